"""The controller: what the supervisor whose metadata-log node leads does for the cluster.

`decisions.py` (each round's fencing, elections and ISR changes, pure), `service.py` (the
controller at work: registrations, heartbeats, AlterPartition, rounds), `broker_probes.py` (its
own connection to each broker), `reassignment.py` (a partition's reassignment, pure),
`reassignment_requests.py` (the reassignment and drain requests) and `replica_moves.py` (drain
and add-broker plans, pure).
"""
