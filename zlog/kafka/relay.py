"""The workers' relay into their gateway with security on: each request with its principal.

A worker's Kafka port serves the data APIs and passes every other request (Metadata, the
group and admin APIs) to its broker's gateway. With security on the client logged in at the
worker, so the gateway cannot log it in again; instead the worker sends the request over a
Unix socket of the abstract namespace, behind the principal it logged in as, and the gateway
answers it as that principal's. Only a process of the broker's own user may connect
(SO_PEERCRED): the same user that can read the broker's keys, so no one is let in who could
not be the broker anyway.

    relayed frame = size (int32) | principal length (uint16) | principal (UTF-8) | request
"""

from __future__ import annotations

import os
import socket
import struct
from typing import Final

PRINCIPAL_LENGTH: Final = struct.Struct(">H")
_PEER_CREDENTIALS: Final = struct.Struct("3i")  # pid, uid, gid


def relayed_frame(principal: str, request: bytes | bytearray) -> list[bytes | bytearray]:
    """The buffers of one relayed request frame, size prefix included."""
    name = principal.encode()
    prefix = PRINCIPAL_LENGTH.pack(len(name)) + name
    return [struct.pack(">i", len(prefix) + len(request)) + prefix, request]


def split_relayed(frame: bytes) -> tuple[str, bytes]:
    """(principal, request frame) of a relayed frame without its size; ValueError if it is
    not one."""
    if len(frame) < PRINCIPAL_LENGTH.size:
        raise ValueError("a relayed frame too short for its principal")
    (length,) = PRINCIPAL_LENGTH.unpack_from(frame)
    end = PRINCIPAL_LENGTH.size + length
    if len(frame) <= end:
        raise ValueError("a relayed frame without a request")
    return frame[PRINCIPAL_LENGTH.size:end].decode(), frame[end:]


def peer_is_own_user(sock: socket.socket) -> bool:
    """Whether the process at the other end of a Unix socket runs as this one's user."""
    credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEER_CREDENTIALS.size)
    _pid, uid, _gid = _PEER_CREDENTIALS.unpack(credentials)
    return bool(uid == os.getuid())
