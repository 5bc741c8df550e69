"""A Jepsen-style harness for zlog: the history a workload records, and the checker that judges it.

docs/reliability.md §8 says what a history holds, which anomalies the checker looks for and
which of them make a run fail. Everything here except the writer and the readers is pure:
the checker takes a history and the final full read and returns a verdict, so each anomaly
is tested on a hand-written history.
"""
