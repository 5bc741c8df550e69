"""The leader's ISR tracker at the start of a term (docs/replication.md §2.2 item 9, §3.1),
as the replication simulator's traces showed it going wrong (tests/sim/replication).
"""

from __future__ import annotations

from zlog.broker.data.isr import HighWatermark, ReplicaSet


def test_a_follower_just_behind_is_not_out_of_sync_at_the_start_of_a_term() -> None:
    """A new leader counts its ISR members as caught up from the term's start; a member's first
    fetch a little behind the leader's log end must not move that back to 0 (which made such a
    follower look out of sync at once, and the leader shrink the ISR right after an
    election)."""
    replicas = ReplicaSet(1, frozenset({1, 2, 3}), frozenset({1, 2, 3}), 2)
    tracker = HighWatermark(replicas)
    tracker.start_term(now_ms=50_000, epoch_start_offset=10)
    tracker.note_follower(2, 8, 0, 12, now_ms=50_001)
    tracker.note_follower(3, 12, 0, 12, now_ms=50_001)
    assert tracker.out_of_sync(50_100, 12, 10_000) == frozenset()
    assert tracker.next_proposal(50_100, 12, 10_000) is None
