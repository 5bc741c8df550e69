"""ZeroMQ sockets for Chained Raft: peer links, the client endpoint, and a blocking client.

DESIGN.md §3: servers bind ROUTER, callers connect DEALER. Each node binds one ROUTER for its
peers and connects one DEALER to every other node's ROUTER, with its node id as the DEALER's
identity, so the ROUTER tells who sent a frame without decoding it. A message is one frame
(codec.encode_message). Raft tolerates loss, so sends never block: with ZMQ_IMMEDIATE nothing
queues for a peer that is down, and a full queue drops the message (the next heartbeat or
retry carries the state again). Stale frames that a reconnect would replay are harmless
(every message carries its term) but useless, which is why nothing is queued in the first
place.

Clients talk to a node's client ROUTER with codec.ClientRequest / ClientReply frames. A
message may carry several of them, one per frame: a client may pipeline requests in one
message, and a node answers everything one Ready settled for one client in one message. Each
zmq message costs tens of microseconds of syscalls and wake-ups, so at 10,000 commits/s the
replies, sent one by one, would take most of the leader's time. The RaftClient below is the
small blocking client that the tests, the benchmark and the command line use: it follows
leader hints and retries only when the outcome is known.

Sockets are not thread-safe: each object here is used by the one thread that created it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from collections.abc import Mapping
from typing import Any, Final

import zmq

from zlog.errors import ErrorCode, ZlogError, for_code
from zlog.raft import codec
from zlog.raft.codec import ClientReply, ClientRequest, RequestKind

peer_send_queue_messages_max: Final = 1000  # per peer: about one election timeout of traffic
client_send_queue_messages_max: Final = 100_000
receive_batch_messages_max: Final = 1024  # per socket per loop turn, so no source starves
client_frames_per_message_max: Final = 1024  # requests or replies in one client message
connect_wait_ms: Final = 100  # how long a client waits for a connection before trying elsewhere


def node_identity(node_id: int) -> bytes:
    return str(node_id).encode()


class PeerTransport:
    """The sockets between this node and its peers."""

    def __init__(self, context: zmq.Context[Any], node_id: int, peers: Mapping[int, str]) -> None:
        assert node_id in peers, "the peer map includes this node's own address"
        self.node_id = node_id
        self.dropped_messages = 0
        self.router: zmq.Socket[Any] = context.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        self.router.setsockopt(zmq.RCVHWM, 0)
        self.router.bind(peers[node_id])
        self._dealers: dict[int, zmq.Socket[Any]] = {}
        for peer_id, address in sorted(peers.items()):
            if peer_id == node_id:
                continue
            dealer = context.socket(zmq.DEALER)
            dealer.setsockopt(zmq.IDENTITY, node_identity(node_id))
            dealer.setsockopt(zmq.LINGER, 0)
            dealer.setsockopt(zmq.IMMEDIATE, 1)
            dealer.setsockopt(zmq.SNDHWM, peer_send_queue_messages_max)
            dealer.setsockopt(zmq.RECONNECT_IVL, 20)
            dealer.setsockopt(zmq.RECONNECT_IVL_MAX, 200)
            dealer.connect(address)
            self._dealers[peer_id] = dealer
        self._identities = {node_identity(peer): peer for peer in peers}

    def send(self, to: int, frame: bytes) -> bool:
        """Queue one message for `to`; False (and counted) when it had to be dropped."""
        dealer = self._dealers.get(to)
        if dealer is None:
            self.dropped_messages += 1
            return False
        try:
            dealer.send(frame, zmq.NOBLOCK, copy=len(frame) < 65_536)
        except zmq.Again:
            self.dropped_messages += 1
            return False
        return True

    def receive(self) -> list[tuple[int, bytes]]:
        """Frames waiting on the ROUTER, as (sender id, frame); unknown senders are dropped."""
        received: list[tuple[int, bytes]] = []
        for _ in range(receive_batch_messages_max):
            try:
                frames = self.router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            sender = self._identities.get(frames[0])
            if sender is None or len(frames) != 2:
                self.dropped_messages += 1
                continue
            received.append((sender, frames[1]))
        return received

    def close(self) -> None:
        self.router.close(linger=0)
        for dealer in self._dealers.values():
            dealer.close(linger=0)


class ClientEndpoint:
    """The ROUTER clients call: [client identity, request...] in, [identity, reply...] out.

    Replies are held per client until `flush()`, which the runner calls once per loop turn.
    """

    def __init__(self, context: zmq.Context[Any], address: str) -> None:
        self.router: zmq.Socket[Any] = context.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        self.router.setsockopt(zmq.SNDHWM, client_send_queue_messages_max)
        self.router.setsockopt(zmq.RCVHWM, client_send_queue_messages_max)
        self.router.bind(address)
        self.malformed_requests = 0
        self._replies: dict[bytes, list[bytes]] = {}

    def receive(self) -> list[tuple[bytes, bytes]]:
        """(client identity, request frame) pairs, in arrival order."""
        received: list[tuple[bytes, bytes]] = []
        for _ in range(receive_batch_messages_max):
            try:
                frames = self.router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            if len(frames) < 2 or len(frames) > client_frames_per_message_max:
                self.malformed_requests += 1
                continue
            received.extend((frames[0], frame) for frame in frames[1:])
        return received

    def reply(self, identity: bytes, reply: ClientReply) -> None:
        """Hold a reply for the next flush()."""
        replies = self._replies.setdefault(identity, [])
        replies.append(codec.encode_client_reply(reply))
        if len(replies) >= client_frames_per_message_max:
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


class OutcomeUnknownError(ZlogError):
    """No answer in time: the command may or may not have been applied."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)


