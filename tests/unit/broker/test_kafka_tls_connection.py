"""A worker's Kafka connection over TLS, in memory: the handshake and the records move in
the non-blocking reads and writes of the worker's loop, against a real TLS client on the
other end of a socket pair."""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import threading
from collections.abc import Iterator

import pytest

from zlog.broker.data.kafka_sockets import TlsKafkaConnection
from zlog.kafka.tls import server_context
from zlog_testbed.tls_certs import TlsFiles, make_tls_files, openssl_installed
from zlog_testbed.waiting import wait_until

TIMEOUT_S = 10.0
REQUEST = struct.pack(">hhi", 18, 3, 77) + b"\x00" * 12  # a frame's bytes, not parsed here


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    if not openssl_installed():
        pytest.skip("the openssl command line is not installed")
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    server, client = socket.socketpair()
    server.setblocking(False)
    client.settimeout(TIMEOUT_S)
    yield server, client
    server.close()
    client.close()


def _serve_until_a_frame(conn: TlsKafkaConnection) -> None:
    """The worker loop's part: read what came, write what is queued (the handshake's)."""
    def turn() -> bool:
        alive = conn.read()
        conn.flush()
        return not alive or bool(conn.frames)

    wait_until(turn, TIMEOUT_S, interval_s=0.001, what="a request through TLS")


def test_a_request_and_its_answer_cross_tls_in_memory(
        tls_files: TlsFiles, pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    conn = TlsKafkaConnection(server, 1, server_context(tls_files.cert_file,
                                                        tls_files.key_file))
    context = ssl.create_default_context(cafile=str(tls_files.ca_file))
    answers: list[bytes] = []
    handshaken = threading.Event()

    def client_side() -> None:
        with context.wrap_socket(client, server_hostname="127.0.0.1",
                                 do_handshake_on_connect=True) as tls:
            handshaken.set()
            tls.sendall(struct.pack(">i", len(REQUEST)) + REQUEST)
            answers.append(tls.recv(4 + 100_000 + 64))
            while len(answers[0]) < 4 + 100_000:
                answers[0] += tls.recv(100_000)

    thread = threading.Thread(target=client_side)
    thread.start()
    _serve_until_a_frame(conn)
    assert list(conn.frames) == [REQUEST]
    big = memoryview(b"b" * 100_000)  # several TLS records
    conn.send([struct.pack(">i", big.nbytes), big])
    def written() -> bool:
        conn.flush()
        return not conn.out

    wait_until(written, TIMEOUT_S, interval_s=0.001, what="the answer written")
    thread.join(TIMEOUT_S)
    assert handshaken.is_set()
    assert answers == [struct.pack(">i", big.nbytes) + bytes(big)]


def test_a_plaintext_client_is_refused(tls_files: TlsFiles,
                                       pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    conn = TlsKafkaConnection(server, 2, server_context(tls_files.cert_file,
                                                        tls_files.key_file))
    client.sendall(struct.pack(">i", len(REQUEST)) + REQUEST)
    assert conn.read() is False
    assert not conn.frames


def test_with_a_client_ca_a_client_without_a_certificate_is_refused(
        tls_files: TlsFiles, pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    context = server_context(tls_files.cert_file, tls_files.key_file, tls_files.ca_file)
    assert context.verify_mode == ssl.CERT_REQUIRED
    conn = TlsKafkaConnection(server, 3, context)
    client_context = ssl.create_default_context(cafile=str(tls_files.ca_file))

    def client_side() -> None:
        with contextlib.suppress(ssl.SSLError, OSError), client_context.wrap_socket(
                client, server_hostname="127.0.0.1") as tls:
            tls.sendall(struct.pack(">i", len(REQUEST)) + REQUEST)
            tls.recv(10)

    thread = threading.Thread(target=client_side)
    thread.start()
    refused = threading.Event()

    def turn() -> bool:
        if not conn.read():
            refused.set()
        conn.flush()
        return refused.is_set()

    wait_until(turn, TIMEOUT_S, interval_s=0.001, what="the handshake refused")
    server.close()
    thread.join(TIMEOUT_S)
    assert not conn.frames
