"""Majority arithmetic: who has won a vote, and how far a quorum has stored the chain.

Kept apart from the node (like etcd's `quorum/` package) so the counting can be tested on
its own: every function is pure, takes the voter set explicitly and iterates it in sorted
order, so results never depend on dict or set order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import Enum


class VoteResult(Enum):
    """Outcome of counting the votes of one election (or one pre-vote round)."""

    PENDING = "pending"  # neither side can be sure yet
    WON = "won"  # a majority granted
    LOST = "lost"  # a majority can no longer grant


def majority(voters_count: int) -> int:
    """The smallest number of voters that intersects every other such set."""
    assert voters_count > 0, "an empty voter set has no quorum"
    size = voters_count // 2 + 1
    assert 2 * size > voters_count
    return size


def vote_result(voters: Sequence[int], votes: Mapping[int, bool]) -> VoteResult:
    """Count `votes` (voter -> granted) over `voters`; answers from non-voters are ignored."""
    needed = majority(len(voters))
    granted = sum(1 for voter in sorted(voters) if votes.get(voter) is True)
    rejected = sum(1 for voter in sorted(voters) if votes.get(voter) is False)
    assert granted + rejected <= len(voters)
    assert needed <= len(voters)
    if granted >= needed:
        return VoteResult.WON
    if rejected > len(voters) - needed:
        return VoteResult.LOST
    return VoteResult.PENDING


def committed_height(voters: Sequence[int], match_heights: Mapping[int, int]) -> int:
    """The greatest height that a majority of `voters` is known to have stored.

    A voter missing from `match_heights` counts as having stored nothing (height 0). The
    caller still has to check the block's term (Raft paper 5.4.2) before committing it.
    """
    heights = sorted((match_heights.get(voter, 0) for voter in sorted(voters)), reverse=True)
    needed = majority(len(heights))
    height = heights[needed - 1]
    assert height >= 0
    assert sum(1 for h in heights if h >= height) >= needed
    return height


def has_quorum(voters: Sequence[int], acked: Callable[[int], bool]) -> bool:
    """Whether a majority of `voters` satisfies `acked` (check-quorum, ReadIndex echoes)."""
    needed = majority(len(voters))
    count = sum(1 for voter in sorted(voters) if acked(voter))
    assert 0 <= count <= len(voters)
    assert needed <= len(voters)
    return count >= needed
