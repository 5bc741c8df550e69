"""Real zlog processes on this host, and the faults to put on them: the tests' and the fault
harness's one testbed.

Free ports and waiting on a condition with a deadline, to begin with. `tests/` and
`zlog_jepsen` both start and break brokers through this package, not through copies of it, so
a fault means the same thing in both; `bench/` takes its ports from here too.

Like `tests/`, `bench/` and `zlog_jepsen`, it is a tool of a source checkout (make puts the
checkout on the module path): the wheel holds `zlog` alone. It imports `zlog` and the standard
library, never the tests, the harness or the benchmarks (tests/test_layering.py).
"""
