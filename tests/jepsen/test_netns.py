"""Network namespaces cut with nftables (zlog_jepsen/netns.py): real links, real packets.

The real test builds two namespaces on a bridge, shows that a TCP connection between them
works, that a both-ways cut stops it while the root namespace (the clients) still gets
through, that a one-way cut lets datagrams through one way only, and that healing restores
everything. It needs root, `ip` and `nft` and is skipped, saying which is missing, without.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from zlog_jepsen import netns
from zlog_jepsen.netns import (
    BRIDGE_HOST,
    CLIENT_HOST_BYTE,
    NamespaceNetwork,
    cut_script,
    free_subnet,
    link_problems,
    reachable,
    stale_namespaces,
    unavailable_reason,
)
from zlog_jepsen.netns_cluster import NamespacedCluster
from zlog_testbed.waiting import wait_until

PORT = 7000
PROBE_TIMEOUT_S = 1.0
# Accepts connections and echoes one line back on each.
TCP_ECHO = f"""
import socket
server = socket.create_server(("0.0.0.0", {PORT}))
print("listening", flush=True)
while True:
    connection, _ = server.accept()
    with connection:
        connection.sendall(connection.recv(64))
"""
TCP_PROBE = f"""
import socket, sys
try:
    with socket.create_connection((sys.argv[1], {PORT}), timeout={PROBE_TIMEOUT_S}) as s:
        s.sendall(b"ping")
        sys.exit(0 if s.recv(64) == b"ping" else 1)
except OSError:
    sys.exit(1)
"""
# Exit 0 once a datagram arrives on the port, 1 if none does in the time given.
UDP_RECEIVE = f"""
import socket, sys
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    s.bind(("0.0.0.0", {PORT}))
    s.settimeout(float(sys.argv[1]))
    print("bound", flush=True)
    try:
        s.recvfrom(64)
    except TimeoutError:
        sys.exit(1)
"""
UDP_SEND = f"""
import socket, sys, time
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    for _ in range(10):
        s.sendto(b"ping", (sys.argv[1], {PORT}))
        time.sleep(0.05)
