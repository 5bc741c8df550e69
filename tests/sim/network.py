"""A seeded packet network: delay (which reorders), loss, duplication and partitions.

Messages sit in a heap keyed by (due tick, send order), so equal due ticks keep send order
and the whole schedule is a function of the seed. Partitions are a set of blocked directed
links, checked at delivery, so a message in flight when a partition starts is lost too.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass

from zlog.raft.messages import Message


@dataclass(slots=True)
class NetworkProfile:
    drop_p: float = 0.0  # chance that one message is lost
    duplicate_p: float = 0.0  # chance that one message is delivered twice
    delay_ticks_max: int = 1  # delay is uniform in [1, delay_ticks_max] ticks


class SimNetwork:
    def __init__(self, rng: random.Random, profile: NetworkProfile) -> None:
        assert profile.delay_ticks_max >= 1
        self.rng = rng
        self.profile = profile
        self.blocked: set[tuple[int, int]] = set()
        self._heap: list[tuple[int, int, Message]] = []
        self._seq = 0
        self.sent = 0
        self.dropped = 0

    def send(self, msg: Message, now: int) -> None:
        self.sent += 1
        if self.rng.random() < self.profile.drop_p:
            self.dropped += 1
            return
        copies = 2 if self.rng.random() < self.profile.duplicate_p else 1
        for _ in range(copies):
            due = now + self.rng.randint(1, self.profile.delay_ticks_max)
            self._seq += 1
            heapq.heappush(self._heap, (due, self._seq, msg))

    def pop_due(self, now: int) -> Message | None:
        """The next message due by `now` whose link is open; blocked ones are lost."""
        while self._heap and self._heap[0][0] <= now:
            _, _, msg = heapq.heappop(self._heap)
            if (msg.from_, msg.to) in self.blocked:
                self.dropped += 1
                continue
            return msg
        return None

    def heal(self) -> None:
        self.blocked = set()

    def isolate(self, node: int, others: list[int], inbound: bool, outbound: bool) -> None:
        for other in others:
            if other == node:
                continue
            if outbound:
                self.blocked.add((node, other))
            if inbound:
                self.blocked.add((other, node))

    def bipartition(self, side: set[int], everyone: list[int]) -> None:
        self.blocked = set()
        for a in everyone:
            for b in everyone:
                if (a in side) != (b in side):
                    self.blocked.add((a, b))

    def __len__(self) -> int:
        return len(self._heap)
