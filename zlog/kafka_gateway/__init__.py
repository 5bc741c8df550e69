"""The broker's Kafka gateway: the supervisor's Kafka port, in a process of its own.

It answers what is not a partition's data (bootstrap, Metadata, the group APIs, the admin
APIs, InitProducerId) by asking the broker's own control plane and the groups' coordinators
in zlog's native protocol, as a native client would. The partition workers' Kafka ports serve
Produce, Fetch, ListOffsets and OffsetForLeaderEpoch themselves and pass everything else on to
this gateway (docs/kafka.md).
"""
