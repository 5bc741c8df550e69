"""A Consumer's group on the poll thread: subscribing, the rebalances the application sees,
commits and auto commit.

The member and its heartbeat thread live in `membership.py`; what touches the application's
partitions happens here, on the thread that calls `poll` (docs/groups.md §11): each
`Reconciliation` the member hands out is applied at the top of a poll or while it waits,
none of it waiting for the coordinator. Revoked partitions stop being returned at once and go
to `on_revoke`, then are committed (with auto commit) from the membership's coordinator thread;
gained ones start from their committed offsets once the same thread has them, `on_assign`
first. A revocation is reported to the member only once its commit is answered, so the next
owner reads it. Auto commit commits the positions every `auto_commit_interval_ms` at the start
of a poll (without waiting for the answer), on a revocation and when the Consumer closes.

The Consumer keeps the partitions: their assignment and positions, which this reads and moves
through what it is handed. Without `subscribe`, a Consumer with a `group_id` commits as a
simple member (generation -1), over a coordinator link of its own.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from zlog.client.cluster import Connections
from zlog.client.group.coordinator import CoordinatorLink
from zlog.client.group.member import Reconciliation
from zlog.client.group.membership import GroupMembership, commit_from_elsewhere, new_member
from zlog.client.group.metadata_watch import (
    MetadataWatch,
    compile_pattern,
    matching,
    partition_counts,
)
from zlog.client.group.offsets import commit_offsets, fetch_committed
from zlog.client.group.settings import (
    GroupMetadata,
    GroupSettings,
    PartitionsCallback,
    RebalanceCallbacks,
)
from zlog.client.group.wake import GroupWake
from zlog.clock import Clock
from zlog.errors import ErrorCode, ZlogError
from zlog.types import NO_GENERATION, TopicPartition

log = logging.getLogger("zlog.client.consumer")


@dataclass(slots=True)
class GainedPartitions:
    """A reconciliation whose gained partitions wait for their committed offsets."""

    work: Reconciliation
    revoke_commit: Future[None] | None
    """The commit of the same work's revoked partitions, if one is in flight."""
    offsets: Future[dict[TopicPartition, int]]


def report_after(commit: Future[None] | None, report: Callable[[], None]) -> None:
    """`report()` once `commit` is answered, whatever the answer (a refused commit is
    logged, as it always was), on the thread that answers it; at once without a commit."""
    if commit is None:
        report()
    else:
        commit.add_done_callback(lambda _: report())


