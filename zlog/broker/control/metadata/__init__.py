"""The metadata log: the cluster state every supervisor builds from the same committed commands.

`commands.py` (the typed commands and their codec), `state.py` (the frozen records and their
snapshot form), `apply.py` (what each command does to them, pure), `state_machine.py` (the Raft
state machine over them) and `log.py` (this broker's Chained-Raft node, proposals in, outcomes
out on the supervisor's loop thread).
"""
