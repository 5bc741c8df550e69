"""The classic group protocol: `machine.py` (JoinGroup, SyncGroup and the rebalance, as a pure
state machine), `group.py` (a classic group's state) and `consumer_protocol.py` (the
subscription and assignment bytes of Kafka's ConsumerProtocol, which the members' leader reads
and writes).
"""
