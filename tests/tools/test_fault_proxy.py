"""The fault proxy does to TCP what each fault promises, on real sockets.

Spec: zlog_testbed/fault_proxy.py's docstrings. Every test talks through a proxy on 127.0.1.2
to a listener on 127.0.0.2 and drives both ends itself: the client socket and the socket the
target accepted. "Nothing arrives" is shown without sleeping: the test waits until the proxy
has counted the bytes as dropped (so they can no longer arrive) and then finds the receiving
socket empty and still open. Delays are checked from below only, never against the clock
from above.
"""

from __future__ import annotations

import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
import zmq

from zlog_testbed.fault_proxy import (
    Address,
    Direction,
    FaultProxy,
    LinkFault,
    ProxyGroup,
    ProxyStats,
    from_this_process,
)
from zlog_testbed.waiting import wait_until

PROXY_HOST: Final = "127.0.1.2"
TARGET_HOST: Final = "127.0.0.2"
TIMEOUT_S: Final = 5.0  # a deadline for what should take milliseconds
REPO_ROOT: Final = Path(__file__).resolve().parents[2]


class Link:
    """Connections through a proxy to the test's own listener; every socket closed at the end."""

    def __init__(self, proxy: FaultProxy, target: socket.socket) -> None:
        self.proxy = proxy
        self.target = target
        self.sockets: list[socket.socket] = []

    def connect(self) -> tuple[socket.socket, socket.socket]:
        """A client connected through the proxy, and the target's end of that connection."""
        return self.connect_from(None)

    def connect_from(self, host: str | None) -> tuple[socket.socket, socket.socket]:
        """As `connect`, from a client bound to `host` (None: the kernel's choice)."""
        client = socket.create_connection(self.proxy.address, timeout=TIMEOUT_S,
                                          source_address=None if host is None else (host, 0))
        self.sockets.append(client)
        server, _ = self.target.accept()
        self.sockets.append(server)
        server.settimeout(TIMEOUT_S)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return client, server

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


def listener(host: str = TARGET_HOST) -> socket.socket:
    sock = socket.create_server((host, 0))
    sock.settimeout(TIMEOUT_S)
    return sock


@pytest.fixture
def target() -> Iterator[socket.socket]:
    with listener() as sock:
        yield sock


@pytest.fixture
def proxy(target: socket.socket) -> Iterator[FaultProxy]:
    with FaultProxy(listen=(PROXY_HOST, 0), target=target.getsockname()) as running:
        yield running
    assert running.errors == []


@pytest.fixture
def link(proxy: FaultProxy, target: socket.socket) -> Iterator[Link]:
    opened = Link(proxy, target)
    yield opened
    opened.close()


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    """Read `size` bytes; the socket's timeout is the deadline."""
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        assert chunk, f"connection closed after {len(chunks)} of {size} bytes"
        chunks += chunk
    return bytes(chunks)


def exchange(client: socket.socket, server: socket.socket, tag: bytes = b"") -> None:
    """One message each way, intact."""
    client.sendall(b"hello target " + tag)
    assert recv_exactly(server, 13 + len(tag)) == b"hello target " + tag
    server.sendall(b"hello client " + tag)
    assert recv_exactly(client, 13 + len(tag)) == b"hello client " + tag


def assert_silent(sock: socket.socket) -> None:
    """Nothing to read, and the connection is neither closed nor reset."""
    sock.setblocking(False)
    try:
        with pytest.raises(BlockingIOError):
            sock.recv(1)
    finally:
        sock.settimeout(TIMEOUT_S)


def assert_reset(sock: socket.socket) -> None:
    """The peer reset the connection (a RST, not a FIN); the socket's timeout is the deadline."""
    with pytest.raises(ConnectionResetError):
        sock.recv(1)


