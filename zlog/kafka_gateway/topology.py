"""The cluster as Kafka clients see it: one Kafka node per Kafka port.

A Kafka client sends a partition's Produce and Fetch to the node Metadata names as its leader,
so that node must be the Kafka port of the worker leading it, not its broker's gateway. Node
ids must be unique in the cluster and the same in every answer:

- the gateway of broker N is Kafka node N (zlog's node id, so operators' ids carry over);
- a worker's Kafka port at port P on broker N is Kafka node (N + 1) * 65536 + P: it stays
  while the worker keeps its port (a restarted worker asks for its old one first) and no
  two workers of a broker share a port. Broker ids above WORKER_NODE_BROKER_ID_MAX would
  overflow Kafka's int32; their workers' partitions are answered LEADER_NOT_AVAILABLE.

The gateway names itself the controller and every group's coordinator: it passes those
requests on to wherever zlog's controller and coordinators are.

Pure: a native MetadataResponse in, the values of a Kafka Metadata answer out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from zlog.errors import ErrorCode
from zlog.transport.messages.admin import (
    BrokerMetadata,
    MetadataResponseV0,
    PartitionMetadata,
    TopicMetadata,
)

PORTS_PER_BROKER: Final = 65_536
WORKER_NODE_BROKER_ID_MAX: Final = (2**31 - 1) // PORTS_PER_BROKER - 2
INTERNAL_PREFIX: Final = "__"


@dataclass(frozen=True, slots=True)
class KafkaNode:
    """A Kafka port as Metadata lists it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None

    def as_values(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "broker_id": self.node_id, "host": self.host,
                "port": self.port, "rack": self.rack}


def split_address(address: str) -> tuple[str, int]:
    """"host:port" (or "[v6]:port") -> (host, port)."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def worker_node_id(broker_id: int, kafka_port: int) -> int | None:
    """The Kafka node id of a worker's Kafka port; None past what an int32 holds."""
    if not 0 <= broker_id <= WORKER_NODE_BROKER_ID_MAX:
        return None
    return (broker_id + 1) * PORTS_PER_BROKER + kafka_port


def _leader_node(partition: PartitionMetadata, racks: dict[int, str]) -> KafkaNode | None:
    endpoint = getattr(partition, "kafka_endpoint", "")
    if partition.leader < 0 or not endpoint:
        return None
    host, port = split_address(endpoint)
    node_id = worker_node_id(partition.leader, port)
    if node_id is None:
        return None
    return KafkaNode(node_id, host, port, racks.get(partition.leader) or None)


def _partition_values(partition: PartitionMetadata, leader: KafkaNode | None) -> dict[str, Any]:
    def as_kafka(replicas: Iterable[int]) -> list[int]:
        if leader is None:
            return list(replicas)
        return [leader.node_id if node == partition.leader else node for node in replicas]

    error = partition.error_code
    if error == ErrorCode.NONE and leader is None:
        error = ErrorCode.LEADER_NOT_AVAILABLE
    return {"error_code": error, "partition_index": partition.partition,
            "leader_id": -1 if leader is None else leader.node_id,
            "leader_epoch": partition.leader_epoch, "replica_nodes": as_kafka(partition.replicas),
            "isr_nodes": as_kafka(partition.isr), "offline_replicas": []}


def _topic_values(topic: TopicMetadata, partitions: list[dict[str, Any]]) -> dict[str, Any]:
    return {"error_code": topic.error_code, "name": topic.name,
            "topic_id": topic.topic_id or None,
            "is_internal": topic.name.startswith(INTERNAL_PREFIX), "partitions": partitions,
            "topic_authorized_operations": -2147483648}


def refused_topic(name: str | None, code: int) -> dict[str, Any]:
    """A Metadata answer's entry for a topic named but not described: its error alone."""
    return {"error_code": code, "name": name, "topic_id": None, "is_internal": False,
            "partitions": [], "topic_authorized_operations": -2147483648}


def metadata_values(native: MetadataResponseV0, gateway: KafkaNode,
                    topic_ids: frozenset[str] | None = None, *,
                    cluster: MetadataResponseV0 | None = None) -> dict[str, Any]:
    """A Kafka Metadata answer for `native`; `topic_ids` keeps only those topics (a request
    naming topics by id). The nodes listed are those leading a partition of `cluster` (the
    whole cluster's metadata; `native` when None) as well as `native`'s."""
    racks = {broker.node_id: broker.rack for broker in native.brokers}
    nodes: dict[int, KafkaNode] = {gateway.node_id: gateway}
    for topic in () if cluster is None else cluster.topics:
        for partition in topic.partitions:
            leader = _leader_node(partition, racks)
            if leader is not None:
                nodes[leader.node_id] = leader
    topics: list[dict[str, Any]] = []
    for topic in native.topics:
        if topic_ids is not None and topic.topic_id not in topic_ids:
            continue
        partitions = []
        for partition in topic.partitions:
            leader = _leader_node(partition, racks)
            if leader is not None:
                nodes[leader.node_id] = leader
            partitions.append(_partition_values(partition, leader))
        topics.append(_topic_values(topic, partitions))
    return {"throttle_time_ms": 0, "brokers": [node.as_values() for node in nodes.values()],
            "cluster_id": native.cluster_id, "controller_id": gateway.node_id,
            "topics": topics, "cluster_authorized_operations": -2147483648}


def gateway_node(node_id: int, address: str, brokers: Iterable[BrokerMetadata]) -> KafkaNode:
    """This gateway as a Kafka node, with its broker's rack."""
    host, port = split_address(address)
    rack = next((broker.rack for broker in brokers if broker.node_id == node_id), "")
    return KafkaNode(node_id, host, port, rack or None)
