"""The broker: the control plane (`control/`, the supervisor) and the data plane (`data/`, the
partition workers).

`zlog serve` runs `serve.run`, which starts a `control.supervisor.Supervisor`; the supervisor
forks the partition workers (`python -m zlog.broker.data.worker`). Modules at this level are the
ones both planes share: the broker's configuration, topic configs, and the messages between a
supervisor and its workers. Nothing is imported here on purpose: a worker process imports only
what it needs, which keeps its start fast.
"""
