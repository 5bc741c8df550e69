"""`python -m zlog ...` is the `zlog` command."""

from zlog.cli import main

raise SystemExit(main())
