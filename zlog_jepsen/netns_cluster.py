"""A run's brokers each in a network namespace of its own, partitioned by nftables rules.

Broker i runs inside namespace i (zlog_jepsen.netns) and listens, and is known to everyone,
at its own private address 10.231.K.i, with no proxy between brokers: a partition is a set
of drop rules in the namespaces, by peer address, as a real network would drop packets. The
harness and its client processes stay in the root namespace, on the same bridge at
10.231.K.254, so a cut between brokers leaves every client reaching every broker, and
`cut_clients` drops exactly that address. A cut takes whole hosts: every port of a broker,
or none.

Which network a run uses is `choose_network`'s answer: namespaces wherever root, `ip`, `nft`
and the kernel allow them, else the TCP fault proxies of `RunCluster`, with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Final

from zlog_jepsen.cluster import TCP_PROXY, HarnessCluster, RunCluster
from zlog_jepsen.netns import NamespaceNetwork, unavailable_reason
from zlog_testbed.broker_process import START_TIMEOUT_S, BrokerProcess
from zlog_testbed.cluster_network import CUTS, LINKS, Cut, Link
from zlog_testbed.cluster_processes import CLUSTER_FLAGS
from zlog_testbed.waiting import wait_until

NETNS_NFTABLES: Final = "netns+nftables"
NETWORKS: Final = ("auto", NETNS_NFTABLES, TCP_PROXY)
CONTROL_PORT: Final = 9092  # the Raft port is the next; each namespace has every port free
TCP_LISTEN: Final = "0A"  # a socket's state in /proc/<pid>/net/tcp


def listens_on(pid: int, port: int) -> bool:
    """Whether process `pid` holds a TCP socket listening on `port`, read from its own
    namespace's table: psutil reads the caller's, where a namespaced broker has none."""
    try:
        table = Path(f"/proc/{pid}/net/tcp").read_text(encoding="ascii")
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    inodes = {fields[9] for fields in (line.split() for line in table.splitlines()[1:])
              if fields[3] == TCP_LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port}
    for descriptor in descriptors:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{descriptor}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False


class NamespacedBroker(BrokerProcess):
    """A broker started inside a network namespace."""

    def wait_ready(self) -> None:
        """First until its control port listens: before that a namespace refuses a connection
        at once, and asking again and again would pile up closing ZeroMQ sockets past the
        context's limit."""
        port = int(self.endpoint.rsplit(":", 1)[1])

        def listening_or_exited() -> bool:
            process = self.process
            return process is None or process.poll() is not None or listens_on(process.pid, port)

        wait_until(listening_or_exited, START_TIMEOUT_S, interval_s=0.05,
                   what=f"the broker listening on {self.endpoint}")
        super().wait_ready()

    def worker_pid_for(self, data_endpoint: str) -> int:
        port = int(data_endpoint.rsplit(":", 1)[1])
        for pid in self.worker_pids():
            if listens_on(pid, port):
                return pid
        raise AssertionError(f"no worker listens on {data_endpoint}")


class NamespacedCluster(HarnessCluster):
    """`size` brokers, one worker each, broker i in namespace i at its own address."""

    network_faults = NETNS_NFTABLES

    def __init__(self, size: int, run_dir: Path, planted_bug: str | None = None, *,
                 spares: int = 0) -> None:
        self.network = NamespaceNetwork(size + spares)
        nodes = range(1, size + spares + 1)
        self.spares = tuple(range(size + 1, size + spares + 1))
        self.endpoints = {node: f"tcp://{self.network.address(node)}:{CONTROL_PORT}"
                          for node in nodes}
        voters = ",".join(f"{node}@{endpoint}" for node, endpoint in self.endpoints.items()
                          if node not in self.spares)
        self.brokers = {
            node: NamespacedBroker(
                1, ["--node-id", str(node),
                    *(["--join", self.endpoints[1]] if node in self.spares
                      else ["--voters", voters]),
                    "--advertised-host", self.network.address(node), *CLUSTER_FLAGS],
                endpoint=self.endpoints[node])
            for node in nodes
        }
        for node, broker in self.brokers.items():
            broker.command_prefix = tuple(self.network.exec_prefix(node))
        self.bootstrap = ",".join(self.endpoints.values())
        self.keep_data_in(run_dir, planted_bug)

    def start(self) -> None:
        """The namespaces first, then the brokers in them."""
        self.network.start()
        super().start()

    def close(self, keep_logs_in: Path | None = None) -> None:
        try:
            super().close(keep_logs_in)
        finally:
            self.network.close()

    # -- the network ---------------------------------------------------------------------------

    def isolate(self, node: int, links: Collection[Link] = LINKS,
                direction: Cut = "both") -> None:
        """In broker `node`'s namespace, drop what the other brokers send it ("in"), what it
        sends them ("out"), or both."""
        _whole_hosts(links)
        if direction not in CUTS:
            raise ValueError(f"direction is one of {CUTS}, not {direction!r}")
        others = self._addresses(other for other in self.brokers if other != node)
        self.network.cut(node, drop_from=others if direction != "out" else (),
                         drop_to=others if direction != "in" else ())

    def split(self, side: Collection[int], others: Collection[int]) -> None:
        for nodes, cut in ((side, others), (others, side)):
            addresses = self._addresses(cut)
            for node in nodes:
                self.network.cut(node, drop_from=addresses, drop_to=addresses)

    def cut_clients(self, node: int) -> None:
        clients = {self.network.client_address}
        self.network.cut(node, drop_from=clients, drop_to=clients)

    def heal(self, links: Collection[Link] = LINKS) -> None:
        _whole_hosts(links)
        self.network.heal()

    def _addresses(self, nodes: Iterable[int]) -> set[str]:
        return {self.network.address(node) for node in nodes}


def _whole_hosts(links: Collection[Link]) -> None:
    if set(links) != set(LINKS):
        raise ValueError(f"a namespace cut takes every port of a broker ({', '.join(LINKS)}), "
                         f"not only {', '.join(sorted(links))}")


def choose_network(asked: str) -> tuple[str, str | None]:
    """The network a run uses for `asked` ("auto" takes namespaces where they work), and why
    namespaces are not used when they were wanted but are unavailable (else None)."""
    if asked not in NETWORKS:
        raise ValueError(f"the network is one of {', '.join(NETWORKS)}, not {asked!r}")
    if asked == TCP_PROXY:
        return TCP_PROXY, None
    reason = unavailable_reason()
    if reason is None:
        return NETNS_NFTABLES, None
    if asked == NETNS_NFTABLES:
        raise RuntimeError(f"network namespaces with nftables are unavailable: {reason}")
    return TCP_PROXY, f"network namespaces with nftables are unavailable ({reason})"


def run_cluster(network: str, size: int, run_dir: Path, planted_bug: str | None = None, *,
                spares: int = 0) -> HarnessCluster:
    """A run's cluster on `network` (NETNS_NFTABLES or TCP_PROXY), not started; `spares`
    learner brokers beyond the `size` voters."""
    if network == NETNS_NFTABLES:
        return NamespacedCluster(size, run_dir, planted_bug, spares=spares)
    return RunCluster(size, run_dir, planted_bug, spares=spares)
