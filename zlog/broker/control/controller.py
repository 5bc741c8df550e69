"""The controller proper: the decisions the Raft leader's supervisor makes for the cluster
(to be built).

Today the controller places the replicas of a new topic (`placement.py`) and nothing else is
needed: one broker leads every partition. A cluster adds here, as pure functions of the
metadata state and the time passed in: broker registration and heartbeats with broker epochs,
fencing a broker whose session expired, electing partition leaders from the ISR (bumping the
leader epoch), accepting or refusing a leader's ISR change (AlterPartition, fenced by
partition epoch), controlled shutdown and preferred-leader elections. Each decision becomes a
command of `metadata_commands.py`, so every supervisor applies the same outcome.
docs/architecture.md, "Where things go", has the whole plan.
"""
