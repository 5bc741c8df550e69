"""zlog.Consumer: reads assigned partitions from their leaders, Kafka's consumer model.

Poll-driven, no background thread: everything happens inside `poll` on the caller's thread,
so a Consumer belongs to one thread (as Kafka's does). To keep the network busy while the
caller works, `poll` sends the next fetch for every partition before it returns records
(pipelining); the answer waits in the socket for the next `poll`.

Subscriptions (`fetch_push=True`, the default): the fetch a consumer sends is a Fetch v2, which
the leader's worker answers as a fetch and then keeps: each time more becomes readable it sends
the next batches on the same request, with no request per batch (docs/protocol.md, "Fetch v2").
Flow control is the fetch's own bound: a subscription sends at most `fetch_max_bytes` in all
and then ends, and the consumer subscribes again once it has handed out what it holds, so what
it buffers stays bounded as with one fetch at a time. A seek, a reset or an unassigned partition
cancels the subscriptions to that worker (a Fetch v2 with no entries); what they still send is
dropped, and the partitions they covered are subscribed again from their positions.

Positions: each assigned partition has a position, the offset of the next record `poll` will
return. A partition without one (just assigned, or after seek_to_beginning/seek_to_end, or
after OFFSET_OUT_OF_RANGE) gets it from ListOffsets per `auto_offset_reset` ("earliest": log
start, "latest": the high watermark; "none": raise). Fetches return whole batches, so records
below the position are skipped (fetch_buffer).

Local reads (`local=True`, zlog.client.local_reads): a partition whose leader runs on this host
is read straight from the leader's shared-memory ring (zlog.client.local_ring): no socket, no
request; the batches are copied out of the mapping and decoded, or with `local_zero_copy=True`
decoded in place, so that the views `poll_batches` returns point into shared memory. Zero-copy
views stay whole until the leader reclaims their ring space (about a ring's capacity of appends
later); `views_intact()` after using them says whether they still were, the seqlock discipline
of Aeron and Chronicle readers. A partition falls back to network fetches while its ring is not
on this host, while the position is below the ring's tail (older data lives only in the segment
files; the consumer comes back to the ring once it has caught up) or past its end. Waiting for
new records spins on the ring heads for up to `local_spin_us` (a core's worth of CPU for the
lowest latency; a few recent waits' worth, and none on a machine without a core to spare),
then sleeps in tiny growing steps on the leaders' doorbells, which an append rings
(docs/local-path.md).

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
(zlog.client.group.membership) and `poll` applies each change on the caller's thread
(zlog.client.group.poll_thread): revoked partitions stop at once and go to `on_revoke`, then
are committed (with auto commit), and gained ones are fetched from their committed offsets
(`auto_offset_reset` where there is none), `on_assign` first. Those round trips go from the
membership's coordinator thread, so the partitions kept meanwhile never wait for them; the
revocation is reported once its commit is answered. Auto commit commits the positions every
`auto_commit_interval_ms` at the start of a poll (without waiting for the answer), on a
revocation and in `close`, which waits for the commits and then leaves the group at once.
Without `subscribe` a consumer reads what it `assign`s, as before; with a `group_id` it may
still `commit` (as a simple member).

This module is the fetch engine: positions, pending resets, fetches in flight, buffers and
backoffs are a single per-partition state that every path on the caller's thread reads and
moves. The rings (local_reads.py) and the group's work on the poll thread
(group/poll_thread.py) are kept beside it, each handed what it reads and moves of that state:
a ring read comes back to be applied here as a fetch answer is, and a rebalance moves the
assignment and positions through what the group's work was given.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Final, TypeVar

import zmq

from zlog.client.cluster import Connections
from zlog.client.fetch_buffer import PartitionBuffer, batches_from_chunk
from zlog.client.group.metadata_watch import METADATA_MAX_AGE_MS_DEFAULT
from zlog.client.group.poll_thread import GroupOnPollThread
from zlog.client.group.settings import (
    ASSIGNMENT_STRATEGY_DEFAULT,
    HEARTBEAT_INTERVAL_MS_CLASSIC_DEFAULT,
    GroupMetadata,
    GroupSettings,
    PartitionsCallback,
)
from zlog.client.group.wake import GroupWake
from zlog.client.local_reads import LOCAL_METADATA_MAX_AGE_MS_DEFAULT, LocalReads, local_policy
from zlog.client.records import ConsumerRecord
from zlog.client.retries import DefiniteError, Next, after_leader_error, retry_within
from zlog.clock import Clock, SystemClock
from zlog.errors import ErrorCode, ZlogError, for_code, prefixed_once
from zlog.record.arrays import BatchView
from zlog.record.header import next_offset_after
from zlog.transport.messages import (
    Request,
    Response,
)
from zlog.transport.messages.data import (
    FetchEntry,
    FetchRequestV0,
    FetchRequestV2,
    FetchResponseV0,
    FetchResponseV2,
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
    TopicPartition,
)

log = logging.getLogger("zlog.client.consumer")
T = TypeVar("T")

MAX_POLL_RECORDS_DEFAULT: Final = 500
_WAIT_SLICE_MS: Final = 100
_RESETS: Final = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP, "none": None}

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
        fetch_push: bool = True,
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
        policy = local_policy(local, ring_dir, client_rack, prefer_local_replica,
                              local_metadata_max_age_ms)
        if auto_offset_reset not in _RESETS:
            raise ZlogError(ErrorCode.INVALID_CONFIG,
                            f"auto_offset_reset must be earliest, latest or none, "
                            f"not {auto_offset_reset!r}")
        self.auto_offset_reset = auto_offset_reset
        self.group_id = group_id
        group_settings = GroupSettings.checked(
            group_id, group_protocol=group_protocol, enable_auto_commit=enable_auto_commit,
            auto_commit_interval_ms=auto_commit_interval_ms,
            session_timeout_ms=session_timeout_ms, max_poll_interval_ms=max_poll_interval_ms,
            group_instance_id=group_instance_id, client_id=client_id,
            partition_assignment_strategy=partition_assignment_strategy,
            heartbeat_interval_ms=heartbeat_interval_ms)
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
        self.fetch_push = fetch_push
        self._subscriptions: set[tuple[str, int]] = set()  # the keys of _fetching that stay
        self._fetch_requests = 0
        self._fetch_answers = 0
        # The poll set `_receive` waits on, kept while the endpoints and connections are those
        # it was built for: building one costs more than a small fetch's answer.
        self._wait_poller: tuple[tuple[object, ...], zmq.Poller] | None = None
        self._backoff_until_ms: dict[TopicPartition, int] = {}
        self._next_start = 0  # round-robin over partitions between polls
        self.local = local
        self._local_reads = LocalReads(self._connections, policy, zero_copy=local_zero_copy,
                                       spin_us=local_spin_us,
                                       metadata_max_age_ms=local_metadata_max_age_ms)
        self._group = GroupOnPollThread(
            group_settings, bootstrap=bootstrap, connections=self._connections,
            clock=self._clock, request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms, metadata_max_age_ms=metadata_max_age_ms,
            positions=self._positions, assignment=lambda: self._assignment,
            set_assignment=self._set_assignment)
        self._closed = False

    @property
    def local_zero_copy(self) -> bool:
        return self._local_reads.zero_copy

    @property
    def local_metadata_max_age_ms(self) -> int:
        return self._local_reads.metadata_max_age_ms

    @property
    def ring_batches_read(self) -> int:
        """Batches this consumer took from local rings."""
        return self._local_reads.batches_read

    @property
    def _partition_fetch_bytes(self) -> int:
        """Bytes to ask of each partition: big for poll_batches, Kafka's size for poll."""
        return self.bulk_partition_fetch_bytes if self._bulk else self.max_partition_fetch_bytes

    # -- assignment and positions ---------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Read exactly these partitions (replaces the previous assignment)."""
        if self._group.subscribed:
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
        self._stop_fetching(key)

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
            self._stop_fetching(tp)

    def metrics(self) -> dict[str, int]:
        """Counters since this consumer was made, as Kafka's consumers keep them:
        `fetch_requests` sent and `fetch_answers` taken in (a subscription's many answers
        come for one request)."""
        return {"fetch_requests": self._fetch_requests, "fetch_answers": self._fetch_answers}

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
        self._group.subscribe(topics, pattern, on_assign, on_revoke, on_lost)

    def commit(self, offsets: Mapping[TopicPartition | tuple[str, int], int] | None = None,
               ) -> None:
        """Commit `offsets` (the next offset to read per partition), by default the position
        of every assigned partition; waits for the coordinator. Retriable errors are retried
        within request_timeout_ms; a refusal raises its Kafka code."""
        self._group.commit(offsets)

    def commit_async(self, offsets: Mapping[TopicPartition | tuple[str, int], int] | None = None,
                     ) -> Future[None]:
        """`commit` from another thread (its own connections), in order; the Future holds the
        outcome. A member commits from its coordinator thread, in order with the commits of
        the partitions it gives up."""
        return self._group.commit_async(offsets)

    def committed(self, partitions: Iterable[TopicPartition | tuple[str, int]] | None = None,
                  ) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None: none committed); by
        default of the assigned partitions."""
        return self._group.committed(partitions)

    def group_metadata(self) -> GroupMetadata:
        """This consumer's place in its group, as its commits carry it."""
        return self._group.metadata()

    # -- polling --------------------------------------------------------------------------

    def poll(self, timeout_ms: int = 0, max_records: int = MAX_POLL_RECORDS_DEFAULT) -> (
        list[ConsumerRecord]
    ):
        """Records at the positions, waiting up to timeout_ms for some to arrive."""
        assert max_records > 0
        self._bulk = False
        self._group.at_poll_start()
        deadline_ms = self._clock.monotonic_ms() + max(timeout_ms, 0)
        while True:
            self._group.work_in_poll()
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
        self._group.at_poll_start()
        deadline_ms = self._clock.monotonic_ms() + max(timeout_ms, 0)
        while True:
            self._group.work_in_poll()
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
            if self.local and (self._fill_from_rings() or self._local_reads.open):
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

    def local_ring_path(self, tp: TopicPartition | tuple[str, int]) -> Path | None:
        """The ring file `tp` is read from right now (a leader's or, with follower reads, an
        in-sync follower's), or None while it is fetched over the network."""
        key = self._assigned(tp)
        return self._local_reads.ring_path(key, self._positions[key])

    def _served_locally(self, tp: TopicPartition) -> bool:
        return self.local and self._local_reads.serves(tp, self._positions[tp])

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
            position = self._positions[tp]
            if position is None:
                continue
            read = self._local_reads.read(tp, position, self._partition_fetch_bytes,
                                          check_crc=self.check_crcs)
            if read is None:
                continue  # not in the ring: _send_fetches asks the network
            if read.high_watermark is not None:
                self._high_watermarks[tp] = read.high_watermark
            if read.views:
                self._buffers[tp].add(read.views)
                got_any = True
            elif read.next_offset != position:
                self._positions[tp] = read.next_offset  # only control batches were read
        return got_any

    def _wait_local(self, deadline_ms: int) -> bool:
        """Poll the rings (and any network fetches of partitions they cannot serve) until
        records arrive or the deadline passes; bounded adaptive backoff between attempts."""
        backoff = self._local_reads.backoff
        backoff.reset()
        while True:
            if any(self._buffers[tp] for tp in self._assignment):
                return True
            self._send_fetches()
            if self._fetching:
                self._receive(0)
            if any(self._buffers[tp] for tp in self._assignment) or self._fill_from_rings() \
                    or self._group.work_due():
                return True
            remaining_ms = deadline_ms - self._clock.monotonic_ms()
            if remaining_ms <= 0:
                return False
            backoff.wait(remaining_ms / 1000, self._local_reads.news(self._positions))

    def _note_handed_out(self) -> None:
        """Remember where the zero-copy views just returned start, for views_intact()."""
        self._local_reads.note_handed_out(self._buffers)

    def views_intact(self) -> bool:
        """Whether every zero-copy view the last poll returned is still whole in shared memory.

        Call it after using the views: False means the leader reclaimed some of that ring space
        meanwhile, so what was made of those views must be thrown away and the records read
        again (seek back; they come from the segment files). Always True without zero copy.
        """
        return self._local_reads.views_intact()

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
            fetch = FetchRequestV2 if self.fetch_push else FetchRequestV0
            request = fetch(
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
                self._fetch_requests += 1
            except ZlogError as error:  # its connection failed: those partitions back off
                for tp in asked:
                    self._on_partition_error(tp, error, now_ms)
                continue
            self._fetching[(endpoint, correlation_id)] = asked
            if self.fetch_push:
                self._subscriptions.add((endpoint, correlation_id))

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
            if got_any or remaining_ms <= 0 or self._group.work_due():
                return
            # Bounded so that request deadlines are checked (poll_responses expires them).
            wait_ms = min(remaining_ms, _WAIT_SLICE_MS)
            if not endpoints:
                self._group.idle_wait(min(wait_ms, self.retry_backoff_ms) / 1000)
                self._send_fetches()  # a backoff may have ended
                continue
            wake = self._group.wake
            ready = self._poller_for(endpoints, wake).poll(wait_ms)
            if wake is not None and any(fd == wake.fileno for fd, _ in ready):
                wake.drain()  # only when woken: a receive on an empty socket raises

    def _poller_for(self, endpoints: list[str], wake: GroupWake | None) -> zmq.Poller:
        """The poll set over these endpoints' sockets and the group's wake-up pipe."""
        key = (*endpoints, self._connections.generation, wake)
        if self._wait_poller is not None and self._wait_poller[0] == key:
            return self._wait_poller[1]
        poller = zmq.Poller()
        for endpoint in endpoints:
            for sock in self._connections.client(endpoint).sockets:
                poller.register(sock, zmq.POLLIN)
        if wake is not None:
            poller.register(wake.reader, zmq.POLLIN)
        self._wait_poller = (key, poller)
        return poller

    def _on_fetch_result(self, endpoint: str, result: RpcResult) -> None:
        key = (endpoint, result.correlation_id)
        asked = self._fetching.get(key)
        if asked is None:
            return
        self._fetch_answers += 1
        response = result.response
        staying = isinstance(response, FetchResponseV2) and response.more
        if not staying:
            del self._fetching[key]
            self._subscriptions.discard(key)
        now_ms = self._clock.monotonic_ms()
        if result.error is not None:
            for tp in asked:
                self._on_partition_error(tp, result.error, now_ms)
            return
        assert isinstance(response, FetchResponseV0 | FetchResponseV2)
        subscribed = isinstance(result.request, FetchRequestV2)
        for entry in response.entries:
            tp = TopicPartition(entry.topic, entry.partition)
            if tp not in asked:
                continue
            # A subscription's answers continue where its last one ended (a seek cancels it);
            # a single fetch's answer is used only if the position is still the one asked.
            stale = (tp not in self._buffers) if subscribed else (
                self._positions.get(tp) != asked[tp])
            if stale:
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
            if staying:
                asked[tp] = next_offset_after(entry.chunks, asked[tp])

    def _stop_fetching(self, tp: TopicPartition) -> None:
        """`tp` moved or left: the subscriptions covering it stop. One request cancels every
        subscription to a worker, so all of those are forgotten and their other partitions
        are subscribed again by the next fetches."""
        endpoints = {endpoint for (endpoint, cid) in self._subscriptions
                     if tp in self._fetching[(endpoint, cid)]}
        for endpoint in endpoints:
            self._cancel_subscriptions(endpoint)

    def _cancel_subscriptions(self, endpoint: str) -> None:
        rpc = self._connections.client(endpoint)
        for key in [key for key in self._subscriptions if key[0] == endpoint]:
            self._subscriptions.discard(key)
            del self._fetching[key]
            rpc.forget(key[1])
        with contextlib.suppress(ZlogError):  # a lost connection took them with it anyway
            rpc.send(FetchRequestV2(CONSUMER_REPLICA_ID, 0, 0, 0, ()), self.request_timeout_ms)

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
            self._local_reads.expire_metadata(topics, self._clock.monotonic_ms())
        # A partition past the known count may be new (CreatePartitions): ask again first.
        grown = {tp.topic for tp in self._assignment if tp.topic in topics
                 and tp.partition >= (metadata.partition_count(tp.topic) or tp.partition + 1)}
        missing = sorted({t for t in topics if metadata.topic(t) is None} | grown)
        if missing:
            errors = self._connections.refresh(missing, self.request_timeout_ms)
            now_ms = self._clock.monotonic_ms()
            self._local_reads.metadata_fetched(missing, now_ms)
            if self.local:
                self._local_reads.learn_ring_dirs(now_ms)
            for error in errors.values():
                if not error.retriable:  # the control plane's "no such topic" among them
                    raise error
        for tp in self._assignment:
            count = metadata.partition_count(tp.topic)
            if tp.topic in topics and count is not None and not 0 <= tp.partition < count:
                raise DefiniteError(ZlogError(  # the count was asked again just now
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"topic {tp.topic!r} has partitions 0..{count - 1}, not {tp.partition}"))

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
        self._stop_fetching(tp)
        self._positions.pop(tp, None)
        self._pending_resets.pop(tp, None)
        self._buffers.pop(tp, None)
        self._high_watermarks.pop(tp, None)
        self._backoff_until_ms.pop(tp, None)
        self._local_reads.forget(tp)

    def close(self) -> None:
        """Commit (with auto commit), hand the partitions to on_revoke, leave the group."""
        if not self._closed:
            try:
                self._group.leave()
            finally:
                self._close_connections()

    def _close_connections(self) -> None:
        if not self._closed:
            for endpoint in {endpoint for endpoint, _ in self._subscriptions}:
                self._cancel_subscriptions(endpoint)  # the worker need not wait out their time
            self._closed = True
            self._group.close()
            self._local_reads.close()
            self._connections.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
