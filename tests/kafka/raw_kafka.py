"""A Kafka connection on a bare socket, for the bytes no client library would send."""

from __future__ import annotations

import socket
import struct
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest

from zlog_testbed.waiting import wait_until

READ_TIMEOUT_S = 30.0


def connect(bootstrap: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=READ_TIMEOUT_S)


def read_frame(connection: socket.socket) -> bytes | None:
    """The next response frame without its size, or None once the gateway closed."""
    head = _read(connection, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    return _read(connection, size)


def _read(connection: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        try:
            chunk = connection.recv(size - len(data))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


def request_frame(message: Any, version: int, correlation_id: int) -> bytes:
    """A request encoded by kafka-python (independent of the kio the gateway parses with)."""
    message.with_header(correlation_id=correlation_id, client_id="raw")
    return bytes(message.encode(version=version, header=True, framed=True))


def api_versions_frame(correlation_id: int) -> bytes:
    return request_frame(ApiVersionsRequest(client_software_name="raw",
                                            client_software_version="1"), 3, correlation_id)


def gateway_answers(bootstrap: str) -> bool:
    """Whether a fresh connection gets ApiVersions answered."""
    try:
        with connect(bootstrap) as connection:
            connection.sendall(api_versions_frame(1))
            answer = read_frame(connection)
    except OSError:
        return False
    return answer is not None and struct.unpack_from(">ih", answer) == (1, 0)


def wait_gateway_answers(bootstrap: str, timeout_s: float = 30) -> None:
    wait_until(lambda: gateway_answers(bootstrap), timeout_s, interval_s=0.05,
               what=f"the Kafka gateway at {bootstrap} answering")
