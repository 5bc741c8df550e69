"""The raw TCP side of a worker's Kafka port: the listener, each client's connection, and the
one connection to this broker's own Kafka gateway, all non-blocking and all polled by the
worker's one zmq.Poller, so Kafka traffic costs no thread and no process hop.

Kafka answers a connection's requests in order, one at a time: a connection whose request is
being served (a Fetch parked for data, a Produce waiting for the in-sync replicas) reads no
further request until that one is answered, as Kafka's own broker mutes the channel. Frames
that arrived meanwhile wait in the connection. Output is gathered from the buffers a response
is made of (`sendmsg`), so stored batches go from the log's pages to the socket uncopied.

With security on a connection speaks TLS (`TlsKafkaConnection`) without a thread of its own:
an `ssl.SSLObject` over two memory BIOs, fed what the socket read and drained into what it
writes, so the handshake and every record move in the same non-blocking turns. A response is
then encrypted, which copies it: the stored batches no longer reach the socket uncopied.
"""

from __future__ import annotations

import errno
import logging
import socket
import ssl
from collections import deque
from collections.abc import Iterable
from typing import Final

from zlog.kafka.framing import FrameReader, FrameSizeError
from zlog.kafka.kafka_login import KafkaLogin
from zlog.transport.wire import Buffer

log = logging.getLogger(__name__)

RECV_BYTES: Final = 256 * 1024
"""What one read takes from a socket at most."""
SEND_BUFFERS_MAX: Final = 512
"""Buffers handed to one sendmsg (the kernel's IOV_MAX is 1024)."""
LISTEN_BACKLOG: Final = 1024
ACCEPTS_PER_TURN_MAX: Final = 256
"""Connections accepted in one loop turn at most: a burst of thousands is taken over several
turns, so the worker's heartbeats, timers and other clients are not held up behind it."""


class KafkaConnection:
    """One client's connection: its unread frames, its unsent bytes, and whether a request of
    its is being served."""

    __slots__ = ("busy", "closed", "closing", "conn_id", "fd", "frames", "login", "out",
                 "reader", "sock")

    def __init__(self, sock: socket.socket, conn_id: int) -> None:
        self.sock = sock
        self.fd = sock.fileno()  # kept: a closed socket's fileno() is -1, the poller's is not
        self.conn_id = conn_id
        self.reader = FrameReader()
        self.frames: deque[bytes] = deque()
        self.out: deque[memoryview] = deque()
        self.busy = False
        self.closed = False
        self.closing = False  # an absurd size came: close once what came before is answered
        self.login: KafkaLogin | None = None  # security on: the client's login

    def fileno(self) -> int:
        return self.fd

    def read(self) -> bool:
        """Take what the socket has into frames; False when the connection is done (closed by
        the client, or an absurd frame size, after which it cannot be re-synchronised)."""
        data = self._recv()
        if data is None:
            return True
        return bool(data) and self._take(data)

    def _recv(self) -> bytes | None:
        """What the socket has: None when nothing yet, empty once the connection is done."""
        try:
            return self.sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            return b""

    def _take(self, data: bytes) -> bool:
        """Frames from the bytes the client sent; False when an absurd size ends it."""
        try:
            self.frames.extend(self.reader.feed(data))
        except FrameSizeError as error:
            log.info("kafka connection %d closed: %s", self.conn_id, error)
            return False
        if self.reader.refusal is not None:
            log.info("kafka connection %d closes: %s", self.conn_id, self.reader.refusal)
            self.closing = True
        return True

    def done(self) -> bool:
        """Closed, or closing with nothing left to answer or to write."""
        return self.closed or (self.closing and not self.frames and not self.busy
                               and not self.out)

    def send(self, buffers: Iterable[Buffer]) -> None:
        """Queue a response; `flush` writes it, once a loop turn, so the answers to requests a
        client sent back to back leave in one system call."""
        for buffer in buffers:
            view = memoryview(buffer).cast("B")
            if view.nbytes:  # sendmsg takes nothing from an empty one: it would stay forever
                self.out.append(view)

    def flush(self) -> None:
        while self.out and not self.closed:
            batch = [self.out[i] for i in range(min(len(self.out), SEND_BUFFERS_MAX))]
            try:
                sent = self.sock.sendmsg(batch)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:
                log.info("kafka connection %d lost: %s", self.conn_id, error)
                self.close()
                return
            while sent:
                head = self.out[0]
                if sent >= head.nbytes:
                    sent -= head.nbytes
                    self.out.popleft()
                else:
                    self.out[0] = head[sent:]
                    sent = 0

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.out.clear()
            self.frames.clear()
            self.sock.close()


