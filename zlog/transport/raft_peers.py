"""ZeroMQ links between the nodes of the Chained-Raft metadata log (raft.links.PeerLinks).

DESIGN.md §3: servers bind ROUTER, callers connect DEALER. Each node binds one ROUTER for its
peers and connects one DEALER to every other node's ROUTER, with its node id as the DEALER's
identity, so the ROUTER tells who sent a frame without decoding it. A message is one frame
(codec.encode_message). Raft tolerates loss, so sends never block: with ZMQ_IMMEDIATE nothing
queues for a peer that is down, and a full queue drops the message (the next heartbeat or
retry carries the state again). Stale frames that a reconnect would replay are harmless
(every message carries its term) but useless, which is why nothing is queued in the first
place.

With security on (transport/curve.py), a message is taken only from a broker's principal: a
client's key opens the socket, but cannot vote. A DEALER whose handshake a peer refused (its
keys were wrong, then fixed) is made again, at most once a second: libzmq never retries it.

Sockets are not thread-safe: each object here is used by the one thread that created it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import zmq

from zlog import limits
from zlog.clock import monotonic_ms
from zlog.transport import curve
from zlog.transport.sockets import has_message, make_peer_dealer, make_peer_router

REFUSED_RETRY_MS: Final = 1_000


def node_identity(node_id: int) -> bytes:
    return str(node_id).encode()


class PeerTransport:
    """The sockets between this node and its peers."""

    def __init__(self, context: zmq.Context[Any], node_id: int, peers: Mapping[int, str]) -> None:
        assert node_id in peers, "the peer map includes this node's own address"
        self.node_id = node_id
        self.dropped_messages = 0
        self._context = context
        self.router = make_peer_router(peers[node_id], context=context)
        self._addresses: dict[int, str] = {}
        self._dealers: dict[int, zmq.Socket[Any]] = {}
        self._monitors: dict[int, zmq.Socket[Any]] = {}  # security on: refused handshakes
        self._refused_ms: dict[int, int] = {}  # peer -> when its handshake was refused
        self._identities: dict[bytes, int] = {}
        self.set_peers(peers)

    def set_peers(self, peers: Mapping[int, str]) -> None:
        """Connect to the peers not known yet, or known at another address; keep the rest."""
        for peer_id, address in sorted(peers.items()):
            self._identities[node_identity(peer_id)] = peer_id
            if peer_id == self.node_id or self._addresses.get(peer_id) == address:
                continue
            self._connect(peer_id, address)

    def _connect(self, peer_id: int, address: str) -> None:
        self._close_dealer(peer_id)

        def watch(dealer: zmq.Socket[Any]) -> None:
            if curve.installed() is not None:
                self._monitors[peer_id] = dealer.get_monitor_socket(
                    curve.HANDSHAKE_REFUSED_EVENTS)

        self._dealers[peer_id] = make_peer_dealer(
            address, node_identity(self.node_id), context=self._context,
            hwm_messages=limits.RAFT_PEER_SEND_QUEUE_MESSAGES_MAX, before_connect=watch)
        self._addresses[peer_id] = address

    def _close_dealer(self, peer_id: int) -> None:
        monitor = self._monitors.pop(peer_id, None)
        if monitor is not None:
            monitor.close(linger=0)
        old = self._dealers.pop(peer_id, None)
        if old is not None:
            old.close(linger=0)

    def _reconnect_if_refused(self, peer_id: int) -> None:
        """Make the DEALER to a peer that refused this node's handshake again, at most once
        per REFUSED_RETRY_MS."""
        monitor = self._monitors.get(peer_id)
        now_ms = monotonic_ms()
        if monitor is not None and has_message(monitor):
            while has_message(monitor):
                monitor.recv_multipart(zmq.NOBLOCK)
            self._refused_ms.setdefault(peer_id, now_ms)
        refused_ms = self._refused_ms.get(peer_id)
        if refused_ms is not None and now_ms - refused_ms >= REFUSED_RETRY_MS:
            del self._refused_ms[peer_id]
            self._connect(peer_id, self._addresses[peer_id])

    @classmethod
    def factory(
        cls, context: zmq.Context[Any]
    ) -> Callable[[int, Mapping[int, str]], PeerTransport]:
        """What a Raft runner takes to build its links on its own thread."""
        return lambda node_id, peers: cls(context, node_id, peers)

    @property
    def pollable(self) -> zmq.Socket[Any]:
        return self.router

    def send(self, to: int, frame: bytes) -> bool:
        """Queue one message for `to`; False (and counted) when it had to be dropped."""
        if self._monitors:
            self._reconnect_if_refused(to)
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
        for _ in range(limits.RAFT_RECEIVE_BATCH_MESSAGES_MAX):
            try:
                frames = self.router.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                break
            sender = self._identities.get(frames[0].bytes)
            if sender is None or len(frames) != 2 or not curve.is_broker(frames[1]):
                self.dropped_messages += 1
                continue
            received.append((sender, frames[1].bytes))
        return received

    def close(self) -> None:
        self.router.close(linger=0)
        for peer_id in list(self._dealers):
            self._close_dealer(peer_id)