class GroupOnPollThread:
    """A Consumer's group work on its poll thread; see the module docstring."""

    def __init__(self, settings: GroupSettings, *, bootstrap: str | Sequence[str],
                 connections: Connections, clock: Clock, request_timeout_ms: int,
                 retry_backoff_ms: int, metadata_max_age_ms: int,
                 positions: MutableMapping[TopicPartition, int | None],
                 assignment: Callable[[], list[TopicPartition]],
                 set_assignment: Callable[[Iterable[TopicPartition]], None]) -> None:
        self.settings = settings
        self._bootstrap = bootstrap
        self._connections = connections
        self._clock = clock
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._positions = positions
        self._assignment = assignment
        self._set_assignment = set_assignment
        self._metadata_watch = MetadataWatch(metadata_max_age_ms)
        self._membership: GroupMembership | None = None
        self._callbacks = RebalanceCallbacks()
        self._next_auto_commit_ms = 0
        self._simple_link: CoordinatorLink | None = None
        self._async_commits: ThreadPoolExecutor | None = None
        self._gaining: GainedPartitions | None = None
        """Gained partitions waiting for their committed offsets (at most one set)."""
        self.wake: GroupWake | None = None
        """Wakes a waiting poll when the group has work for it (wake.py)."""

    @property
    def subscribed(self) -> bool:
        """Whether the Consumer is a member of its group (its coordinator assigns)."""
        return self._membership is not None

    def subscribe(self, topics: Iterable[str] | None, pattern: str | None,
                  on_assign: PartitionsCallback | None, on_revoke: PartitionsCallback | None,
                  on_lost: PartitionsCallback | None) -> None:
        settings = self.settings
        settings.required_group_id("subscribe()")
        if (topics is None) == (pattern is None):
            raise ZlogError(ErrorCode.INVALID_REQUEST, "subscribe to topics or to a pattern")
        if self._assignment() and self._membership is None:
            raise ZlogError(ErrorCode.INVALID_REQUEST, "this consumer reads assigned "
                            "partitions: subscribe() and assign() do not mix")
        compiled = None if pattern is None else compile_pattern(pattern)
        wanted = sorted(set(topics)) if topics is not None else self._matching(compiled)
        if not wanted:
            raise ZlogError(ErrorCode.INVALID_REQUEST,
                            f"no topic matches {pattern!r}" if pattern else "no topic named")
        self._callbacks = RebalanceCallbacks(on_assign, on_revoke, on_lost)
        if self._membership is None:
            self.wake = GroupWake()
            self._membership = GroupMembership(
                self._bootstrap, new_member(settings, retry_backoff_ms=self._retry_backoff_ms),
                max_poll_interval_ms=settings.max_poll_interval_ms,
                request_timeout_ms=self._request_timeout_ms,
                retry_backoff_ms=self._retry_backoff_ms, watch=self._metadata_watch,
                on_work=self.wake.wake)
        self._membership.subscribe(wanted, compiled)
        self._next_auto_commit_ms = self._clock.monotonic_ms() + settings.auto_commit_interval_ms

    def _matching(self, pattern: re.Pattern[str] | None) -> list[str]:
        assert pattern is not None
        return matching(pattern, partition_counts(self._connections, self._request_timeout_ms))

    # -- commits --------------------------------------------------------------------------

    def commit(self, offsets: Mapping[TopicPartition | tuple[str, int], int] | None) -> None:
        wanted = self._offsets_to_commit(offsets)
        if self._membership is not None:
            self._membership.commit(wanted)
        else:
            commit_offsets(self._simple_coordinator(), wanted)

    def commit_async(self, offsets: Mapping[TopicPartition | tuple[str, int], int] | None,
                     ) -> Future[None]:
        wanted = self._offsets_to_commit(offsets)
        membership = self._membership
        if membership is not None:
            return membership.commit_in_background(wanted)
        if self._async_commits is None:
            self._async_commits = ThreadPoolExecutor(1, thread_name_prefix="zlog-commit")
        group_id = self.settings.required_group_id("commit_async()")
        return self._async_commits.submit(commit_from_elsewhere, self._bootstrap, group_id,
                                          wanted, self._request_timeout_ms,
                                          self._retry_backoff_ms)

    def committed(self, partitions: Iterable[TopicPartition | tuple[str, int]] | None,
                  ) -> dict[TopicPartition, int | None]:
        wanted = [TopicPartition(*tp) for tp in (self._assignment() if partitions is None
                                                 else partitions)]
        if self._membership is not None:
            found = self._membership.committed(wanted)
        else:
            found = fetch_committed(self._simple_coordinator(), wanted)
        return {tp: found.get(tp) for tp in wanted}

    def metadata(self) -> GroupMetadata:
        group_id = self.settings.required_group_id("group_metadata()")
        if self._membership is None:
            return GroupMetadata(group_id, NO_GENERATION, "", self.settings.group_instance_id)
        return self._membership.metadata()

    def _offsets_to_commit(self, offsets: Mapping[TopicPartition | tuple[str, int], int] | None,
                           ) -> dict[TopicPartition, int]:
        self.settings.required_group_id("commit()")
        if offsets is not None:
            return {TopicPartition(*tp): offset for tp, offset in offsets.items()}
        return {tp: position for tp in self._assignment()
                if (position := self._positions.get(tp)) is not None}

    def _simple_coordinator(self) -> CoordinatorLink:
        if self._simple_link is None:
            self._simple_link = CoordinatorLink(
                self._connections, self.settings.required_group_id("commit()"),
                request_timeout_ms=self._request_timeout_ms,
                retry_backoff_ms=self._retry_backoff_ms)
        return self._simple_link

    # -- rebalances on the poll thread ----------------------------------------------------

    def at_poll_start(self) -> None:
        """At the start of a poll: apply what the coordinator changed, auto commit."""
        membership = self._membership
        if membership is None:
            return
        self._take_gained(membership)
        work = membership.polled()
        if work is not None:
            self._reconcile(membership, work)
        settings = self.settings
        now_ms = self._clock.monotonic_ms()
        if settings.enable_auto_commit and now_ms >= self._next_auto_commit_ms:
            self._next_auto_commit_ms = now_ms + settings.auto_commit_interval_ms
            self._auto_commit(membership, self._assignment())

    def work_in_poll(self) -> None:
        """What the group brought while this poll waited: gained partitions whose offsets
        arrived start, and partitions it moves are reconciled, as at the top of a poll."""
        membership = self._membership
        if membership is None:
            return
        if self._gained_offsets_arrived():
            self._take_gained(membership)
        if membership.work_due():
            work = membership.polled()
            if work is not None:
                self._reconcile(membership, work)

    def _reconcile(self, membership: GroupMembership, work: Reconciliation) -> None:
        """Lost, then revoked, then assigned, none of it waiting for the coordinator: the
        partitions kept meanwhile go on being returned (docs/groups.md §11).

        Revoked partitions stop being fetched and returned at once, go to `on_revoke`, and
        (with auto commit) their positions are committed from the coordinator thread; only
        that commit's answer reports the revocation, so their next owner reads it. Gained
        partitions' committed offsets are looked up on the same thread; `_take_gained` starts
        them, calls `on_assign` and reports the whole work once the offsets are in."""
        kept = [tp for tp in self._assignment() if tp not in work.lost and tp not in work.revoke]
        if work.lost:
            self._set_assignment(kept)
            self._callbacks.lost(set(work.lost))
        commit: Future[None] | None = None
        if work.revoke:
            self._callbacks.revoked(set(work.revoke))
            if self.settings.enable_auto_commit:
                commit = self._auto_commit(membership, sorted(work.revoke))
            self._set_assignment(kept)
        if work.assign:
            self._gaining = GainedPartitions(
                work, commit, self._woken_by(membership.committed_in_background(work.assign)))
            self._take_gained(membership)
        else:
            report_after(commit, lambda: membership.done(work))

    def _take_gained(self, membership: GroupMembership) -> None:
        """Start the gained partitions once their committed offsets are known: positions
        first (a seek in `on_assign` overrides them), then `on_assign`, then the report. A
        failed lookup is asked again; one that failed for good is raised (as `committed()`
        raises it), one that ran out of time on a retriable error (a coordinator away for
        longer than request_timeout_ms) only logged: a poll never raises those."""
        gaining = self._gaining
        if gaining is None or not gaining.offsets.done():
            return
        work = gaining.work
        try:
            committed = gaining.offsets.result()
        except ZlogError as error:
            gaining.offsets = self._woken_by(membership.committed_in_background(work.assign))
            if not error.retriable:
                raise
            log.warning("group %s: the committed offsets of %d gained partitions: %s; "
                        "asking again", self.settings.group_id, len(work.assign), error)
            return
        self._gaining = None
        self._set_assignment([*self._assignment(), *sorted(work.assign)])
        for tp, offset in committed.items():
            self._positions[tp] = offset
        self._callbacks.assigned(set(work.assign))
        report_after(gaining.revoke_commit, lambda: membership.done(work))

    def _woken_by(self, offsets: Future[dict[TopicPartition, int]],
                  ) -> Future[dict[TopicPartition, int]]:
        """`offsets`, whose answer wakes a waiting poll."""
        wake = self.wake
        if wake is not None:
            offsets.add_done_callback(lambda _done: wake.wake())
        return offsets

    def _gained_offsets_arrived(self) -> bool:
        return self._gaining is not None and self._gaining.offsets.done()

    def work_due(self) -> bool:
        """Gained partitions can start, or the group has moved partitions to reconcile."""
        membership = self._membership
        return self._gained_offsets_arrived() or (
            membership is not None and membership.work_due())

    def _auto_commit(self, membership: GroupMembership, partitions: Iterable[TopicPartition],
                     ) -> Future[None] | None:
        """Commit the positions of `partitions` from the coordinator thread (None: nothing
        to commit); a refusal is logged, not raised (the next owner reads from the last
        commit that did go through)."""
        offsets = {tp: position for tp in partitions
                   if (position := self._positions.get(tp)) is not None}
        if not offsets:
            return None
        commit = membership.commit_in_background(offsets)
        commit.add_done_callback(self._log_auto_commit)
        return commit

    def _log_auto_commit(self, commit: Future[None]) -> None:
        error = commit.exception()
        if isinstance(error, ZlogError):
            log.warning("group %s: auto commit failed: %s", self.settings.group_id, error)
        elif error is not None:
            log.error("group %s: auto commit failed", self.settings.group_id, exc_info=error)

    def idle_wait(self, seconds: float) -> None:
        """Nothing to fetch: sleep, or until the group has work for this poll."""
        if self.wake is None:
            time.sleep(seconds)
        else:
            self.wake.wait(seconds)

    # -- leaving --------------------------------------------------------------------------

    def leave(self) -> None:
        """Commit (with auto commit), hand the partitions to on_revoke, leave the group."""
        membership = self._membership
        if membership is None:
            return
        self._membership = None
        try:
            if self.settings.enable_auto_commit:
                self._auto_commit(membership, self._assignment())  # membership.close waits
            self._callbacks.revoked(set(self._assignment()))
        finally:
            membership.close()

    def close(self) -> None:
        """Wait for the commits in flight from `commit_async`, close the wake's sockets."""
        if self._async_commits is not None:
            self._async_commits.shutdown(wait=True)
        if self.wake is not None:
            self.wake.close()
            self.wake = None
