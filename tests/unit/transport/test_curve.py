"""CURVE and the ZAP handler on real sockets in this process (zlog/transport/curve.py).

A server socket made by sockets.py once security is installed names each client by its
principal; an unknown key never gets a message through (its client hearing
SASL_AUTHENTICATION_FAILED: tests/integration/test_curve_security.py); a client's key opens
the metadata log's peer socket but its messages there are dropped (only brokers vote); a key
file others may read is refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from zlog.errors import ErrorCode, ZlogError
from zlog.transport import curve
from zlog.transport.curve_keys import (
    PRINCIPALS_DIR,
    broker_security,
    generate_key_pair,
    load_key_pair,
)
from zlog.transport.raft_peers import PeerTransport, node_identity
from zlog.transport.sockets import make_router, recv_routed
from zlog_testbed.free_ports import free_port

WAIT_MS = 5_000


@pytest.fixture
def keys(tmp_path: Path) -> Iterator[Path]:
    generate_key_pair(tmp_path, "server")
    for name in ("broker", "alice"):
        generate_key_pair(tmp_path / PRINCIPALS_DIR, name)
    generate_key_pair(tmp_path / "elsewhere", "mallory")
    curve.install(broker_security(tmp_path, "broker"))
    yield tmp_path
    curve.install(None)


def _dealer(keys: Path, key_file: Path, endpoint: str,
            identity: bytes = b"") -> zmq.Socket[bytes]:
    """A client socket of another process: its own context and key, not this one's."""
    pair = load_key_pair(key_file)
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    if identity:
        sock.setsockopt(zmq.IDENTITY, identity)
    server = load_key_pair(keys / "server.key_secret")
    sock.curve_serverkey = server.public
    sock.curve_publickey = pair.public
    sock.curve_secretkey = pair.secret
    sock.connect(endpoint)
    return sock


def test_a_known_key_is_named_by_its_principal_and_an_unknown_one_gets_nothing_through(
        keys: Path) -> None:
    router, endpoint = make_router("tcp://127.0.0.1:0")
    try:
        stranger = _dealer(keys, keys / "elsewhere" / "mallory.key_secret", endpoint)
        stranger.send(b"let me in")
        alice = _dealer(keys, keys / PRINCIPALS_DIR / "alice.key_secret", endpoint)
        alice.send(b"hello")
        assert router.poll(WAIT_MS)
        routed = recv_routed(router)
        assert routed is not None
        _identity, frames = routed
        assert frames[0].bytes == b"hello"
        assert curve.principal_of(frames[0]) == "alice"
        assert not router.poll(200)  # the stranger's message never arrives
    finally:
        router.close(linger=0)
        for sock in (stranger, alice):
            context = sock.context
            sock.close(linger=0)
            context.term()


def test_a_client_s_key_opens_the_raft_peer_socket_but_cannot_speak_for_a_node(
        keys: Path) -> None:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    endpoint = "tcp://127.0.0.1:{}"
    port = free_port()
    peers = PeerTransport(context, 1, {1: endpoint.format(port), 2: "tcp://127.0.0.1:9",
                                       3: "tcp://127.0.0.1:10"})
    try:
        alice = _dealer(keys, keys / PRINCIPALS_DIR / "alice.key_secret",
                        endpoint.format(port), node_identity(2))
        broker = _dealer(keys, keys / PRINCIPALS_DIR / "broker.key_secret",
                         endpoint.format(port), node_identity(3))
        alice.send(b"vote for me")
        broker.send(b"append entries")
        received: list[tuple[int, bytes]] = []
        while (not received or peers.dropped_messages == 0) and peers.router.poll(WAIT_MS):
            received += peers.receive()
        assert received == [(3, b"append entries")]
        assert peers.dropped_messages == 1  # alice's, though it named a node
    finally:
        peers.close()
        for sock in (alice, broker):
            other = sock.context
            sock.close(linger=0)
            other.term()


def test_a_secret_key_file_others_may_read_is_refused(tmp_path: Path) -> None:
    _public, secret = generate_key_pair(tmp_path, "server")
    assert os.stat(secret).st_mode & 0o777 == 0o600
    os.chmod(secret, 0o640)
    with pytest.raises(ZlogError) as refused:
        load_key_pair(secret)
    assert refused.value.code == ErrorCode.INVALID_CONFIG
    assert f"chmod 600 {secret}" in refused.value.message
