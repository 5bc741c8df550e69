"""A real cluster of `zlog serve` processes on loopback: broker i listens on 127.0.0.i.

Every broker is a voter of the metadata log; each is a `BrokerProcess` (kill -9, SIGSTOP,
restart on the same data dir), and the cluster helpers wait on conditions with deadlines. The
cluster tests start theirs here, and the fault harness its own (zlog_jepsen.cluster) on top.

    with cluster_processes(3, log_dir) as cluster:
        cluster.bootstrap                  # every control endpoint, comma-separated
        cluster.broker(2).kill_all()
        cluster.wait_isr("t", 0, {1, 3})
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from zlog.errors import ZlogError
from zlog.transport.messages.admin import MetadataResponseV0, PartitionMetadata
from zlog_testbed.broker_process import START_TIMEOUT_S, BrokerProcess
from zlog_testbed.free_ports import free_port_pair
from zlog_testbed.waiting import wait_until

_Cluster = TypeVar("_Cluster", bound="ClusterProcesses")

CLUSTER_FLAGS = (
    # A broker silent for 1.5 s is fenced (the defaults); the client-facing timeouts stay.
    "--broker-heartbeat-interval-ms", "250", "--broker-session-timeout-ms", "1500",
)


def _rack_args(racks: Mapping[int, str] | None, node: int) -> list[str]:
    rack = (racks or {}).get(node)
    return [] if rack is None else ["--rack", rack]


class ClusterProcesses:
    def __init__(self, size: int, *, workers: int = 1, extra_args: Sequence[str] = (),
                 racks: Mapping[int, str] | None = None) -> None:
        hosts = [f"127.0.0.{index}" for index in range(1, size + 1)]
        port = free_port_pair(hosts)
        self.endpoints = {index: f"tcp://{host}:{port}"
                          for index, host in enumerate(hosts, start=1)}
        voters = ",".join(f"{node}@{endpoint}" for node, endpoint in self.endpoints.items())
        self.brokers = {
            node: BrokerProcess(
                workers,
                ["--node-id", str(node), "--voters", voters,
                 "--advertised-host", endpoint.split("//")[1].rsplit(":", 1)[0],
                 *CLUSTER_FLAGS, *_rack_args(racks, node), *extra_args],
                endpoint=endpoint)
            for node, endpoint in self.endpoints.items()
        }
        self.bootstrap = ",".join(self.endpoints.values())

    def broker(self, node: int) -> BrokerProcess:
        return self.brokers[node]

    def add_learner(self, node: int, *, workers: int = 1) -> BrokerProcess:
        """A broker that joins through broker 1 without voting (`--join`), on 127.0.0.<node>;
        not started."""
        host = f"127.0.0.{node}"
        endpoint = f"tcp://{host}:{free_port_pair([host])}"
        broker = self.brokers[node] = BrokerProcess(
            workers, ["--node-id", str(node), "--join", self.endpoints[1],
                      "--advertised-host", host, *CLUSTER_FLAGS], endpoint=endpoint)
        return broker

    def running(self) -> list[BrokerProcess]:
        return [b for b in self.brokers.values()
                if b.process is not None and b.process.poll() is None]

    def start(self) -> None:
        """Start every broker at once (each waits for a quorum), then wait for them all."""
        for broker in self.brokers.values():
            broker.start(wait=False)
        for broker in self.brokers.values():
            broker.wait_ready()

    def close(self, keep_logs_in: Path | None = None) -> None:
        """Stop every broker; each one's logs go to `keep_logs_in`/broker-<node id> (they
        share their names, broker-<run>.log, so one directory would keep the last broker's)."""
        for node, broker in self.brokers.items():
            kept = None if keep_logs_in is None else keep_logs_in / f"broker-{node}"
            if kept is not None:
                kept.mkdir(parents=True, exist_ok=True)
            broker.close(kept)

    # -- metadata, from whichever broker answers ------------------------------------------------

    def metadata(self, topics: Sequence[str] | None = None) -> MetadataResponseV0:
        last: Exception | None = None
        for broker in self.running():
            try:
                return broker.metadata(topics, timeout_ms=2_000)
            except (ZlogError, AssertionError) as error:
                last = error
        raise AssertionError(f"no broker answered Metadata: {last}")

    def partition(self, topic: str, partition: int) -> PartitionMetadata:
        """The partition as a broker sees it, once one does: a topic the controller has just
        created reaches the other brokers' metadata a moment later."""
        found: list[PartitionMetadata] = []

        def known() -> bool:
            try:
                seen = self._partition_now(topic, partition)
            except AssertionError:  # no broker answered this time
                return False
            found[:] = [] if seen is None else [seen]
            return bool(found)

        wait_until(known, START_TIMEOUT_S, interval_s=0.02,
                   what=f"{topic}-{partition} in a broker's metadata")
        return found[0]

    def _partition_now(self, topic: str, partition: int) -> PartitionMetadata | None:
        (found,) = self.metadata([topic]).topics
        return next((p for p in found.partitions if p.partition == partition), None)

    def wait_for(self, check: Callable[[PartitionMetadata], bool], topic: str,
                 partition: int, what: str, timeout_s: float = START_TIMEOUT_S) -> None:
        def holds() -> bool:
            try:
                seen = self._partition_now(topic, partition)
                return seen is not None and check(seen)
            except (AssertionError, ValueError):
                return False

        wait_until(holds, timeout_s, interval_s=0.05, what=f"{topic}-{partition}: {what}")

    def wait_isr(self, topic: str, partition: int, isr: set[int]) -> None:
        self.wait_for(lambda p: set(p.isr) == isr and p.error_code == 0 and bool(p.endpoint),
                      topic, partition, f"ISR {sorted(isr)} with a serving leader")


@contextlib.contextmanager
def cluster_processes(size: int = 3, keep_logs_in: Path | None = None, *, workers: int = 1,
                      extra_args: Sequence[str] = (), racks: Mapping[int, str] | None = None,
                      ) -> Iterator[ClusterProcesses]:
    with running(ClusterProcesses(size, workers=workers, extra_args=extra_args, racks=racks),
                 keep_logs_in) as cluster:
        yield cluster


@contextlib.contextmanager
def running(cluster: _Cluster, keep_logs_in: Path | None) -> Iterator[_Cluster]:
    """`cluster` started for the block; then each running broker's log tail printed (the
    report of a failing test) and every broker stopped."""
    try:
        cluster.start()
        yield cluster
    finally:
        for node, broker in cluster.brokers.items():
            if broker.process is not None and broker.process.poll() is None:
                print(f"\n--- broker {node} log (tail) ---\n{broker.log_tail()}")
        cluster.close(keep_logs_in)