def wait_dropped(proxy: FaultProxy, direction: Direction, at_least_bytes: int) -> None:
    """Until the proxy has read and discarded the bytes: from then on they cannot arrive."""
    def dropped() -> bool:
        stats = proxy.stats()
        count = (
            stats.bytes_dropped_forward if direction == "forward"
            else stats.bytes_dropped_backward
        )
        return count >= at_least_bytes

    wait_until(dropped, timeout_s=TIMEOUT_S, what=f"{at_least_bytes} bytes dropped {direction}")


def wait_read_forward(proxy: FaultProxy, at_least_bytes: int) -> None:
    """Until the proxy has read that many bytes from clients (delivered or still queued)."""
    def read() -> bool:
        stats = proxy.stats()
        return stats.bytes_forward + stats.bytes_queued_forward >= at_least_bytes

    wait_until(read, timeout_s=TIMEOUT_S, interval_s=0.0005, what=f"{at_least_bytes} bytes read")


# --- forwarding ---------------------------------------------------------------------------


def test_bytes_pass_both_ways_and_are_counted(proxy: FaultProxy, link: Link) -> None:
    client, server = link.connect()
    exchange(client, server)
    exchange(client, server, b"again")
    # The proxy counts a chunk once send() returns, which may be after the peer read it.
    wait_until(
        lambda: (proxy.stats().bytes_forward, proxy.stats().bytes_backward) == (31, 31),
        timeout_s=TIMEOUT_S, what="the byte counters",
    )
    stats = proxy.stats()
    assert (stats.connections_accepted, stats.connections_open) == (1, 1)
    assert proxy.address[0] == PROXY_HOST and proxy.address[1] != 0
    assert proxy.endpoint == f"tcp://{PROXY_HOST}:{proxy.address[1]}"


def test_large_transfers_both_ways_at_once_arrive_intact(proxy: FaultProxy, link: Link) -> None:
    client, server = link.connect()
    upstream = bytes(range(256)) * (4 * 4096)  # 4 MiB each way, both at the same time
    downstream = upstream[::-1]
    senders = [
        threading.Thread(target=client.sendall, args=(upstream,)),
        threading.Thread(target=server.sendall, args=(downstream,)),
    ]
    for sender in senders:
        sender.start()
    received_by_server = recv_exactly(server, len(upstream))
    received_by_client = recv_exactly(client, len(downstream))
    for sender in senders:
        sender.join(TIMEOUT_S)
    assert received_by_server == upstream
    assert received_by_client == downstream
    wait_until(
        lambda: (proxy.stats().bytes_forward, proxy.stats().bytes_backward)
        == (len(upstream), len(downstream)),
        timeout_s=TIMEOUT_S, what="the byte counters",
    )


def test_a_clean_close_passes_through_half_closed(proxy: FaultProxy, link: Link) -> None:
    client, server = link.connect()
    client.shutdown(socket.SHUT_WR)
    assert server.recv(1) == b""  # the client's FIN, passed on
    server.sendall(b"still open this way")
    assert recv_exactly(client, 19) == b"still open this way"
    server.close()
    assert client.recv(1) == b""  # a FIN, not a reset
    wait_until(lambda: proxy.stats().connections_open == 0, what="the connection closed")
    assert proxy.stats().connections_reset == 0


def test_an_endpoint_reset_passes_through_as_a_reset(proxy: FaultProxy, link: Link) -> None:
    client, server = link.connect()
    exchange(client, server)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    server.close()
    assert_reset(client)
    wait_until(lambda: proxy.stats().connections_open == 0, what="the connection closed")
    assert proxy.stats().connections_reset == 0  # the endpoint's doing, not a fault's


def test_a_target_that_refuses_resets_the_client(proxy: FaultProxy) -> None:
    with socket.socket() as bound_not_listening:
        bound_not_listening.bind((TARGET_HOST, 0))  # held, so connecting to it is refused
        unreachable = FaultProxy((PROXY_HOST, 0), bound_not_listening.getsockname())
        with unreachable:
            try:
                client = socket.create_connection(unreachable.address, TIMEOUT_S)
            except ConnectionResetError:
                pass  # the reset came before connect() returned: the same reset, seen sooner
            else:
                with client:
                    assert_reset(client)
            wait_until(lambda: unreachable.stats().target_connect_failures == 1,
                       what="the proxy to count the refused connection")


