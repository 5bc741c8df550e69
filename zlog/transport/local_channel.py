"""The doorbells between a worker and the clients on its host: a Unix socket.

A worker takes local producers on a SOCK_SEQPACKET socket in the abstract namespace named for
its data endpoint (`doorbell_name`), so a producer on the same host (and in the same network
namespace) finds it from the endpoint Metadata gave, with no file to create or clean up; a
worker that is not running, or that takes no local producers, refuses the connection, and the
producer uses the network.

A local producer's connection carries three things, each a small message:
* the hello: the producer names its queue pair file (shm_queue.py) and the worker answers OK or
  why not (it has mapped the file and unlinked it by then, so nothing is left under /dev/shm
  whoever dies);
* doorbells: one byte, sent only to a side that sleeps (shm_queue.py), to wake its poll;
* the end: when either process dies the kernel closes its end, and the other sees end of file
  at once. That is how a worker learns a producer is gone, and a producer its worker.

A local consumer (zlog/client/local_reads.py) connects the same way with READER_HELLO, then
tells each offset it parks at (`wait_message`: a partition and the offset it has read to); the
worker rings it once that partition's high watermark passes the offset (at once if it has
already), then forgets the wait. So a consumer parked on a ring is woken by the append itself,
not by a timer.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import socket
from typing import Final

HELLO: Final = b"hello "
READER_HELLO: Final = b"reader"
WAIT: Final = b"wait "
OK: Final = b"ok"
REFUSED: Final = b"no "
BELL: Final = b"!"
MESSAGE_BYTES_MAX: Final = 4096
LISTEN_BACKLOG: Final = 64
_RING_FLAGS: Final = socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL
_LIBC: Final = ctypes.PyDLL(None, use_errno=True)  # calls keep the GIL: see `ring`
_send = _LIBC.send
_send.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int)
_send.restype = ctypes.c_ssize_t
_recv = _LIBC.recv
_recv.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_recv.restype = ctypes.c_ssize_t
_drain_buffer = ctypes.create_string_buffer(MESSAGE_BYTES_MAX)  # bells carry nothing


def doorbell_name(endpoint: str) -> bytes:
    """The abstract socket name of the worker serving `endpoint` (a leading NUL byte)."""
    return b"\0zlog-local " + endpoint.encode()


def listen(endpoint: str) -> socket.socket:
    """The worker's listening socket, non-blocking (OSError if another process holds it)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        listener.bind(doorbell_name(endpoint))
        listener.listen(LISTEN_BACKLOG)
    except OSError:
        listener.close()
        raise
    listener.setblocking(False)
    return listener


def connect(endpoint: str) -> socket.socket | None:
    """A producer's connection to the worker serving `endpoint`; None when none listens."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        connection.connect(doorbell_name(endpoint))
    except OSError:
        connection.close()
        return None
    return connection


def ring(connection: socket.socket) -> bool:
    """Wake the other side; False when it is gone. A full socket already holds a bell.

    The send(2) is called holding the GIL (ctypes.PyDLL): a few microseconds. Through
    `socket.send` the GIL is let go for the call, and in a process whose other thread runs
    Python meanwhile (a producer encoding its next batch) getting it back can take CPython's
    whole switch interval, 5 ms, for each bell.
    """
    if _send(connection.fileno(), BELL, 1, _RING_FLAGS) >= 0:
        return True
    return ctypes.get_errno() in (errno.EAGAIN, errno.EWOULDBLOCK)


def drain(connection: socket.socket) -> bool:
    """Take every bell waiting; False once the other side closed (it died, or let go).

    Holding the GIL, as `ring` does: a producer calls this on its hot path."""
    while True:
        received = _recv(connection.fileno(), _drain_buffer, MESSAGE_BYTES_MAX, _RING_FLAGS)
        if received > 0:
            continue
        if received == 0:
            return False
        return ctypes.get_errno() in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR)


def wait_message(topic: str, partition: int, offset: int) -> bytes:
    """A consumer parks at `offset` of a partition: ring me once records past it are visible."""
    return WAIT + b"%d %d " % (partition, offset) + topic.encode()


def parse_wait(message: bytes) -> tuple[str, int, int] | None:
    """(topic, partition, offset) of a wait message; None for anything else."""
    if not message.startswith(WAIT):
        return None
    fields = message[len(WAIT):].split(b" ", 2)
    if len(fields) != 3 or not fields[2]:
        return None
    try:
        return fields[2].decode(), int(fields[0]), int(fields[1])
    except (ValueError, UnicodeDecodeError):
        return None


def receive(connection: socket.socket) -> list[bytes] | None:
    """Every message waiting (bells included); None once the other side closed."""
    messages: list[bytes] = []
    while True:
        try:
            message = connection.recv(MESSAGE_BYTES_MAX, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return messages
        except OSError:
            return None
        if not message:
            return None
        messages.append(message)


def close(connection: socket.socket) -> None:
    with contextlib.suppress(OSError):
        connection.close()
