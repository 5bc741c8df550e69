"""A Consumer's place in its group: the member's state, and the thread that heartbeats for it.

Heartbeats go from a background thread (KIP-62), so an application that takes long between
two polls is judged by `max_poll_interval_ms` (it leaves the group, and rejoins at its next
poll) and never by the session timeout, which only a dead process or a lost network runs out.
Everything that touches the application's partitions happens on the poll thread instead: it
takes each `Reconciliation` the member asks for, calls the callbacks and moves its fetches.
The round trips of a reconciliation go from a third thread, the coordinator thread
(coordinator_thread.py), so that the poll thread keeps returning the partitions it keeps
meanwhile: the commit of revoked partitions, whose answer reports `done` (always before the
heartbeat that releases them, so their next owner reads the commit), and the committed
offsets of gained ones (docs/groups.md §11). `commit()` goes from the poll thread, over its
own connections (a zmq socket belongs to one thread).

Both threads move the pure member under one lock and never do I/O while holding it. The
member is the protocol: `ServerSideMember` (GroupHeartbeat) or `ClassicMember` (JoinGroup,
SyncGroup, Heartbeat); this thread sends whatever request it asks for, looks up partition
counts for a classic leader about to assign, and every `metadata_max_age_ms` looks at the
topics again for a subscription by pattern and for a classic leader (metadata_watch.py).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Final

from zlog.client.cluster import Connections
from zlog.client.group.classic_member import ClassicMember
from zlog.client.group.coordinator import CoordinatorLink
from zlog.client.group.coordinator_thread import CoordinatorThread
from zlog.client.group.member import GroupMember, MemberState, Reconciliation
from zlog.client.group.metadata_watch import MetadataWatch, matching, partition_counts
from zlog.client.group.offsets import commit_offsets, fetch_committed
from zlog.client.group.server_side_member import ServerSideMember
from zlog.client.group.settings import SERVER_SIDE_PROTOCOL, GroupMetadata, GroupSettings
from zlog.client.retries import Next, after_coordinator_error
from zlog.clock import monotonic_ms
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages.groups import (
    GroupHeartbeatRequestV0,
    GroupRequest,
)
from zlog.types import NO_GENERATION, TopicPartition

log = logging.getLogger("zlog.client.group.membership")

TIMER_CHECK_MS: Final = 100
"""The heartbeat thread wakes at least this often to check the poll interval and session."""
LEAVE_TIMEOUT_MS: Final = 2_000
"""How long close() waits for the coordinator to take note of the leave."""


class GroupMembership:
    """The member, its heartbeat thread, and the poll thread's way to the coordinator."""

    def __init__(self, bootstrap: str | Sequence[str], member: GroupMember, *,
                 max_poll_interval_ms: int, request_timeout_ms: int,
                 retry_backoff_ms: int, watch: MetadataWatch,
                 on_work: Callable[[], None] = lambda: None) -> None:
        self.member = member
        self._on_work = on_work
        """Called from the heartbeat thread when a reply gives the poll thread work."""
        self._watch = watch
        self._pattern: re.Pattern[str] | None = None
        group_id = member.group_id
        self.max_poll_interval_ms = max_poll_interval_ms
        self.request_timeout_ms = request_timeout_ms
        self._bootstrap = bootstrap
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._last_poll_ms = monotonic_ms()
        self._connections = Connections(bootstrap, retry_backoff_ms=retry_backoff_ms)
        self.link = CoordinatorLink(self._connections, group_id,
                                    request_timeout_ms=request_timeout_ms,
                                    retry_backoff_ms=retry_backoff_ms)
        self._thread: threading.Thread | None = None
        self._background = CoordinatorThread(bootstrap, group_id,
                                             request_timeout_ms=request_timeout_ms,
                                             retry_backoff_ms=retry_backoff_ms)

    # -- the poll thread -----------------------------------------------------------------

    def subscribe(self, topics: Iterable[str], pattern: re.Pattern[str] | None = None) -> None:
        """`topics`, or those `pattern` matched just now: it is matched again on every look
        at metadata."""
        with self._lock:
            now_ms = monotonic_ms()
            self.member.subscribe(topics, now_ms)
            self._pattern = pattern
            self._watch.looked(now_ms)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"zlog-heartbeat-{self.member.group_id}")
            self._thread.start()
            self._background.submit(self._connect_early)
        self._wake.set()

    def polled(self) -> Reconciliation | None:
        """The application polled: the work it has to do first, if any; a fatal error of
        the heartbeat thread is raised here."""
        now_ms = monotonic_ms()
        with self._lock:
            self._last_poll_ms = now_ms
            if self.member.failure is not None:
                raise self.member.failure
            self.member.polled(now_ms)
            work = self.member.take_reconciliation()
        self._wake.set()
        return work

    def work_due(self) -> bool:
        """Whether `polled` would hand out work now."""
        with self._lock:
            return self.member.failure is not None or self.member.reconciliation_due()

    def done(self, work: Reconciliation) -> None:
        with self._lock:
            self.member.reconciled(work, monotonic_ms())
            self.member.polled(monotonic_ms())
        self._wake.set()

    @property
    def joined(self) -> bool:
        with self._lock:
            return self.member.state is MemberState.STABLE

    def metadata(self) -> GroupMetadata:
        with self._lock:
            return GroupMetadata(self.member.group_id, *self.member.commit_identity())

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit as this member: its epoch (or generation) and id let the coordinator refuse
        a member that no longer holds the partitions (STALE_MEMBER_EPOCH, ILLEGAL_GENERATION,
        UNKNOWN_MEMBER_ID)."""
        self._commit_over(self.link, offsets)

    def commit_in_background(self, offsets: Mapping[TopicPartition, int]) -> Future[None]:
        """`commit` on the coordinator thread, after every call submitted there before; the
        member's identity is the one it has when the commit leaves."""
        wanted = dict(offsets)
        return self._background.submit(lambda link: self._commit_over(link, wanted))

    def _commit_over(self, link: CoordinatorLink, offsets: Mapping[TopicPartition, int]) -> None:
        with self._lock:
            epoch, member_id, instance_id = self.member.commit_identity()
        commit_offsets(link, offsets, generation=epoch, member_id=member_id,
                       group_instance_id=instance_id)

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return fetch_committed(self.link, partitions)

    def committed_in_background(self, partitions: Iterable[TopicPartition],
                                ) -> Future[dict[TopicPartition, int]]:
        """`committed` on the coordinator thread (so after the commits submitted before)."""
        wanted = tuple(partitions)
        return self._background.submit(lambda link: fetch_committed(link, wanted))

    def _connect_early(self, link: CoordinatorLink) -> None:
        """Find the coordinator and connect to it from the coordinator thread as soon as the
        member subscribes: its first call is otherwise the lookup of the first assignment's
        committed offsets, which would pay for a FindCoordinator and a connection in the
        middle of a rebalance. A failure here is left to that call to meet and report."""
        with contextlib.suppress(ZlogError):
            link.connections.client(link.endpoint or link.find(self.request_timeout_ms))

    def close(self) -> None:
        """Leave the group at once (the caller committed and revoked first), once the
        coordinator thread's commits are answered. The heartbeat thread is told to stop
        first: a held heartbeat notices it only within `CANCEL_CHECK_MS` (rpc.py), which
        then passes while the commits are answered, not after them."""
        self._closing.set()
        self._wake.set()
        self._background.close()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            leave = self.member.leave()
        if leave is not None:
            self._send_leave(self.link, leave)
        self._connections.close()

    # -- the heartbeat thread --------------------------------------------------------------

    def _run(self) -> None:
        connections = Connections(self._bootstrap, retry_backoff_ms=self.member.retry_backoff_ms)
        link = CoordinatorLink(connections, self.member.group_id,
                               request_timeout_ms=self.request_timeout_ms,
                               retry_backoff_ms=self.member.retry_backoff_ms)
        try:
            while not self._closing.is_set():
                self._step(link)
        except Exception:  # the poll thread must hear of it, not find a dead thread
            log.exception("group %s: the heartbeat thread failed", self.member.group_id)
            with self._lock:
                self.member.failure = self.member.failure or ZlogError(
                    ErrorCode.UNKNOWN_SERVER_ERROR, "the heartbeat thread failed; see the log")
        finally:
            connections.close()

    def _step(self, link: CoordinatorLink) -> None:
        now_ms = monotonic_ms()
        with self._lock:
            member = self.member
            leave = member.check_timers(now_ms, self._last_poll_ms, self.max_poll_interval_ms)
            active = member.state in (MemberState.JOINING, MemberState.STABLE)
            find = active and member.needs_coordinator
            assign_topics = None if find else member.assignment_topics()
            watching = self._pattern is not None or member.watched_topics() is not None
            look = watching and self._watch.due(now_ms) and assign_topics is None
            # A look that is due goes before the heartbeat: a long-polling member always has
            # its next heartbeat due at once, and a look after it would never leave.
            sent = None if find or look else member.next_heartbeat(now_ms)
            due_ms = member.due_ms()
        if leave is not None:
            log.warning("group %s: no poll for over %d ms (max_poll_interval_ms): leaving the "
                        "group until the next poll", member.group_id, self.max_poll_interval_ms)
            self._send_leave(link, leave)
        if find:
            self._find(link)
            return
        if assign_topics is not None:
            self._assign(link, assign_topics)
            return
        if sent is not None:
            timeout_ms = sent.timeout_ms or self.request_timeout_ms
            if isinstance(sent.request, GroupHeartbeatRequestV0):
                timeout_ms += sent.request.max_wait_ms  # the coordinator may hold it that long
            try:
                response = link.send_once(sent.request, timeout_ms,
                                          cancelled=self._closing.is_set)
            except ZlogError as error:
                with self._lock:
                    member.on_failure(sent, error, monotonic_ms())
                return
            with self._lock:
                member.on_response(sent, response, monotonic_ms())
                work_due = member.reconciliation_due()
            if work_due:
                self._on_work()
            return
        if look:
            self._look(link)
            return
        wait_ms = TIMER_CHECK_MS if due_ms is None else min(max(due_ms - now_ms, 0),
                                                            TIMER_CHECK_MS)
        self._wake.wait(wait_ms / 1000)
        self._wake.clear()

    def _find(self, link: CoordinatorLink) -> None:
        try:
            link.find(self.request_timeout_ms)
        except ZlogError as error:
            if after_coordinator_error(error.code) is Next.FAIL:  # refused: an ACL, a bad id
                with self._lock:
                    self.member.failure = self.member.failure or error
            log.debug("group %s: no coordinator yet: %s", self.member.group_id, error)
            self._closing.wait(self.member.retry_backoff_ms / 1000)
            return
        with self._lock:
            self.member.coordinator_found()

    def _assign(self, link: CoordinatorLink, topics: frozenset[str]) -> None:
        """A classic leader's partition counts, from fresh metadata, then its assignment."""
        connections = link.connections
        try:
            connections.refresh(sorted(topics), self.request_timeout_ms,
                                cancelled=self._closing.is_set)
        except ZlogError as error:
            log.info("group %s: no metadata to assign from yet: %s", self.member.group_id, error)
            self._closing.wait(self.member.retry_backoff_ms / 1000)
            return
        counts = {topic: count for topic in sorted(topics)
                  if (count := connections.metadata.partition_count(topic)) is not None}
        with self._lock:
            self.member.assign(counts, monotonic_ms())

    def _look(self, link: CoordinatorLink) -> None:
        """Every topic's partition count: a pattern subscription follows the topics it
        matches now (all gone: it keeps the last ones, which then have no partitions), and a
        classic leader rejoins if its group's topics changed since it assigned."""
        try:
            counts = partition_counts(link.connections, self.request_timeout_ms,
                                      cancelled=self._closing.is_set)
        except ZlogError as error:
            log.info("group %s: no metadata to watch: %s", self.member.group_id, error)
            with self._lock:
                self._watch.failed(monotonic_ms(), self.member.retry_backoff_ms)
            return
        now_ms = monotonic_ms()
        with self._lock:
            self._watch.looked(now_ms)
            topics = [] if self._pattern is None else matching(self._pattern, counts)
            if topics and frozenset(topics) != self.member.topics:
                log.info("group %s: the pattern now matches %s", self.member.group_id, topics)
                self.member.subscribe(topics, now_ms)
            self.member.metadata_seen(counts, now_ms)

    def _send_leave(self, link: CoordinatorLink, leave: GroupRequest) -> None:
        try:
            link.send_once(leave, LEAVE_TIMEOUT_MS)
        except ZlogError as error:  # its session ends it anyway
            log.info("group %s: the leave was not acknowledged: %s", self.member.group_id, error)


