"""A consumer's group, client side: the member, its threads, its coordinator, its offsets.

`member.py` (what a member is to the Consumer, whichever protocol), `server_side_member.py`
(KIP-848's GroupHeartbeat) and `classic_member.py` (JoinGroup, SyncGroup, Heartbeat): pure
state, time as an argument. `membership.py` (the member under its heartbeat thread), with
`coordinator_thread.py`, `metadata_watch.py` and `wake.py`; `poll_thread.py` (rebalances and
commits on the Consumer's poll thread); `settings.py` (the group configs and rebalance
callbacks); `coordinator.py` and `offsets.py` (the way to a group's coordinator, and its
committed offsets, for the Consumer and the Admin alike); `admin.py` (the Admin's group calls).
"""
