"""zlog.Consumer: reads assigned partitions from their leaders, Kafka's consumer model.

Poll-driven, no background thread: everything happens inside `poll` on the caller's thread,
so a Consumer belongs to one thread (as Kafka's does). To keep the network busy while the
caller works, `poll` sends the next fetch for every partition before it returns records
(pipelining); the answer waits in the socket for the next `poll`.

Positions: each assigned partition has a position, the offset of the next record `poll` will
return. A partition without one (just assigned, or after seek_to_beginning/seek_to_end, or
after OFFSET_OUT_OF_RANGE) gets it from ListOffsets per `auto_offset_reset` ("earliest": log
start, "latest": the high watermark; "none": raise). Fetches return whole batches, so records
below the position are skipped (fetch_buffer).

Local reads (`local=True`): a partition whose leader runs on this host is read straight from the
leader's shared-memory ring (zlog.client.local_ring): no socket, no request; the batches are
copied out of the mapping and decoded, or with `local_zero_copy=True` decoded in place, so that
the views `poll_batches` returns point into shared memory. Zero-copy views stay whole until the
leader reclaims their ring space (about a ring's capacity of appends later); `views_intact()`
after using them says whether they still were, the seqlock discipline of Aeron and Chronicle
readers. A partition falls back to network fetches while its ring is not on this host, while the
position is below the ring's tail (older data lives only in the segment files; the consumer
comes back to the ring once it has caught up) or past its end. Waiting for new records spins on
the ring heads for up to `local_spin_us` (a core's worth of CPU for the lowest latency), then
sleeps in tiny growing steps.

On a cluster (zlog.client.local_replicas, docs/replication.md §2.6): with
`prefer_local_replica=True` or `client_rack` the ring may be an in-sync follower's on this host,
read up to that follower's high watermark; `ring_dir` or `client_rack` name this host's broker
where several run on one machine. A ring whose writer is gone is left for the network, and a
local consumer refreshes its metadata every `local_metadata_max_age_ms`, so it follows the
leader to another host and back without an error.

Retriable errors (a leader moving or not elected yet, a broker restarting, a lost
connection) never reach the caller: the partition backs off `retry_backoff_ms`, its metadata
is asked again, and `poll` keeps trying within its own timeout (an empty answer at worst).
`position`, `list_offsets` and `latest` retry the same way within `request_timeout_ms`.

Consumer groups (`group_id` and `subscribe`): the group's coordinator hands out the partitions
(the server-side protocol), or with `group_protocol="classic"` the members' leader runs one of
`partition_assignment_strategy` (docs/groups.md "Client"); a background thread heartbeats
(zlog.client.group.membership) and `poll` applies each change on the caller's thread: revoked
partitions stop at once and go to `on_revoke`, then are committed (with auto commit), and
gained ones are fetched from their committed offsets (`auto_offset_reset` where there is
none), `on_assign` first. Those round trips go from the membership's coordinator thread, so
the partitions kept meanwhile never wait for them; the revocation is reported once its commit
is answered. Auto commit commits the positions every `auto_commit_interval_ms` at the start of
a poll (without waiting for the answer), on a revocation and in `close`, which waits for the
commits and then leaves the group at once. Without `subscribe` a consumer
reads what it `assign`s, as before; with a `group_id` it may still `commit` (as a simple
member).

One module, one class: positions, pending resets, fetches in flight, buffers, backoffs and
local rings are a single per-partition state that every path on the caller's thread reads and
moves, so a split would pass that state across modules rather than separate concerns.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

import zmq

from zlog.client.cluster import Connections
from zlog.client.fetch_buffer import PartitionBuffer, batches_from_chunk
from zlog.client.group.coordinator import CoordinatorLink
from zlog.client.group.member import Reconciliation
from zlog.client.group.membership import GroupMembership, commit_from_elsewhere, new_member
from zlog.client.group.metadata_watch import (
    METADATA_MAX_AGE_MS_DEFAULT,
    MetadataWatch,
    compile_pattern,
    matching,
    partition_counts,
)
from zlog.client.group.offsets import commit_offsets, fetch_committed
from zlog.client.group.settings import (
    ASSIGNMENT_STRATEGY_DEFAULT,
    HEARTBEAT_INTERVAL_MS_CLASSIC_DEFAULT,
    GroupMetadata,
    GroupSettings,
    PartitionsCallback,
    RebalanceCallbacks,
)
from zlog.client.group.wake import GroupWake
from zlog.client.local_replicas import (
    LocalReplicaPolicy,
    RingChoice,
    brokers_to_ask,
    choose_ring,
    local_ring_dirs,
)
from zlog.client.local_ring import Backoff, LocalRing, ring_exists
from zlog.client.records import ConsumerRecord
from zlog.client.retries import DefiniteError, Next, after_leader_error, retry_within
from zlog.clock import Clock, SystemClock
from zlog.errors import ErrorCode, ZlogError, for_code, prefixed_once
from zlog.record.arrays import BatchView
from zlog.transport.messages import (
    Request,
    Response,
)
from zlog.transport.messages.admin import (
    MetadataRequestV0,
    MetadataResponseV0,
)
from zlog.transport.messages.data import (
    FetchEntry,
    FetchRequestV0,
    FetchResponseV0,
    ListOffsetsPartition,
    ListOffsetsRequestV0,
    ListOffsetsResponseV0,
)
from zlog.transport.rpc import RpcResult
from zlog.types import (
    CONSUMER_REPLICA_ID,
    DEFAULT_BOOTSTRAP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_GENERATION,
    TopicPartition,
)

log = logging.getLogger("zlog.client.consumer")
T = TypeVar("T")

MAX_POLL_RECORDS_DEFAULT: Final = 500
_WAIT_SLICE_MS: Final = 100
_RESETS: Final = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP, "none": None}


_RING_DIR_ASK_TIMEOUT_MS: Final = 1_000
_RING_DIR_ASK_INTERVAL_MS: Final = 10_000
LOCAL_METADATA_MAX_AGE_MS_DEFAULT: Final = 1_000
"""How stale a local consumer's metadata may get: bounds how long it keeps reading a ring
after leadership moved without an error telling it (see _expire_metadata)."""


def _local_policy(local: bool, ring_dir: str | Path | None, client_rack: str | None,
                  prefer_local_replica: bool, local_metadata_max_age_ms: int,
                  ) -> LocalReplicaPolicy:
    """The options of local and follower reads, checked: INVALID_CONFIG with a sentence."""
    if not local and (ring_dir is not None or client_rack is not None or prefer_local_replica):
        raise ZlogError(ErrorCode.INVALID_CONFIG,
                        "ring_dir, client_rack and prefer_local_replica need local=True "
                        "(zlog consume --local): "
                        "follower reads are served from a replica's ring on this host (brokers "
                        "do not yet name a preferred read replica)")
    if client_rack is not None and not client_rack.strip():
        raise ZlogError(ErrorCode.INVALID_CONFIG, "client_rack must not be empty")
    if local_metadata_max_age_ms <= 0:
        raise ZlogError(ErrorCode.INVALID_CONFIG,
                        f"local_metadata_max_age_ms must be positive, not "
                        f"{local_metadata_max_age_ms}")
    if ring_dir is not None and not Path(ring_dir).is_dir():
        raise ZlogError(ErrorCode.INVALID_CONFIG, f"ring_dir {str(ring_dir)!r} is not a "
                        "directory on this host")
    return LocalReplicaPolicy(None if ring_dir is None else Path(ring_dir), client_rack,
                              prefer_local_replica)


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


BULK_PARTITION_FETCH_BYTES_DEFAULT: Final = 4 * 1024 * 1024
"""Per partition per fetch for poll_batches; Kafka's 1 MiB (max_partition_fetch_bytes) stays
for poll, whose caller takes one record at a time."""


class Consumer:
    """Reads records from assigned partitions; see the module docstring for the model."""

    def __init__(
        self,
        bootstrap: str | Sequence[str] = DEFAULT_BOOTSTRAP,
        *,
        auto_offset_reset: str = "latest",
        group_id: str | None = None,
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 50 * 1024 * 1024,
        max_partition_fetch_bytes: int = 1024 * 1024,
        bulk_partition_fetch_bytes: int = BULK_PARTITION_FETCH_BYTES_DEFAULT,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        consumer_timeout_ms: int | None = None,
        check_crcs: bool = True,
        clock: Clock | None = None,
        local: bool = False,
        local_zero_copy: bool = False,
        local_spin_us: int = 50,
        local_metadata_max_age_ms: int = LOCAL_METADATA_MAX_AGE_MS_DEFAULT,
        ring_dir: str | Path | None = None,
        client_rack: str | None = None,
        prefer_local_replica: bool = False,
        group_protocol: str = "consumer",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        session_timeout_ms: int = 45_000,
        max_poll_interval_ms: int = 300_000,
        group_instance_id: str | None = None,
        client_id: str = "zlog-consumer",
        partition_assignment_strategy: Sequence[str] = ASSIGNMENT_STRATEGY_DEFAULT,
        heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS_CLASSIC_DEFAULT,
        metadata_max_age_ms: int = METADATA_MAX_AGE_MS_DEFAULT,
    ) -> None:
        if local_spin_us < 0:
            raise ZlogError(ErrorCode.INVALID_CONFIG,
                            f"local_spin_us must not be negative, not {local_spin_us}")
        policy = _local_policy(local, ring_dir, client_rack, prefer_local_replica,
                               local_metadata_max_age_ms)
        if auto_offset_reset not in _RESETS:
            raise ZlogError(ErrorCode.INVALID_CONFIG,
                            f"auto_offset_reset must be earliest, latest or none, "
                            f"not {auto_offset_reset!r}")
        self.auto_offset_reset = auto_offset_reset
        self.group_id = group_id
        self._group_settings = GroupSettings.checked(
            group_id, group_protocol=group_protocol, enable_auto_commit=enable_auto_commit,
            auto_commit_interval_ms=auto_commit_interval_ms,
            session_timeout_ms=session_timeout_ms, max_poll_interval_ms=max_poll_interval_ms,
            group_instance_id=group_instance_id, client_id=client_id,
            partition_assignment_strategy=partition_assignment_strategy,
            heartbeat_interval_ms=heartbeat_interval_ms)
        self._bootstrap = bootstrap
        self._metadata_watch = MetadataWatch(metadata_max_age_ms)
        self._membership: GroupMembership | None = None
        self._callbacks = RebalanceCallbacks()
        self._next_auto_commit_ms = 0
        self._simple_link: CoordinatorLink | None = None
        self._async_commits: ThreadPoolExecutor | None = None
        self._gaining: GainedPartitions | None = None
        """Gained partitions waiting for their committed offsets (at most one set)."""
        self._group_wake: GroupWake | None = None
        """Wakes a waiting poll when the group has work for it (group/wake.py)."""
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.bulk_partition_fetch_bytes = bulk_partition_fetch_bytes
        self._bulk = False  # the last poll was poll_batches: fetch bulk_partition_fetch_bytes
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.consumer_timeout_ms = consumer_timeout_ms
        self.check_crcs = check_crcs
        self._clock = clock or SystemClock()
        self._connections = Connections(bootstrap, retry_backoff_ms=retry_backoff_ms)
        self._assignment: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int | None] = {}
        self._pending_resets: dict[TopicPartition, int] = {}  # tp -> LATEST/EARLIEST
        self._buffers: dict[TopicPartition, PartitionBuffer] = {}
        self._high_watermarks: dict[TopicPartition, int] = {}
        self._fetching: dict[tuple[str, int], dict[TopicPartition, int]] = {}  # asked offsets
        self._backoff_until_ms: dict[TopicPartition, int] = {}
        self._next_start = 0  # round-robin over partitions between polls
        self.local = local
        self._local_policy = policy
        self.local_metadata_max_age_ms = local_metadata_max_age_ms
        self._metadata_fetched_ms: dict[str, int] = {}  # per topic, for the local rings' sake
        self._ring_dirs_asked_ms: dict[int, int] = {}  # per broker on this host
        self._rings: dict[TopicPartition, LocalRing] = {}
        self._ring_choices: dict[TopicPartition, RingChoice | None] = {}
        self._ring_choices_version = -1  # the metadata version they were chosen from
        self._local_dirs: dict[int, Path] = {}  # brokers whose rings are this host's (same version)
        self.local_zero_copy = local_zero_copy
        self._ring_backoff = Backoff(spin_s=local_spin_us / 1e6)
        self._handed_out: list[tuple[LocalRing, int | None]] = []  # zero-copy views out there
        self.ring_batches_read = 0  # batches this consumer took from local rings
        self._closed = False

    @property
    def _partition_fetch_bytes(self) -> int:
        """Bytes to ask of each partition: big for poll_batches, Kafka's size for poll."""
        return self.bulk_partition_fetch_bytes if self._bulk else self.max_partition_fetch_bytes

    # -- assignment and positions ---------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Read exactly these partitions (replaces the previous assignment)."""
        if self._membership is not None:
            raise ZlogError(ErrorCode.INVALID_REQUEST,
                            "this consumer subscribed to a group: its coordinator assigns the "
                            "partitions (assign() and subscribe() do not mix)")
        self._set_assignment(partitions)

    def _set_assignment(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        wanted = list(dict.fromkeys(TopicPartition(*tp) for tp in partitions))
        for tp in list(self._positions):
            if tp not in wanted:
                self._forget(tp)
        for tp in wanted:
            if tp not in self._positions:
                self._positions[tp] = None
                self._buffers[tp] = PartitionBuffer()
        self._assignment = wanted

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def seek(self, tp: TopicPartition | tuple[str, int], offset: int) -> None:
        """The next poll returns records from `offset` on."""
        key = self._assigned(tp)
        if offset < 0:
            raise ZlogError(ErrorCode.INVALID_REQUEST, f"offset must be >= 0, not {offset}")
        self._positions[key] = offset
        self._pending_resets.pop(key, None)
        self._buffers[key].clear()

    def seek_to_beginning(self, partitions: Iterable[TopicPartition | tuple[str, int]] | None
                          = None) -> None:
        self._seek_to(partitions, EARLIEST_TIMESTAMP)

    def seek_to_end(self, partitions: Iterable[TopicPartition | tuple[str, int]] | None
                    = None) -> None:
        self._seek_to(partitions, LATEST_TIMESTAMP)

    def _seek_to(self, partitions: Iterable[TopicPartition | tuple[str, int]] | None,
                 timestamp: int) -> None:
        targets = self._assignment if partitions is None else [self._assigned(p)
                                                               for p in partitions]
        for tp in targets:
            self._positions[tp] = None
            self._pending_resets[tp] = timestamp
            self._buffers[tp].clear()

    def position(self, tp: TopicPartition | tuple[str, int]) -> int:
        """The offset of the next record poll will return for `tp`."""
        key = self._assigned(tp)
        self._retrying(self._resolve_positions)
        position = self._positions[key]
        assert position is not None
        return position

    def highwater(self, tp: TopicPartition | tuple[str, int]) -> int | None:
        """The high watermark seen in the last fetch answer for `tp` (None before one)."""
        return self._high_watermarks.get(TopicPartition(*tp))

    # -- consumer groups --------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | None = None, *, pattern: str | None = None,
                  on_assign: PartitionsCallback | None = None,
                  on_revoke: PartitionsCallback | None = None,
                  on_lost: PartitionsCallback | None = None) -> None:
        """Join the group `group_id` for `topics` (or every topic whose whole name matches
        the regular expression `pattern`, looked at again every `metadata_max_age_ms`, so
        topics created or deleted later join or leave the subscription); its coordinator
        assigns the partitions, applied at the next polls. The callbacks run on the poll
        thread (see RebalanceCallbacks)."""
        settings = self._group_settings
        settings.required_group_id("subscribe()")
        if (topics is None) == (pattern is None):
            raise ZlogError(ErrorCode.INVALID_REQUEST, "subscribe to topics or to a pattern")
        if self._assignment and self._membership is None:
            raise ZlogError(ErrorCode.INVALID_REQUEST, "this consumer reads assigned "
                            "partitions: subscribe() and assign() do not mix")
        compiled = None if pattern is None else compile_pattern(pattern)
        wanted = sorted(set(topics)) if topics is not None else self._matching(compiled)
        if not wanted:
            raise ZlogError(ErrorCode.INVALID_REQUEST,
                            f"no topic matches {pattern!r}" if pattern else "no topic named")
        self._callbacks = RebalanceCallbacks(on_assign, on_revoke, on_lost)
        if self._membership is None:
            self._group_wake = GroupWake()
            self._membership = GroupMembership(
                self._bootstrap, new_member(settings, retry_backoff_ms=self.retry_backoff_ms),
                max_poll_interval_ms=settings.max_poll_interval_ms,
                request_timeout_ms=self.request_timeout_ms,
                retry_backoff_ms=self.retry_backoff_ms, watch=self._metadata_watch,
                on_work=self._group_wake.wake)
        self._membership.subscribe(wanted, compiled)
        self._next_auto_commit_ms = self._clock.monotonic_ms() + settings.auto_commit_interval_ms

    def _matching(self, pattern: re.Pattern[str] | None) -> list[str]:
        assert pattern is not None
        return matching(pattern, partition_counts(self._connections, self.request_timeout_ms))

    def commit(self, offsets: Mapping[TopicPartition | tuple[str, int], int] | None = None,
               ) -> None:
        """Commit `offsets` (the next offset to read per partition), by default the position
        of every assigned partition; waits for the coordinator. Retriable errors are retried
        within request_timeout_ms; a refusal raises its Kafka code."""
        wanted = self._offsets_to_commit(offsets)
        if self._membership is not None:
            self._membership.commit(wanted)
        else:
            commit_offsets(self._simple_coordinator(), wanted)

    def commit_async(self, offsets: Mapping[TopicPartition | tuple[str, int], int] | None = None,
                     ) -> Future[None]:
        """`commit` from another thread (its own connections), in order; the Future holds the
        outcome. A member commits from its coordinator thread, in order with the commits of
        the partitions it gives up."""
        wanted = self._offsets_to_commit(offsets)
        membership = self._membership
        if membership is not None:
            return membership.commit_in_background(wanted)
        if self._async_commits is None:
            self._async_commits = ThreadPoolExecutor(1, thread_name_prefix="zlog-commit")
        settings = self._group_settings
        group_id = settings.required_group_id("commit_async()")
        return self._async_commits.submit(commit_from_elsewhere, self._bootstrap, group_id,
                                          wanted, self.request_timeout_ms,
                                          self.retry_backoff_ms)

    def committed(self, partitions: Iterable[TopicPartition | tuple[str, int]] | None = None,
                  ) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None: none committed); by
        default of the assigned partitions."""
        wanted = [TopicPartition(*tp) for tp in (self._assignment if partitions is None
                                                 else partitions)]
        if self._membership is not None:
            found = self._membership.committed(wanted)
        else:
            found = fetch_committed(self._simple_coordinator(), wanted)
        return {tp: found.get(tp) for tp in wanted}

    def group_metadata(self) -> GroupMetadata:
        """This consumer's place in its group, as its commits carry it."""
        group_id = self._group_settings.required_group_id("group_metadata()")
        if self._membership is None:
            return GroupMetadata(group_id, NO_GENERATION, "",
                                 self._group_settings.group_instance_id)
        return self._membership.metadata()

    def _offsets_to_commit(self, offsets: Mapping[TopicPartition | tuple[str, int], int] | None,
                           ) -> dict[TopicPartition, int]:
        self._group_settings.required_group_id("commit()")
        if offsets is not None:
            return {TopicPartition(*tp): offset for tp, offset in offsets.items()}
        return {tp: position for tp in self._assignment
                if (position := self._positions.get(tp)) is not None}

    def _simple_coordinator(self) -> CoordinatorLink:
        if self._simple_link is None:
            self._simple_link = CoordinatorLink(
                self._connections, self._group_settings.required_group_id("commit()"),
                request_timeout_ms=self.request_timeout_ms,
                retry_backoff_ms=self.retry_backoff_ms)
        return self._simple_link

    def _group_poll(self) -> None:
        """At the start of a poll: apply what the coordinator changed, auto commit."""
        membership = self._membership
        if membership is None:
            return
        self._take_gained(membership)
        work = membership.polled()
        if work is not None:
            self._reconcile(membership, work)
        settings = self._group_settings
        now_ms = self._clock.monotonic_ms()
        if settings.enable_auto_commit and now_ms >= self._next_auto_commit_ms:
            self._next_auto_commit_ms = now_ms + settings.auto_commit_interval_ms
            self._auto_commit(membership, self._assignment)

    def _reconcile(self, membership: GroupMembership, work: Reconciliation) -> None:
        """Lost, then revoked, then assigned, none of it waiting for the coordinator: the
        partitions kept meanwhile go on being returned (docs/groups.md §11).

        Revoked partitions stop being fetched and returned at once, go to `on_revoke`, and
        (with auto commit) their positions are committed from the coordinator thread; only
        that commit's answer reports the revocation, so their next owner reads it. Gained
        partitions' committed offsets are looked up on the same thread; `_take_gained` starts
        them, calls `on_assign` and reports the whole work once the offsets are in."""
        kept = [tp for tp in self._assignment if tp not in work.lost and tp not in work.revoke]
        if work.lost:
            self._set_assignment(kept)
            self._callbacks.lost(set(work.lost))
        commit: Future[None] | None = None
        if work.revoke:
            self._callbacks.revoked(set(work.revoke))
            if self._group_settings.enable_auto_commit:
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
                        "asking again", self.group_id, len(work.assign), error)
            return
        self._gaining = None
        self._set_assignment([*self._assignment, *sorted(work.assign)])
        for tp, offset in committed.items():
            self._positions[tp] = offset
        self._callbacks.assigned(set(work.assign))
        report_after(gaining.revoke_commit, lambda: membership.done(work))

    def _woken_by(self, offsets: Future[dict[TopicPartition, int]],
                  ) -> Future[dict[TopicPartition, int]]:
        """`offsets`, whose answer wakes a waiting poll."""
        wake = self._group_wake
        if wake is not None:
            offsets.add_done_callback(lambda _done: wake.wake())
        return offsets

    def _gained_offsets_arrived(self) -> bool:
        return self._gaining is not None and self._gaining.offsets.done()

    def _group_work_due(self) -> bool:
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
            log.warning("group %s: auto commit failed: %s", self.group_id, error)
        elif error is not None:
            log.error("group %s: auto commit failed", self.group_id, exc_info=error)

    def _leave_group(self) -> None:
        membership = self._membership
        if membership is None:
            return
        self._membership = None
        try:
            if self._group_settings.enable_auto_commit:
                self._auto_commit(membership, self._assignment)  # membership.close waits
            self._callbacks.revoked(set(self._assignment))
        finally:
            membership.close()

    # -- polling --------------------------------------------------------------------------

    def poll(self, timeout_ms: int = 0, max_records: int = MAX_POLL_RECORDS_DEFAULT) -> (
        list[ConsumerRecord]
    ):
        """Records at the positions, waiting up to timeout_ms for some to arrive."""
        assert max_records > 0
        self._bulk = False
        self._group_poll()
        deadline_ms = self._clock.monotonic_ms() + max(timeout_ms, 0)
        while True:
            self._group_work_in_poll()
            records = self._take_records(max_records)
            if records:
                self._note_handed_out()
                self._prefetch()  # the next answers arrive while the caller works
                return records
            if not self._wait_for_data(deadline_ms):
                return []

    def poll_batches(self, timeout_ms: int = 0) -> list[tuple[TopicPartition, BatchView]]:
        """Whole decoded batches (records at or past the position only), no object per record.

        Each BatchView has `offsets`, `timestamps_ms`, `values()`, `values_concatenated()`...;
        positions move past every batch returned. Fetches made for it ask each partition for
        up to `bulk_partition_fetch_bytes` (4 MiB by default) instead of
        `max_partition_fetch_bytes`: a reader that takes whole batches gains from big fetches.
        """
        self._bulk = True
        self._group_poll()
        deadline_ms = self._clock.monotonic_ms() + max(timeout_ms, 0)
        while True:
            self._group_work_in_poll()
            batches: list[tuple[TopicPartition, BatchView]] = []
            for tp in self._assignment:
                views, next_position = self._buffers[tp].take_batches()
                if next_position is not None:
                    self._positions[tp] = next_position
                batches.extend((tp, view) for view in views)
            if batches:
                self._note_handed_out()
                self._prefetch()
                return batches
            if not self._wait_for_data(deadline_ms):
                return []

    def _group_work_in_poll(self) -> None:
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

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Records forever, or until consumer_timeout_ms passes without one."""
        while not self._closed:
            wait_ms = self.consumer_timeout_ms if self.consumer_timeout_ms is not None else 1000
            records = self.poll(wait_ms)
            if not records and self.consumer_timeout_ms is not None:
                return
            yield from records

    def _wait_for_data(self, deadline_ms: int) -> bool:
        """Send fetches and take in answers until the deadline; False when it has passed.

        A retriable error on the way (no leader yet, a broker away) costs a backoff, never
        an exception: the next round asks the metadata again.
        """
        try:
            self._resolve_positions(self.request_timeout_ms)
            if self.local and (self._fill_from_rings() or self._rings):
                return self._wait_local(deadline_ms)
            self._send_fetches()
        except ZlogError as error:
            if not error.retriable:  # the control plane's "no such topic" among them
                raise
            return self._pause_after(error, deadline_ms)
        remaining_ms = deadline_ms - self._clock.monotonic_ms()
        if remaining_ms <= 0:
            self._receive(0)
            return any(self._buffers[tp] for tp in self._assignment)
        self._receive(remaining_ms)
        return True

    def _pause_after(self, error: ZlogError, deadline_ms: int) -> bool:
        """Back off after a retriable error; False once the poll's deadline has passed."""
        log.debug("poll: %s; trying again in %d ms", error, self.retry_backoff_ms)
        for topic in {tp.topic for tp in self._assignment}:
            self._connections.metadata.invalidate(topic)
        remaining_ms = deadline_ms - self._clock.monotonic_ms()
        if remaining_ms <= 0:
            return False
        time.sleep(min(self.retry_backoff_ms, remaining_ms) / 1000)
        return deadline_ms > self._clock.monotonic_ms()

    def _retrying(self, call: Callable[[int], T]) -> T:
        """`call(remaining_ms)`, tried again after retriable errors until request_timeout_ms
        has passed; then the last error (it names the cause). Each attempt forgets the
        metadata it found stale, so the next one asks again."""
        return retry_within(call, timeout_ms=self.request_timeout_ms,
                            backoff_ms=self.retry_backoff_ms, next_step=after_leader_error,
                            clock_ms=self._clock.monotonic_ms)

    def _take_records(self, max_records: int) -> list[ConsumerRecord]:
        records: list[ConsumerRecord] = []
        count = len(self._assignment)
        for step in range(count):
            tp = self._assignment[(self._next_start + step) % count]
            taken, next_position = self._buffers[tp].take_records(tp, max_records - len(records))
            if next_position is not None:
                self._positions[tp] = next_position
            records.extend(taken)
            if len(records) >= max_records:
                break
        if count:
            self._next_start = (self._next_start + 1) % count
        return records

    # -- local rings ----------------------------------------------------------------------

    def _ring_for(self, tp: TopicPartition) -> LocalRing | None:
        """The ring to read `tp` from (local_replicas.py chooses), None to use the network.

        A ring whose writer is gone is not read: the network finds out where the partition
        went (the answer, or the failed connection, refreshes the metadata)."""
        choice = self._ring_choice(tp)
        ring = self._rings.get(tp)
        if ring is not None and (choice is None or ring.path != choice.path):
            ring.close()
            del self._rings[tp]
            ring = None
        if choice is None:
            return None
        if ring is None:
            if not ring_exists(str(choice.path)):
                return None
            ring = self._rings[tp] = LocalRing(choice.path)
        return None if ring.writer_gone() else ring

    def _ring_choice(self, tp: TopicPartition) -> RingChoice | None:
        """choose_ring's answer, kept until the metadata changes (it costs a few stats)."""
        metadata = self._connections.metadata
        if metadata.version != self._ring_choices_version:
            self._ring_choices.clear()
            self._ring_choices_version = metadata.version
            self._local_dirs = local_ring_dirs(metadata.brokers, metadata.ring_dirs,
                                               self._local_policy)
        if tp not in self._ring_choices:
            partition = metadata.partition(*tp)
            self._ring_choices[tp] = None if partition is None else choose_ring(
                tp.topic, partition, self._local_policy, leader_ring_path=metadata.ring_path(*tp),
                brokers=metadata.brokers, local_dirs=self._local_dirs)
        return self._ring_choices[tp]

    def local_ring_path(self, tp: TopicPartition | tuple[str, int]) -> Path | None:
        """The ring file `tp` is read from right now (a leader's or, with follower reads, an
        in-sync follower's), or None while it is fetched over the network."""
        key = self._assigned(tp)
        ring = self._rings.get(key)
        if ring is None or ring.writer_gone():
            return None
        position = self._positions[key]
        return ring.path if position is None or ring.covers(position) else None

    def _served_locally(self, tp: TopicPartition) -> bool:
        if not self.local:
            return False
        ring = self._ring_for(tp)
        position = self._positions[tp]
        return ring is not None and position is not None and ring.covers(position)

    def _fill_from_rings(self) -> bool:
        """Read every idle partition that its ring can serve; whether any records came."""
        in_flight = {tp for asked in self._fetching.values() for tp in asked}
        idle = [tp for tp in self._assignment if self._positions[tp] is not None
                and not self._buffers[tp] and tp not in in_flight]
        if not idle:
            return False
        self._refresh_metadata({tp.topic for tp in idle})
        got_any = False
        for tp in idle:
            ring = self._ring_for(tp)
            position = self._positions[tp]
            if ring is None or position is None:
                continue
            result = ring.read(position, self._partition_fetch_bytes,
                               check_crc=self.check_crcs, copy=not self.local_zero_copy)
            if result is None:
                continue  # not in the ring: _send_fetches asks the network
            views, next_offset = result
            if ring.high_watermark is not None:
                self._high_watermarks[tp] = ring.high_watermark
            if views:
                self._buffers[tp].add(views)
                self.ring_batches_read += len(views)
                got_any = True
            elif next_offset != position:
                self._positions[tp] = next_offset  # only control batches were read
        return got_any

    def _wait_local(self, deadline_ms: int) -> bool:
        """Poll the rings (and any network fetches of partitions they cannot serve) until
        records arrive or the deadline passes; bounded adaptive backoff between attempts."""
        backoff = self._ring_backoff
        backoff.reset()
        while True:
            if any(self._buffers[tp] for tp in self._assignment):
                return True
            self._send_fetches()
            if self._fetching:
                self._receive(0)
            if any(self._buffers[tp] for tp in self._assignment) or self._fill_from_rings() \
                    or self._group_work_due():
                return True
            remaining_ms = deadline_ms - self._clock.monotonic_ms()
            if remaining_ms <= 0:
                return False
            backoff.wait(remaining_ms / 1000, self._ring_news())

    def _ring_news(self) -> Callable[[], bool]:
        """A cheap test (one state read per ring) of whether any ring moved past a position.

        A ring whose writer is gone never moves: watching it would only spin."""
        watched = [(ring, position) for tp, ring in self._rings.items()
                   if (position := self._positions.get(tp)) is not None
                   and not ring.writer_gone()]

        def news() -> bool:
            return any(ring.has_news(position) for ring, position in watched)

        return news

    def _note_handed_out(self) -> None:
        """Remember where the zero-copy views just returned start, for views_intact()."""
        if not self.local_zero_copy:
            return
        self._handed_out = []
        for tp, ring in self._rings.items():
            if ring.read_from_position is None:
                continue
            self._handed_out.append((ring, ring.read_from_position))
            if not self._buffers[tp]:
                ring.forget_reads()  # the next poll's views start where the next read starts

    def views_intact(self) -> bool:
        """Whether every zero-copy view the last poll returned is still whole in shared memory.

        Call it after using the views: False means the leader reclaimed some of that ring space
        meanwhile, so what was made of those views must be thrown away and the records read
        again (seek back; they come from the segment files). Always True without zero copy.
        """
        return all(ring.intact(position) for ring, position in self._handed_out)

    # -- fetching -------------------------------------------------------------------------

    def _prefetch(self) -> None:
        """Send the next fetches before returning records; a retriable failure here waits for
        the next poll, which deals with it."""
        try:
            self._send_fetches()
        except ZlogError as error:
            if not error.retriable:
                raise

    def _fetchable(self, now_ms: int) -> list[TopicPartition]:
        in_flight = {tp for asked in self._fetching.values() for tp in asked}
        return [
            tp for tp in self._assignment
            if self._positions[tp] is not None and not self._buffers[tp]
            and tp not in in_flight and self._backoff_until_ms.get(tp, 0) <= now_ms
        ]

    def _send_fetches(self) -> None:
        now_ms = self._clock.monotonic_ms()
        candidates = self._fetchable(now_ms)
        if not candidates:
            return
        self._refresh_metadata({tp.topic for tp in candidates})
        if self.local:
            candidates = [tp for tp in candidates if not self._served_locally(tp)]
        by_endpoint: dict[str, list[TopicPartition]] = {}
        for tp in candidates:
            endpoint = self._connections.metadata.leader_endpoint(*tp)
            if endpoint is None:  # no leader, as the metadata had it: ask again after a backoff
                self._connections.metadata.invalidate(tp.topic)
                self._back_off(tp, now_ms)
                continue
            by_endpoint.setdefault(endpoint, []).append(tp)
        for endpoint, tps in by_endpoint.items():
            asked = {tp: self._position_of(tp) for tp in tps}
            request = FetchRequestV0(
                CONSUMER_REPLICA_ID, self.fetch_max_wait_ms, self.fetch_min_bytes,
                self.fetch_max_bytes,
                tuple(FetchEntry(tp.topic, tp.partition, offset, self._partition_fetch_bytes)
                      for tp, offset in asked.items()),
            )
            rpc = self._connections.client(endpoint)
            if not rpc.has_capacity:
                continue
            timeout_ms = self.request_timeout_ms + self.fetch_max_wait_ms
            try:
                correlation_id = rpc.send(request, timeout_ms)
            except ZlogError as error:  # its connection failed: those partitions back off
                for tp in asked:
                    self._on_partition_error(tp, error, now_ms)
                continue
            self._fetching[(endpoint, correlation_id)] = asked

    def _receive(self, timeout_ms: int) -> None:
        """Take in fetch answers, waiting up to timeout_ms for the first one.

        With nothing in flight (every partition backing off), just waits out the time.
        """
        deadline_ms = self._clock.monotonic_ms() + timeout_ms
        while True:
            endpoints = sorted({endpoint for endpoint, _ in self._fetching})
            got_any = False
            for endpoint in endpoints:
                for result in self._connections.client(endpoint).poll_responses(0):
                    got_any = True
                    self._on_fetch_result(endpoint, result)
            remaining_ms = deadline_ms - self._clock.monotonic_ms()
            if got_any or remaining_ms <= 0 or self._group_work_due():
                return
            # Bounded so that request deadlines are checked (poll_responses expires them).
            wait_ms = min(remaining_ms, _WAIT_SLICE_MS)
            if not endpoints:
                self._idle_wait(min(wait_ms, self.retry_backoff_ms) / 1000)
                self._send_fetches()  # a backoff may have ended
                continue
            poller = zmq.Poller()
            for endpoint in endpoints:
                for sock in self._connections.client(endpoint).sockets:
                    poller.register(sock, zmq.POLLIN)
            wake = self._group_wake
            if wake is not None:
                poller.register(wake.reader, zmq.POLLIN)
            ready = poller.poll(wait_ms)
            if wake is not None and any(fd == wake.fileno for fd, _ in ready):
                wake.drain()  # only when woken: a receive on an empty socket raises

    def _idle_wait(self, seconds: float) -> None:
        """Nothing to fetch: sleep, or until the group has work for this poll."""
        if self._group_wake is None:
            time.sleep(seconds)
        else:
            self._group_wake.wait(seconds)

    def _on_fetch_result(self, endpoint: str, result: RpcResult) -> None:
        asked = self._fetching.pop((endpoint, result.correlation_id), None)
        if asked is None:
            return
        now_ms = self._clock.monotonic_ms()
        if result.error is not None:
            for tp in asked:
                self._on_partition_error(tp, result.error, now_ms)
            return
        response = result.response
        assert isinstance(response, FetchResponseV0)
        for entry in response.entries:
            tp = TopicPartition(entry.topic, entry.partition)
            if tp not in asked or self._positions.get(tp) != asked[tp]:
                continue  # unassigned or sought elsewhere since this fetch left
            if entry.error_code != ErrorCode.NONE:
                self._on_partition_error(tp, for_code(entry.error_code, entry.error_message),
                                         now_ms)
                continue
            if entry.high_watermark >= 0:  # -1: a new leader shows none yet (Kafka's rule)
                self._high_watermarks[tp] = entry.high_watermark
            position = asked[tp]
            for chunk in entry.chunks:
                views = batches_from_chunk(chunk, position, check_crc=self.check_crcs)
                if views:
                    self._buffers[tp].add(views)
                    position = views[-1].header.next_offset

    def _on_partition_error(self, tp: TopicPartition, error: ZlogError, now_ms: int) -> None:
        if error.code == ErrorCode.OFFSET_OUT_OF_RANGE:
            reset = _RESETS[self.auto_offset_reset]
            if reset is None:
                where = prefixed_once(f"{tp.topic}-{tp.partition}", error.message)
                raise ZlogError(error.code, f"{where} (auto_offset_reset is none)")
            where = "earliest" if reset == EARLIEST_TIMESTAMP else "latest"
            log.warning("%s; moving to the %s offset (auto_offset_reset=%s)",
                        prefixed_once(f"{tp.topic}-{tp.partition}", error.message), where,
                        self.auto_offset_reset)
            self._positions[tp] = None
            self._pending_resets[tp] = reset
            return
        if error.retriable:  # a leader moving, a broker away: ask again after a backoff
            self._forget_if_stale(tp.topic, error)
            self._back_off(tp, now_ms)
            return
        raise ZlogError(error.code, prefixed_once(f"fetching {tp.topic}-{tp.partition}",
                                                  error.message, f"{tp.topic}-{tp.partition}"))

    def _back_off(self, tp: TopicPartition, now_ms: int) -> None:
        self._backoff_until_ms[tp] = now_ms + self.retry_backoff_ms

    # -- offsets --------------------------------------------------------------------------

    def _resolve_positions(self, timeout_ms: int) -> None:
        """Give every assigned partition without a position one, per its pending reset."""
        missing = [tp for tp in self._assignment if self._positions[tp] is None]
        if not missing:
            return
        default = _RESETS[self.auto_offset_reset]
        wanted: dict[TopicPartition, int] = {}
        for tp in missing:
            reset = self._pending_resets.get(tp, default)
            if reset is None:
                raise ZlogError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                f"{tp.topic}-{tp.partition} has no position and "
                                "auto_offset_reset is none: seek first")
            wanted[tp] = reset
        for tp, offset in self._list_offsets_once(wanted, timeout_ms).items():
            self._positions[tp] = offset
            self._pending_resets.pop(tp, None)

    def list_offsets(self, specs: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """ListOffsets against the leaders: -1 high watermark, -2 log start, else a time.

        Retriable errors are retried within request_timeout_ms."""
        return self._retrying(lambda remaining_ms: self._list_offsets_once(specs, remaining_ms))

    def _list_offsets_once(self, specs: dict[TopicPartition, int], timeout_ms: int,
                           ) -> dict[TopicPartition, int]:
        """One ListOffsets per leader; a failure forgets the metadata it shows stale (a
        partition without a leader among them) and is raised."""
        self._refresh_metadata({tp.topic for tp in specs})
        groups: dict[tuple[str, str], list[ListOffsetsPartition]] = {}
        for tp, spec in specs.items():
            endpoint = self._leader_of(tp)
            groups.setdefault((endpoint, tp.topic), []).append(
                ListOffsetsPartition(tp.partition, spec))
        offsets: dict[TopicPartition, int] = {}
        for (endpoint, topic), partitions in groups.items():
            response = self._call(endpoint, topic, ListOffsetsRequestV0(topic, tuple(partitions)),
                                  timeout_ms)
            assert isinstance(response, ListOffsetsResponseV0)
            for result in response.partitions:
                if result.error_code != ErrorCode.NONE:
                    error = for_code(result.error_code, prefixed_once(
                        f"{topic}-{result.partition}", result.error_message))
                    self._forget_if_stale(topic, error)
                    raise error
                offsets[TopicPartition(topic, result.partition)] = result.offset
        return offsets

    def _leader_of(self, tp: TopicPartition) -> str:
        """The endpoint of `tp`'s leader; LEADER_NOT_AVAILABLE (its metadata forgotten, to be
        asked again) when the metadata names none."""
        endpoint = self._connections.metadata.leader_endpoint(*tp)
        if endpoint is None:
            self._connections.metadata.invalidate(tp.topic)
            raise ZlogError(ErrorCode.LEADER_NOT_AVAILABLE,
                            f"{tp.topic}-{tp.partition} has no leader right now")
        return endpoint

    def _call(self, endpoint: str, topic: str, request: Request, timeout_ms: int) -> Response:
        """A call of this consumer's own to a leader's worker, over the connection its
        fetches use. The failures a broken connection still holds are taken in first (their
        partitions back off): the call then gets a fresh connection instead of failing at
        once. A failure forgets `topic`'s metadata where it shows it stale."""
        rpc = self._connections.client(endpoint)
        if rpc.broken is not None:
            for result in rpc.poll_responses(0):
                self._on_fetch_result(endpoint, result)
            rpc = self._connections.client(endpoint)
        try:
            return rpc.call(request, timeout_ms)
        except ZlogError as error:
            self._forget_if_stale(topic, error)
            raise

    def _forget_if_stale(self, topic: str, error: ZlogError) -> None:
        if after_leader_error(error.code) is Next.RELEARN:
            self._connections.metadata.invalidate(topic)

    def latest(self, topic: str, partition: int) -> ConsumerRecord | None:
        """The last record below the high watermark, or None if the partition is empty.

        A one-off read that leaves this consumer's positions alone; retriable errors are
        retried within request_timeout_ms.
        """
        return self._retrying(lambda remaining_ms: self._latest_once(topic, partition,
                                                                      remaining_ms))

    def _latest_once(self, topic: str, partition: int, timeout_ms: int,
                     ) -> ConsumerRecord | None:
        tp = TopicPartition(topic, partition)
        bounds = self._list_offsets_once({tp: LATEST_TIMESTAMP}, timeout_ms)
        high_watermark = bounds[tp]
        start = self._list_offsets_once({tp: EARLIEST_TIMESTAMP}, timeout_ms)[tp]
        if high_watermark <= start:
            return None
        wanted = high_watermark - 1
        request = FetchRequestV0(CONSUMER_REPLICA_ID, 0, 0, self.max_partition_fetch_bytes,
                                 (FetchEntry(topic, partition, wanted,
                                             self.max_partition_fetch_bytes),))
        response = self._call(self._leader_of(tp), topic, request, timeout_ms)
        assert isinstance(response, FetchResponseV0)
        entry = response.entries[0]
        if entry.error_code != ErrorCode.NONE:
            error = for_code(entry.error_code,
                             prefixed_once(f"{topic}-{partition}", entry.error_message))
            self._forget_if_stale(topic, error)
            raise error
        buffer = PartitionBuffer()
        for chunk in entry.chunks:
            buffer.add(batches_from_chunk(chunk, wanted, check_crc=self.check_crcs))
        records, _ = buffer.take_records(tp, 2**31 - 1)
        below = [r for r in records if r.offset < high_watermark]
        return below[-1] if below else None

    # -- helpers --------------------------------------------------------------------------

    def _refresh_metadata(self, topics: set[str]) -> None:
        metadata = self._connections.metadata
        if self.local:
            self._expire_metadata(topics)
        # A partition past the known count may be new (CreatePartitions): ask again first.
        grown = {tp.topic for tp in self._assignment if tp.topic in topics
                 and tp.partition >= (metadata.partition_count(tp.topic) or tp.partition + 1)}
        missing = sorted({t for t in topics if metadata.topic(t) is None} | grown)
        if missing:
            errors = self._connections.refresh(missing, self.request_timeout_ms)
            now_ms = self._clock.monotonic_ms()
            self._metadata_fetched_ms.update((topic, now_ms) for topic in missing)
            if self.local:
                self._learn_ring_dirs(now_ms)
            for error in errors.values():
                if not error.retriable:  # the control plane's "no such topic" among them
                    raise error
        for tp in self._assignment:
            count = metadata.partition_count(tp.topic)
            if tp.topic in topics and count is not None and not 0 <= tp.partition < count:
                raise DefiniteError(ZlogError(  # the count was asked again just now
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"topic {tp.topic!r} has partitions 0..{count - 1}, not {tp.partition}"))

    def _learn_ring_dirs(self, now_ms: int) -> None:
        """Ask each broker on this host whose ring directory is unknown for it (a Metadata
        request for no topic: its own answer names it). One that does not answer within
        _RING_DIR_ASK_TIMEOUT_MS is asked again _RING_DIR_ASK_INTERVAL_MS later at the earliest."""
        metadata = self._connections.metadata
        for broker in brokers_to_ask(metadata.brokers, metadata.ring_dirs, self._local_policy):
            if now_ms < self._ring_dirs_asked_ms.get(broker.node_id, -_RING_DIR_ASK_INTERVAL_MS
                                                     ) + _RING_DIR_ASK_INTERVAL_MS:
                continue
            self._ring_dirs_asked_ms[broker.node_id] = now_ms
            try:
                response = self._connections.call_endpoint(
                    broker.control_endpoint, MetadataRequestV0(()), _RING_DIR_ASK_TIMEOUT_MS)
            except ZlogError as error:
                log.debug("broker %d did not say where its rings are: %s", broker.node_id, error)
                continue
            if isinstance(response, MetadataResponseV0):
                metadata.update(response)

    def _expire_metadata(self, topics: set[str]) -> None:
        """Forget metadata older than local_metadata_max_age_ms.

        A ring tells nothing of leadership: a consumer reading a former leader's ring (now a
        follower's, still correct up to its high watermark) or fetching from a leader while a
        replica on this host caught up would otherwise never learn of the change, since no
        answer carries an error. So local consumers ask again now and then.
        """
        now_ms = self._clock.monotonic_ms()
        for topic in topics:
            fetched_ms = self._metadata_fetched_ms.get(topic)
            if fetched_ms is not None and now_ms - fetched_ms >= self.local_metadata_max_age_ms:
                self._connections.metadata.invalidate(topic)
                del self._metadata_fetched_ms[topic]

    def _position_of(self, tp: TopicPartition) -> int:
        position = self._positions[tp]
        assert position is not None, "fetches go only to partitions with a position"
        return position

    def _assigned(self, tp: TopicPartition | tuple[str, int]) -> TopicPartition:
        key = TopicPartition(*tp)
        if key not in self._positions:
            raise ZlogError(ErrorCode.INVALID_REQUEST,
                            f"{key.topic}-{key.partition} is not assigned to this consumer")
        return key

    def _forget(self, tp: TopicPartition) -> None:
        self._positions.pop(tp, None)
        self._pending_resets.pop(tp, None)
        self._buffers.pop(tp, None)
        self._high_watermarks.pop(tp, None)
        self._backoff_until_ms.pop(tp, None)
        self._ring_choices.pop(tp, None)
        ring = self._rings.pop(tp, None)
        if ring is not None:
            ring.close()

    def close(self) -> None:
        """Commit (with auto commit), hand the partitions to on_revoke, leave the group."""
        if not self._closed:
            try:
                self._leave_group()
            finally:
                self._close_connections()

    def _close_connections(self) -> None:
        if not self._closed:
            self._closed = True
            if self._async_commits is not None:
                self._async_commits.shutdown(wait=True)
            for ring in self._rings.values():
                ring.close()
            self._rings.clear()
            self._connections.close()
            if self._group_wake is not None:
                self._group_wake.close()
                self._group_wake = None

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
