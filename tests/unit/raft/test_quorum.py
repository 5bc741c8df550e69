"""Unit tests of zlog.raft.quorum and zlog.raft.progress: counting and per-peer tracking."""

from __future__ import annotations

import pytest

from zlog.raft.progress import Progress, ProgressState
from zlog.raft.quorum import VoteResult, committed_height, has_quorum, majority, vote_result


@pytest.mark.parametrize(("voters", "size"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (7, 4)])
def test_majority(voters: int, size: int) -> None:
    """Raft 5.2: a quorum is any strict majority of the voters."""
    assert majority(voters) == size


def test_majority_of_nothing_is_a_bug() -> None:
    with pytest.raises(AssertionError):
        majority(0)


def test_vote_result_pending_won_lost() -> None:
    """Section 4 Vote: a candidate wins with a quorum (self included) of the config at head."""
    voters = (1, 2, 3, 4, 5)
    assert vote_result(voters, {1: True}) == VoteResult.PENDING
    assert vote_result(voters, {1: True, 2: True}) == VoteResult.PENDING
    assert vote_result(voters, {1: True, 2: True, 3: True}) == VoteResult.WON
    assert vote_result(voters, {1: True, 2: False, 3: False}) == VoteResult.PENDING
    assert vote_result(voters, {1: True, 2: False, 3: False, 4: False}) == VoteResult.LOST


def test_vote_result_ignores_non_voters() -> None:
    """Learners' answers never count (section 4 membership)."""
    assert vote_result((1, 2, 3), {1: True, 9: True, 8: True}) == VoteResult.PENDING
    assert vote_result((1,), {1: True}) == VoteResult.WON


def test_committed_height_is_the_quorum_th_highest_match() -> None:
    """Commit rule: the largest N that a quorum of voters has stored."""
    assert committed_height((1, 2, 3), {1: 9, 2: 5, 3: 2}) == 5
    assert committed_height((1, 2, 3, 4, 5), {1: 9, 2: 9, 3: 1, 4: 1, 5: 4}) == 4
    assert committed_height((1, 2, 3), {1: 7}) == 0  # missing voters count as 0
    assert committed_height((1, 2), {1: 7, 2: 3}) == 3


def test_committed_height_ignores_learners() -> None:
    assert committed_height((1, 2, 3), {1: 9, 4: 9, 5: 9, 2: 0, 3: 0}) == 0


def test_has_quorum() -> None:
    """Check-quorum and ReadIndex: a predicate held by a majority of voters."""
    voters = (1, 2, 3, 4)
    assert has_quorum(voters, lambda v: v in (1, 2, 3))
    assert not has_quorum(voters, lambda v: v in (1, 2))
    assert not has_quorum(voters, lambda v: v in (1, 2, 9))


def test_progress_probe_then_replicate() -> None:
    """Leader replication (section 4): probe one Append at a time, then stream."""
    progress = Progress(next_h=10)
    assert progress.state == ProgressState.PROBE
    assert not progress.paused(window=4)
    progress.sent(12, window=4)
    assert progress.paused(window=4)
    assert progress.update_match(12, now=1)
    progress.become_replicate(now=1)
    assert progress.next_h == 13
    for last in (14, 16, 18, 20):
        progress.sent(last, window=4)
    assert progress.paused(window=4)
    assert progress.update_match(16, now=2)
    assert list(progress.inflight) == [18, 20]
    assert not progress.paused(window=4)
    assert progress.next_h == 21


def test_progress_update_never_moves_match_back() -> None:
    progress = Progress(next_h=1)
    assert progress.update_match(8, now=1)
    assert not progress.update_match(5, now=2)
    assert progress.match_h == 8
    assert progress.next_h == 9


def test_progress_snapshot_state_waits() -> None:
    """Section 4: when next_h falls to or below the base, send a snapshot and wait."""
    progress = Progress(next_h=3)
    progress.become_snapshot(50, now=4)
    assert progress.paused(window=16)
    assert progress.next_h == 51
    progress.update_match(50, now=5)
    progress.become_replicate(now=5)
    assert progress.state == ProgressState.REPLICATE
    assert progress.next_h == 51


def test_probe_never_goes_below_match() -> None:
    progress = Progress(next_h=10, match_h=6)
    with pytest.raises(AssertionError):
        progress.become_probe(6, now=0)
    progress.become_probe(7, now=0)
    assert progress.next_h == 7
