"""`zlog cluster health`: whether the cluster is healthy, for scripts and rolling restarts.

Healthy means what a rolling restart waits for before it takes down the next host: one active
controller, no offline partition (without a leader, nobody reads or writes it) and no
under-replicated partition (an ISR smaller than its replica list: one more broker down and
a partition may lose its leader, or with acks=all refuse writes). Partitions under their
min.insync.replicas are named too, since those refuse acks=all writes now. Exit status 0 when
healthy, 1 otherwise (a cluster that does not answer is reported as an error, also 1).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from zlog.cli_cluster import LeafCommand

if TYPE_CHECKING:
    from zlog.client import Admin
    from zlog.client.records import ClusterDescription, TopicDescription

MIN_INSYNC_REPLICAS = "min.insync.replicas"


@dataclass(slots=True)
class Health:
    """What the cluster looks like, and each reason it is not healthy."""

    controller_id: int
    brokers: dict[int, str]  # node id -> live, fenced or draining
    partitions: int = 0
    offline: list[str] = field(default_factory=list)
    under_replicated: list[str] = field(default_factory=list)
    under_min_isr: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return self.controller_id >= 0 and not self.offline and not self.under_replicated

    def lines(self) -> list[str]:
        """A summary line, then one line per problem."""
        states = ", ".join(f"{node} {state}" for node, state in sorted(self.brokers.items()))
        controller = str(self.controller_id) if self.controller_id >= 0 else "none"
        lines = [f"{'healthy' if self.healthy else 'UNHEALTHY'}: controller {controller}; "
                 f"brokers {states or 'none'}; {self.partitions} partitions, "
                 f"{len(self.offline)} offline, {len(self.under_replicated)} under-replicated, "
                 f"{len(self.under_min_isr)} under min ISR"]
        if self.controller_id < 0:
            lines.append("no active controller")
        lines += [f"offline: {item}" for item in self.offline]
        lines += [f"under-replicated: {item}" for item in self.under_replicated]
        lines += [f"under min ISR: {item}" for item in self.under_min_isr]
        return lines


def assess(cluster: ClusterDescription, topics: Sequence[TopicDescription],
           min_insync: Mapping[str, int]) -> Health:
    """The health of a described cluster (pure); `min_insync` is each topic's effective
    min.insync.replicas."""
    health = Health(cluster.controller_id,
                    {broker.node_id: broker.state for broker in cluster.brokers})
    for topic in topics:
        for partition in topic.partitions:
            health.partitions += 1
            name = (f"{topic.name}-{partition.partition} replicas "
                    f"{list(partition.replicas)} isr {list(partition.isr)}")
            if partition.leader < 0:
                health.offline.append(name)
            if len(partition.isr) < len(partition.replicas):
                health.under_replicated.append(name)
            if len(partition.isr) < min_insync.get(topic.name, 1):
                health.under_min_isr.append(f"{name} min.insync.replicas "
                                            f"{min_insync[topic.name]}")
    return health


def _min_insync(admin: Admin, topics: Sequence[TopicDescription]) -> dict[str, int]:
    if not topics:
        return {}
    configs = admin.describe_configs([topic.name for topic in topics], [MIN_INSYNC_REPLICAS])
    return {name: int(entry.value) for name, entries in configs.items() for entry in entries
            if entry.name == MIN_INSYNC_REPLICAS and entry.value is not None}


def cluster_health(args: argparse.Namespace) -> int:
    from zlog.client import Admin  # noqa: PLC0415  (keeps `zlog serve` free of the client)

    with Admin(args.bootstrap, request_timeout_ms=args.request_timeout_ms) as admin:
        cluster = admin.describe_cluster()
        topics = admin.describe_topics()
        health = assess(cluster, topics, _min_insync(admin, topics))
    for line in health.lines():
        print(line)
    return 0 if health.healthy else 1


def add_parsers(cluster_commands: argparse._SubParsersAction[argparse.ArgumentParser],
                leaf: LeafCommand) -> None:
    leaf(cluster_commands, "health",
         "exit 0 if the cluster is healthy: an active controller, no offline or "
         "under-replicated partition (each problem printed)", cluster_health)
