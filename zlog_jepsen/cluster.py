"""The cluster a run faults, with its data kept in the run: what every run needs of it
(`HarnessCluster`), and the tests' proxied cluster as one (`RunCluster`).

The harness starts brokers through the very code the cluster tests use
(zlog_testbed/cluster_network.py: three `zlog serve` processes, each behind in-tree TCP fault
proxies), not a copy of it, so a fault means the same thing in both. That makes zlog_jepsen a
tool of a source checkout (make puts the checkout on the module path), not of an installed
zlog. Where network namespaces and nftables are available, a run's brokers live in
namespaces instead (zlog_jepsen.netns_cluster) and partitions are nftables rules; elsewhere
they go through those proxies. `network_faults` names which, in every summary.

Two things differ from the tests (three with a planted bug, zlog.broker.data.planted_bug,
which every broker of the run then carries). Each broker's data directory lives in the run's
directory from the start, so a failed run keeps it as it was; and the proxies treat every
process that is not a broker as a client (the tests know only their own process), so a
partition between brokers leaves the workload's client processes reaching every broker, as
Jepsen's clients on the control node do.
"""

from __future__ import annotations

import shutil
from collections.abc import Collection
from pathlib import Path
from typing import Final

from zlog.broker.data.planted_bug import PLANTED_BUG_ENV
from zlog.client import Admin, NewTopic
from zlog.errors import ErrorCode
from zlog_jepsen.small_disks import SmallDisks
from zlog_testbed.cluster_network import (
    LINKS,
    TEST_CLIENT,
    UNKNOWN_CLIENT,
    Cut,
    Link,
    ProxiedCluster,
    broker_client,
)
from zlog_testbed.cluster_processes import ClusterProcesses
from zlog_testbed.fault_proxy import Address

TCP_PROXY: Final = "tcp-proxy"
REPLICATION_FACTOR: Final = 3
MIN_INSYNC_REPLICAS: Final = 2
REPLICATED_TIMEOUT_S: Final = 90.0
# Small segments, so that a run rolls some: the storage faults need sealed segments (and
# their indexes) to damage, and rolling under faults is exercised too.
SEGMENT_BYTES: Final = 64 << 10
SEGMENT_BYTES_CONFIG: Final = "segment.bytes"
TOPIC_CONFIGS: Final = {"min.insync.replicas": str(MIN_INSYNC_REPLICAS),
                        SEGMENT_BYTES_CONFIG: str(SEGMENT_BYTES)}
"""The run's topic's configs; every other config is the broker's default."""