class TlsKafkaConnection(KafkaConnection):
    """A client's connection over TLS, the server's side, in memory: what `read` takes from
    the socket goes through the SSL object, and what `send` queues is its ciphertext."""

    __slots__ = ("_handshaken", "_incoming", "_outgoing", "_tls")

    def __init__(self, sock: socket.socket, conn_id: int, context: ssl.SSLContext) -> None:
        super().__init__(sock, conn_id)
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._handshaken = False

    def read(self) -> bool:
        data = self._recv()
        if data is None:
            return True
        if not data:
            return False
        self._incoming.write(data)
        chunks: list[bytes] = []
        try:
            if not self._handshaken:
                self._tls.do_handshake()
                self._handshaken = True
            while chunk := self._tls.read(RECV_BYTES):
                chunks.append(chunk)
        except ssl.SSLWantReadError:
            pass  # the rest of a record, or of the handshake, is still to come
        except ssl.SSLZeroReturnError:  # the client's close_notify
            return False
        except ssl.SSLError as error:  # a plaintext client, a certificate refused ...
            log.info("kafka connection %d: TLS refused: %s", self.conn_id, error.reason or error)
            return False
        finally:
            self._queue_ciphertext()
        if not chunks:
            return True
        return self._take(chunks[0] if len(chunks) == 1 else b"".join(chunks))

    def send(self, buffers: Iterable[Buffer]) -> None:
        """Encrypt the response in one piece (TLS records of up to 16 KiB each)."""
        data = b"".join(memoryview(buffer).cast("B") for buffer in buffers)
        if data and not self.closed:
            self._tls.write(data)
            self._queue_ciphertext()

    def _queue_ciphertext(self) -> None:
        pending = self._outgoing.read()
        if pending:
            self.out.append(memoryview(pending))


def listen(bind_host: str, port: int) -> socket.socket:
    """A non-blocking listener on `bind_host`:`port` (0: the OS picks)."""
    family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((bind_host, port))
        sock.listen(LISTEN_BACKLOG)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def accept_all(listener: socket.socket) -> list[socket.socket]:
    """The connections waiting on the listener (up to ACCEPTS_PER_TURN_MAX; the listener
    stays readable for the rest), made non-blocking with Nagle off."""
    accepted: list[socket.socket] = []
    while len(accepted) < ACCEPTS_PER_TURN_MAX:
        try:
            sock, _address = listener.accept()
        except (BlockingIOError, InterruptedError):
            return accepted
        except OSError as error:  # EMFILE and the like: the client is refused, we go on
            if error.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM,
                                   errno.ECONNABORTED):
                raise
            log.warning("kafka connection not accepted: %s", error)
            return accepted
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        accepted.append(sock)
    return accepted


def connect(address: str) -> socket.socket:
    """A non-blocking connection under way to `address` ("host:port", or "@name": a Unix
    socket of the abstract namespace)."""
    if address.startswith("@"):
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.setblocking(False)
        code = unix.connect_ex("\0" + address[1:])
        if code not in (0, errno.EINPROGRESS, errno.EAGAIN):
            unix.close()
            raise OSError(code, f"cannot connect to {address}: "
                                f"{errno.errorcode.get(code, code)}")
        return unix
    host, _, port_text = address.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setblocking(False)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    code = sock.connect_ex((host, int(port_text)))
    if code not in (0, errno.EINPROGRESS):
        sock.close()
        raise OSError(code, f"cannot connect to {address}: {errno.errorcode.get(code, code)}")
    return sock
