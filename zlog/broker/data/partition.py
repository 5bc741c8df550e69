"""One partition's data-path decisions: what a produce appends, what a fetch may see.

The rules, Kafka's (DESIGN.md section 1, docs/reliability.md §3):

* The **high watermark** (HW) is the smallest log end offset over the in-sync replicas (ISR),
  and never moves back while this replica leads. With one replica it is the log end.
* **Consumers** (replica id < 0) never read at or above the HW; **followers** (replica ids of
  this partition's replicas) read up to the log end and report their position by fetching.
* **acks**: 0 and 1 are answered once the leader appended; -1 (all) is answered once the HW
  covers the batches, and is refused with NOT_ENOUGH_REPLICAS, appending nothing, while the
  ISR is smaller than `min.insync.replicas`.
* **Idempotent producers**: `producer_state` decides each batch before it is appended.
* **compression.type**: a topic that names a codec stores every batch in it; a batch that came
  in another codec is re-encoded before the append (Kafka's rule). With "producer" (the
  default) batches are stored as sent and nothing is re-encoded.
* An error in one batch of an entry fails it and every later batch of that entry; earlier ones
  stay appended (as in Kafka), and the caller still hears how many bytes went in so that long
  polls wake.

Pure: the log is anything with `PartitionLog`'s read/append surface (`LogLike`), so the rules are
tested over an in-memory log; time never enters here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from zlog import limits
from zlog.broker.data.epoch_cache import UNDEFINED, LeaderEpochCache
from zlog.broker.data.fetch_waiters import EntryRead
from zlog.broker.data.isr import HighWatermark, IsrChange, ReplicaSet
from zlog.broker.data.producer_state import ProducerBatch, ProducerStateTable
from zlog.broker.data.recent_batches import RecentBatches
from zlog.errors import CorruptSegmentError, ErrorCode, ZlogError
from zlog.record.arrays import WALK_BELOW_RECORDS, parse_batch
from zlog.record.compression import recompress, uncompressed_records
from zlog.record.header import (
    BatchHeader,
    Buffer,
    Compression,
    size_bytes_at,
    stamp,
    validate_batch,
    verify_crc,
)
from zlog.record.small import walk_records
from zlog.types import (
    ACKS_ALL,
    DELETE_TO_HIGH_WATERMARK,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NO_TIMESTAMP,
    NO_TOPIC_ID,
)

VALID_ACKS: Final = frozenset({0, 1, ACKS_ALL})
_READ_ALL_BYTES: Final = 2**31 - 1


class LogLike(Protocol):
    """The part of `shm_segments.log.PartitionLog` the partition rules use."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def segment_count(self) -> int: ...

    def append(
        self, batch: Buffer, *, leader_epoch: int = -1, header: BatchHeader | None = None
    ) -> int: ...

    def append_replicated(self, batch: Buffer, *, defer_flush: bool = False) -> int: ...

    def tick(self) -> None: ...

    def truncate_to(self, offset: int) -> None: ...

    def publish_high_watermark(self, offset: int) -> None: ...

    def truncate_fully_and_start_at(self, offset: int) -> None: ...

    def delete_records_before(self, offset: int) -> int: ...

    def read(
        self, offset: int, max_bytes: int, upto_offset: int | None = None
    ) -> list[memoryview]: ...

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None: ...

    def max_timestamp_record(self, upto_offset: int) -> tuple[int, int] | None: ...


@dataclass(frozen=True, slots=True)
class ProduceOutcome:
    """The answer for one (topic, partition) entry of a produce request."""

    error_code: ErrorCode
    base_offset: int  # the first batch's base offset; -1 on error
    log_start_offset: int
    error_message: str = ""
    required_offset: int = -1  # acks=all is answered once the HW reaches this offset
    appended_bytes: int = 0  # bytes appended (even when a later batch failed)
    committed_bytes: int = 0  # bytes that became visible to consumers (the HW moved over them)