class NodeUnreachableError(ZlogError):
    """Not connected to the node, so the request was never sent: safe to try elsewhere."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NETWORK_EXCEPTION, message)


class RaftClient:
    """A blocking client over every node's client endpoint; finds the leader by its hints.

    `propose` retries a command on another node only after a NOT_LEADER_OR_FOLLOWER reply (the
    command was certainly not applied). A timeout raises OutcomeUnknownError and never
    retries: retrying could apply the command twice.
    """

    def __init__(
        self,
        addresses: Mapping[int, str],
        *,
        timeout_ms: int = 5000,
        attempt_timeout_ms: int = 1000,
        context: zmq.Context[Any] | None = None,
    ) -> None:
        assert addresses, "at least one node"
        self._context = context or zmq.Context.instance()
        self._sockets: dict[int, zmq.Socket[Any]] = {}
        for node_id, address in sorted(addresses.items()):
            dealer = self._context.socket(zmq.DEALER)
            dealer.setsockopt(zmq.LINGER, 0)
            dealer.setsockopt(zmq.IMMEDIATE, 1)
            dealer.setsockopt(zmq.RECONNECT_IVL, 20)
            dealer.setsockopt(zmq.RECONNECT_IVL_MAX, 200)
            dealer.connect(address)
            self._sockets[node_id] = dealer
        self._node_ids = sorted(addresses)
        self.timeout_ms = timeout_ms
        self.attempt_timeout_ms = attempt_timeout_ms
        self.leader_guess: int = self._node_ids[0]
        self._request_ids = itertools.count(1)

    def call(self, node_id: int, kind: RequestKind, body: bytes, timeout_ms: int) -> ClientReply:
        """One request to one node; OutcomeUnknownError if no reply comes within timeout_ms."""
        socket = self._sockets[node_id]
        request_id = next(self._request_ids)
        frame = codec.encode_client_request(ClientRequest(kind, request_id, body))
        deadline = time.monotonic() + timeout_ms / 1000
        if not socket.poll(min(timeout_ms, connect_wait_ms), zmq.POLLOUT):
            raise NodeUnreachableError(f"node {node_id} is not connected")
        socket.send(frame, zmq.NOBLOCK)
        while (remaining_s := deadline - time.monotonic()) > 0:
            if not socket.poll(int(remaining_s * 1000) + 1, zmq.POLLIN):
                break
            for frame in socket.recv_multipart():
                reply = codec.decode_client_reply(frame)
                if reply.request_id == request_id:
                    return reply
                # A late reply to an abandoned request: its outcome was reported already.
        raise OutcomeUnknownError(f"no reply from node {node_id} within {timeout_ms} ms")

    def propose(self, command: bytes) -> bytes:
        return self._call_leader(RequestKind.PROPOSE, command)

    def read(self, query: bytes) -> bytes:
        return self._call_leader(RequestKind.READ, query)

    def status(self, node_id: int, timeout_ms: int = 1000) -> dict[str, Any]:
        reply = self.call(node_id, RequestKind.STATUS, b"", timeout_ms)
        status: dict[str, Any] = json.loads(reply.body)
        return status

    def _call_leader(self, kind: RequestKind, body: bytes) -> bytes:
        deadline = time.monotonic() + self.timeout_ms / 1000
        target = self.leader_guess
        backoff_s = 0.005
        while True:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                raise OutcomeUnknownError(f"no leader answered within {self.timeout_ms} ms")
            try:
                reply = self.call(target, kind, body, min(remaining_ms, self.attempt_timeout_ms))
            except NodeUnreachableError:
                target = self._next_after(target)
                continue
            except OutcomeUnknownError:
                if kind == RequestKind.PROPOSE:
                    raise  # it may have been applied: retrying could apply it twice
                target = self._next_after(target)
                continue
            if reply.error_code == 0:
                self.leader_guess = target
                return reply.body
            if reply.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                raise for_code(reply.error_code, reply.body.decode(errors="replace"))
            hinted = reply.leader_hint in self._sockets and reply.leader_hint != target
            target = reply.leader_hint if hinted else self._next_after(target)
            if not hinted:
                time.sleep(backoff_s)  # no leader yet: an election takes a few ticks
                backoff_s = min(backoff_s * 2, 0.1)

    def _next_after(self, node_id: int) -> int:
        index = self._node_ids.index(node_id)
        return self._node_ids[(index + 1) % len(self._node_ids)]

    def close(self) -> None:
        for socket in self._sockets.values():
            socket.close(linger=0)
