"""The group coordinators a worker runs: one per `__consumer_offsets` partition it leads.

The pure `GroupCoordinator` decides; this drives it (docs/groups.md §1 and §10). On becoming
leader of an offsets partition the worker replays the partition's whole log (segments and
ring) into `load`. Each group request goes to the coordinator of `partition_for(group id)`;
the records of each output are appended to the partition as ONE batch through the produce
path (so followers replicate it like any batch), and the output's replies are released only
once the high watermark covers everything written before them (acks=all: nothing answered can
be lost by a failover that keeps the ISR). Timers run from the worker's loop (`advance`).
Losing the leadership drops the coordinator and answers its parked and unreleased requests
NOT_COORDINATOR; so does a failed append, after which the coordinator reloads from its log.
A load that fails (the log does not read or replay) is tried again with a doubling backoff
while the worker still leads the partition; meanwhile its groups hear
COORDINATOR_LOAD_IN_PROGRESS, which clients retry, instead of a NOT_COORDINATOR that would
send them back to FindCoordinator, which names this worker again.

Between `defer_appends` and `flush` (the worker's drain of its socket, one loop turn) the
records of every output go to one batch per offsets partition instead of one per output: a
turn of a thousand commits is one append, not a thousand. Nothing is answered before `flush`,
so each reply still waits for everything written before it; a failed append answers every
request of the turn NOT_COORDINATOR, as it would have answered the one output. A batch carries
only the latest commit of each (group, topic, partition) it holds (`latest_commits_only`): the
compacted log would keep no other, and a burst of commits of one partition in a turn is one
record, not one per request.

The coordinator lease: a worker's leaderships stand only while its broker's lease from the
controller's heartbeats does (worker_protocol.Lease). When it runs out another broker may
already coordinate these groups, so every coordinator is dropped as if its leadership were
lost: parked and unreleased requests, and every group request until the lease comes back,
hear NOT_COORDINATOR (no stale OffsetFetch or Describe), and no timer of a stale coordinator
expires a session or an offset. A renewed lease loads them again from the log, which gives
every member a fresh session: the members were refused meanwhile, not silent.

Loading again replays only what was written since the last load in the same leader epoch
(`_Replayed`): a leader's log only grows within its epoch, and the replayed state depends only
on the records in log order. A busy worker whose lease lapses and comes back, again and again,
would otherwise replay a long offsets log each time, which blocked its loop for seconds per
renewal until its supervisor judged it dead, and again after every restart.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from zlog import limits
from zlog.broker.data.partition import Partition, ProduceOutcome
from zlog.broker.worker_protocol import GroupSettings
from zlog.errors import ErrorCode, ZlogError
from zlog.groups.config import GroupConfig
from zlog.groups.coordinator import GroupCoordinator, error_response
from zlog.groups.offsets import latest_commits_only
from zlog.groups.output import Output
from zlog.groups.partitioning import OFFSETS_TOPIC, partition_for
from zlog.groups.records import OffsetsRecord, encode_record
from zlog.groups.replay import LoadedGroups, replay_encoded
from zlog.record.header import read_header
from zlog.record.records import NewRecord, build_batch, read_records
from zlog.transport.codec import RequestHeader, encode_error_response, encode_response
from zlog.transport.messages.groups import (
    DeletedGroup,
    DeleteGroupsRequestV0,
    DeleteGroupsResponseV0,
    DescribeGroupsRequestV0,
    DescribeGroupsResponseV0,
    GroupDescription,
    GroupRequest,
    GroupResponse,
    ListGroupsRequestV0,
    ListGroupsResponseV0,
    OffsetCommitRequestV0,
)
from zlog.transport.server import Reply
from zlog.transport.wire import Buffer
from zlog.types import TopicPartition

log = logging.getLogger(__name__)

LOAD_READ_BYTES: Final = limits.BATCH_SIZE_BYTES_MAX
"""How much of the log one read takes while loading (at least the largest batch)."""
LOAD_RETRY_BACKOFF_MS: Final = 100
"""The wait before the first retry of a failed load; each failure doubles it."""
LOAD_RETRY_BACKOFF_MAX_MS: Final = 10_000
"""The longest wait between two tries: a fault that clears is noticed within this."""

UNFLUSHED: Final = 2**63
"""The offset a reply waits for while the records before it wait for `flush`: no high
watermark reaches it, and `flush` replaces it with the end of what it appended."""
_UNPARKED: Final = 0
"""The handle of a request its coordinator answers in the step it arrives in (a commit, a
list, describe or delete): parked requests get handles from 1 up."""

Append = Callable[[TopicPartition, bytes], tuple[ProduceOutcome, list[Reply]]]
"""Appends one batch to a partition as its leader (the produce path) and returns the outcome
and the replies the append woke (long polls of followers and consumers)."""
LeaseRemaining = Callable[[], int | None]
"""How long the broker's lease still stands, in ms (0 or less: it ran out; None: no lease,
a single node that is its own controller)."""


def _no_lease() -> int | None:
    return None


@dataclass(slots=True)
class _Led:
    """One offsets partition this worker leads, and its coordinator."""

    coordinator: GroupCoordinator
    leader_epoch: int
    last_written: int
    """The log end after the coordinator's last append: what a reply waits for."""
    parked: dict[int, tuple[bytes, RequestHeader]] = field(default_factory=dict)


