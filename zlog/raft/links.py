"""The seam between the Raft runner and the network: what it needs from its peer links.

The runner never builds a socket: whoever starts it passes a factory (the broker passes
`zlog.transport.raft_peers.PeerTransport`), called on the runner's own loop thread, since
sockets belong to the thread that uses them. So `raft` imports nothing of `transport`, and a
test may pass links of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol


class PeerLinks(Protocol):
    """One node's links to its peers: one frame per message, sends that never block."""

    @property
    def pollable(self) -> Any:
        """What the runner's poller waits on for incoming frames (a zmq socket)."""

    def send(self, to: int, frame: bytes) -> bool:
        """Queue one message for peer `to`; False when it had to be dropped."""

    def receive(self) -> list[tuple[int, bytes]]:
        """The frames waiting now, as (sender id, frame); unknown senders are dropped."""

    def set_peers(self, peers: Mapping[int, str]) -> None:
        """Reach every node of `peers` (this node's own address included) from now on: the
        configuration names members that were not known at start (docs/raft.md §4.16)."""

    def close(self) -> None: ...


PeerLinksFactory = Callable[[int, Mapping[int, str]], PeerLinks]
"""(this node's id, every member's address, this node's included) -> its links."""