def new_member(settings: GroupSettings, *, retry_backoff_ms: int) -> GroupMember:
    """The member of `settings.group_protocol`: server-side (its id chosen here, as KIP-848
    asks of clients) or classic (its id handed out by the coordinator)."""
    group_id = settings.required_group_id("subscribe()")
    if settings.group_protocol == SERVER_SIDE_PROTOCOL:
        return ServerSideMember(
            group_id, uuid.uuid4().hex, rebalance_timeout_ms=settings.max_poll_interval_ms,
            session_timeout_ms=settings.session_timeout_ms,
            group_instance_id=settings.group_instance_id, client_id=settings.client_id,
            retry_backoff_ms=retry_backoff_ms)
    return ClassicMember(
        group_id, assignors=settings.partition_assignment_strategy,
        session_timeout_ms=settings.session_timeout_ms,
        rebalance_timeout_ms=settings.max_poll_interval_ms,
        heartbeat_interval_ms=settings.heartbeat_interval_ms,
        group_instance_id=settings.group_instance_id, client_id=settings.client_id,
        retry_backoff_ms=retry_backoff_ms)


def commit_from_elsewhere(bootstrap: str | Sequence[str], group_id: str,
                          offsets: Mapping[TopicPartition, int], request_timeout_ms: int,
                          retry_backoff_ms: int, *, generation: int = NO_GENERATION,
                          member_id: str = "", group_instance_id: str | None = None) -> None:
    """A commit over connections of its own (commit_async runs it on another thread)."""
    connections = Connections(bootstrap, retry_backoff_ms=retry_backoff_ms)
    try:
        link = CoordinatorLink(connections, group_id, request_timeout_ms=request_timeout_ms,
                               retry_backoff_ms=retry_backoff_ms)
        commit_offsets(link, offsets, generation=generation, member_id=member_id,
                       group_instance_id=group_instance_id)
    finally:
        connections.close()
