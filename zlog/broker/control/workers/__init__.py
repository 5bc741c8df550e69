"""The partition worker processes, as the supervisor keeps them.

`pool.py` (start, watch, restart, and keep their partitions assigned), `fork_server.py` (the
supervisor's side of the worker fork server) and `offline_leaderships.py` (the leaderships of
partitions no worker here can serve, handed to the other replicas).
"""
