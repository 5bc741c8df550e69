"""A cluster whose brokers reach one another only through fault proxies: a network to cut.

Broker i binds on 127.0.0.i, as in `cluster_processes`, but is reached at 127.0.1.i: its
voter entry, `--advertised-listener` and `--advertised-host` all name that address, so its
control, Raft and worker data endpoints are known to everyone there. A `FaultProxy` per port
of broker i (control, Raft, and a fixed data port per worker) listens on 127.0.1.i with the
same port and forwards to 127.0.0.i. Every connection between two brokers, whichever of them
opened it and whatever for (Raft, heartbeats, the controller's probes, a follower's fetches),
so passes one of these proxies.

Each proxy names the process that opened a connection (`client_of`): "broker j" for broker
j's supervisor or workers, "test" for this process. `isolate(i)` drops what the other
brokers send broker i and what broker i sends them, both ways, while the test's own clients
(producers, consumers, metadata calls) still reach every broker: a partition between brokers
that a client sees across, as a client in broker i's rack would. `isolate(i, direction="in")`
silences only what reaches broker i (it hears no other broker, they all hear it), and
`direction="out"` only what leaves it: a one-way partition, whichever broker opened each
connection (both directions of a connection pass the same proxy).

    with proxied_cluster(3, log_dir) as cluster:
        cluster.isolate(2)     # broker 2 cut off from 1 and 3; clients reach all three
        cluster.reset(2, ("control",))   # the connections to its control port drop
        cluster.isolate(2, direction="in")   # it hears neither, both hear it
        cluster.heal(("control", "data"))                # its metadata log still cut off
        cluster.slow_down(2, 500, ("raft",))             # now slow
        cluster.heal()
        assert not cluster.direct_links()   # no broker bypassed the proxies
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Final, Literal

import psutil

from zlog_testbed.broker_process import BrokerProcess
from zlog_testbed.cluster_processes import CLUSTER_FLAGS, ClusterProcesses, running
from zlog_testbed.fault_proxy import Address, FaultProxy, socket_owner
from zlog_testbed.free_ports import free_port_pair

Link = Literal["control", "raft", "data"]  # which of a broker's ports: what travels there
LINKS: Final[tuple[Link, ...]] = ("control", "raft", "data")
Cut = Literal["both", "in", "out"]  # what a cut silences: all, what reaches a broker, what leaves
CUTS: Final[tuple[Cut, ...]] = ("both", "in", "out")
TEST_CLIENT: Final = "test"  # connections this process opened
UNKNOWN_CLIENT: Final = "unknown"  # a socket no broker holds any more (it closed at once)


def bound_host(node: int) -> str:
    return f"127.0.0.{node}"


def proxy_host(node: int) -> str:
    return f"127.0.1.{node}"


def broker_client(node: int) -> str:
    """How the proxies name connections opened by broker `node`'s processes."""
    return f"broker {node}"


