"""The proposal and read trackers the runner builds on.

Spec: docs/raft.md §4.8 Apply (deterministic, in committed order), §4.10 Snapshot (restore
replaces the state), §4.6 Leader (the proposal succeeded iff the committed path later holds
(t, h) at height h) and §4.12 ReadIndex (answer once applied >= the read index).
"""

from __future__ import annotations

from zlog.errors import ErrorCode, ZlogError
from zlog.raft import codec
from zlog.raft.messages import Block, BlockId, BlockKind
from zlog.raft.proposals import (
    NotLeaderOrFollowerError,
    Outcome,
    ProposalSupersededError,
    ProposalTracker,
    ReadTracker,
)


def _collector() -> tuple[list[Outcome], ProposalTracker]:
    return [], ProposalTracker(batch_commands_max=3, batch_bytes_max=100)


def _block(term: int, height: int, commands_: list[bytes]) -> Block:
    return Block(
        BlockId(term, height), BlockId(term, height - 1), BlockKind.CMD,
        codec.encode_commands(commands_),
    )


def test_proposals_batch_and_resolve_in_order() -> None:
    """Commands that arrive together share one block; each gets its own result."""
    outcomes, tracker = _collector()
    for index in range(5):
        assert tracker.enqueue(f"c{index}".encode(), outcomes.append, deadline_ms=1000)
    batch = tracker.take_batch()
    assert [p.payload for p in batch] == [b"c0", b"c1", b"c2"]
    tracker.proposed(BlockId(2, 7), batch)
    tracker.applied(_block(2, 7, [b"c0", b"c1", b"c2"]), [b"r0", b"r1", b"r2"])
    assert outcomes == [b"r0", b"r1", b"r2"]
    assert tracker.queued_count == 2


def test_a_different_block_at_the_height_drops_the_proposal() -> None:
    """§4 Leader: if a different id commits at h, the proposal failed (and is safe to retry)."""
    outcomes, tracker = _collector()
    tracker.enqueue(b"mine", outcomes.append, deadline_ms=1000)
    tracker.proposed(BlockId(2, 7), tracker.take_batch())
    tracker.applied(_block(3, 7, [b"theirs"]), [b"r"])
    assert len(outcomes) == 1
    assert isinstance(outcomes[0], ProposalSupersededError)
    assert outcomes[0].code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_leadership_loss_fails_only_commands_not_yet_in_a_block() -> None:
    """A proposed block may still commit under the next leader, so it keeps waiting."""
    outcomes, tracker = _collector()
    tracker.enqueue(b"proposed", outcomes.append, deadline_ms=1000)
    tracker.proposed(BlockId(2, 7), tracker.take_batch())
    tracker.enqueue(b"queued", outcomes.append, deadline_ms=1000)
    tracker.fail_queued(NotLeaderOrFollowerError(3))
    assert len(outcomes) == 1
    assert isinstance(outcomes[0], NotLeaderOrFollowerError) and outcomes[0].leader_hint == 3
    tracker.applied(_block(2, 7, [b"proposed"]), [b"ok"])
    assert outcomes[1] == b"ok"


def test_deadline_reports_an_unknown_outcome() -> None:
    outcomes, tracker = _collector()
    tracker.enqueue(b"a", outcomes.append, deadline_ms=10)
    tracker.proposed(BlockId(1, 1), tracker.take_batch())
    tracker.enqueue(b"b", outcomes.append, deadline_ms=10)
    tracker.expire(now_ms=10)
    assert [o.code for o in outcomes if isinstance(o, ZlogError)] == [
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.REQUEST_TIMED_OUT,
    ]
    tracker.applied(_block(1, 1, [b"a"]), [b"late"])  # nobody left to tell
    assert len(outcomes) == 2


def test_queue_is_bounded() -> None:
    tracker = ProposalTracker(
        queued_commands_max=2, queued_bytes_max=10, batch_commands_max=1, batch_bytes_max=10
    )
    assert tracker.enqueue(b"12345", print, 0)
    assert not tracker.enqueue(b"123456", print, 0)  # bytes
    assert tracker.enqueue(b"1", print, 0)
    assert not tracker.enqueue(b"", print, 0)  # count


def test_snapshot_past_a_proposal_makes_its_outcome_unknown() -> None:
    outcomes, tracker = _collector()
    tracker.enqueue(b"a", outcomes.append, deadline_ms=100)
    tracker.proposed(BlockId(1, 4), tracker.take_batch())
    tracker.skipped_to(BlockId(2, 9))
    assert isinstance(outcomes[0], ZlogError)
    assert outcomes[0].code == ErrorCode.REQUEST_TIMED_OUT


def test_reads_share_one_read_index_and_wait_for_apply() -> None:
    """§4 ReadIndex: reads answer only once the node has applied the confirmed index."""
    tracker = ReadTracker()
    seen: list[Outcome] = []
    tracker.enqueue(b"q1", seen.append, deadline_ms=100)
    tracker.enqueue(b"q2", seen.append, deadline_ms=100)
    ctx = tracker.take_batch()
    assert ctx is not None and tracker.take_batch() is None
    assert tracker.ready(applied_height=100) == []  # not confirmed yet
    tracker.confirmed(ctx, BlockId(3, 10))
    assert tracker.ready(applied_height=9) == []
    assert [read.payload for read in tracker.ready(applied_height=10)] == [b"q1", b"q2"]
    assert tracker.waiting_count == 0


def test_reads_fail_on_leadership_loss_and_on_deadline() -> None:
    tracker = ReadTracker()
    seen: list[Outcome] = []
    tracker.enqueue(b"q1", seen.append, deadline_ms=5)
    tracker.take_batch()
    tracker.enqueue(b"q2", seen.append, deadline_ms=50)
    tracker.expire(now_ms=5)
    tracker.fail_all(NotLeaderOrFollowerError(None))
    assert [o.code for o in seen if isinstance(o, ZlogError)] == [
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ]