class Partition:
    """One partition led (or followed) by this worker: single-threaded, no locks."""

    def __init__(
        self,
        topic: str,
        partition: int,
        log: LogLike,
        *,
        leader_epoch: int,
        is_leader: bool = True,
        replicas: ReplicaSet | None = None,
        compacted: bool = False,
        producers: ProducerStateTable | None = None,
        timestamp_difference_max_ms: int = -1,
        compression: Compression | None = None,
        epochs: LeaderEpochCache | None = None,
        save_epochs: Callable[[LeaderEpochCache], None] | None = None,
        recovered_high_watermark: int = -1,
    ) -> None:
        """`recovered_high_watermark`: the HW an earlier process of this replica published
        (the ring header's, else the HW checkpoint's; -1: none), where a reopened replica
        starts, capped by its log end, instead of at its log start."""
        assert partition >= 0 and topic
        self.topic, self.partition = topic, partition
        self.topic_id = NO_TOPIC_ID  # set by its host (KIP-516): a fetch naming another is refused
        self.log = log
        self.leader_epoch = leader_epoch
        self.is_leader = is_leader
        self.compacted = compacted
        self.deletes = True  # cleanup.policy includes delete: DeleteRecords may go here
        self.producers = producers or ProducerStateTable()
        self.timestamp_difference_max_ms = timestamp_difference_max_ms  # -1: not checked
        self.compression = compression  # the topic's codec; None: keep the producer's
        # Consumers at the tail read these instead of the log. Not for compacted topics: the
        # compactor rewrites sealed segments behind this thread's back.
        self._recent: RecentBatches | None = None if compacted else RecentBatches()
        # Where each leader epoch starts in this log (KIP-101), kept on disk by `save_epochs`
        # before a batch of a new epoch is appended.
        self.epochs = epochs if epochs is not None else LeaderEpochCache()
        self._save_epochs = save_epochs or (lambda cache: None)
        if is_leader:
            self._note_epoch(leader_epoch, log.log_end_offset)
        # The HW starts where this replica's last process left it, never above the log end: a
        # follower then takes its leader's, a leader computes its own from its term's start.
        start_value = max(log.log_start_offset,
                          min(recovered_high_watermark, log.log_end_offset))
        self._hw = HighWatermark(replicas or ReplicaSet.single(), value=start_value,
                                 epoch_start_offset=self.epoch_start_offset)
        self._published_high_watermark = -1
        self._publish_high_watermark()
        # Why the last produce could not be stored (a full disk), until an append succeeds or
        # the role changes: while set, the leader resigns (isr_proposals.py).
        self.storage_error: ZlogError | None = None
        # The first offset of a batch found corrupt: a follower cuts its log there and fetches
        # the rest again (`cut_corrupt`); a leader first hands the partition over.
        self.corrupt_from: int | None = None

    # ------------------------------------------------------------------ replicas and HW

    @property
    def high_watermark(self) -> int:
        return self._hw.value

    @property
    def client_high_watermark(self) -> int:
        """The HW a client is shown (a consumer's fetch, ListOffsets): -1 while this new
        leader's HW is below the start of its epoch, where it may lie below a HW an earlier
        leader showed (isr.py); Kafka's clients keep the HW they had on a fetch answer's -1."""
        return self._hw.value if self._hw.shown_to_clients else -1

    @property
    def epoch_start_offset(self) -> int:
        """Where the current leader epoch starts in this log, as the epoch cache keeps it (so
        a new process of the same leader keeps it); the log end when the cache has no entry
        for it."""
        start = self.epochs.start_of(self.leader_epoch)
        return self.log.log_end_offset if start == UNDEFINED else start

    @property
    def replicas(self) -> ReplicaSet:
        return self._hw.replicas

    @property
    def isr_tracker(self) -> HighWatermark:
        """The leader's view of its followers (isr.py); the replication code reads it."""
        return self._hw

    def become(
        self, *, leader_epoch: int, is_leader: bool, replicas: ReplicaSet | None = None,
        now_ms: int = 0,
    ) -> int:
        """A new assignment of the same partition: a newer epoch, a change of role, or a
        committed ISR change. Returns the bytes that became visible to consumers.

        A replica that takes leadership (or a new leader epoch) records where its epoch starts
        before it appends anything in it (KAFKA-7415), and starts a term: followers' positions
        are unknown until they fetch (isr.py).
        """
        if leader_epoch < self.leader_epoch:
            raise ZlogError(
                ErrorCode.FENCED_LEADER_EPOCH,
                f"{self.topic}-{self.partition}: epoch {leader_epoch} is older than the "
                f"current epoch {self.leader_epoch}",
            )
        new_term = leader_epoch != self.leader_epoch or is_leader != self.is_leader
        self.leader_epoch, self.is_leader = leader_epoch, is_leader
        if replicas is not None:
            self._hw.set_replicas(replicas)
        if new_term:
            self.storage_error = None
            if self._recent is not None:
                self._recent.clear()
            if is_leader:
                self._note_epoch(leader_epoch, self.log.log_end_offset)
                self._hw.start_term(now_ms, self.epoch_start_offset)
        return self._advance_high_watermark() if is_leader else 0

    def start_term(self, now_ms: int, stored_isr_change: IsrChange | None = None) -> bool:
        """A leader opened by a new process starts a term at its epoch's start: followers'
        positions are unknown until they fetch (isr.py). `stored_isr_change` is the ISR
        change its predecessor had sent (isr_proposals.py): computed from this leader epoch
        and record, it is pending again before the HW is computed (the controller may commit
        it yet, so its new member counts from now). Whether it was taken back (False: none,
        or a stale one, to be forgotten)."""
        tracker = self._hw
        tracker.start_term(now_ms, self.epoch_start_offset)
        change = stored_isr_change
        if change is not None and (
                not self.is_leader or change.leader_epoch != self.leader_epoch
                or change.partition_epoch != tracker.replicas.partition_epoch):
            change = None
        if change is not None:
            tracker.propose(frozenset(change.new_isr), now_ms)
        self._advance_high_watermark()
        return change is not None

    def _note_epoch(self, epoch: int, start_offset: int) -> None:
        """Record (and keep on disk) that `epoch` starts at `start_offset`."""
        if epoch >= 0 and self.epochs.assign(epoch, start_offset):
            self._save_epochs(self.epochs)

    def set_compacted(self, compacted: bool) -> None:
        """cleanup.policy changed on the open partition: recent batches are kept only for a
        log the compactor never rewrites, so they go when compaction starts."""
        self.compacted = compacted
        if compacted:
            self._recent = None
        elif self._recent is None:
            self._recent = RecentBatches()

    def set_replicas(self, replicas: ReplicaSet) -> int:
        """A committed ISR change; returns the bytes that became visible to consumers."""
        self._hw.set_replicas(replicas)
        return self._advance_high_watermark()

    def refresh_high_watermark(self) -> int:
        """A leader's HW computed again (after an ISR check stopped waiting for a follower
        outside the ISR, isr.py); the bytes that became visible to consumers."""
        return self._advance_high_watermark() if self.is_leader else 0

    def note_replica_fetch(
        self, replica_id: int, fetch_offset: int, now_ms: int, broker_epoch: int, *,
        log_start_offset: int,
    ) -> int:
        """A follower's Fetch v1 at `fetch_offset` (isr.py's rules, with the time and the
        broker epoch it fetched with, and its own log start); the bytes that became visible
        to consumers."""
        self._hw.note_follower(replica_id, fetch_offset, self.log.log_start_offset,
                               self.log.log_end_offset, now_ms=now_ms,
                               broker_epoch=broker_epoch,
                               follower_log_start_offset=log_start_offset)
        return self._advance_high_watermark()

    # ------------------------------------------------------------------ as a follower

    def append_from_leader(
        self, batch: Buffer, header: BatchHeader, *, defer_flush: bool = False
    ) -> None:
        """Store one batch as the leader wrote it (its offsets and epoch): a follower's append.

        A batch of an epoch newer than any in the log first records where that epoch starts,
        on disk, so the epoch cache never lags the log. Producer state learns the batch without
        checking sequences (the leader did), so a future leader recognises retries.
        `defer_flush`: the batch stays in the ring until the log's `tick` (see the log's
        `append_replicated`).
        """
        assert not self.is_leader, "a leader appends through produce()"
        epoch = header.partition_leader_epoch
        if epoch > self.epochs.latest_epoch:
            self._note_epoch(epoch, header.base_offset)
        self.log.append_replicated(batch, defer_flush=defer_flush)
        if header.producer_id >= 0:
            self.producers.observe(ProducerBatch.from_header(header), header.base_offset)

    def follow_high_watermark(self, leader_high_watermark: int) -> None:
        self._hw.follow(leader_high_watermark, self.log.log_end_offset)
        self._publish_high_watermark()

    def start_over_at(self, offset: int) -> None:
        """Drop the whole log: it restarts empty at `offset` (a follower below its leader's
        log start, which retention moved past it)."""
        self.log.truncate_fully_and_start_at(offset)
        self.epochs.clear()
        self._save_epochs(self.epochs)
        self.producers = ProducerStateTable()
        self._hw.value = offset
        self._publish_high_watermark()
        if self._recent is not None:
            self._recent.clear()

    def follow_log_start(self, leader_log_start_offset: int) -> bool:
        """A follower's log start follows its leader's, as a Kafka follower's does with each
        fetch answer, never past its own HW (what lies above may not be committed): what the
        leader deleted (DeleteRecords, retention) goes here too, so a replica that leads next
        never serves a record a client was told was gone. Whether it moved."""
        target = min(leader_log_start_offset, self._hw.value)
        if self.is_leader or target <= self.log.log_start_offset:
            return False
        self.log.delete_records_before(target)
        self.log_start_moved()
        return True

    def log_start_moved(self) -> None:
        """Retention moved the log start: the epoch holding it now starts there, in memory and
        on disk (Kafka's truncateFromStart), so the cache describes only the log there is."""
        if self.epochs.truncate_from_start(self.log.log_start_offset):
            self._save_epochs(self.epochs)

    def truncate_to(self, offset: int, producers: ProducerStateTable) -> None:
        """Cut the log at `offset` (whole batches), the epoch cache with it, and take the
        producer state rebuilt for what is left (the caller's, from the log)."""
        if offset < self.log.log_start_offset:
            self.log.truncate_fully_and_start_at(offset)
        else:
            self.log.truncate_to(offset)
        end = self.log.log_end_offset
        if self.epochs.truncate_from_end(end):
            self._save_epochs(self.epochs)
        self.producers = producers
        self._hw.value = min(self._hw.value, end)
        self._publish_high_watermark()
        if self._recent is not None:
            self._recent.clear()

    def note_corrupt(self, error: CorruptSegmentError) -> None:
        """A batch of this replica failed its CRC check: it is never served, the leader
        resigns, and as a follower the replica cuts its log there and fetches it again."""
        if self.corrupt_from is None or error.offset < self.corrupt_from:
            self.corrupt_from = error.offset

    @property
    def must_resign(self) -> bool:
        """Whether this replica should hand its leadership over: it cannot store what
        producers send, or holds a batch it must not serve."""
        return self.storage_error is not None or self.corrupt_from is not None

    def cut_corrupt(self, rebuild_producers: Callable[[], ProducerStateTable]) -> int | None:
        """A follower's cut at its first corrupt batch (the offset cut at, or None): every
        batch from there on is fetched again from the leader, whose copy is whole."""
        offset = self.corrupt_from
        if offset is None or self.is_leader:
            return None
        self.truncate_to(offset, ProducerStateTable())
        self.corrupt_from = None
        self.producers = rebuild_producers()  # from what is left, once the cut is made
        return offset

    def _advance_high_watermark(self) -> int:
        before, after = self._hw.advance(self.log.log_start_offset, self.log.log_end_offset)
        self._publish_high_watermark()
        return self._bytes_between(before, after) if after > before else 0

    def _publish_high_watermark(self) -> None:
        """Tell the log's local readers (the ring header) where committed records end, each
        time that moves: a consumer reading the ring on this host sees no more than a fetch."""
        value = self._hw.value
        if value != self._published_high_watermark:
            self._published_high_watermark = value
            self.log.publish_high_watermark(value)

    def _bytes_between(self, from_offset: int, to_offset: int) -> int:
        """Bytes of the batches in [from, to): views of the log, nothing is copied."""
        from_offset = max(from_offset, self.log.log_start_offset)
        if from_offset >= to_offset:
            return 0
        chunks = self.log.read(from_offset, _READ_ALL_BYTES, to_offset)
        return sum(chunk.nbytes for chunk in chunks)

    # ------------------------------------------------------------------ produce

    def produce(
        self, batches: Sequence[Buffer], acks: int, now_ms: int | None = None, *,
        built_here: bool = False,
    ) -> ProduceOutcome:
        """Append an entry's batches in order; the outcome says what to answer.

        `now_ms` (wall clock) is needed only when the topic bounds record timestamps.
        `built_here`: the batches are the worker's own (a group coordinator's records, built
        by `build_batch` with keys and the wall clock's timestamps), so the walk of their
        records that guards against a client's garbage is skipped: it was most of the cost
        of a coordinator's append.
        """
        assert acks in VALID_ACKS, acks
        start = self.log.log_start_offset
        refusal = self._refusal(batches, acks)
        if refusal is not None:
            return ProduceOutcome(refusal.code, -1, start, refusal.message)
        hw_before, end_before = self._hw.value, self.log.log_end_offset
        first_base_offset = required_offset = -1
        appended_bytes = 0
        failure: ZlogError | None = None
        for batch in batches:
            try:
                base_offset, next_offset, size_bytes = self._append_one(batch, now_ms,
                                                                        built_here)
            except ZlogError as error:
                failure = error
                break
            except OSError as error:
                failure = ZlogError(ErrorCode.KAFKA_STORAGE_ERROR, f"append failed: {error}")
                break
            if first_base_offset < 0:
                first_base_offset = base_offset
            required_offset = max(required_offset, next_offset)
            appended_bytes += size_bytes
        committed_bytes = self._committed_after_append(hw_before, end_before, appended_bytes)
        start = self.log.log_start_offset
        if failure is not None and failure.code == ErrorCode.KAFKA_STORAGE_ERROR:
            self.storage_error = failure
        elif appended_bytes:
            self.storage_error = None
        if failure is not None:
            return ProduceOutcome(
                failure.code, -1, start, failure.message, -1, appended_bytes, committed_bytes
            )
        return ProduceOutcome(
            ErrorCode.NONE, first_base_offset, start, "", required_offset, appended_bytes,
            committed_bytes,
        )

    def _refusal(self, batches: Sequence[Buffer], acks: int) -> ZlogError | None:
        """A reason to refuse the whole entry before anything is appended.

        The partition's name is formatted only for a refusal: this runs for every produce.
        """
        if not self.is_leader:
            return ZlogError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"this worker does not lead {self.topic}-{self.partition}")
        if self.corrupt_from is not None:  # its producer table may miss what it cannot read
            return ZlogError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"{self.topic}-{self.partition} holds a corrupt batch at offset "
                             f"{self.corrupt_from} and takes no writes until it hands over")
        if not batches:
            return ZlogError(ErrorCode.INVALID_REQUEST,
                             f"produce entry for {self.topic}-{self.partition} has no batch")
        replicas = self._hw.replicas
        if acks == ACKS_ALL and not replicas.enough_in_sync:
            in_sync, needed = len(replicas.isr), replicas.min_insync_replicas
            return ZlogError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"{self.topic}-{self.partition} has {in_sync} in-sync replicas; "
                f"min.insync.replicas is {needed}",
            )
        return None

    def _append_one(self, batch: Buffer, now_ms: int | None,
                    built_here: bool) -> tuple[int, int, int]:
        """Append (or deduplicate) one batch: (base offset, next offset, bytes appended)."""
        header = validate_batch(batch, strict=True, check_crc=False)
        if header.is_control:
            raise ZlogError(ErrorCode.INVALID_RECORD, "clients may not write control batches")
        if header.is_transactional:
            raise ZlogError(ErrorCode.INVALID_RECORD, "zlog does not support transactions")
        if not built_here:
            self._check_records(batch, header, now_ms)
        producer = ProducerBatch.from_header(header) if header.producer_id >= 0 else None
        if producer is not None:
            duplicate_offset = self.producers.check(producer)
            if duplicate_offset is not None:
                return duplicate_offset, duplicate_offset + header.last_offset_delta + 1, 0
        size_bytes = header.size_bytes
        checked: BatchHeader | None = header  # the log's append does not validate it again
        if self.compression is not None and header.compression != self.compression:
            verify_crc(batch)  # the new batch gets a new CRC: check the one that came in
            batch = recompress(batch, header, self.compression)
            size_bytes = len(batch)
            checked = None  # other bytes: the log validates their header
        segment_count = self.log.segment_count
        try:
            base_offset = self.log.append(batch, leader_epoch=self.leader_epoch, header=checked)
        except BaseException:
            if self._recent is not None:
                self._recent.clear()  # whatever the log holds now, it is not what was noted
            raise
        if producer is not None:
            self.producers.record(producer, base_offset)
        next_offset = base_offset + header.last_offset_delta + 1
        assert self.log.log_end_offset >= base_offset + header.record_count
        self._remember(batch, base_offset, next_offset, size_bytes, segment_count)
        return base_offset, next_offset, size_bytes

    def _remember(
        self, batch: Buffer, base_offset: int, next_offset: int, size_bytes: int,
        segment_count_before: int,
    ) -> None:
        """Keep the batch just appended as the log stored it (see `recent_batches`)."""
        recent = self._recent
        if recent is None:
            return
        if size_bytes > limits.RECENT_BATCHES_BYTES_MAX:
            recent.clear()
            return
        stored = bytearray(batch)
        stamp(stored, base_offset, self.leader_epoch)  # what the log stamps on its copy
        recent.note_appended(
            base_offset, next_offset, stored, (segment_count_before, self.log.segment_count)
        )

    def _check_records(self, batch: Buffer, header: BatchHeader, now_ms: int | None) -> None:
        """Decode every record's framing before storing, then apply the topic's record rules.

        A batch whose CRC is right but whose records are garbage would otherwise be stored and
        then fail every consumer that reaches it, forever (catalogue row 8). A wrong CRC keeps
        its own answer, CORRUPT_MESSAGE, even when the records also fail to parse; the CRC of
        a good batch is checked once, later, on the ring's cache-hot copy.

        Small batches (the low-rate latency path) are walked record by record straight from
        the header validated above, as `parse_batch` would walk them, minus the numpy arrays
        that only the two rules below would read; larger ones are parsed with that header, so
        no batch's header is validated twice here.
        """
        try:
            if header.record_count < WALK_BELOW_RECORDS:
                walked = walk_records(bytes(uncompressed_records(batch, header)), header)
                stamps = walked.timestamps_ms
                earliest = min(stamps)
                _check_not_negative(earliest)
                if self.timestamp_difference_max_ms >= 0 and now_ms is not None:
                    self._check_timestamps(earliest, max(stamps), now_ms)
                if self.compacted:
                    self._check_keys(min(walked.key_lengths))
                return
            parsed = parse_batch(batch, check_crc=False, header=header)
        except ZlogError:
            verify_crc(batch)
            raise
        stamps_array = parsed.timestamps_ms
        earliest = int(stamps_array.min())
        _check_not_negative(earliest)
        if self.timestamp_difference_max_ms >= 0 and now_ms is not None:
            self._check_timestamps(earliest, int(stamps_array.max()), now_ms)
        if self.compacted:
            self._check_keys(int(parsed.key_lengths.min()))

    def _check_timestamps(self, earliest: int, latest: int, now_ms: int) -> None:
        """message.timestamp.difference.max.ms: CreateTime may not be too far from now."""
        limit = self.timestamp_difference_max_ms
        if now_ms - earliest > limit or latest - now_ms > limit:
            raise ZlogError(
                ErrorCode.INVALID_TIMESTAMP,
                f"record timestamps [{earliest}, {latest}] are more than {limit} ms from the "
                f"broker's clock ({now_ms}); see message.timestamp.difference.max.ms",
            )

    @staticmethod
    def _check_keys(key_length_min: int) -> None:
        """A compacted topic keeps the last record per key, so every record needs one."""
        if key_length_min < 0:
            raise ZlogError(
                ErrorCode.INVALID_RECORD, "a compacted topic does not accept records without a key"
            )

    def _committed_after_append(
        self, hw_before: int, end_before: int, appended_bytes: int
    ) -> int:
        """Bytes now visible to consumers; free in the common case of a caught-up HW."""
        _before, after = self._hw.advance(self.log.log_start_offset, self.log.log_end_offset)
        if after == hw_before:
            return 0
        self._publish_high_watermark()
        if hw_before == end_before and after == self.log.log_end_offset:
            return appended_bytes  # exactly this entry's batches became visible
        return self._bytes_between(hw_before, after)

    def acks_status(self, required_offset: int) -> ErrorCode | None:
        """For an acks=all entry: its answer now, or None to keep waiting (isr.py)."""
        return self._hw.acks_status(required_offset, is_leader=self.is_leader)

    # ------------------------------------------------------------------ fetch

    def read(
        self, fetch_offset: int, limit_bytes: int, *, replica_id: int, at_least_one: bool
    ) -> EntryRead:
        """Whole batches from `fetch_offset`: below the HW for consumers, the log end for followers.

        Within `limit_bytes` unless `at_least_one`, which allows one larger batch. Errors are
        returned in the result (with the offsets filled in), never raised.
        """
        try:
            if not self.is_leader:
                raise ZlogError(
                    ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    f"this worker does not lead {self.topic}-{self.partition}",
                )
            chunks = None
            if replica_id < 0:
                if fetch_offset == self._hw.value:
                    caught_up = self._caught_up_read(fetch_offset)
                    if caught_up is not None:
                        return caught_up
                chunks = self._recent_read(fetch_offset, max(limit_bytes, 0))
            if chunks is None:
                upto_offset: int | None = self._hw.value
                if replica_id >= 0:
                    self._hw.check_follower(replica_id, self.topic, self.partition)
                    upto_offset = None
                chunks = self.log.read(fetch_offset, max(limit_bytes, 0), upto_offset)
        except CorruptSegmentError as error:
            self.note_corrupt(error)
            return self._read_error(error)
        except ZlogError as error:
            return self._read_error(error)
        if not at_least_one and sum(chunk.nbytes for chunk in chunks) > limit_bytes:
            chunks = []  # the one batch that would not fit; it goes in a later fetch
        shown = self._hw.value if replica_id >= 0 else self.client_high_watermark
        return EntryRead(ErrorCode.NONE, shown, self.log.log_start_offset, tuple(chunks))

    def _caught_up_read(self, fetch_offset: int) -> EntryRead | None:
        """A consumer at the high watermark has nothing to read: the log's answer, unasked.

        A consumer that keeps up fetches here after every batch it receives (and is parked),
        so the log's read is skipped where its answer is known to be empty.
        """
        log = self.log
        log_start_offset = log.log_start_offset
        if not log_start_offset <= fetch_offset <= log.log_end_offset:
            return None  # the log's read raises OFFSET_OUT_OF_RANGE; let it
        return EntryRead(ErrorCode.NONE, self.client_high_watermark, log_start_offset)

    def _recent_read(self, fetch_offset: int, max_bytes: int) -> list[memoryview] | None:
        """A consumer's read below the HW from the recent batches, or None: read the log."""
        recent = self._recent
        if recent is None or not recent:
            return None
        log = self.log
        if fetch_offset < log.log_start_offset:
            return None  # the log answers OFFSET_OUT_OF_RANGE
        return recent.read(
            fetch_offset, max_bytes, self._hw.value,
            log_end_offset=log.log_end_offset, segment_count=log.segment_count,
        )

    def _read_error(self, error: ZlogError) -> EntryRead:
        return EntryRead(
            error.code, self.client_high_watermark, self.log.log_start_offset, (), error.message
        )

    # ------------------------------------------------------------------ delete records

    @property
    def low_watermark(self) -> int:
        """The lowest log start of this leader and its in-sync followers (isr.py): what a
        DeleteRecords answer waits for."""
        return self._hw.low_watermark(self.log.log_start_offset)

    def delete_records(self, offset: int) -> int:
        """DeleteRecords on the leader: the log start moves up to `offset` (-1: the HW);
        returns the offset it moved to (the HW for -1), which the answer waits for every
        in-sync follower's log start to reach (`low_watermark`). Never past the HW (Kafka's
        `deleteRecordsOnLeader`): a record above it may not be on every in-sync replica, and
        a follower's log start follows the leader's only up to its own HW. Refused, nothing
        deleted: not the leader (NOT_LEADER_OR_FOLLOWER), a negative offset other than -1 or
        one above the HW (OFFSET_OUT_OF_RANGE), a topic whose cleanup.policy has no delete
        (POLICY_VIOLATION)."""
        where = f"{self.topic}-{self.partition}"
        if not self.is_leader:
            raise ZlogError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                            f"this worker does not lead {where}")
        high_watermark = self._hw.value
        target = high_watermark if offset == DELETE_TO_HIGH_WATERMARK else offset
        if not 0 <= target <= high_watermark:
            raise ZlogError(ErrorCode.OFFSET_OUT_OF_RANGE,
                            f"{where}: cannot delete records before {offset}: use -1 (the "
                            f"high watermark) or an offset from 0 to the high watermark "
                            f"{high_watermark}")
        if not self.deletes:
            raise ZlogError(ErrorCode.POLICY_VIOLATION,
                            f"{where}: records of a topic whose cleanup.policy has no "
                            "delete cannot be deleted")
        before = self.log.log_start_offset
        if self.log.delete_records_before(target) != before:
            self.log_start_moved()
        return target

    # ------------------------------------------------------------------ list offsets

    def list_offset(self, timestamp_ms: int) -> tuple[int, int]:
        """ListOffsets: (offset, record timestamp) for -1 latest, -2 earliest, -3 max
        timestamp or a time.

        A time finds the earliest offset below the HW whose record timestamp is >= it;
        -3 the first record below the HW with the largest timestamp (KIP-734); (-1, -1) when
        no such record exists. While a new leader shows no HW (isr.py), the latest offset, a
        time no record below the HW reaches, and the max timestamp are OFFSET_NOT_AVAILABLE
        (retriable), as in Kafka (KIP-207): each answer could be lower than one given before.
        """
        if not self.is_leader:
            raise ZlogError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"this worker does not lead {self.topic}-{self.partition}",
            )
        if timestamp_ms == LATEST_TIMESTAMP:
            self._check_high_watermark_shown()
            return self._hw.value, -1
        if timestamp_ms == EARLIEST_TIMESTAMP:
            return self.log.log_start_offset, -1
        if timestamp_ms == MAX_TIMESTAMP:
            self._check_high_watermark_shown()
            return self.log.max_timestamp_record(self._hw.value) or (-1, -1)
        if timestamp_ms < EARLIEST_TIMESTAMP:
            raise ZlogError(
                ErrorCode.INVALID_REQUEST,
                f"timestamp {timestamp_ms} is invalid: use -1 (latest), -2 (earliest), "
                "-3 (max timestamp) or >= 0",
            )
        offset = self.log.offset_for_timestamp(timestamp_ms)
        if offset is None or offset >= self._hw.value:
            self._check_high_watermark_shown()
            return -1, -1
        return offset, self._timestamp_at(offset)

    def _check_high_watermark_shown(self) -> None:
        if self.client_high_watermark < 0:
            raise ZlogError(
                ErrorCode.OFFSET_NOT_AVAILABLE,
                f"{self.topic}-{self.partition}: its new leader's high watermark "
                f"({self._hw.value}) has not reached the start of its epoch "
                f"({self._hw.epoch_start_offset}) yet; retry",
            )

    def _timestamp_at(self, offset: int) -> int:
        chunks = self.log.read(offset, 1, self._hw.value)
        assert chunks, f"offset {offset} is below the HW and must be readable"
        parsed = parse_batch(chunks[0][: size_bytes_at(chunks[0])], check_crc=False)
        for found, timestamp_ms in zip(
            parsed.offsets.tolist(), parsed.timestamps_ms.tolist(), strict=True
        ):
            if found >= offset:
                return int(timestamp_ms)
        return -1


def _check_not_negative(earliest_timestamp_ms: int) -> None:
    """A record's CreateTime is milliseconds since the epoch, or -1 for "none" (Kafka's rule)."""
    if earliest_timestamp_ms < NO_TIMESTAMP:
        raise ZlogError(
            ErrorCode.INVALID_TIMESTAMP,
            f"record timestamp {earliest_timestamp_ms} is negative: a timestamp is "
            "milliseconds since the epoch (>= 0), or -1 for none",
        )
