"""Real zlog processes on this host, and the faults to put on them: the one testbed of the
tests and of the fault harness.

A broker started as an operator starts it, then killed with SIGKILL, frozen or restarted on
its data (broker_process); a cluster of them on 127.0.0.1-N (cluster_processes), the same
cluster behind TCP fault proxies that cut, slow or silence one way the links between brokers
(cluster_network, fault_proxy); a small tmpfs to fill (small_disk); free ports; and waiting
on a condition with a deadline (waiting). `tests/` and `zlog_jepsen` both start and break
brokers through this package, not through copies of it, so a fault means the same thing in
both; `bench/` takes its ports from here too.

Like `tests/`, `bench/` and `zlog_jepsen`, it is a tool of a source checkout (make puts the
checkout on the module path): the wheel holds `zlog` alone. It imports `zlog` and libraries,
never the tests, the harness or the benchmarks (tests/test_layering.py).
"""