# --- delay --------------------------------------------------------------------------------


def test_delay_holds_each_direction_back_on_an_open_connection(
    proxy: FaultProxy, link: Link
) -> None:
    delay_ms = 40
    client, server = link.connect()
    exchange(client, server)
    proxy.delay(delay_ms)
    started = time.monotonic()
    client.sendall(b"ping")
    assert recv_exactly(server, 4) == b"ping"
    one_way_s = time.monotonic() - started
    server.sendall(b"pong")
    assert recv_exactly(client, 4) == b"pong"
    round_trip_s = time.monotonic() - started
    assert one_way_s >= delay_ms / 1000
    assert round_trip_s >= 2 * delay_ms / 1000
    assert proxy.fault == LinkFault("delay", delay_ms=delay_ms)


def test_jittered_delay_slows_chunks_but_never_reorders_them(
    proxy: FaultProxy, link: Link
) -> None:
    client, server = link.connect()
    proxy.delay(2, jitter_ms=10, seed=7)
    messages = [f"{number:04d}".encode() * 64 for number in range(50)]
    sent = 0
    for message in messages:
        client.sendall(message)
        sent += len(message)
        wait_read_forward(proxy, sent)  # so each message is a chunk with its own jitter
    assert recv_exactly(server, sent) == b"".join(messages)


def test_a_delayed_direction_queues_at_most_queue_bytes_max(target: socket.socket) -> None:
    queue_bytes_max = 256 * 1024
    sent_bytes_max = 64 * 1024 * 1024  # far beyond socket buffers: only an unbounded queue
    with FaultProxy((PROXY_HOST, 0), target.getsockname(), queue_bytes_max=queue_bytes_max) as (
        proxy
    ):
        link = Link(proxy, target)
        try:
            client, _ = link.connect()
            proxy.delay(60_000)  # nothing is delivered during this test
            client.setblocking(False)
            chunk = bytes(64 * 1024)
            sent = 0

            def fill_until_full() -> bool:
                nonlocal sent
                with pytest.raises(BlockingIOError):  # the sender is pushed back
                    while sent < sent_bytes_max:
                        sent += client.send(chunk)
                return proxy.stats().bytes_queued_forward >= queue_bytes_max

            wait_until(fill_until_full, timeout_s=TIMEOUT_S, what="the proxy's queue full")
            fill_until_full()  # the proxy read no further
            stats = proxy.stats()
            assert stats.bytes_queued_forward == queue_bytes_max
            assert stats.bytes_forward == 0
            assert sent > queue_bytes_max
        finally:
            link.close()


# --- partition ----------------------------------------------------------------------------


def test_partition_silences_both_ways_and_heal_resets_the_connection(
    proxy: FaultProxy, link: Link
) -> None:
    client, server = link.connect()
    exchange(client, server)
    proxy.drop()
    client.sendall(b"lost forward")
    server.sendall(b"lost backward")
    wait_dropped(proxy, "forward", 12)
    wait_dropped(proxy, "backward", 13)
    assert_silent(server)
    assert_silent(client)

    proxy.heal()
    assert_reset(client)
    assert_reset(server)
    assert proxy.stats().connections_reset == 1
    exchange(*link.connect())


def test_partition_accepts_new_connections_but_nothing_flows(
    proxy: FaultProxy, link: Link
) -> None:
    proxy.partition()
    client, server = link.connect()
    client.sendall(b"into the void")
    wait_dropped(proxy, "forward", 13)
    assert_silent(server)
    proxy.heal()
    assert_reset(client)
    exchange(*link.connect())


def test_heal_keeps_connections_that_lost_nothing(proxy: FaultProxy, link: Link) -> None:
    client, server = link.connect()
    exchange(client, server)
    proxy.drop()
    proxy.heal()
    exchange(client, server, b"after")
    assert proxy.stats().connections_reset == 0


