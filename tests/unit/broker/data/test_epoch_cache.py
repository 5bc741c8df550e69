"""The leader-epoch cache (zlog/broker/data/epoch_cache.py; KIP-101, KIP-279, KAFKA-7415)."""

from __future__ import annotations

import pytest

from zlog.broker.data.epoch_cache import (
    UNDEFINED,
    CheckpointError,
    EpochEntry,
    LeaderEpochCache,
)


def _cache(*pairs: tuple[int, int]) -> LeaderEpochCache:
    return LeaderEpochCache(EpochEntry(epoch, start) for epoch, start in pairs)


def test_end_offsets_follow_kafkas_rules() -> None:
    cache = _cache((1, 0), (3, 5))  # epoch 1 at 0..4, epoch 3 from 5; log end 9
    assert cache.end_offset_for(3, 9) == (3, 9)  # the latest epoch ends at the log end
    assert cache.end_offset_for(1, 9) == (1, 5)
    assert cache.end_offset_for(2, 9) == (1, 5)  # never had 2: the largest below, and its end
    assert cache.end_offset_for(0, 9) == (0, 0)  # below the first entry: ends where it starts
    assert cache.end_offset_for(4, 9) == (UNDEFINED, UNDEFINED)  # above every entry
    assert LeaderEpochCache().end_offset_for(1, 0) == (UNDEFINED, UNDEFINED)


def test_assigning_drops_entries_a_new_leader_supersedes() -> None:
    cache = _cache((1, 0), (2, 3), (3, 6))
    assert cache.assign(2, 4)  # epoch 2 now starts at 4: 2 and 3 as they were are gone
    assert cache.entries == (EpochEntry(1, 0), EpochEntry(2, 4))
    assert not cache.assign(2, 7)  # the same epoch again, later: nothing changes
    assert cache.assign(5, 4)  # a start not above the previous one's replaces it
    assert cache.entries == (EpochEntry(1, 0), EpochEntry(5, 4))


def test_truncation_from_either_end() -> None:
    cache = _cache((1, 0), (2, 3), (3, 6))
    assert cache.truncate_from_end(6)
    assert cache.entries == (EpochEntry(1, 0), EpochEntry(2, 3))
    assert not cache.truncate_from_end(6)
    assert cache.truncate_from_start(4)  # epoch 2 holds offset 4: it stays, starting there
    assert cache.entries == (EpochEntry(2, 4),)
    assert cache.epoch_at(10) == 2 and cache.epoch_at(3) == UNDEFINED


def test_the_kip_279_case_gets_an_exact_answer() -> None:
    """Replicas A,B,C at epoch 1 (0..4); B led epoch 2 from 3, C leads epoch 3 from 5 and
    recorded (3, 5) at election (KAFKA-7415). B asks C where epoch 2 ends: C answers (1, 5),
    and B's own end for epoch 1 is 3, so B keeps 0..2 and refetches from 3."""
    leader_c = _cache((1, 0), (3, 5))
    follower_b = _cache((1, 0), (2, 3))
    leader_epoch, leader_end = leader_c.end_offset_for(follower_b.latest_epoch, 8)
    assert (leader_epoch, leader_end) == (1, 5)
    assert follower_b.end_offset_for(leader_epoch, 6) == (1, 3)


def test_the_checkpoint_round_trips_and_refuses_garbage() -> None:
    cache = _cache((0, 0), (4, 17), (9, 1000))
    assert cache.encode() == b"0\n3\n0 0\n4 17\n9 1000\n"
    assert LeaderEpochCache.decode(cache.encode()).entries == cache.entries
    assert LeaderEpochCache.decode(b"0\n0\n").entries == ()


@pytest.mark.parametrize("data", [
    b"", b"\xff", b"1\n0\n", b"0\n2\n1 0\n", b"0\n1\n1\n", b"0\n2\n3 0\n2 5\n",
    b"0\n2\n1 5\n2 5\n", b"0\n1\n-1 0\n", b"0\n99999999999\n",
])
def test_a_bad_checkpoint_is_an_error_not_a_cache(data: bytes) -> None:
    with pytest.raises(CheckpointError):
        LeaderEpochCache.decode(data)
