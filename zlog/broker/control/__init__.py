"""The control plane: what runs in the supervisor process, one per host.

The supervisor (`supervisor.py`) forks and watches the partition workers (`workers/`), answers
the control endpoint (`control_plane.py`), takes its part in the cluster (`cluster_node.py`:
registration, heartbeats, requests forwarded to the controller) and runs this host's node of
the Chained-Raft metadata log (`metadata/`), whose committed commands build the cluster state.
The Raft leader's supervisor is the controller (`controller/`): it places replicas, fences
brokers, elects partition leaders and moves replicas. What stays at this level is the
supervisor itself and its wiring. Nothing here is on the data path.
"""