class ProxiedCluster(ClusterProcesses):
    """`ClusterProcesses` with each broker behind its own proxies (one worker per broker).

    The last `learners` of the `size` brokers do not vote: each joins the metadata log
    through broker 1 (`--join`), as a broker added to a running cluster does."""

    def __init__(self, size: int, *, extra_args: Sequence[str] = (), learners: int = 0) -> None:
        nodes = range(1, size + 1)
        port = free_port_pair([host for node in nodes
                               for host in (bound_host(node), proxy_host(node))])
        data_ports = {node: free_port_pair([bound_host(node), proxy_host(node)])
                      for node in nodes}
        self.endpoints = {node: f"tcp://{bound_host(node)}:{port}" for node in nodes}
        self.advertised = {node: f"tcp://{proxy_host(node)}:{port}" for node in nodes}
        voters = ",".join(f"{node}@{endpoint}" for node, endpoint in self.advertised.items()
                          if node <= size - learners)
        self.brokers = {
            node: BrokerProcess(
                1,
                ["--node-id", str(node),
                 *(["--voters", voters] if node <= size - learners
                   else ["--join", self.advertised[1]]),
                 "--advertised-listener", self.advertised[node],
                 "--advertised-host", proxy_host(node),
                 "--data-port-range", f"{data_ports[node]}-{data_ports[node]}",
                 *CLUSTER_FLAGS, *extra_args],
                endpoint=self.endpoints[node])
            for node in nodes
        }
        self.bootstrap = ",".join(self.endpoints.values())
        ports: dict[Link, int] = {"control": port, "raft": port + 1}
        self.proxies: dict[int, dict[Link, FaultProxy]] = {
            node: {
                link: FaultProxy((proxy_host(node), each), (bound_host(node), each),
                                 client_of=self.client_of, name=f"broker {node} {link}")
                for link, each in {**ports, "data": data_ports[node]}.items()
            }
            for node in nodes
        }

    def start(self) -> None:
        """The proxies first: a broker's peers reach it through them from the start."""
        with contextlib.ExitStack() as started:
            for proxy in self._each_proxy(LINKS):
                started.callback(proxy.close)
                proxy.start()
            started.pop_all()
        super().start()

    def close(self, keep_logs_in: Path | None = None) -> None:
        with contextlib.ExitStack() as closing:
            for proxy in self._each_proxy(LINKS):
                closing.callback(proxy.close)
            super().close(keep_logs_in)

    # -- the network ---------------------------------------------------------------------------

    def isolate(self, node: int, links: Collection[Link] = LINKS,
                direction: Cut = "both") -> None:
        """Cut broker `node` off from every other broker on `links` (every port by default):
        both ways, or only what reaches it ("in") or only what leaves it ("out"). Clients are
        spared."""
        if direction not in CUTS:
            raise ValueError(f"direction is one of {CUTS}, not {direction!r}")
        if direction == "both":
            self._between(node, links, lambda proxy, clients, _: proxy.drop(clients))
            return
        # On its own proxies "forward" reaches it; on the others' it leaves it.
        self._between(node, links, lambda proxy, clients, its_own: proxy.one_way(
            "forward" if its_own == (direction == "in") else "backward", clients))

    def slow_down(self, node: int, delay_ms: float, links: Collection[Link] = LINKS) -> None:
        """Delay everything between broker `node` and the others on `links`, both ways."""
        self._between(node, links,
                      lambda proxy, clients, _: proxy.delay(delay_ms, clients=clients))

    def reset(self, node: int, links: Collection[Link] = LINKS) -> None:
        """Reset every open connection to broker `node`'s ports on `links`: the others see
        them drop, as a host's reset or a middlebox's would, while it runs on; new ones are
        accepted, under whatever fault is in place."""
        for proxy in (self.proxies[node][link] for link in links):
            proxy.reset()

    def heal(self, links: Collection[Link] = LINKS) -> None:
        """`links` forward again; connections that lost bytes are reset and reconnect."""
        for proxy in self._each_proxy(links):
            proxy.heal()

    def _between(self, node: int, links: Collection[Link],
                 apply: Callable[[FaultProxy, set[str], bool], None]) -> None:
        """`apply` a fault to the connections the others opened to broker `node` (its own
        proxies, aimed at the other brokers and at any client no broker owns) and to those it
        opened to them (their proxies, aimed at it); the flag says which: its own."""
        others = {broker_client(other) for other in self.brokers if other != node}
        for other, proxies in self.proxies.items():
            for link in links:
                its_own = other == node
                apply(proxies[link],
                      others | {UNKNOWN_CLIENT} if its_own else {broker_client(node)}, its_own)

    def _each_proxy(self, links: Collection[Link]) -> Iterator[FaultProxy]:
        for proxies in self.proxies.values():
            for link in links:
                yield proxies[link]

    def client_of(self, client: Address) -> str:
        """Which process opened the connection from `client` (runs on a proxy's thread)."""
        owner = socket_owner(client, self._owner_candidates())
        if owner == os.getpid():
            return TEST_CLIENT
        return next((broker_client(node) for node, broker in self.brokers.items()
                     if owner in _pids(broker)), UNKNOWN_CLIENT)

    def _owner_candidates(self) -> Iterator[int]:
        """This process, then every broker's (lazily: only once the socket was found)."""
        yield os.getpid()
        for broker in self.brokers.values():
            yield from _pids(broker)

    def direct_links(self) -> list[tuple[int, Address]]:
        """(broker, remote address) of every connection a broker opened to another broker's
        bound ports, past the proxies: the cut is complete only if there is none."""
        bound = {proxy.target: node for node, proxies in self.proxies.items()
                 for proxy in proxies.values()}
        links = []
        for node, broker in self.brokers.items():
            for pid in _pids(broker):
                with contextlib.suppress(psutil.NoSuchProcess):
                    for connection in psutil.Process(pid).net_connections(kind="tcp"):
                        remote = connection.raddr and (connection.raddr.ip, connection.raddr.port)
                        if remote and bound.get(remote, node) != node:
                            links.append((node, remote))
        return links


def _pids(broker: BrokerProcess) -> list[int]:
    """The broker's supervisor and its descendants (the fork server and the workers it forked,
    grandchildren of the supervisor), from /proc: psutil's way of finding children scans
    every process, too slow for each accepted connection. Runs on a proxy's thread while the
    test's may stop the broker: `process` is read once."""
    process = broker.process
    if process is None or process.poll() is not None:
        return []
    pids = [process.pid]
    for parent in pids:  # grows as children are found: a breadth-first walk
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{parent}/task"):
                with contextlib.suppress(OSError), open(
                        f"/proc/{parent}/task/{task}/children", encoding="ascii") as children:
                    pids += [int(child) for child in children.read().split()
                             if int(child) not in pids]
    return pids


@contextlib.contextmanager
def proxied_cluster(size: int = 3, keep_logs_in: Path | None = None, *,
                    extra_args: Sequence[str] = ()) -> Iterator[ProxiedCluster]:
    with running(ProxiedCluster(size, extra_args=extra_args), keep_logs_in) as cluster:
        yield cluster