class HarnessCluster(ClusterProcesses):
    """What a run needs of its cluster, whatever carries its network faults: data kept in the
    run, the topic, and the partitions the nemesis asks for.

    `spares` brokers beyond the voters join the metadata log as learners (they never vote, so
    the quorum is the voters') and hold replicas like any broker: placement may give them
    some, and the membership faults (zlog_jepsen.membership_faults) move replicas onto and off
    them."""

    network_faults: str  # "netns+nftables" or "tcp-proxy", in the run's figures and summary
    spares: tuple[int, ...] = ()

    def keep_data_in(self, run_dir: Path, planted_bug: str | None) -> None:
        """Each broker's data under `run_dir`/broker-<node>, every broker with `planted_bug`."""
        self.run_dir = run_dir
        self.small_disks: SmallDisks | None = None  # each data dir on a tmpfs (disk-full)
        for node, broker in self.brokers.items():
            broker.data_dir = run_dir / f"broker-{node}" / "data"
            broker.data_dir.mkdir(parents=True, exist_ok=True)
            if planted_bug is not None:
                broker.environment[PLANTED_BUG_ENV] = planted_bug

    def start(self) -> None:
        """The voters first, then the spares: on a loaded machine a worker that starts slower
        than its heartbeat timeout never serves, and four brokers starting at once are slower."""
        spares = {node: self.brokers.pop(node) for node in self.spares}
        try:
            super().start()
        finally:
            self.brokers.update(spares)
        for broker in spares.values():
            broker.start()

    def create_topic(self, topic: str, partitions: int) -> None:
        """`partitions` partitions, three replicas each, min.insync.replicas 2, segments of
        SEGMENT_BYTES; returns once
        every partition has its three replicas in sync and a serving leader. The cluster is
        the run's own, so TOPIC_ALREADY_EXISTS means an attempt the client retried (its
        answer late on a loaded machine) created it."""
        with Admin(self.bootstrap) as admin:
            error = admin.create_topics([NewTopic(
                topic, partitions, replication_factor=REPLICATION_FACTOR,
                configs=dict(TOPIC_CONFIGS))],
                raise_on_error=False)[topic]
        if error is not None and error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise error
        self.wait_fully_replicated(topic, partitions)

    def wait_fully_replicated(self, topic: str, partitions: int,
                              timeout_s: float = REPLICATED_TIMEOUT_S) -> None:
        """Until every partition has its three replicas, all in sync, and a serving leader
        (with a spare broker, which three is the placement's or the last move's choice)."""
        for partition in range(partitions):
            self.wait_for(lambda p: len(p.replicas) == REPLICATION_FACTOR
                          and set(p.isr) == set(p.replicas) and p.error_code == 0
                          and bool(p.endpoint), topic, partition,
                          f"ISR of all {REPLICATION_FACTOR} replicas with a serving leader",
                          timeout_s)

    def mount_small_disks(self) -> None:
        """Each broker's data dir on a small tmpfs of its own, before the brokers start."""
        self.small_disks = SmallDisks({node: broker.data_dir
                                       for node, broker in self.brokers.items()})

    def close_keeping(self, keep: bool) -> None:
        """Stop every broker; with `keep`, copy each one's logs and rings next to its data,
        else remove the data too. Small disks are unmounted once the brokers are stopped."""
        for node, broker in self.brokers.items():
            if not keep:
                continue
            if broker.process is not None:
                broker.kill_all()  # as a crash leaves them: the rings are what it kept
            if broker.ring_dir.is_dir():
                shutil.copytree(broker.ring_dir, self.run_dir / f"broker-{node}" / "rings",
                                dirs_exist_ok=True)
        self.close(self.run_dir / "logs" if keep else None)
        if self.small_disks is not None:
            self.small_disks.close(keep)
        if not keep:
            for node in self.brokers:
                shutil.rmtree(self.run_dir / f"broker-{node}", ignore_errors=True)

    # -- the network: clients are spared by every cut but `cut_clients` -------------------------

    def isolate(self, node: int, links: Collection[Link] = LINKS,
                direction: Cut = "both") -> None:
        """Broker `node` cut off from every other broker, both ways or one way."""
        raise NotImplementedError

    def split(self, side: Collection[int], others: Collection[int]) -> None:
        """Every broker of `side` cut off from every broker of `others`, both ways."""
        raise NotImplementedError

    def cut_clients(self, node: int) -> None:
        """Every client cut off from broker `node`, which still reaches the other brokers."""
        raise NotImplementedError

    def heal(self, links: Collection[Link] = LINKS) -> None:
        raise NotImplementedError


class RunCluster(ProxiedCluster, HarnessCluster):
    """A `ProxiedCluster` whose brokers keep their data under `run_dir`/broker-<node>."""

    network_faults = TCP_PROXY

    def __init__(self, size: int, run_dir: Path, planted_bug: str | None = None, *,
                 spares: int = 0) -> None:
        super().__init__(size + spares, learners=spares)
        self.spares = tuple(range(size + 1, size + spares + 1))
        self.keep_data_in(run_dir, planted_bug)

    def client_of(self, client: Address) -> str:
        """Any process but a broker's is a client: the workload's run in processes of their
        own, which the tests' proxies would not recognise."""
        name = super().client_of(client)
        return TEST_CLIENT if name == UNKNOWN_CLIENT else name

    def split(self, side: Collection[int], others: Collection[int]) -> None:
        """Cut every broker of `side` off from every broker of `others`, both ways; links
        within each side, and every client, are spared (a majority/minority split, or a
        bridge: two cut from each other while a third hears both)."""
        for node, cut in ([(n, others) for n in side] + [(n, side) for n in others]):
            for proxy in self.proxies[node].values():
                proxy.drop({broker_client(other) for other in cut})

    def cut_clients(self, node: int) -> None:
        """Cut every client off broker `node`'s data and control ports; brokers still reach
        it, and clients still reach the others."""
        for proxy in self.proxies[node].values():
            proxy.drop({TEST_CLIENT})
