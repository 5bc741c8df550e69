"""Consumer groups: the pure coordinator logic (no sockets, threads or clocks).

docs/groups.md describes the design. Time (`now_ms`) and randomness (member ids) are inputs, so
the tests replay every run exactly.

The two group protocols each have a room: `classic/` (JoinGroup and SyncGroup, the members'
leader assigning) and `server_side/` (KIP-848's GroupHeartbeat, the coordinator assigning).
What both use stays here: the coordinator that runs them (`coordinator.py`), the assignors,
committed offsets, the offsets-log records and their replay, the partitioning of groups over
`__consumer_offsets`, the coordinator's config, its outputs and the DescribeGroups answers.
"""
