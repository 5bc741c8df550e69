"""A deterministic, seeded simulator of zlog's ISR replication (docs/simulation.md).

The pure code under test (`broker/data/{isr,epoch_cache,replica_sync,partition}.py`,
`broker/control/controller/decisions.py` and `broker/control/metadata/apply.py`) runs unchanged
inside a simulated cluster: brokers holding `Partition`s over in-memory logs, one controller
deciding rounds, a lossy network, a clock that only the simulator moves, producers, consumers
and faults. A ghost history records what clients were told; `checker.py` checks the safety
invariants after every event and the liveness ones once the faults stop. Planted bugs
(`bugs.py`) swap one rule of the wiring at a time, so the tests can show that each check
catches what it is meant to catch.

Module map: profile (what a seed decides), clock, messages, network, storage (logs and disks),
wiring (the rules, substitutable), bugs, controller, broker, clients, ghost, checker, sim (the
driver), scenarios (scripted cases in place of the chaos), test_replication_sim (the tests);
`python -m tests.sim.replication --seed N` replays, `--scenario NAME` runs a scripted case.
"""
