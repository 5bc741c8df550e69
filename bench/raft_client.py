"""The client protocol of a standalone Raft node (bench/raft_node.py), and a blocking client.

A client sends ClientRequest frames to a node's client ROUTER and gets ClientReply frames back.
A message may carry several of them, one per frame: a client may pipeline requests in one
message, and a node answers everything that settled together for one client in one message.
Each zmq message costs tens of microseconds of syscalls and wake-ups, so at 10,000 commits/s
replies sent one by one would take most of the leader's time. Frames start like every Raft
codec value (version byte, tag byte), and decoding never trusts a length.

RaftClient is the small blocking client that the process tests and the benchmark use: it
follows leader hints and retries only when the outcome is known. Sockets are not thread-safe:
each RaftClient is used by the one thread that created it.
"""

from __future__ import annotations

import itertools
import json
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Final

import zmq

from zlog import limits
from zlog.errors import ErrorCode, ZlogError, for_code
from zlog.raft.codec import VERSION, CodecError, Reader, Tag

CLIENT_BODY_BYTES_MAX: Final = limits.RAFT_COMMAND_BYTES_MAX
CONNECT_WAIT_MS: Final = 100  # how long a client waits for a connection before trying elsewhere
_CLIENT_REQUEST = struct.Struct(">BBQI")
_CLIENT_REPLY = struct.Struct(">BBQhiI")


class ClientRequestKind(IntEnum):
    """What a client asks a node for; the values are the Raft codec's client tags."""

    PROPOSE = Tag.CLIENT_PROPOSE  # body: a state-machine command to commit and apply
    READ = Tag.CLIENT_READ  # body: a state-machine query, answered linearizably
    STATUS = Tag.CLIENT_STATUS  # body empty; the reply is this node's status as JSON


@dataclass(frozen=True, slots=True)
class ClientRequest:
    """A client's call to a node: `u8 version | u8 kind | u64 request_id | u32 len | body`."""

    kind: ClientRequestKind
    request_id: int  # chosen by the client, echoed in the reply; unique per client socket
    body: bytes


@dataclass(frozen=True, slots=True)
class ClientReply:
    """`u8 version | u8 tag | u64 request_id | i16 error_code | i32 leader_hint | u32 len | body`.

    On success `error_code` is 0 and `body` is the state machine's answer; otherwise `body`
    is a UTF-8 message and `leader_hint` (or -1) names the node the client should try next.
    """

    request_id: int
    error_code: int
    leader_hint: int
    body: bytes


def encode_client_request(request: ClientRequest) -> bytes:
    assert len(request.body) <= CLIENT_BODY_BYTES_MAX, "client body over its bound"
    head = _CLIENT_REQUEST.pack(VERSION, request.kind, request.request_id, len(request.body))
    return head + request.body


def decode_client_request(data: bytes | memoryview) -> ClientRequest:
    reader = Reader(data)
    version, kind, request_id, size = reader.unpack(_CLIENT_REQUEST)
    if version != VERSION:
        raise CodecError(f"unknown codec version {version}")
    try:
        request_kind = ClientRequestKind(kind)
    except ValueError:
        raise CodecError(f"unknown client request kind {kind}") from None
    body = reader.take(size, CLIENT_BODY_BYTES_MAX, "client request body")
    reader.expect_end()
    return ClientRequest(request_kind, request_id, body)


def encode_client_reply(reply: ClientReply) -> bytes:
    assert len(reply.body) <= CLIENT_BODY_BYTES_MAX, "client reply over its bound"
    head = _CLIENT_REPLY.pack(
        VERSION, Tag.CLIENT_REPLY, reply.request_id, reply.error_code, reply.leader_hint,
        len(reply.body),
    )
    return head + reply.body


def decode_client_reply(data: bytes | memoryview) -> ClientReply:
    reader = Reader(data)
    version, tag, request_id, error_code, leader_hint, size = reader.unpack(_CLIENT_REPLY)
    if version != VERSION or tag != Tag.CLIENT_REPLY:
        raise CodecError(f"not a client reply (version {version}, tag {tag})")
    body = reader.take(size, CLIENT_BODY_BYTES_MAX, "client reply body")
    reader.expect_end()
    return ClientReply(request_id, error_code, leader_hint, body)


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

    def call(
        self, node_id: int, kind: ClientRequestKind, body: bytes, timeout_ms: int
    ) -> ClientReply:
        """One request to one node; OutcomeUnknownError if no reply comes within timeout_ms."""
        socket = self._sockets[node_id]
        request_id = next(self._request_ids)
        frame = encode_client_request(ClientRequest(kind, request_id, body))
        deadline = time.monotonic() + timeout_ms / 1000
        if not socket.poll(min(timeout_ms, CONNECT_WAIT_MS), zmq.POLLOUT):
            raise NodeUnreachableError(f"node {node_id} is not connected")
        socket.send(frame, zmq.NOBLOCK)
        while (remaining_s := deadline - time.monotonic()) > 0:
            if not socket.poll(int(remaining_s * 1000) + 1, zmq.POLLIN):
                break
            for frame in socket.recv_multipart():
                reply = decode_client_reply(frame)
                if reply.request_id == request_id:
                    return reply
                # A late reply to an abandoned request: its outcome was reported already.
        raise OutcomeUnknownError(f"no reply from node {node_id} within {timeout_ms} ms")

    def propose(self, command: bytes) -> bytes:
        return self._call_leader(ClientRequestKind.PROPOSE, command)

    def read(self, query: bytes) -> bytes:
        return self._call_leader(ClientRequestKind.READ, query)

    def status(self, node_id: int, timeout_ms: int = 1000) -> dict[str, Any]:
        reply = self.call(node_id, ClientRequestKind.STATUS, b"", timeout_ms)
        status: dict[str, Any] = json.loads(reply.body)
        return status

    def _call_leader(self, kind: ClientRequestKind, body: bytes) -> bytes:
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
                if kind == ClientRequestKind.PROPOSE:
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