def test_bytes_queued_by_a_delay_are_lost_to_a_partition(proxy: FaultProxy, link: Link) -> None:
    client, server = link.connect()
    proxy.delay(60_000)
    client.sendall(b"in flight")
    wait_until(lambda: proxy.stats().bytes_queued_forward == 9, what="the bytes queued")
    proxy.drop()
    assert proxy.stats().bytes_dropped_forward == 9
    proxy.heal()
    assert_reset(server)


@pytest.mark.parametrize("dropped", ["forward", "backward"])
def test_one_way_drops_one_direction_while_the_other_flows(
    proxy: FaultProxy, link: Link, dropped: Direction
) -> None:
    client, server = link.connect()
    exchange(client, server)
    proxy.one_way(dropped)
    sender, receiver = (client, server) if dropped == "forward" else (server, client)
    flowing_sender, flowing_receiver = receiver, sender
    sender.sendall(b"swallowed")
    wait_dropped(proxy, dropped, 9)
    flowing_sender.sendall(b"gets through")
    assert recv_exactly(flowing_receiver, 12) == b"gets through"
    assert_silent(receiver)

    proxy.heal()  # the dropped direction has a gap now: reset, not resumed
    assert_reset(client)
    assert_reset(server)
    exchange(*link.connect())


def test_one_way_swallows_the_end_of_the_silenced_stream_and_passes_the_other(
    proxy: FaultProxy, link: Link
) -> None:
    """The target's FIN is silenced, the client's is delivered: the client hears nothing,
    not even that the target went away, while the target sees the client's end."""
    client, server = link.connect()
    proxy.one_way("backward")
    server.sendall(b"unheard")
    server.shutdown(socket.SHUT_WR)
    client.sendall(b"heard")
    assert recv_exactly(server, 5) == b"heard"
    client.shutdown(socket.SHUT_WR)
    assert server.recv(1) == b""  # the client's FIN, passed on
    wait_dropped(proxy, "backward", 7)
    assert_silent(client)
    assert proxy.stats().connections_open == 1  # one FIN still owed: not finished
    proxy.heal()
    assert_reset(client)


def test_turning_a_one_way_fault_around_resets_what_lost_bytes(
    proxy: FaultProxy, link: Link
) -> None:
    """The reverse one-way lets the silenced direction flow again, with a gap: reset. A
    connection that lost nothing to the first fault keeps going through the second."""
    lossy_client, lossy_server = link.connect()
    quiet_client, quiet_server = link.connect()
    proxy.one_way("forward")
    lossy_client.sendall(b"lost")
    wait_dropped(proxy, "forward", 4)
    proxy.one_way("backward")
    assert_reset(lossy_server)
    assert_reset(lossy_client)
    quiet_client.sendall(b"now heard")
    assert recv_exactly(quiet_server, 9) == b"now heard"
    assert proxy.stats().connections_reset == 1


def test_a_fault_aimed_at_some_clients_spares_the_others(target: socket.socket) -> None:
    """Clients named by their address: one from 127.0.0.5 talks on through a partition that
    silences one from 127.0.0.6, and is not reset when it heals."""
    spared_host = "127.0.0.5"
    with FaultProxy(listen=(PROXY_HOST, 0), target=target.getsockname(),
                    client_of=lambda client: client[0]) as proxy:
        spared = Link(proxy, target)
        cut = Link(proxy, target)
        try:
            spared_client, spared_server = spared.connect_from(spared_host)
            cut_client, cut_server = cut.connect_from("127.0.0.6")
            proxy.drop(clients={"127.0.0.6"})
            assert proxy.fault == LinkFault()  # the proxy-wide state is untouched
            cut_client.sendall(b"lost")
            wait_dropped(proxy, "forward", 4)
            exchange(spared_client, spared_server, b"through the cut")
            assert_silent(cut_server)
            exchange(*cut.connect_from("127.0.0.5"))  # a new connection, spared too
            proxy.heal()
            assert_reset(cut_client)
            exchange(spared_client, spared_server, b"after")
            assert proxy.stats().connections_reset == 1
            assert [(event.name, event.args) for event in proxy.faults] == [
                ("drop", {"clients": ["127.0.0.6"]}), ("heal", {})]
        finally:
            spared.close()
            cut.close()
    assert proxy.errors == []


