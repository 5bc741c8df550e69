"""One Chained-Raft node as a process: a RaftRunner, the KV state machine and a client ROUTER.

    python -m bench.raft_node --id 1 --peers 1=tcp://...,2=... --data-dir D --client-port C

SIGTERM (or SIGINT) hands leadership off and exits with status 0. The benchmark
(bench/raft_bench.py) and the process tests (tests/integration/test_raft_processes.py) run it
to drive Raft from outside, with clients speaking bench/raft_client.py's protocol; zlog's
brokers embed RaftRunner instead and call it in process.

The runner's loop owns the core, its peer sockets and the state machine. The client ROUTER
lives on a thread of its own (ClientServer) and reaches the runner only through its
thread-safe API: propose() and read() futures, status(). A future completes on the loop thread,
which only queues the answer and wakes the client thread, so answers still leave before the
Ready's fsync, and the ones that settle together go out together, one message per client.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import signal
import threading
import weakref
from collections import deque
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Final

import zmq

from bench.raft_client import (
    ClientReply,
    ClientRequestKind,
    decode_client_request,
    encode_client_reply,
)
from bench.raft_kv import KvStateMachine
from zlog import limits
from zlog.errors import ZlogError
from zlog.raft.codec import CodecError
from zlog.raft.errors import NotLeaderError
from zlog.raft.runner import RaftRunner, RunnerConfig
from zlog.transport.raft_peers import PeerTransport

log = logging.getLogger("bench.raft_node")

CLIENT_SEND_QUEUE_MESSAGES_MAX: Final = 100_000
CLIENT_FRAMES_PER_MESSAGE_MAX: Final = 1024  # requests or replies in one client message


class SharedKvStateMachine(KvStateMachine):
    """The KV state machine behind a lock: the runner's loop applies commands while the client
    thread takes the digest a STATUS request reports."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def apply(self, command: bytes) -> bytes:
        with self._lock:
            return super().apply(command)

    def restore(self, data: bytes) -> None:
        with self._lock:
            super().restore(data)

    def digest(self) -> str:
        with self._lock:
            return super().digest()


class ClientEndpoint:
    """The ROUTER clients call: [client identity, request...] in, [identity, reply...] out.

    Replies are held per client until `flush()`, which the server calls once per turn.
    """

    def __init__(self, context: zmq.Context[Any], address: str) -> None:
        self.router: zmq.Socket[Any] = context.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        self.router.setsockopt(zmq.SNDHWM, CLIENT_SEND_QUEUE_MESSAGES_MAX)
        self.router.setsockopt(zmq.RCVHWM, CLIENT_SEND_QUEUE_MESSAGES_MAX)
        self.router.bind(address)
        self.malformed_requests = 0
        self._replies: dict[bytes, list[bytes]] = {}

    def receive(self) -> list[tuple[bytes, bytes]]:
        """(client identity, request frame) pairs, in arrival order."""
        received: list[tuple[bytes, bytes]] = []
        for _ in range(limits.RAFT_RECEIVE_BATCH_MESSAGES_MAX):
            try:
                frames = self.router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            if len(frames) < 2 or len(frames) > CLIENT_FRAMES_PER_MESSAGE_MAX:
                self.malformed_requests += 1
                continue
            received.extend((frames[0], frame) for frame in frames[1:])
        return received

    def reply(self, identity: bytes, reply: ClientReply) -> None:
        """Hold a reply for the next flush()."""
        replies = self._replies.setdefault(identity, [])
        replies.append(encode_client_reply(reply))
        if len(replies) >= CLIENT_FRAMES_PER_MESSAGE_MAX:
            self._send(identity, self._replies.pop(identity))

    def flush(self) -> None:
        """Send the held replies, one message per client."""
        for identity, replies in self._replies.items():
            self._send(identity, replies)
        self._replies.clear()

    def _send(self, identity: bytes, replies: list[bytes]) -> None:
        """A client that went away (or stopped reading) simply misses its replies."""
        with contextlib.suppress(zmq.Again):
            self.router.send_multipart([identity, *replies], zmq.NOBLOCK)

    def close(self) -> None:
        self.router.close(linger=0)


