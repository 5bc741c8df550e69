"""The control plane: what runs in the supervisor process, one per host.

The supervisor forks and watches the partition workers (`worker_pool`), answers the control
endpoint (`control_plane`), and runs this host's node of the Chained-Raft metadata log, whose
committed commands (`metadata_commands`) build the cluster state (`metadata`). The Raft leader's
supervisor is the controller (`controller`): it places replicas (`placement`); fencing brokers
and electing partition leaders in a cluster are to be built there. Nothing here is on the data
path.
"""
