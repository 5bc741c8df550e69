"""A seeded network between the controller, the brokers and the clients.

Messages wait in a heap keyed by (due tick, send order): a random delay reorders them, a drop
loses one, a duplicate delivers one twice. Blocked links are directed (a symmetric cut blocks
both directions) and are checked at delivery, so a message in flight when a cut starts is lost
too. A message due at a paused (SIGSTOPped) broker stays in its socket buffer, `held`, and is
delivered in order when the broker resumes. A scripted scenario may also `hold` the messages
that match a predicate (a connection whose packets stall, for TCP to deliver them later) and
`release` them, in order, when its case needs a late message.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tests.sim.replication.messages import Envelope


@dataclass(slots=True)
class NetworkProfile:
    drop_p: float = 0.0
    duplicate_p: float = 0.0
    delay_max: int = 1  # ticks, uniform in [1, delay_max]


class SimNetwork:
    def __init__(self, rng: random.Random, profile: NetworkProfile) -> None:
        self.rng = rng
        self.profile = profile
        self.blocked: set[tuple[int, int]] = set()
        self.held: dict[int, list[Envelope]] = {}
        self.holding: list[Callable[[Envelope], bool]] = []
        self.withheld: list[Envelope] = []
        self._heap: list[tuple[int, int, Envelope]] = []
        self._seq = 0
        self.sent = self.dropped = 0

    def send(self, src: int, dst: int, body: object, now: int) -> None:
        self.sent += 1
        if self.rng.random() < self.profile.drop_p:
            self.dropped += 1
            return
        copies = 2 if self.rng.random() < self.profile.duplicate_p else 1
        for _ in range(copies):
            self._push(now + self.rng.randint(1, self.profile.delay_max),
                       Envelope(src, dst, body))

    def _push(self, due: int, envelope: Envelope) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, envelope))

    def pop_due(self, now: int, paused: Callable[[int], bool]) -> Envelope | None:
        while self._heap and self._heap[0][0] <= now:
            _, _, envelope = heapq.heappop(self._heap)
            if (envelope.src, envelope.dst) in self.blocked:
                self.dropped += 1
                continue
            if any(matches(envelope) for matches in self.holding):
                self.withheld.append(envelope)
                continue
            if paused(envelope.dst):
                self.held.setdefault(envelope.dst, []).append(envelope)
                continue
            return envelope
        return None

    def hold(self, matches: Callable[[Envelope], bool]) -> None:
        """From now on, messages that `matches` wait (in order) until `release`."""
        self.holding.append(matches)

    def release(self, now: int) -> int:
        """Stop holding; what was held arrives now, in order. Returns how many."""
        withheld, self.withheld, self.holding = self.withheld, [], []
        for envelope in withheld:
            self._push(now, envelope)
        return len(withheld)

    def resume(self, node: int, now: int) -> None:
        """SIGCONT: what waited in the node's socket buffers arrives now, in order."""
        for envelope in self.held.pop(node, []):
            self._push(now, envelope)

    def drop_held(self, node: int) -> None:
        """The node's process died: its socket buffers die with it."""
        self.held.pop(node, None)

    # -- cuts ------------------------------------------------------------------------------

    def heal(self) -> None:
        self.blocked = set()

    def cut(self, a: int, b: int, *, both: bool = True) -> None:
        self.blocked.add((a, b))
        if both:
            self.blocked.add((b, a))

    def isolate(self, node: int, others: Iterable[int], *, inbound: bool = True,
                outbound: bool = True) -> None:
        for other in others:
            if other == node:
                continue
            if outbound:
                self.blocked.add((node, other))
            if inbound:
                self.blocked.add((other, node))

    def __len__(self) -> int:
        return len(self._heap)
