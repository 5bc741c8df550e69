"""The ghost history: what the cluster promised, recorded outside of it (docs/simulation.md).
The code under test never reads any of this; the checker compares it with the logs.

Where a loss is allowed, the ghost says so: `lossy[p]` is set once every member of p's
committed ISR has lost power since it last joined it (checked at each power loss and each
committed ISR change), which is the bound zlog documents (docs/reliability.md §2: acknowledged
data is lost only if every in-sync replica loses power within one writeback window).

`spec_loss_bound` applies a stricter bound (docs/simulation.md, Invariants) instead: only at
power losses, so a loss is allowed only when every ISR member of that moment lost power. zlog does
not meet it (it has no eligible leader replicas and does not tell a power-lost restart from a
clean one; docs/simulation.md), so the tests run with zlog's own bound.
The simulated topic enables unclean election only at heal, for a partition whose every ISR
member came back on a wiped disk (an operator's recovery); `unclean` names those partitions.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field


@dataclass(slots=True)
class Ghost:
    # A batch is (batch id, leader epoch): an idempotent retry appended by another leader has
    # the same id but is another batch (another epoch stamp).
    # partition -> offset -> batch, for acks=all successes
    acked: dict[int, dict[int, tuple[int, int]]] = field(
        default_factory=lambda: defaultdict(dict))
    acked_offset: dict[int, int] = field(default_factory=dict)  # batch id -> its offset
    # partition -> offset -> batch: acked, or returned to a consumer (below a HW)
    committed: dict[int, dict[int, tuple[int, int]]] = field(
        default_factory=lambda: defaultdict(dict))
    # partition -> offset -> the lowest leader epoch in which that batch was known committed
    committed_in: dict[int, dict[int, int]] = field(default_factory=lambda: defaultdict(dict))
    exposed_hw: dict[int, int] = field(default_factory=lambda: defaultdict(int))  # shown
    leader_of: dict[tuple[int, int], int] = field(default_factory=dict)  # (p, epoch) -> broker
    appended_as_leader: dict[tuple[int, int], int] = field(default_factory=dict)
    max_leader_hw: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    # (p, broker): lost power since it last joined p's committed ISR
    lost_since_join: set[tuple[int, int]] = field(default_factory=set)
    # (p, broker): its disk was wiped since it last joined p's committed ISR. It holds nothing,
    # but unlike a power loss this allows no loss: zlog elects no replica back on another
    # directory (a partition whose ISR holds only such replicas waits for an operator)
    wiped_since_join: set[tuple[int, int]] = field(default_factory=set)
    # broker -> its registration (broker epoch) when it last lost power: a join only counts
    # once the broker registered again (a join proposed from its fetches before the power
    # loss proves nothing about what it holds now)
    lost_at_epoch: dict[int, int] = field(default_factory=dict)
    lossy: set[int] = field(default_factory=set)
    # partition -> (the highest offset a DeleteRecords answered ok deleted below, the leader
    # epoch it was answered in)
    deleted: dict[int, tuple[int, int]] = field(default_factory=dict)
    unclean: set[int] = field(default_factory=set)
    spec_loss_bound: bool = False
    # what each leader's proposal saw of the members it added: (p, leader epoch, PE) ->
    # member -> (its log end, the broker epoch it fetched with, HW, epoch start)
    proposals: dict[tuple[int, int, int], dict[int, tuple[int, int, int, int]]] = field(
        default_factory=dict)

    def commit(self, p: int, offset: int, batch: tuple[int, int], leader_epoch: int) -> None:
        self.committed[p][offset] = batch
        known = self.committed_in[p].get(offset)
        self.committed_in[p][offset] = leader_epoch if known is None else min(known,
                                                                               leader_epoch)

    def lacks_data(self, p: int, broker: int) -> bool:
        """Whether `broker`'s replica of p may lack what it held when it joined the ISR."""
        return (p, broker) in self.lost_since_join or (p, broker) in self.wiped_since_join

    def exempt(self, p: int) -> bool:
        """Whether losses on p are within what zlog documents."""
        return p in self.lossy or p in self.unclean
