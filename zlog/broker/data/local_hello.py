"""Who may hand a worker a queue pair: the checks of a local producer's hello.

A hello names a file the worker will map and then unlink (zlog/transport/local_channel.py), so
a local process must not be able to name any other file: the worker takes only a queue pair
in the queue directory (a name starting with QUEUE_NAME_PREFIX, no symbolic link), owned by the
user of the process on the other end of the connection, and made by that very process (the pid
in the file's header against SO_PEERCRED's). Anything else is refused with a sentence the
producer logs before it uses the network.
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from zlog.transport import local_channel
from zlog.transport.shm_queue import QUEUE_NAME_PREFIX, QueuePair

_PEER_CREDENTIALS: Final = struct.Struct("3i")  # pid, uid, gid (struct ucred)


@dataclass(frozen=True, slots=True)
class Peer:
    """The process on the other end of a connection, as the kernel tells it."""

    pid: int
    uid: int


def peer_of(connection: socket.socket) -> Peer:
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                        _PEER_CREDENTIALS.size)
    pid, uid, _gid = _PEER_CREDENTIALS.unpack(credentials)
    return Peer(pid, uid)


def open_queues(peer: Peer, message: bytes, directory: Path) -> QueuePair:
    """The queue pair a hello names, mapped and unlinked; ValueError (or OSError) saying why
    not when it does not check out."""
    if not message.startswith(local_channel.HELLO):
        raise ValueError("the first message is not a hello")
    path = Path(message[len(local_channel.HELLO):].decode())
    if path.parent != directory or not path.name.startswith(QUEUE_NAME_PREFIX):
        raise ValueError(f"{path} is not a queue pair of {directory}")
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    try:
        owner = os.fstat(fd).st_uid
        if owner != peer.uid:
            raise ValueError(f"{path} belongs to uid {owner}, not to the producer's")
        queues = QueuePair(path, fd, create=False)
    finally:
        os.close(fd)
    if queues.producer_pid != peer.pid:
        queues.close()
        raise ValueError(f"{path} was made by pid {queues.producer_pid}, not by the "
                         f"producer's {peer.pid}")
    os.unlink(path)
    return queues
