"""Tools the tests run alongside zlog: things that stand between processes, not zlog itself."""