@dataclass(slots=True)
class _Replayed:
    """What one offsets partition's log replayed to when it was last loaded by this leader."""

    leader_epoch: int
    end_offset: int
    groups: LoadedGroups


@dataclass(frozen=True, slots=True)
class _LoadRetry:
    """An offsets partition this worker leads whose load failed: when to try again."""

    leader_epoch: int
    due_ms: int
    backoff_ms: int


@dataclass(slots=True)
class _Waiting:
    identity: bytes
    header: RequestHeader
    response: GroupResponse
    until: list[tuple[int, int]]
    """(offsets partition, offset): released when each partition's HW reaches its offset."""


class GroupHost:
    def __init__(self, partitions: Mapping[TopicPartition, Partition], append: Append,
                 wall_ms: Callable[[], int], seed: int | None = None,
                 lease_remaining_ms: LeaseRemaining = _no_lease) -> None:
        self._partitions = partitions
        self._lease_remaining_ms = lease_remaining_ms
        self._lease_lapsed = False
        """The lease ran out and the coordinators were dropped; a renewal reloads them."""
        self._append = append
        self._wall_ms = wall_ms
        self._rng = random.Random(seed)
        self._led: dict[int, _Led] = {}
        self._load_retries: dict[int, _LoadRetry] = {}
        self._replayed: dict[int, _Replayed] = {}
        self._waiting: list[_Waiting] = []
        self._request_ids: Iterator[int] = iter(range(1, 2**62))
        self._deferring = False
        self._pending: dict[int, list[OffsetsRecord]] = {}
        """Records of this turn's outputs, per offsets partition, not appended yet."""
        self._deferred_wakes: set[int] = set()
        """Offsets partitions whose coordinator handled a request this turn: its held
        heartbeats are woken at the flush (only these: a turn of produces touches none)."""
        self.settings: GroupSettings | None = None

    # ------------------------------------------------------------------ settings, leadership

    def configure(self, settings: GroupSettings) -> list[Reply]:
        """New partition counts or configs from the supervisor."""
        self.settings = settings
        replies = self.check_lease()
        for index, led in sorted(self._led.items()):
            replies += self._carry_out(index, led.coordinator.update_metadata(
                self._counts()), self._wall_ms())
        return replies

    def _counts(self) -> dict[str, int]:
        if self.settings is None:
            return {}
        return {name: count for name, count in self.settings.partition_counts.items()
                if name != OFFSETS_TOPIC}

    def _config(self) -> GroupConfig:
        settings = self.settings
        if settings is None:
            return GroupConfig()
        return GroupConfig(initial_rebalance_delay_ms=settings.initial_rebalance_delay_ms,
                           min_session_timeout_ms=settings.min_session_timeout_ms,
                           consumer_session_timeout_ms=settings.consumer_session_timeout_ms,
                           consumer_heartbeat_interval_ms=settings.consumer_heartbeat_interval_ms,
                           offsets_retention_ms=settings.offsets_retention_ms,
                           offsets_retention_check_interval_ms=(
                               settings.offsets_retention_check_interval_ms))

    def partition_changed(self, tp: TopicPartition) -> list[Reply]:
        """An assign or unassign touched `tp`: load a coordinator for a new leadership (or a
        new epoch), drop one for a lost leadership."""
        if tp.topic != OFFSETS_TOPIC:
            return []
        replies = self.check_lease()
        return replies + self._follow_leadership(tp)

    def _follow_leadership(self, tp: TopicPartition) -> list[Reply]:
        partition = self._partitions.get(tp)
        led = self._led.get(tp.partition)
        if partition is None or not partition.is_leader:
            self._load_retries.pop(tp.partition, None)
            self._replayed.pop(tp.partition, None)
            return self._unload(tp.partition) if led is not None else []
        if self._lease_lapsed:
            return []  # loaded when the lease comes back
        if led is not None and led.leader_epoch == partition.leader_epoch:
            return []
        replies = self._unload(tp.partition) if led is not None else []
        return replies + self._load(tp.partition, partition)

    def check_lease(self) -> list[Reply]:
        """Drop every coordinator when the lease runs out (their waiting requests hear
        NOT_COORDINATOR); load those of the partitions still led when it comes back."""
        remaining_ms = self._lease_remaining_ms()
        lapsed = remaining_ms is not None and remaining_ms <= 0
        if lapsed == self._lease_lapsed:
            return []
        self._lease_lapsed = lapsed
        replies: list[Reply] = []
        if lapsed:
            log.warning("the broker's lease ran out: coordinating no group until it is "
                        "renewed")
            self._load_retries.clear()
            for index in sorted(self._led):
                replies += self._unload(index)
            return replies
        for tp in sorted(self._partitions):
            if tp.topic == OFFSETS_TOPIC:
                replies += self._follow_leadership(tp)
        return replies

    def _load(self, index: int, partition: Partition) -> list[Reply]:
        coordinator = GroupCoordinator(self._config(), self._rng, self._counts())
        try:
            loaded = self._replay(index, partition)
        except (ZlogError, OSError) as error:
            self._retry_load(index, partition.leader_epoch)
            log.error("offsets partition %d does not load (%s); trying again in %d ms", index,
                      error, self._load_retries[index].backoff_ms)
            return []
        self._load_retries.pop(index, None)
        led = _Led(coordinator, partition.leader_epoch, partition.log.log_end_offset)
        self._led[index] = led
        log.info("coordinating offsets partition %d (epoch %d): %d groups", index,
                 partition.leader_epoch, len(loaded.groups))
        return self._carry_out(index, coordinator.load(loaded, self._wall_ms()),
                               self._wall_ms())

    def _replay(self, index: int, partition: Partition) -> LoadedGroups:
        """The partition's log replayed: only its new records when this leadership replayed
        it before (the coordinator copies what it takes, so the state can be continued)."""
        end_offset = partition.log.log_end_offset
        earlier = self._replayed.pop(index, None)
        if (earlier is None or earlier.leader_epoch != partition.leader_epoch
                or not partition.log.log_start_offset <= earlier.end_offset <= end_offset):
            loaded = replay_encoded(_log_records(partition, partition.log.log_start_offset))
        else:
            loaded = replay_encoded(_log_records(partition, earlier.end_offset), earlier.groups)
        self._replayed[index] = _Replayed(partition.leader_epoch, end_offset, loaded)
        return loaded

    def _retry_load(self, index: int, leader_epoch: int) -> None:
        """The next try: a doubled backoff, or the first one for a new leadership."""
        previous = self._load_retries.get(index)
        backoff_ms = LOAD_RETRY_BACKOFF_MS
        if previous is not None and previous.leader_epoch == leader_epoch:
            backoff_ms = min(previous.backoff_ms * 2, LOAD_RETRY_BACKOFF_MAX_MS)
        self._load_retries[index] = _LoadRetry(leader_epoch, self._wall_ms() + backoff_ms,
                                               backoff_ms)

    def _unload(self, index: int) -> list[Reply]:
        led = self._led.pop(index)
        self._pending.pop(index, None)
        replies: list[Reply] = []
        for identity, header in led.parked.values():
            replies.append(_not_coordinator(identity, header))
        for waiting in [w for w in self._waiting if any(p == index for p, _ in w.until)]:
            self._waiting.remove(waiting)
            replies.append(_not_coordinator(waiting.identity, waiting.header))
        return replies

    def drain(self) -> list[Reply]:
        """Shutdown: every parked or unreleased request hears NOT_COORDINATOR."""
        replies: list[Reply] = []
        for index in sorted(self._led):
            replies += self._unload(index)
        return replies

    # ------------------------------------------------------------------ requests

    def handle(self, identity: bytes, header: RequestHeader, request: GroupRequest,
               now_ms: int) -> list[Reply]:
        del now_ms  # the coordinator runs on wall time: commit times outlive the process
        replies = self.check_lease()
        if self._lease_lapsed:
            refusal = error_response(request, ErrorCode.NOT_COORDINATOR, "this broker's lease "
                                     "from the controller ran out: another broker may "
                                     "coordinate the group")
            return [*replies, (identity, encode_response(header, refusal))]
        return replies + self._handle(identity, header, request)

    def _handle(self, identity: bytes, header: RequestHeader,
                request: GroupRequest) -> list[Reply]:
        wall_ms = self._wall_ms()
        if isinstance(request, ListGroupsRequestV0):
            return self._fan_out(identity, header, request, sorted(self._led), wall_ms)
        if isinstance(request, DescribeGroupsRequestV0 | DeleteGroupsRequestV0):
            # Routed by the partitions of the ids it names, never by a group id of its own
            # (it has none): every part answers at once, and one part needs no merging.
            indexes = sorted({self._partition_of(group_id) for group_id in request.group_ids})
            if len(indexes) != 1 or indexes[0] not in self._led:
                return self._fan_out(identity, header, request, indexes, wall_ms)
            index = indexes[0]
        else:
            index = self._partition_of(request.group_id)
        led = self._led.get(index)
        if led is None:
            if index in self._load_retries:
                return [(identity, encode_response(header, error_response(
                    request, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                    "the group's offsets partition is being loaded")))]
            return [_not_coordinator(identity, header, request)]
        if isinstance(request, OffsetCommitRequestV0):
            return self._commit(identity, header, request, index, wall_ms)
        request_id = next(self._request_ids)
        led.parked[request_id] = (identity, header)
        if self._deferring and index not in self._deferred_wakes:
            led.coordinator.defer_wakes()
            self._deferred_wakes.add(index)
        return self._carry_out(index, led.coordinator.handle(request_id, request, wall_ms),
                               wall_ms)

    def _commit(self, identity: bytes, header: RequestHeader, request: OffsetCommitRequestV0,
                index: int, wall_ms: int) -> list[Reply]:
        """An OffsetCommit, the one group request at a data path's rate: the coordinator
        answers it in the step it arrives in (never parks it), so it needs no request id and
        no parking, only its wait for the high watermark."""
        led = self._led[index]
        out = led.coordinator.handle(_UNPARKED, request, wall_ms)
        replies = self._append_records(index, out, wall_ms)
        if self._led.get(index) is not led:  # the append failed: the coordinator reloaded
            return [*replies, _not_coordinator(identity, header)]
        [(_request_id, response)] = out.replies
        self._waiting.append(_Waiting(identity, header, response,
                                      [(index, self._written_end(index, led))]))
        return replies + self.release()

    def _partition_of(self, group_id: str) -> int:
        counts = self.settings.partition_counts if self.settings is not None else {}
        count = counts.get(OFFSETS_TOPIC)
        return -1 if count is None else partition_for(group_id, count)

    def _fan_out(self, identity: bytes, header: RequestHeader,
                 request: ListGroupsRequestV0 | DescribeGroupsRequestV0 | DeleteGroupsRequestV0,
                 indexes: list[int], wall_ms: int) -> list[Reply]:
        """A request over several offsets partitions: each coordinator answers its part at
        once (these are never parked) and the merged answer waits for every part's HW."""
        parts: list[GroupResponse] = []
        until: list[tuple[int, int]] = []
        replies: list[Reply] = []
        for index in indexes:
            led = self._led.get(index)
            if isinstance(request, ListGroupsRequestV0):
                part: GroupRequest = request
            else:
                ids = tuple(g for g in request.group_ids if self._partition_of(g) == index)
                part = replace(request, group_ids=ids)
            if led is None:
                parts.append(error_response(part, ErrorCode.NOT_COORDINATOR))
                continue
            out = led.coordinator.handle(_UNPARKED, part, wall_ms)
            replies += self._append_records(index, out, wall_ms)
            assert len(out.replies) == 1, "list, describe and delete are never parked"
            parts.append(out.replies[0][1])
            until.append((index, self._written_end(index, led)))
        self._waiting.append(_Waiting(identity, header, _merged(request, parts), until))
        return replies + self.release()

    # ------------------------------------------------------------------ outputs

    def _carry_out(self, index: int, out: Output, wall_ms: int) -> list[Reply]:
        led = self._led.get(index)
        if led is None:
            return []
        replies = self._append_records(index, out, wall_ms)
        if self._led.get(index) is not led:  # the append failed: the coordinator reloaded
            return replies
        for request_id, response in out.replies:
            parked = led.parked.pop(request_id, None)
            if parked is not None:
                self._waiting.append(_Waiting(*parked, response,
                                              [(index, self._written_end(index, led))]))
        return replies + self.release()

    def _written_end(self, index: int, led: _Led) -> int:
        """Where a reply computed now waits for the high watermark."""
        return UNFLUSHED if index in self._pending else led.last_written

    def defer_appends(self) -> None:
        """From now until `flush`, outputs' records gather into one batch per partition,
        and held heartbeats are woken once, at the flush, with what the whole turn did."""
        self._deferring = True

    def flush(self) -> list[Reply]:
        """Append what gathered since `defer_appends`, one batch per offsets partition, and
        let the replies that waited for it wait for its end instead."""
        replies: list[Reply] = []
        wall_ms = self._wall_ms()
        for index in sorted(self._deferred_wakes):  # their records join the turn's batch
            led = self._led.get(index)  # None: unloaded during the turn, its requests answered
            if led is not None:
                replies += self._carry_out(index, led.coordinator.wake_deferred(wall_ms),
                                           wall_ms)
        self._deferred_wakes.clear()
        self._deferring = False
        while self._pending:
            index, records = self._pending.popitem()
            replies += self._append_now(index, records, wall_ms)
            led = self._led.get(index)
            if led is None:  # a failed append, and no leadership to reload: all answered
                continue
            for waiting in self._waiting:
                waiting.until = [(p, led.last_written if p == index and offset == UNFLUSHED
                                  else offset) for p, offset in waiting.until]
        return replies + self.release()

    def _append_records(self, index: int, out: Output, wall_ms: int) -> list[Reply]:
        if not out.records:
            return []
        if self._deferring:
            self._pending.setdefault(index, []).extend(out.records)
            return []
        return self._append_now(index, out.records, wall_ms)

    def _append_now(self, index: int, out_records: list[OffsetsRecord],
                    wall_ms: int) -> list[Reply]:
        led = self._led[index]
        records = []
        for record in latest_commits_only(out_records):
            key, value = encode_record(record)
            records.append(NewRecord(value, key, record.headers))
        batch = build_batch(records, base_timestamp_ms=wall_ms)
        tp = TopicPartition(OFFSETS_TOPIC, index)
        outcome, replies = self._append(tp, batch)
        if outcome.error_code != ErrorCode.NONE:
            log.warning("offsets partition %d: append failed (%s); reloading", index,
                        outcome.error_message)
            replies += self._unload(index)
            partition = self._partitions.get(tp)
            if partition is not None and partition.is_leader and not self._lease_lapsed:
                replies += self._load(index, partition)
            return replies
        led.last_written = outcome.required_offset
        return replies

    def release(self) -> list[Reply]:
        """The replies whose writes the high watermark now covers. Between `defer_appends`
        and `flush` none can be: the turn's records are not appended yet, and `flush` looks
        (one pass over the waiting replies per turn, not one per request)."""
        if not self._waiting or self._deferring:
            return []
        high_watermarks: dict[int, int] = {}  # each partition's, looked up once per call
        replies: list[Reply] = []
        kept: list[_Waiting] = []
        for waiting in self._waiting:
            for index, offset in waiting.until:
                high_watermark = high_watermarks.get(index)
                if high_watermark is None:
                    high_watermark = high_watermarks[index] = self._high_watermark(index)
                if high_watermark < offset:
                    kept.append(waiting)
                    break
            else:
                replies.append((waiting.identity, encode_response(waiting.header,
                                                                  waiting.response)))
        self._waiting = kept
        return replies

    def _high_watermark(self, index: int) -> int:
        partition = self._partitions.get(TopicPartition(OFFSETS_TOPIC, index))
        return -1 if partition is None else partition.high_watermark

    # ------------------------------------------------------------------ timers

    def on_timer(self) -> list[Reply]:
        wall_ms = self._wall_ms()
        replies = self.check_lease()
        for index, retry in sorted(self._load_retries.items()):
            partition = self._partitions.get(TopicPartition(OFFSETS_TOPIC, index))
            if retry.due_ms <= wall_ms and partition is not None and partition.is_leader:
                replies += self._load(index, partition)
        for index, led in sorted(self._led.items()):
            deadline = led.coordinator.next_deadline_ms()
            if deadline is not None and deadline <= wall_ms:
                replies += self._carry_out(index, led.coordinator.advance(wall_ms), wall_ms)
        return replies + self.release()

    def group_sizes(self) -> Iterator[tuple[str, int]]:
        """Each group coordinated here, with its members (the worker's metrics)."""
        for led in self._led.values():
            for group_id, group in led.coordinator.groups.items():
                yield group_id, len(group.members)

    def committed_offsets(self) -> Iterator[tuple[str, TopicPartition, int]]:
        """Each committed offset of the groups coordinated here (the worker's metrics)."""
        for led in self._led.values():
            for group_id, offsets in led.coordinator.offsets.committed.items():
                for tp, value in offsets.items():
                    yield group_id, tp, value.offset

    def ms_to_next_timer(self) -> int | None:
        deadlines = [d for led in self._led.values()
                     if (d := led.coordinator.next_deadline_ms()) is not None]
        deadlines += [retry.due_ms for retry in self._load_retries.values()]
        wait_ms = None if not deadlines else max(min(deadlines) - self._wall_ms(), 0)
        lease_ms = self._lease_remaining_ms() if self._led else None
        if lease_ms is not None and (wait_ms is None or lease_ms < wait_ms):
            return max(lease_ms, 0)  # wake when it runs out, to drop the coordinators
        return wait_ms