def test_from_this_process_knows_its_own_sockets(proxy: FaultProxy, link: Link) -> None:
    client, server = link.connect()
    assert from_this_process(client.getsockname())
    assert from_this_process(server.getsockname())
    unused = socket.socket()
    try:
        unused.bind(("127.0.0.7", 0))
        port = unused.getsockname()[1]
    finally:
        unused.close()
    assert not from_this_process(("127.0.0.7", port))


# --- reset, refuse, accept ----------------------------------------------------------------


def test_reset_resets_every_connection_and_keeps_accepting(
    proxy: FaultProxy, link: Link
) -> None:
    pairs = [link.connect() for _ in range(3)]
    for client, server in pairs:
        exchange(client, server)
    proxy.reset()
    for client, server in pairs:
        assert_reset(client)
        assert_reset(server)
    stats = proxy.stats()
    assert (stats.connections_reset, stats.connections_open) == (3, 0)
    exchange(*link.connect())


def test_refuse_stops_listening_and_accept_listens_again(proxy: FaultProxy, link: Link) -> None:
    client, server = link.connect()
    proxy.refuse()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(proxy.address, timeout=TIMEOUT_S).close()
    exchange(client, server)  # connections already open are left alone
    proxy.accept()
    exchange(*link.connect())
    assert proxy.stats().connections_accepted == 2


# --- life cycle and reports -----------------------------------------------------------------


def test_close_resets_connections_and_frees_the_port(target: socket.socket) -> None:
    proxy = FaultProxy((PROXY_HOST, 0), target.getsockname()).start()
    link = Link(proxy, target)
    try:
        client, server = link.connect()
        exchange(client, server)
        address = proxy.address
        proxy.close()
        assert_reset(client)
        with socket.socket() as again:  # no SO_REUSEADDR: not even a TIME_WAIT may hold it
            again.bind(address)
            again.listen()
        with FaultProxy(address, target.getsockname()) as reopened:
            assert reopened.address == address
        proxy.close()  # twice is harmless
        with pytest.raises(RuntimeError):
            proxy.drop()
    finally:
        link.close()


