"""Waiting proposals and reads: who to answer, and with what, as blocks commit.

docs/raft.md §4.6 Leader: a proposal appends a block on head and returns its id (t, h); it
succeeded iff the committed path later holds (t, h) at height h, and failed as soon as a
different id commits at h. So a proposal's outcome is known exactly when the node applies height
h, and not before: a leader that lost its leadership may still see its block commit under the
next leader. The trackers here therefore resolve a proposal only when its height is applied
(success, or ProposalSupersededError: it never applies, a safe retry), fail only commands that
never became a block with NOT_LEADER_OR_FOLLOWER, and give up on a deadline with
REQUEST_TIMED_OUT, whose outcome is unknown.

Reads follow ReadIndex (§4.12): the reads that arrive together share one
`read_index(ctx)` call; when the core answers with ReadState(ctx, index), they wait until the
node has applied `index`, then the runner answers them from the state machine.

Pure bookkeeping: no threads, sockets or clock (time comes in as `now_ms`). The runner owns the
trackers and calls them from its loop thread only; a waiter is a callback that the runner builds
to complete a Future or to send a client reply.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.raft.errors import NotLeaderError
from zlog.raft.messages import Block, BlockId

Outcome = bytes | ZlogError
Waiter = Callable[[Outcome], None]


class ProposalSupersededError(NotLeaderError):
    """A different block committed at the height of this proposal: it will never apply. The
    node that proposed it led no longer when that height committed, so this is its "not the
    leader" (the leader unnamed: the runner's status knows it)."""

    def __init__(self, proposed: BlockId, committed: BlockId) -> None:
        super().__init__(
            None, f"proposal {tuple(proposed)} lost to {tuple(committed)}; it was not applied"
        )
        self.proposed = proposed
        self.committed = committed


NotLeaderOrFollowerError = NotLeaderError  # the name the trackers' callers also know it by


def timed_out(what: str) -> ZlogError:
    return ZlogError(ErrorCode.REQUEST_TIMED_OUT, f"{what} timed out; its outcome is unknown")


@dataclass(slots=True)
class _Pending:
    payload: bytes  # a command, or a query for reads
    waiter: Waiter
    deadline_ms: int


@dataclass(slots=True)
class _InFlight:
    block_id: BlockId
    pending: list[_Pending]


class ProposalTracker:
    """Commands waiting for a block, and blocks waiting to be applied.

    Bounded by count and bytes: a full queue refuses new commands (the runner answers them with
    an error) rather than growing without limit while no leader is elected.
    """

    def __init__(
        self,
        *,
        queued_commands_max: int = limits.RAFT_QUEUED_COMMANDS_MAX_DEFAULT,
        queued_bytes_max: int = limits.RAFT_QUEUED_BYTES_MAX_DEFAULT,
        batch_commands_max: int = limits.RAFT_BATCH_COMMANDS_MAX_DEFAULT,
        batch_bytes_max: int = limits.RAFT_BATCH_BYTES_MAX_DEFAULT,
    ) -> None:
        assert 0 < batch_commands_max <= queued_commands_max, "batch cannot exceed the queue"
        assert 0 < batch_bytes_max <= queued_bytes_max, "batch cannot exceed the queue"
        self.queued_commands_max = queued_commands_max
        self.queued_bytes_max = queued_bytes_max
        self.batch_commands_max = batch_commands_max
        self.batch_bytes_max = batch_bytes_max
        self._queued: deque[_Pending] = deque()
        self._queued_bytes = 0
        self._in_flight: dict[int, list[_InFlight]] = {}  # by height: one per term at most

    @property
    def queued_count(self) -> int:
        return len(self._queued)

    def enqueue(self, command: bytes, waiter: Waiter, deadline_ms: int) -> bool:
        """Queue a command for the next block; False when the queue is full."""
        full = len(self._queued) >= self.queued_commands_max
        if full or self._queued_bytes + len(command) > self.queued_bytes_max:
            return False
        self._queued.append(_Pending(command, waiter, deadline_ms))
        self._queued_bytes += len(command)
        return True

    def take_batch(self) -> list[_Pending]:
        """The oldest queued commands that fit in one block (at least one if any is queued)."""
        batch: list[_Pending] = []
        batch_bytes = 0
        while self._queued and len(batch) < self.batch_commands_max:
            size = len(self._queued[0].payload)
            if batch and batch_bytes + size > self.batch_bytes_max:
                break
            batch.append(self._queued.popleft())
            batch_bytes += size
        self._queued_bytes -= batch_bytes
        assert self._queued_bytes >= 0, "queued byte count went negative"
        return batch

    def requeue_front(self, batch: list[_Pending]) -> None:
        """Put back a batch the core refused, keeping the order the clients sent it in."""
        self._queued.extendleft(reversed(batch))
        self._queued_bytes += sum(len(pending.payload) for pending in batch)

    def proposed(self, block_id: BlockId, batch: list[_Pending]) -> None:
        assert batch, "an empty batch is never proposed"
        entries = self._in_flight.setdefault(block_id.height, [])
        assert all(entry.block_id != block_id for entry in entries), "block proposed twice"
        entries.append(_InFlight(block_id, batch))

    def applied(self, block: Block, results: list[bytes] | None) -> None:
        """Resolve the proposals at this block's height: results if it is ours, else dropped."""
        for entry in self._in_flight.pop(block.id.height, ()):
            if entry.block_id == block.id:
                assert results is not None, "our block applied without results"
                assert len(results) == len(entry.pending), "one result per command"
                for pending, result in zip(entry.pending, results, strict=True):
                    pending.waiter(result)
            else:
                for pending in entry.pending:
                    pending.waiter(ProposalSupersededError(entry.block_id, block.id))

    def skipped_to(self, snapshot_last: BlockId) -> None:
        """A leader's snapshot jumped past these heights: whether they applied is unknown."""
        for height in [h for h in self._in_flight if h <= snapshot_last.height]:
            for entry in self._in_flight.pop(height):
                for pending in entry.pending:
                    pending.waiter(timed_out(f"proposal {tuple(entry.block_id)}"))

    def fail_queued(self, error: ZlogError) -> None:
        """Commands that never became a block: certainly not applied, safe to retry."""
        while self._queued:
            self._queued.popleft().waiter(error)
        self._queued_bytes = 0

    def expire(self, now_ms: int) -> None:
        """Give up on proposals past their deadline (the runner calls this once per tick)."""
        if any(pending.deadline_ms <= now_ms for pending in self._queued):
            kept: deque[_Pending] = deque()
            for pending in self._queued:
                if pending.deadline_ms <= now_ms:
                    self._queued_bytes -= len(pending.payload)
                    pending.waiter(timed_out("queued proposal"))
                else:
                    kept.append(pending)
            self._queued = kept
        for entries in self._in_flight.values():
            for entry in entries:
                expired = [p for p in entry.pending if p.deadline_ms <= now_ms]
                for pending in expired:
                    pending.waiter(timed_out(f"proposal {tuple(entry.block_id)}"))
                    # The block may still apply; its result then has no one to go to.
                    pending.waiter = _ignore


