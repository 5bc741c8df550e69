"""The server-side group protocol (KIP-848): `machine.py` (GroupHeartbeat, the coordinator's
target assignment and its reconciliation), `group.py` (a server-side group's state) and
`records.py` (its records in the offsets log, key types 3-8).
"""