def test_faults_are_recorded_in_order_with_their_arguments(proxy: FaultProxy) -> None:
    before = time.monotonic()
    proxy.delay(5, jitter_ms=2, seed=3)
    proxy.drop()
    proxy.one_way("backward")
    proxy.reset()
    proxy.refuse()
    proxy.accept()
    proxy.heal()
    faults = proxy.faults
    assert [(event.name, event.args) for event in faults] == [
        ("delay", {"delay_ms": 5, "jitter_ms": 2, "seed": 3}),
        ("drop", {}),
        ("one_way", {"direction": "backward"}),
        ("reset", {}),
        ("refuse", {}),
        ("accept", {}),
        ("heal", {}),
    ]
    times = [event.at_s for event in faults]
    assert times == sorted(times) and times[0] >= before
    with pytest.raises(ValueError, match="direction"):
        proxy.one_way("sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="negative"):
        proxy.delay(-1)


def test_a_fault_set_before_start_applies_from_the_first_connection(
    target: socket.socket,
) -> None:
    proxy = FaultProxy((PROXY_HOST, 0), target.getsockname())
    proxy.drop()
    with proxy:
        link = Link(proxy, target)
        try:
            client, server = link.connect()
            client.sendall(b"cut")
            wait_dropped(proxy, "forward", 3)
            assert_silent(server)
        finally:
            link.close()


def test_a_group_faults_every_member(target: socket.socket) -> None:
    with listener() as second_target:
        targets = [target, second_target]
        routes: list[tuple[Address, Address]] = [
            ((PROXY_HOST, 0), sock.getsockname()) for sock in targets
        ]
        with ProxyGroup.between(routes) as group:
            links = [Link(member, sock) for member, sock in zip(group, targets, strict=True)]
            try:
                pairs = [each.connect() for each in links]
                for client, server in pairs:
                    exchange(client, server)
                group.drop()
                for member, (client, server) in zip(group, pairs, strict=True):
                    client.sendall(b"cut")
                    wait_dropped(member, "forward", 3)
                    assert_silent(server)
                group.heal()
                for client, _ in pairs:
                    assert_reset(client)
                for each in links:
                    exchange(*each.connect())
                stats = group.stats()
                assert isinstance(stats, ProxyStats)
                assert (stats.connections_accepted, stats.connections_reset) == (4, 2)
                assert [event.name for event in group.faults] == ["drop", "heal"]
                assert all(member.fault.name == "heal" for member in group)
            finally:
                for each in links:
                    each.close()


# --- ZeroMQ -------------------------------------------------------------------------------


def test_zmq_reconnects_by_itself_after_a_partition_heals(target: socket.socket) -> None:
    context = zmq.Context()
    try:
        router = context.socket(zmq.ROUTER)
        router.linger = 0
        router_port = router.bind_to_random_port(f"tcp://{TARGET_HOST}")
        with FaultProxy((PROXY_HOST, 0), (TARGET_HOST, router_port)) as proxy:
            dealer = context.socket(zmq.DEALER)
            dealer.linger = 0
            dealer.setsockopt(zmq.RECONNECT_IVL, 10)
            dealer.connect(proxy.endpoint)
            timeout_ms = int(TIMEOUT_S * 1000)

            def round_trip(body: bytes) -> None:
                dealer.send(body)
                assert router.poll(timeout_ms), f"{body!r} never reached the router"
                identity, received = router.recv_multipart()
                assert received == body
                router.send_multipart([identity, b"re: " + body])
                assert dealer.poll(timeout_ms), f"no answer to {body!r}"
                assert dealer.recv() == b"re: " + body

            round_trip(b"hello")
            proxy.drop()
            dealer.send(b"lost")
            wait_dropped(proxy, "forward", 2 + len(b"lost"))  # ZMTP's flags and size, the body
            assert router.poll(0) == 0

            proxy.heal()
            assert proxy.stats().connections_reset == 1
            # zmq notices the reset and connects again; what is sent after that goes through.
            wait_until(
                lambda: proxy.stats().connections_accepted == 2, timeout_s=TIMEOUT_S,
                what="the dealer reconnecting",
            )
            round_trip(b"hello again")
            assert proxy.errors == []
    finally:
        context.destroy(linger=0)


# --- the command line -----------------------------------------------------------------------


def test_the_command_line_forwards_until_sigterm(link: Link, target: socket.socket) -> None:
    target_host, target_port = target.getsockname()
    command = [
        sys.executable, "-m", "zlog_testbed.fault_proxy", "--listen", f"{PROXY_HOST}:0",
        "--target", f"{target_host}:{target_port}", "--delay-ms", "1",
    ]
    with subprocess.Popen(
        command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        try:
            assert process.stdout is not None
            banner = process.stdout.readline()
            found = re.search(r"listening on (\S+):(\d+),", banner)
            assert found, f"no address in {banner!r}"
            address = (found[1], int(found[2]))
            with socket.create_connection(address, timeout=TIMEOUT_S) as client:
                server, _ = target.accept()
                with server:
                    server.settimeout(TIMEOUT_S)
                    exchange(client, server)
            process.send_signal(signal.SIGTERM)
            assert process.wait(TIMEOUT_S) == 0
            assert process.stderr is not None
            assert "connections_accepted=1" in process.stderr.read()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
