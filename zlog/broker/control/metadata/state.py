"""The cluster state the metadata log builds: frozen records, and their snapshot form.

A ClusterState is never mutated once published: applying a command builds a new one
(`apply.py`), so another thread may read the current one at any time. The snapshot
JSON is what the Raft log's compaction stores; fields added since an older snapshot was written
decode with their defaults.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from zlog.broker.control.metadata.security_state import (
    SecurityRecords,
    records_from_json,
    records_to_json,
)

_LEGACY_TOPIC_IDS: Final = uuid.UUID("6f1c1b2e-55a3-4d0e-9a51-1f0d3c2b7a40")


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A broker as its last RegisterBroker command left it in the cluster state.

    Not the Metadata response's broker entry (transport.messages.BrokerMetadata): the state
    also keeps the epoch that fences a restarted broker's past, which clients never see.
    """

    node_id: int
    host: str  # where clients reach this broker's workers
    control_endpoint: str  # the supervisor's control ROUTER, e.g. tcp://10.0.0.5:7400
    broker_epoch: int  # new at each registration: tells a restarted broker from its past
    incarnation_id: str = ""  # the supervisor process that registered
    workers: int = 1  # its partition worker processes
    rack: str = ""
    dir_id: str = ""  # its data directory's id
    worker_endpoints: tuple[str, ...] = ()  # data endpoint of each worker ("" while unknown)
    fenced: bool = False  # the controller lost its heartbeats: it leads nothing, is in no ISR
    shutting_down: bool = False  # controlled shutdown: leadership moves off it first
    draining: bool = False  # being removed: its replicas move away, then it is deregistered
    worker_kafka_endpoints: tuple[str, ...] = ()  # each worker's Kafka port ("": unknown)

    def worker_endpoint(self, worker: int) -> str:
        """The data endpoint serving a replica placed on `worker` ("" while unknown)."""
        if not self.worker_endpoints:
            return ""
        return self.worker_endpoints[worker % len(self.worker_endpoints)]

    def worker_kafka_endpoint(self, worker: int) -> str:
        """The Kafka port of the worker serving a replica placed on `worker` ("": none, or
        not known yet)."""
        if not self.worker_kafka_endpoints:
            return ""
        return self.worker_kafka_endpoints[worker % len(self.worker_kafka_endpoints)]


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    replicas: tuple[int, ...]  # broker ids; the first is the preferred leader
    leader: int  # broker id, -1 when no replica in the ISR is available
    leader_epoch: int  # bumped at each leader change; fences stale leaders (KIP-101)
    isr: tuple[int, ...]  # in-sync replicas, a subset of replicas
    partition_epoch: int  # bumped at every change of this record (leader or ISR)
    replica_workers: tuple[int, ...] = ()  # the worker of each replica on its broker
    # A reassignment in progress (KIP-455): `replicas` is the target followed by the replicas
    # leaving; `adding` are those not in the replica set it started from, `removing` those not
    # in the target. Both empty: none in progress.
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    # The data directory (BrokerRegistration.dir_id) each replica's data was in when it was
    # placed or last joined the ISR, parallel to `replicas` (KIP-858); "" where unknown (a
    # record from before directories were kept). A replica whose broker registered another
    # directory since may have lost everything: it is not an acceptable leader.
    directories: tuple[str, ...] = ()

    def directory_of(self, broker: int) -> str:
        """The directory recorded for `broker`'s replica ("" when none is)."""
        if broker in self.replicas and self.directories:
            return self.directories[self.replicas.index(broker)]
        return ""

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target(self) -> tuple[int, ...]:
        """The replica set a reassignment in progress ends with (the replicas, if none)."""
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def original(self) -> tuple[int, ...]:
        """The replica set before the reassignment in progress (what cancelling restores)."""
        return tuple(r for r in self.replicas if r not in self.adding)

    def worker_of(self, broker: int) -> int:
        """Which of `broker`'s workers holds its replica (0 before placement was recorded)."""
        if broker in self.replicas and self.replica_workers:
            return self.replica_workers[self.replicas.index(broker)]
        return 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_seq: int  # creation sequence number: orders topics, rotates replica placement
    replication_factor: int
    configs: Mapping[str, str]  # the topic's own overrides, Kafka names, string values
    partitions: tuple[PartitionInfo, ...]
    # Made when the topic is created (KIP-516): the same name created again is another topic,
    # and a partition directory left by the earlier one is never served as this one's.
    topic_id: str = ""


def legacy_topic_id(cluster_id: str, topic_seq: int, name: str) -> str:
    """The id of a topic created before zlog made topic ids: the same on every node that
    applies the same log (a name-based uuid of the cluster and the creation), and another
    for each creation of a name (`topic_seq` never repeats)."""
    return uuid.uuid5(_LEGACY_TOPIC_IDS, f"{cluster_id}/{topic_seq}/{name}").hex