def _ignore(outcome: Outcome) -> None:
    del outcome


@dataclass(slots=True)
class _ReadBatch:
    ctx: bytes
    reads: list[_Pending]
    index: BlockId | None = None  # set once the core confirms leadership for ctx


class ReadTracker:
    """Reads waiting for a ReadIndex confirmation, then for the node to apply that index."""

    def __init__(self, *, queued_reads_max: int = limits.RAFT_QUEUED_READS_MAX_DEFAULT) -> None:
        assert queued_reads_max > 0
        self.queued_reads_max = queued_reads_max
        self._queued: list[_Pending] = []
        self._batches: dict[bytes, _ReadBatch] = {}
        self._ctx_counter = itertools.count(1)

    @property
    def waiting_count(self) -> int:
        return len(self._queued) + sum(len(batch.reads) for batch in self._batches.values())

    def enqueue(self, query: bytes, waiter: Waiter, deadline_ms: int) -> bool:
        if self.waiting_count >= self.queued_reads_max:
            return False
        self._queued.append(_Pending(query, waiter, deadline_ms))
        return True

    def take_batch(self) -> bytes | None:
        """The ctx for one read_index call covering every queued read, or None if none."""
        if not self._queued:
            return None
        ctx = next(self._ctx_counter).to_bytes(8, "big")
        self._batches[ctx] = _ReadBatch(ctx, self._queued)
        self._queued = []
        return ctx

    def confirmed(self, ctx: bytes, index: BlockId) -> None:
        batch = self._batches.get(ctx)
        if batch is not None:  # unknown ctx: already expired or failed
            batch.index = index

    def ready(self, applied_height: int) -> list[_Pending]:
        """Reads whose index the node has applied: answer them now, in arrival order."""
        done = [
            ctx
            for ctx, batch in self._batches.items()
            if batch.index is not None and batch.index.height <= applied_height
        ]
        return [read for ctx in done for read in self._batches.pop(ctx).reads]

    def fail_all(self, error: ZlogError) -> None:
        """Leadership lost: no read can be confirmed any more; reads are safe to retry."""
        for read in self._queued:
            read.waiter(error)
        for batch in self._batches.values():
            for read in batch.reads:
                read.waiter(error)
        self._queued = []
        self._batches.clear()

    def expire(self, now_ms: int) -> None:
        error = ZlogError(ErrorCode.REQUEST_TIMED_OUT, "read timed out")
        for read in [r for r in self._queued if r.deadline_ms <= now_ms]:
            read.waiter(error)
        self._queued = [r for r in self._queued if r.deadline_ms > now_ms]
        for batch in self._batches.values():
            for read in [r for r in batch.reads if r.deadline_ms <= now_ms]:
                read.waiter(error)
            batch.reads = [r for r in batch.reads if r.deadline_ms > now_ms]
        for ctx in [ctx for ctx, batch in self._batches.items() if not batch.reads]:
            del self._batches[ctx]