def _log_records(partition: Partition, offset: int,
                 ) -> Iterator[tuple[Buffer, Buffer | None, tuple[tuple[str, bytes], ...]]]:
    """Every record of the partition's log from `offset` (a batch's start) to its end (not
    only to the HW: the new leader's log is the partition's future)."""
    end = partition.log.log_end_offset
    while offset < end:
        chunks = partition.log.read(offset, LOAD_READ_BYTES, None)
        if not chunks:
            raise ZlogError(ErrorCode.CORRUPT_MESSAGE, f"no batch holds offset {offset}")
        for chunk in chunks:
            position = 0
            while position < chunk.nbytes:
                header = read_header(chunk, position)
                for record in read_records(chunk[position:position + header.size_bytes]):
                    if record.key is None:
                        raise ZlogError(ErrorCode.CORRUPT_MESSAGE,
                                        f"offsets record at {record.offset} has no key")
                    yield record.key, record.value, tuple(
                        (name, value or b"") for name, value in record.headers)
                position += header.size_bytes
                offset = header.last_offset + 1


def _merged(request: ListGroupsRequestV0 | DescribeGroupsRequestV0 | DeleteGroupsRequestV0,
            parts: list[GroupResponse]) -> GroupResponse:
    if isinstance(request, ListGroupsRequestV0):
        lists = [p for p in parts if isinstance(p, ListGroupsResponseV0)]
        error = next((p.error_code for p in lists if p.error_code != ErrorCode.NONE),
                     ErrorCode.NONE)
        return ListGroupsResponseV0(error, tuple(g for p in lists for g in p.groups))
    if isinstance(request, DescribeGroupsRequestV0):
        found: dict[str, GroupDescription] = {
            g.group_id: g for p in parts if isinstance(p, DescribeGroupsResponseV0)
            for g in p.groups}
        return DescribeGroupsResponseV0(tuple(found[g] for g in request.group_ids))
    results = {g: code for p in parts if isinstance(p, DeleteGroupsResponseV0)
               for g, code in p.results}
    return DeleteGroupsResponseV0(tuple(DeletedGroup(g, results[g]) for g in request.group_ids))


def _not_coordinator(identity: bytes, header: RequestHeader,
                     request: GroupRequest | None = None) -> Reply:
    """NOT_COORDINATOR in the request's own response type (the client rediscovers)."""
    if request is None:
        return identity, encode_error_response(header, ErrorCode.NOT_COORDINATOR,
                                               "this worker no longer coordinates the group")
    return identity, encode_response(header, error_response(
        request, ErrorCode.NOT_COORDINATOR, "this worker does not coordinate the group"))
