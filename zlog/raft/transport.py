"""ZeroMQ sockets for Chained Raft: the links between a node and its peers.

DESIGN.md §3: servers bind ROUTER, callers connect DEALER. Each node binds one ROUTER for its
peers and connects one DEALER to every other node's ROUTER, with its node id as the DEALER's
identity, so the ROUTER tells who sent a frame without decoding it. A message is one frame
(codec.encode_message). Raft tolerates loss, so sends never block: with ZMQ_IMMEDIATE nothing
queues for a peer that is down, and a full queue drops the message (the next heartbeat or
retry carries the state again). Stale frames that a reconnect would replay are harmless
(every message carries its term) but useless, which is why nothing is queued in the first
place.

Sockets are not thread-safe: each object here is used by the one thread that created it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import zmq

peer_send_queue_messages_max: Final = 1000  # per peer: about one election timeout of traffic
receive_batch_messages_max: Final = 1024  # per socket per loop turn, so no source starves


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
