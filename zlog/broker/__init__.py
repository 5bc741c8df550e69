"""The broker: the supervisor (control plane) and the partition workers (data path).

`zlog serve` runs `serve.run`, which starts a `supervisor.Supervisor`; the supervisor forks the
partition workers (`python -m zlog.broker.worker`). Nothing is imported here on purpose: a
worker process imports only what it needs, which keeps its start fast.
"""