class ClientServer:
    """Serves the client protocol for one runner on its own thread; see the module docstring.

    The ROUTER is bound here, so a busy port fails the caller; after that only the server's
    thread touches it.
    """

    def __init__(
        self,
        runner: RaftRunner,
        fsm: SharedKvStateMachine,
        address: str,
        context: zmq.Context[Any] | None = None,
    ) -> None:
        self.runner = runner
        self.fsm = fsm
        self._endpoint = ClientEndpoint(context or zmq.Context.instance(), address)
        self._settled: deque[tuple[bytes, int, Future[bytes]]] = deque()
        self._settled_lock = threading.Lock()
        # The pipe lives as long as this object: a future's callback holds the object, so a
        # late answer never writes to a closed (or since reused) descriptor.
        self._wake_read_fd, self._wake_write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        weakref.finalize(self, _close_fds, self._wake_read_fd, self._wake_write_fd)
        self._stop_requested = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"raft-clients-{runner.node_id}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop_requested.set()
        self._wake()
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), "client thread did not stop"

    def _run(self) -> None:
        endpoint = self._endpoint
        poller = zmq.Poller()
        poller.register(endpoint.router, zmq.POLLIN)
        poller.register(self._wake_read_fd, zmq.POLLIN)
        try:
            while not self._stop_requested.is_set():
                poller.poll()
                with contextlib.suppress(BlockingIOError):
                    while os.read(self._wake_read_fd, 4096):
                        pass
                for identity, frame in endpoint.receive():
                    self._serve(endpoint, identity, frame)
                with self._settled_lock:
                    settled, self._settled = self._settled, deque()
                for identity, request_id, future in settled:
                    endpoint.reply(identity, self._reply(request_id, future))
                endpoint.flush()
        finally:
            endpoint.close()

    def _serve(self, endpoint: ClientEndpoint, identity: bytes, frame: bytes) -> None:
        try:
            request = decode_client_request(frame)
        except CodecError as error:
            endpoint.reply(identity, ClientReply(0, error.code, -1, error.message.encode()))
            return
        if request.kind == ClientRequestKind.STATUS:
            status = {**self.runner.status().to_json(), "fsm_digest": self.fsm.digest()}
            body = json.dumps(status).encode()
            endpoint.reply(identity, ClientReply(request.request_id, 0, -1, body))
            return
        if request.kind == ClientRequestKind.PROPOSE:
            future = self.runner.propose(request.body)
        else:
            future = self.runner.read(request.body)
        future.add_done_callback(functools.partial(self._settle, identity, request.request_id))

    def _settle(self, identity: bytes, request_id: int, future: Future[bytes]) -> None:
        """On the runner's loop thread: queue the answer, and wake the server once per batch
        (a server that has not taken the queue yet will find this one in it too)."""
        with self._settled_lock:
            first = not self._settled
            self._settled.append((identity, request_id, future))
        if first:
            self._wake()

    def _reply(self, request_id: int, future: Future[bytes]) -> ClientReply:
        error = future.exception()
        if error is None:
            return ClientReply(request_id, 0, -1, future.result())
        assert isinstance(error, ZlogError), error
        hint = error.leader_hint if isinstance(error, NotLeaderError) else None
        if hint is None:
            hint = self.runner.status().leader
        return ClientReply(
            request_id, int(error.code), -1 if hint is None else hint, error.message.encode()
        )

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError):  # full of wake-ups already: enough
            os.write(self._wake_write_fd, b"\x01")


def _close_fds(*fds: int) -> None:
    for fd in fds:
        os.close(fd)


# -- the process --------------------------------------------------------------------------------


def parse_peers(text: str) -> dict[int, str]:
    """`1=tcp://127.0.0.1:7001,2=tcp://...` -> {1: "tcp://127.0.0.1:7001", 2: ...}."""
    peers: dict[int, str] = {}
    for item in text.split(","):
        node_id, _, address = item.strip().partition("=")
        if not address:
            raise argparse.ArgumentTypeError(f"peer {item!r} is not id=address")
        peers[int(node_id)] = address
    return peers


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    defaults = RunnerConfig()
    parser = argparse.ArgumentParser(description="Run one Chained-Raft node over ZeroMQ.")
    parser.add_argument("--id", type=int, required=True, help="this node's id")
    parser.add_argument("--peers", type=parse_peers, required=True,
                        help="every voter as id=tcp://host:port, comma-separated, this one too")
    parser.add_argument("--data-dir", type=Path, required=True, help="where raft.log lives")
    parser.add_argument("--client-port", type=int, required=True,
                        help="TCP port of the client ROUTER (bound on --client-host)")
    parser.add_argument("--client-host", default="127.0.0.1")
    parser.add_argument("--tick-ms", type=int, default=defaults.tick_ms)
    parser.add_argument("--election-ticks", type=int, default=defaults.election_ticks)
    parser.add_argument("--heartbeat-ticks", type=int, default=defaults.heartbeat_ticks)
    parser.add_argument("--compaction-threshold-blocks", type=int,
                        default=defaults.compaction_threshold_blocks)
    parser.add_argument("--no-fsync", action="store_true", help="for measurements only")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    arguments = _arguments(argv)
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s raft-{arguments.id} %(levelname)s %(message)s"
    )
    config = RunnerConfig(
        tick_ms=arguments.tick_ms,
        election_ticks=arguments.election_ticks,
        heartbeat_ticks=arguments.heartbeat_ticks,
        compaction_threshold_blocks=arguments.compaction_threshold_blocks,
        fsync=not arguments.no_fsync,
    )
    fsm = SharedKvStateMachine()
    runner = RaftRunner(arguments.id, arguments.peers, arguments.data_dir, fsm, config=config,
                        links=PeerTransport.factory(zmq.Context.instance()))
    server = ClientServer(runner, fsm, f"tcp://{arguments.client_host}:{arguments.client_port}")

    def on_signal(signum: int, frame: object) -> None:
        del signum, frame
        runner.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    try:
        runner.run()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