@dataclass(frozen=True, slots=True)
class ClusterState:
    """One version of the metadata; never mutated once published."""

    cluster_id: str = ""
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=dict)
    topics: Mapping[str, TopicInfo] = field(default_factory=dict)  # in creation order
    deleting: Mapping[str, int] = field(default_factory=dict)  # name -> partition count
    next_producer_id: int = 0
    next_topic_seq: int = 0
    next_broker_epoch: int = 0
    applied_commands: int = 0
    # Brokers removed from the cluster (node id -> the incarnation removed): that process may
    # not register again; a restart (a new incarnation) joins as a new, empty broker.
    retired: Mapping[int, str] = field(default_factory=dict)
    security: SecurityRecords = field(default_factory=SecurityRecords)  # ACLs, users, quotas

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        info = self.topics.get(topic)
        if info is None or not 0 <= partition < len(info.partitions):
            return None
        return info.partitions[partition]


# -- snapshots -----------------------------------------------------------------------------------


def state_to_json(state: ClusterState) -> dict[str, Any]:
    return {
        "cluster_id": state.cluster_id,
        "brokers": [
            {"node_id": broker.node_id, "host": broker.host,
             "control_endpoint": broker.control_endpoint, "broker_epoch": broker.broker_epoch,
             "incarnation_id": broker.incarnation_id, "workers": broker.workers,
             "rack": broker.rack, "dir_id": broker.dir_id,
             "worker_endpoints": list(broker.worker_endpoints), "fenced": broker.fenced,
             "shutting_down": broker.shutting_down, "draining": broker.draining,
             "worker_kafka_endpoints": list(broker.worker_kafka_endpoints)}
            for broker in state.brokers.values()
        ],
        "topics": [
            {"name": topic.name, "topic_seq": topic.topic_seq,
             "replication_factor": topic.replication_factor, "configs": dict(topic.configs),
             "topic_id": topic.topic_id,
             "partitions": [
                 {"partition": p.partition, "replicas": list(p.replicas), "leader": p.leader,
                  "leader_epoch": p.leader_epoch, "isr": list(p.isr),
                  "partition_epoch": p.partition_epoch,
                  "replica_workers": list(p.replica_workers),
                  "adding": list(p.adding), "removing": list(p.removing),
                  "directories": list(p.directories)}
                 for p in topic.partitions
             ]}
            for topic in state.topics.values()
        ],
        "deleting": dict(state.deleting),
        "next_producer_id": state.next_producer_id,
        "next_topic_seq": state.next_topic_seq,
        "next_broker_epoch": state.next_broker_epoch,
        "applied_commands": state.applied_commands,
        "retired": {str(node_id): incarnation for node_id, incarnation in state.retired.items()},
        **records_to_json(state.security),
    }


def state_from_json(data: dict[str, Any]) -> ClusterState:
    brokers = {
        int(item["node_id"]): BrokerRegistration(
            int(item["node_id"]), str(item["host"]), str(item["control_endpoint"]),
            int(item["broker_epoch"]), str(item.get("incarnation_id", "")),
            int(item.get("workers", 1)), str(item.get("rack", "")), str(item.get("dir_id", "")),
            tuple(str(e) for e in item.get("worker_endpoints", ())),
            bool(item.get("fenced", False)), bool(item.get("shutting_down", False)),
            bool(item.get("draining", False)),
            tuple(str(e) for e in item.get("worker_kafka_endpoints", ())),
        )
        for item in data["brokers"]
    }
    topics = {
        str(item["name"]): TopicInfo(
            str(item["name"]), int(item["topic_seq"]), int(item["replication_factor"]),
            {str(key): str(value) for key, value in item["configs"].items()},
            tuple(
                PartitionInfo(
                    int(p["partition"]), tuple(p["replicas"]), int(p["leader"]),
                    int(p["leader_epoch"]), tuple(p["isr"]), int(p["partition_epoch"]),
                    tuple(int(w) for w in p.get("replica_workers", ())),
                    tuple(int(r) for r in p.get("adding", ())),
                    tuple(int(r) for r in p.get("removing", ())),
                    tuple(str(d) for d in p.get("directories", ())),
                )
                for p in item["partitions"]
            ),
            str(item.get("topic_id") or legacy_topic_id(
                str(data["cluster_id"]), int(item["topic_seq"]), str(item["name"]))),
        )
        for item in sorted(data["topics"], key=lambda topic: int(topic["topic_seq"]))
    }
    return ClusterState(
        cluster_id=str(data["cluster_id"]),
        brokers=brokers,
        topics=topics,
        deleting={str(key): int(value) for key, value in data["deleting"].items()},
        next_producer_id=int(data["next_producer_id"]),
        next_topic_seq=int(data["next_topic_seq"]),
        next_broker_epoch=int(data.get("next_broker_epoch", 1 + max(
            (b.broker_epoch for b in brokers.values()), default=-1))),
        applied_commands=int(data["applied_commands"]),
        retired={int(key): str(value) for key, value in data.get("retired", {}).items()},
        security=records_from_json(data),
    )