"""


def test_stale_namespaces_are_those_of_dead_harness_processes() -> None:
    listed = "zlj-41-0-1 (id: 3)\nzlj-41-0-net\nzlj-77-2-1\nother-ns\nzlj-x-1-1\n"
    assert stale_namespaces(listed, alive={77}) == ["zlj-41-0-1", "zlj-41-0-net"]
    assert stale_namespaces(listed, alive={41, 77}) == []


def test_a_cut_drops_by_peer_address_in_each_direction_asked() -> None:
    both = cut_script({"10.0.0.3", "10.0.0.2"}, {"10.0.0.2"})
    assert both == ("add rule inet zlog_faults input ip saddr { 10.0.0.2, 10.0.0.3 } drop\n"
                    "add rule inet zlog_faults output ip daddr { 10.0.0.2 } drop\n")
    assert cut_script((), {"10.0.0.2"}).count("\n") == 1
    assert cut_script((), ()) == ""


def _link(name: str, operstate: str = "UP", port: str | None = None,
          addresses: tuple[dict[str, object], ...] = ()) -> dict[str, object]:
    """One link as `ip -details -json address show` lists it."""
    link: dict[str, object] = {"ifname": name, "operstate": operstate,
                               "addr_info": list(addresses)}
    if port is not None:
        link["linkinfo"] = {"info_kind": "veth", "info_slave_kind": "bridge",
                            "info_slave_data": {"state": port}}
    return link


def test_a_link_carries_packets_once_up_forwarding_and_addressed() -> None:
    address = {"family": "inet", "local": "10.231.5.1", "prefixlen": 24}
    ready = json.dumps([_link("eth0", addresses=(address,)),
                        _link("h1", port="forwarding"), _link("br0")])
    assert link_problems(ready, {"eth0": "10.231.5.1", "h1": None, "br0": None}) == []
    late = json.dumps([
        _link("eth0", "LOWERLAYERDOWN"), _link("h1", port="disabled"),
        _link("h2", "DOWN", port="listening"),
        _link("eth1", addresses=({**address, "local": "10.231.5.2", "tentative": True},)),
    ])
    assert link_problems(late, {"eth0": "10.231.5.1", "h1": None, "h2": None,
                                "eth1": "10.231.5.2", "br0": None}) == [
        "eth0: lowerlayerdown", "eth0: no address 10.231.5.1", "h1: bridge port disabled",
        "h2: down", "h2: bridge port listening", "eth1: no address 10.231.5.2",
        "br0: no such link"]


def test_the_subnet_is_one_no_route_of_the_host_mentions() -> None:
    routes = "default via 10.231.5.1 dev eth0\n10.231.6.0/24 dev x\n"
    assert free_subnet(5, routes) == "10.231.7"
    assert free_subnet(CLIENT_HOST_BYTE - 1, "") == f"10.231.{CLIENT_HOST_BYTE - 1}"
    assert free_subnet(CLIENT_HOST_BYTE, "") == "10.231.0"  # wraps below the client byte


@pytest.fixture
def network() -> Iterator[NamespaceNetwork]:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"network namespaces with nftables are unavailable: {reason}")
    network = NamespaceNetwork(2)
    network.start()
    try:
        yield network
    finally:
        network.close()


def _in(network: NamespaceNetwork, host: int, script: str, *args: str
        ) -> subprocess.Popen[str]:
    return subprocess.Popen([*network.exec_prefix(host), sys.executable, "-c", script, *args],
                            stdout=subprocess.PIPE, text=True)


def _run_in(network: NamespaceNetwork, host: int, script: str, *args: str) -> int:
    return subprocess.run([*network.exec_prefix(host), sys.executable, "-c", script, *args],
                          timeout=10, check=False).returncode


def _tcp_from(network: NamespaceNetwork, host: int) -> bool:
    """Whether host `host` gets an echo from host 1 now."""
    return _run_in(network, host, TCP_PROBE, network.address(1)) == 0


def _tcp_from_root(network: NamespaceNetwork) -> bool:
    try:
        with socket.create_connection((network.address(1), PORT), PROBE_TIMEOUT_S) as s:
            s.sendall(b"ping")
            return s.recv(64) == b"ping"
    except OSError:
        return False


def _datagram_arrives(network: NamespaceNetwork, sender: int, receiver: int) -> bool:
    with _in(network, receiver, UDP_RECEIVE, str(PROBE_TIMEOUT_S)) as receiving:
        assert receiving.stdout is not None and receiving.stdout.readline() == "bound\n"
        _run_in(network, sender, UDP_SEND, network.address(receiver))
        return receiving.wait(10) == 0


LATE_PORT_S = 1.5
"""How long the clients' bridge port stays down after its last command: longer than a probe's
timeout, so that a connect made meanwhile loses its ARP request and times out."""


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_start_returns_once_the_network_carries_packets(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a fresh or busy machine a bridge port may forward only a while after the command
    that brought it up returned (the kernel's link watch runs later). Here the clients' port
    is held disabled for LATE_PORT_S after its command, as such a kernel would leave it:
    `start` must not return before it forwards, so the first connect from the root
    namespace gets through at once."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"network namespaces with nftables are unavailable: {reason}")
    network = NamespaceNetwork(2)
    bridge = network.namespace(BRIDGE_HOST)
    run = netns.run_command
    timers: list[threading.Timer] = []

    def port_state(state: int) -> None:  # iproute2's `bridge`, as `ip` sets no state 0
        run(["bridge", "-n", bridge, "link", "set", "dev", "clients", "state", str(state)])

    def with_a_late_port(command: Sequence[str], *, stdin: str | None = None) -> str:
        out = run(command, stdin=stdin)
        if "clients" in command and list(command[-3:]) == ["master", "br0", "up"]:
            port_state(0)  # disabled
            timers.append(threading.Timer(LATE_PORT_S, port_state, (3,)))  # forwarding
            timers[-1].start()
        return out

    monkeypatch.setattr(netns, "run_command", with_a_late_port)
    try:
        network.start()
        assert timers, "the clients' port was held"
        assert reachable(network.address(1), PROBE_TIMEOUT_S), "the first connect got through"
    finally:
        for timer in timers:
            timer.join()
        network.close()


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_cut_stops_tcp_between_namespaces_until_healed(network: NamespaceNetwork) -> None:
    with _in(network, 1, TCP_ECHO) as server:
        try:
            assert server.stdout is not None and server.stdout.readline() == "listening\n"
            assert _tcp_from(network, 2) and _tcp_from_root(network)

            network.cut(1, drop_from={network.address(2)}, drop_to={network.address(2)})
            assert not _tcp_from(network, 2)
            assert _tcp_from_root(network), "clients are not cut by a cut between hosts"
            network.cut(1, drop_from={network.client_address}, drop_to={network.client_address})
            assert not _tcp_from_root(network)

            network.heal()
            assert "drop" not in network.rules(1)
            wait_until(lambda: _tcp_from(network, 2) and _tcp_from_root(network), 10,
                       what="TCP through again after the heal")
        finally:
            server.kill()  # it serves forever


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_one_way_cut_passes_packets_the_other_way(network: NamespaceNetwork) -> None:
    network.cut(1, drop_from={network.address(2)})  # host 1 hears nothing from host 2
    assert not _datagram_arrives(network, sender=2, receiver=1)
    assert _datagram_arrives(network, sender=1, receiver=2)
    network.heal()
    assert _datagram_arrives(network, sender=2, receiver=1)


def _drops(cluster: NamespacedCluster, node: int) -> tuple[set[str], set[str]]:
    """(addresses dropped on the way in, on the way out) in broker `node`'s namespace."""
    listed = cluster.network.rules(node)
    inbound, _, outbound = listed.partition("chain output")
    return _addresses(inbound, "saddr"), _addresses(outbound, "daddr")


