"""The gateway's asyncio loop: connections in, one request at a time per connection.

Kafka answers a connection's requests in order, so each connection reads a frame, answers it
and only then reads the next (Kafka's own broker mutes a connection the same way). Handlers
block on native calls, so they run on a thread pool large enough for every JoinGroup that
may be waiting on a rebalance at once. The process ends when its supervisor's lifeline pipe
reads end-of-file (the supervisor stopped or died) or on SIGTERM.

With security on the listener speaks TLS (`tls`) and each connection logs in before anything
else (dispatch.Session); an answer a quota throttles is held for its throttle, and reading
that connection waits with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import ssl
from concurrent.futures import ThreadPoolExecutor
from typing import Final

from zlog.kafka.framing import FrameReader, FrameSizeError
from zlog.kafka.kafka_login import KafkaLogin
from zlog.kafka.relay import peer_is_own_user, split_relayed
from zlog.kafka_gateway.calls import Call, Gateway, Handler
from zlog.kafka_gateway.dispatch import Session, answer
from zlog.kafka_gateway.gateway_security import GatewaySecurity

log = logging.getLogger("zlog.kafka_gateway")

HANDLER_THREADS: Final = 256
READ_CHUNK_BYTES: Final = 256 * 1024
TLS_HANDSHAKE_TIMEOUT_S: Final = 10.0
SECURITY_WAIT_S: Final = 0.05


async def _closed(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError, OSError):
        await writer.wait_closed()


class GatewayServer:
    """Serves Kafka clients on a listening socket the supervisor bound."""

    def __init__(self, gateway: Gateway, listener: socket.socket, lifeline_fd: int | None, *,
                 security: GatewaySecurity | None = None,
                 tls: ssl.SSLContext | None = None, relay: str = "") -> None:
        assert (security is None) == (tls is None), "security on: SASL_SSL, never plaintext"
        self.relay = relay  # "@name": the workers' relay socket (relay.py), security on
        self.gateway = gateway
        self.listener = listener
        self.lifeline_fd = lifeline_fd
        self.security = security
        self.tls = tls
        self._pool = ThreadPoolExecutor(HANDLER_THREADS, thread_name_prefix="kafka-call")
        self._stopped: asyncio.Event | None = None

    async def _run_blocking(self, handler: Handler, gateway: Gateway,
                            call: Call) -> dict[str, object]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, handler, gateway, call)

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        client_host = peer[0] if isinstance(peer, tuple) else ""
        frames = FrameReader()
        session = (None if self.security is None
                   else Session(KafkaLogin(self.security.user, client_host), self.security))
        try:
            while data := await reader.read(READ_CHUNK_BYTES):
                for frame in frames.feed(data):
                    reply = await answer(frame, self.gateway, client_host, self._run_blocking,
                                         session)
                    if reply.throttle_ms:
                        await asyncio.sleep(reply.throttle_ms / 1000)
                    if reply.reply is not None:
                        writer.write(reply.reply)
                        await writer.drain()
                    if reply.close:
                        return
                if frames.refusal is not None:
                    raise FrameSizeError(frames.refusal)
        except FrameSizeError as error:
            log.info("kafka client %s: %s; closing its connection", client_host, error)
        except (ConnectionError, OSError):
            pass
        finally:
            await _closed(writer)

    async def _relay_connection(self, reader: asyncio.StreamReader,
                                writer: asyncio.StreamWriter) -> None:
        """A worker relaying its logged-in clients' requests, each under its principal.

        The requests of different clients are answered side by side, each as soon as it is
        done (the worker matches an answer to its client by its correlation id, and sends a
        client's next request only once its last is answered), so a JoinGroup waiting for its
        group or an answer a quota holds delays no other client of that worker."""
        assert self.security is not None
        sock = writer.get_extra_info("socket")
        frames = FrameReader()
        sessions: dict[str, Session] = {}
        answering: set[asyncio.Task[None]] = set()
        try:
            if sock is None or not peer_is_own_user(sock):
                log.warning("kafka relay connection from another user refused")
                return
            while data := await reader.read(READ_CHUNK_BYTES):
                for frame in frames.feed(data):
                    principal, request = split_relayed(frame)
                    session = sessions.get(principal)
                    if session is None:
                        session = sessions[principal] = Session(
                            KafkaLogin.logged_in(principal, "relay"), self.security)
                    task = asyncio.create_task(self._relayed(request, session, writer))
                    answering.add(task)
                    task.add_done_callback(answering.discard)
        except (FrameSizeError, ValueError) as error:
            log.warning("kafka relay connection: %s; closing it", error)
        except (ConnectionError, OSError):
            pass
        finally:
            for task in answering:
                task.cancel()
            await _closed(writer)

    async def _relayed(self, request: bytes, session: Session,
                       writer: asyncio.StreamWriter) -> None:
        reply = await answer(request, self.gateway, "relay", self._run_blocking, session)
        if reply.throttle_ms:
            await asyncio.sleep(reply.throttle_ms / 1000)
        if reply.reply is not None and not writer.is_closing():
            writer.write(reply.reply)
            with contextlib.suppress(ConnectionError, OSError):
                await writer.drain()

    def _on_lifeline(self) -> None:
        assert self.lifeline_fd is not None and self._stopped is not None
        try:
            data = os.read(self.lifeline_fd, 1)
        except BlockingIOError:
            return
        if not data:
            log.info("the supervisor is gone: stopping")
            self._stopped.set()

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, self._stopped.set)
        loop.add_signal_handler(signal.SIGINT, self._stopped.set)
        if self.lifeline_fd is not None:
            os.set_blocking(self.lifeline_fd, False)
            loop.add_reader(self.lifeline_fd, self._on_lifeline)
        if self.security is not None:
            self.security.start()
            # Logins need the users: connections wait in the listener's backlog until then.
            while not self.security.ready.is_set():
                if self._stopped.is_set():
                    self.security.stop()
                    return
                await asyncio.sleep(SECURITY_WAIT_S)
        server = await asyncio.start_server(self._connection, sock=self.listener,
                                            limit=READ_CHUNK_BYTES, ssl=self.tls,
                                            ssl_handshake_timeout=(TLS_HANDSHAKE_TIMEOUT_S
                                                                   if self.tls else None))
        relay = (await asyncio.start_unix_server(self._relay_connection,
                                                 path="\0" + self.relay[1:],
                                                 limit=READ_CHUNK_BYTES)
                 if self.relay else None)
        log.info("kafka gateway of broker %d serving %s at %s:%d", self.gateway.node.node_id,
                 "SASL_SSL" if self.tls else "PLAINTEXT", self.gateway.node.host,
                 self.gateway.node.port)
        async with server:
            await self._stopped.wait()
        if relay is not None:
            relay.close()
        if self.security is not None:
            self.security.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)