def _addresses(rules: str, field: str) -> set[str]:
    """From lines `ip saddr { a, b } drop`, or `ip saddr a drop` (nft lists one alone)."""
    return {address.strip(" {}") for line in rules.splitlines() if f"ip {field} " in line
            for address in line.split(f"ip {field} ", 1)[1].rsplit(" drop", 1)[0].split(",")}


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_each_topology_of_the_nemesis_is_rules_in_the_right_namespaces(
        tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"network namespaces with nftables are unavailable: {reason}")
    cluster = NamespacedCluster(3, tmp_path)  # its namespaces only: no broker is started
    one, two, three = (cluster.network.address(node) for node in (1, 2, 3))
    clients = cluster.network.client_address
    cluster.network.start()
    try:
        cluster.isolate(2)
        assert _drops(cluster, 2) == ({one, three}, {one, three})
        assert _drops(cluster, 1) == _drops(cluster, 3) == (set(), set())
        cluster.heal()
        cluster.isolate(2, direction="in")
        assert _drops(cluster, 2) == ({one, three}, set())
        cluster.heal()
        cluster.isolate(2, direction="out")
        assert _drops(cluster, 2) == (set(), {one, three})
        cluster.heal()
        cluster.split([1], [2, 3])  # a minority, or with [1], [2] a bridge through 3
        assert _drops(cluster, 1) == ({two, three}, {two, three})
        assert _drops(cluster, 2) == _drops(cluster, 3) == ({one}, {one})
        cluster.heal()
        cluster.cut_clients(3)
        assert _drops(cluster, 3) == ({clients}, {clients})
        cluster.heal()
        assert all(_drops(cluster, node) == (set(), set()) for node in (1, 2, 3))
        with pytest.raises(ValueError, match="every port of a broker"):
            cluster.isolate(1, links=("raft",))
    finally:
        cluster.close()
