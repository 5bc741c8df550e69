"""The partitions a worker owns: opening, closing, and the periodic upkeep of their logs.

This is the I/O half of ownership (`partition.py` is the pure half). Opening a partition opens
its `PartitionLog`, which replays the shared-memory ring a killed predecessor left behind, so
every batch that predecessor acknowledged is back; then the idempotent-producer table is loaded
from its newest snapshot and the batches after it (producer_snapshots.py), so a producer's retry
after the restart is still recognised as a retry. A follower that cuts its log rebuilds the
table the same way, from the newest snapshot at or below the cut.

A partition directory belongs to one topic id (KIP-516, `partition.metadata`): one that names
another id (the name was deleted and created again while this broker was away) is deleted with
its ring before the open, so the new topic's replica starts empty instead of serving the old
topic's batches; a new directory, or one from before topic ids, gets the assign's id.

Upkeep runs on the worker's thread (ticks for flush.ms, retention), except key compaction,
which runs on one background thread: `compact()` reads and rewrites only sealed segments and
swaps them in under the log's own lock, so it is safe beside the writer. A log is never closed
while its compaction runs.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import resource
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from zlog.broker.data.epoch_checkpoint import load_epoch_cache, save_epoch_cache
from zlog.broker.data.high_watermark_checkpoint import (
    recovered_high_watermark,
    save_high_watermark,
)
from zlog.broker.data.isr import ReplicaSet
from zlog.broker.data.isr_change_file import load_isr_change, remove_isr_change
from zlog.broker.data.partition import Partition
from zlog.broker.data.producer_snapshots import ProducerSnapshots, load_producer_state
from zlog.broker.data.producer_state import ProducerStateTable
from zlog.broker.log_lines import log_failure
from zlog.broker.topic_configs import (
    COMPRESSION_TYPE,
    MIN_INSYNC_REPLICAS,
    TIMESTAMP_DIFFERENCE_MAX_MS,
    normalize_topic_configs,
    validate_compression_type,
    validate_min_insync_replicas,
    validate_timestamp_difference_max_ms,
    validate_topic_configs,
    validate_topic_name,
)
from zlog.broker.worker_protocol import Assign
from zlog.clock import Clock
from zlog.errors import CorruptSegmentError, ErrorCode, ZlogError
from zlog.groups.partitioning import OFFSETS_RING_BYTES, OFFSETS_TOPIC
from zlog.shm_segments.compaction import CompactionStats, compact
from zlog.shm_segments.log import PartitionLog, partition_dir_name
from zlog.shm_segments.log_config import LogConfig
from zlog.shm_segments.partition_metadata import read_topic_id, write_topic_id
from zlog.types import NO_TOPIC_ID, TopicPartition

log = logging.getLogger(__name__)

TICK_INTERVAL_MS_MAX: Final = 1_000
TICK_INTERVAL_MS_MIN: Final = 10
# CRC-checked per partition and tick (up to once a second) in sealed segments found at open:
# a log of a few GiB is checked within minutes, and a tick never stalls the worker for long.
VERIFY_BYTES_PER_TICK: Final = 16 << 20
OPEN_FILES_RESERVE: Final = 64
"""Descriptors a worker keeps free for client connections and its own sockets: partitions that
would eat into them are refused, so a low `ulimit -n` fails partitions, never the worker."""
FILES_PER_PARTITION: Final = 4  # the active segment and its mapping, the ring and its mapping


@dataclass(slots=True)
class HostedPartition:
    """A partition this worker owns: the rules, the log they act on, its running compaction."""

    partition: Partition
    log: PartitionLog
    snapshots: ProducerSnapshots
    compaction: Future[CompactionStats] | None = None
    producer_snapshot_offset: int = -1  # the log end at the last producer snapshot
    snapshot_failing: bool = False  # the last snapshot failed (logged once per episode)
    sealed_verified: bool = False  # every sealed segment found at open passed its CRC check
    checkpointed_high_watermark: int = -1  # the HW in the checkpoint file, as last written


@dataclass(frozen=True, slots=True)
class Assignment:
    """An Assign from the supervisor whose topic name and configs passed the topic rules."""

    topic: str
    partition: int
    configs: dict[str, str]
    leader_epoch: int
    is_leader: bool
    message: Assign  # the rest of the record: replicas, ISR, epochs, the leader's endpoint

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def replica_set(self, default_replica_id: int, min_insync: int) -> ReplicaSet:
        """The record's replicas and ISR as this broker sees them (itself alone by default)."""
        message = self.message
        local = message.broker_id if message.broker_id >= 0 else default_replica_id
        replicas = frozenset(message.replicas or (local,))
        isr = frozenset(message.isr or (local,))
        return ReplicaSet(local, replicas | {local}, isr, min_insync, message.partition_epoch,
                          frozenset(message.ineligible))


@dataclass(frozen=True, slots=True)
class AssignOutcome:
    """What an assign changed that the data plane must act on."""

    committed_bytes: int = 0  # bytes that became visible (the HW moved)
    role_changed: bool = False  # leader <-> follower, or a new leader epoch: waits end


def checked_assignment(message: Assign) -> Assignment:
    """INVALID_TOPIC_EXCEPTION or INVALID_CONFIG for a name or config the topic rules refuse
    (the message's shape was checked when it was decoded)."""
    topic = validate_topic_name(message.topic)
    configs = normalize_topic_configs(dict(message.configs))
    return Assignment(topic, message.partition, configs, message.leader_epoch, message.is_leader,
                      message)


class PartitionHost:
    """Owns the open partitions of one worker process. Used from the worker's thread only."""

    def __init__(
        self,
        data_dir: Path,
        ring_dir: Path,
        *,
        base_config: LogConfig,
        clock: Clock,
        local_replica_id: int = 0,
    ) -> None:
        self.data_dir, self.ring_dir = data_dir, ring_dir
        self.base_config = base_config
        self.clock = clock
        self.local_replica_id = local_replica_id
        self.partitions: dict[TopicPartition, Partition] = {}  # shared with the DataPlane
        self.hosted: dict[TopicPartition, HostedPartition] = {}
        self._rolled: set[TopicPartition] = set()  # their producer tables are snapshotted
        self._compactor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="zlog-compact")

    # ------------------------------------------------------------------ assign / unassign

    def assign(self, message: Assign) -> AssignOutcome:
        """Open the partition (or take the new epoch, role or ISR if it is open already)."""
        assignment = checked_assignment(message)
        config = replace(validate_topic_configs(assignment.configs, self.base_config),
                         disk_share_bytes=message.disk_share_bytes)
        if assignment.topic == OFFSETS_TOPIC:
            config = replace(config, ring_bytes=min(config.ring_bytes, OFFSETS_RING_BYTES))
        min_insync = validate_min_insync_replicas(assignment.configs.get(MIN_INSYNC_REPLICAS, "1"))
        skew_ms = validate_timestamp_difference_max_ms(
            assignment.configs.get(TIMESTAMP_DIFFERENCE_MAX_MS)
        )
        compression = validate_compression_type(assignment.configs.get(COMPRESSION_TYPE))
        if assignment.tp in self.hosted:
            outcome = self._reassign(assignment, config, min_insync)
            partition = self.hosted[assignment.tp].partition
            partition.timestamp_difference_max_ms = skew_ms
            partition.compression = compression
            return outcome
        check_open_files_headroom()
        topic_id = message.topic_id
        found_id = self._clear_other_topic(assignment.topic, assignment.partition, topic_id)
        tp = assignment.tp
        partition_log = PartitionLog(
            self.data_dir, assignment.topic, assignment.partition, config,
            ring_dir=self.ring_dir, clock=self.clock, on_roll=lambda: self._rolled.add(tp),
        )
        corrupt: CorruptSegmentError | None = None
        try:
            if topic_id not in (NO_TOPIC_ID, found_id):
                _mark_directory(partition_log, topic_id)
            snapshots = ProducerSnapshots(partition_log.directory)
            try:
                producers = load_producer_state(partition_log, snapshots)
            except CorruptSegmentError as error:  # the partition opens to be cut or handed over
                producers, corrupt = ProducerStateTable(), error
            epochs = load_epoch_cache(partition_log)
        except BaseException:
            partition_log.close()
            raise
        directory = partition_log.directory
        partition = Partition(
            assignment.topic, assignment.partition, partition_log,
            leader_epoch=assignment.leader_epoch, is_leader=assignment.is_leader,
            replicas=assignment.replica_set(self.local_replica_id, min_insync),
            compacted=config.compacted, producers=producers,
            timestamp_difference_max_ms=skew_ms, compression=compression,
            epochs=epochs, save_epochs=lambda cache: save_epoch_cache(directory, cache),
            recovered_high_watermark=recovered_high_watermark(partition_log),
        )
        partition.topic_id = topic_id
        partition.deletes = config.deletes
        if corrupt is not None:
            partition.note_corrupt(corrupt)
        if assignment.is_leader:
            stored = load_isr_change(directory)
            if not partition.start_term(self.clock.monotonic_ms(), stored) and stored:
                remove_isr_change(directory)
        self.partitions[tp] = partition
        hosted = self.hosted[tp] = HostedPartition(partition, partition_log, snapshots)
        if corrupt is None and snapshots.newest_at_or_below(
                partition_log.log_end_offset) != partition_log.log_end_offset:
            _snapshot_or_log(hosted, tp)  # the next open or cut replays from here
        log.info(
            "opened %s-%d at epoch %d: log [%d, %d), %d producers, %d batches replayed",
            assignment.topic, assignment.partition, assignment.leader_epoch,
            partition_log.log_start_offset, partition_log.log_end_offset, len(producers),
            partition_log.replayed_batches,
        )
        return AssignOutcome(role_changed=True)

    def _clear_other_topic(self, topic: str, index: int, topic_id: str) -> str | None:
        """Make room for `topic_id`'s partition: a directory of another topic of that name (it
        was deleted and created again while this broker was away) is deleted with its ring,
        never served; a ring left without its directory (the data dir was wiped) goes too.
        Returns the id the directory carried (None: none, or no directory). An assign without
        an id (opened only to be deleted) checks nothing."""
        if topic_id == NO_TOPIC_ID:
            return None
        directory = self.data_dir / partition_dir_name(topic, index)
        found = read_topic_id(directory)
        if found is not None and found != topic_id:
            log.warning("%s-%d: %s belongs to topic id %s, not %s (a topic deleted and created "
                        "again): deleting it", topic, index, directory, found, topic_id)
            PartitionLog.remove(self.data_dir, topic, index, self.ring_dir)
            return None
        if not directory.exists() and not directory.is_symlink():
            PartitionLog.remove(self.data_dir, topic, index, self.ring_dir)
        return found

    def holds_other_topic(self, message: Assign) -> bool:
        """Whether the open partition of that name belongs to another topic id than the
        assign's: the name was deleted and created again before this worker heard of it."""
        hosted = self.hosted.get(TopicPartition(message.topic, message.partition))
        return (hosted is not None and NO_TOPIC_ID not in (hosted.partition.topic_id,
                                                           message.topic_id)
                and hosted.partition.topic_id != message.topic_id)

    def _reassign(
        self, assignment: Assignment, config: LogConfig, min_insync: int
    ) -> AssignOutcome:
        """An open partition assigned again: a new epoch, role or ISR, maybe changed configs.

        The log reads its config at each use, so new settings apply from the next append,
        roll or retention pass; the ring keeps its size until the partition is reopened.
        """
        hosted = self.hosted[assignment.tp]
        partition = hosted.partition
        role_changed = (assignment.leader_epoch != partition.leader_epoch
                        or assignment.is_leader != partition.is_leader)
        committed = partition.become(
            leader_epoch=assignment.leader_epoch, is_leader=assignment.is_leader,
            replicas=assignment.replica_set(self.local_replica_id, min_insync),
            now_ms=self.clock.monotonic_ms(),
        )
        if config.disk_share_bytes != hosted.log.config.disk_share_bytes:
            log.info("%s-%d: disk share %d bytes (was %d)", assignment.topic, assignment.partition,
                     config.disk_share_bytes, hosted.log.config.disk_share_bytes)
        hosted.log.config = replace(config, ring_bytes=hosted.log.config.ring_bytes)
        partition.set_compacted(config.compacted)
        partition.deletes = config.deletes
        return AssignOutcome(committed, role_changed)

    def directory_of(self, tp: TopicPartition) -> Path | None:
        """The open partition's directory (None: not open here)."""
        hosted = self.hosted.get(tp)
        return None if hosted is None else hosted.log.directory

    def rebuilt_producers(self, tp: TopicPartition) -> ProducerStateTable:
        """The producer table of what the log holds now (after a follower cut its log): the
        newest snapshot at or below the cut and the batches after it; those above are gone."""
        hosted = self.hosted[tp]
        hosted.producer_snapshot_offset = -1
        return load_producer_state(hosted.log, hosted.snapshots)

    def unassign(self, tp: TopicPartition, *, delete: bool) -> bool:
        """Close (or delete) the partition; False when it was not open here."""
        hosted = self.hosted.pop(tp, None)
        if hosted is None:
            return False
        del self.partitions[tp]
        self._wait_for_compaction(hosted)
        if delete:
            hosted.log.delete()
        else:
            # A failure (a full disk) is logged: the log still closes, and the next open
            # rebuilds the producers from the batches after an older snapshot.
            _snapshot_or_log(hosted, tp)
            self._checkpoint_high_watermark(tp, hosted)
            hosted.log.close()
        self._rolled.discard(tp)
        log.info("%s %s-%d", "deleted" if delete else "closed", tp[0], tp[1])
        return True

    def close_all(self) -> None:
        """Flush every ring into its segment and release the partitions (graceful stop)."""
        for tp in list(self.hosted):
            try:
                self.unassign(tp, delete=False)
            except Exception as error:
                log_failure(log, error, "closing %s-%d failed", tp[0], tp[1])
        self._compactor.shutdown(wait=True, cancel_futures=True)

    # ------------------------------------------------------------------ upkeep

    def tick_interval_ms(self) -> int:
        """How often the logs need `tick()`: the shortest flush.ms, within bounds."""
        flush_ms = [
            h.log.config.flush_ms for h in self.hosted.values() if h.log.config.flush_ms >= 0
        ]
        return max(min([*flush_ms, TICK_INTERVAL_MS_MAX]), TICK_INTERVAL_MS_MIN)

    def tick(self) -> None:
        """Time-based ring flush and fsync of every log (flush.ms), the next part of the CRC
        check of the sealed segments each log found at open, and a producer snapshot of each
        log that rolled since the last tick."""
        for tp, hosted in self.hosted.items():
            try:
                hosted.log.tick()
                if not hosted.sealed_verified:
                    hosted.sealed_verified = hosted.log.verify_sealed(VERIFY_BYTES_PER_TICK)
            except CorruptSegmentError as error:
                hosted.partition.note_corrupt(error)
            except Exception as error:
                log_failure(log, error, "tick of %s-%d failed", tp[0], tp[1])
        while self._rolled:
            tp = self._rolled.pop()
            rolled = self.hosted.get(tp)
            try:
                if rolled is not None:
                    _snapshot_or_log(rolled, tp)
            except Exception as error:
                log_failure(log, error, "producer snapshot of %s-%d failed", tp[0], tp[1])

    def save_producer_states(self) -> None:
        """Snapshot each partition's producer table that changed since its last snapshot."""
        for tp, hosted in self.hosted.items():
            if not len(hosted.partition.producers):
                continue  # no idempotent producer to remember; rolls and closes snapshot
            try:
                save_producer_state(hosted)
            except OSError as error:  # a full disk: tried again at the next round
                if not hosted.snapshot_failing:
                    log.warning("producer snapshot of %s-%d failed: %s", *tp, error)
                hosted.snapshot_failing = True
                continue
            except Exception as error:
                log_failure(log, error, "producer snapshot of %s-%d failed", tp[0], tp[1])
                continue
            hosted.snapshot_failing = False

    def checkpoint_high_watermarks(self) -> None:
        """Write each partition's HW that moved since its last checkpoint
        (high_watermark_checkpoint.py)."""
        for tp, hosted in self.hosted.items():
            self._checkpoint_high_watermark(tp, hosted)

    @staticmethod
    def _checkpoint_high_watermark(tp: TopicPartition, hosted: HostedPartition) -> None:
        high_watermark = hosted.partition.high_watermark
        if high_watermark == hosted.checkpointed_high_watermark:
            return
        try:
            save_high_watermark(hosted.log.directory, high_watermark)
        except OSError as error:  # a full disk: the next round tries again
            log.debug("high-watermark checkpoint of %s-%d not written: %s", *tp, error)
            return
        hosted.checkpointed_high_watermark = high_watermark

    def enforce_retention(self) -> None:
        """Retention of every log, never past its newest producer snapshot at or below the
        high watermark (where a truncation rebuilds the table from; without one, say snapshots
        could not be written, by the HW alone); then the snapshots the log start passed go."""
        for tp, hosted in self.hosted.items():
            partition_log, snapshots = hosted.log, hosted.snapshots
            try:
                snapshots.keep_within(partition_log.log_start_offset,
                                      partition_log.log_end_offset)
                deleted = partition_log.enforce_retention(
                    keep_from_offset=snapshots.newest_at_or_below(
                        hosted.partition.high_watermark))
                snapshots.keep_within(partition_log.log_start_offset,
                                      partition_log.log_end_offset)
                if deleted:
                    hosted.partition.log_start_moved()
            except Exception as error:
                log_failure(log, error, "retention of %s-%d failed", tp[0], tp[1])
                continue
            if deleted:
                log.info("retention deleted %d segments of %s-%d", deleted, tp[0], tp[1])

    def start_compactions(self) -> int:
        """Queue compaction of every compacted log not being compacted; returns how many."""
        started = 0
        for hosted in self.hosted.values():
            if not hosted.log.config.compacted:
                continue
            if hosted.compaction is not None and not hosted.compaction.done():
                continue
            if hosted.log.segment_count < 2:
                continue  # only sealed segments are compacted
            hosted.compaction = self._compactor.submit(compact, hosted.log)
            hosted.compaction.add_done_callback(
                functools.partial(_report_compaction, hosted.log.topic, hosted.log.partition))
            started += 1
        return started

    def _wait_for_compaction(self, hosted: HostedPartition) -> None:
        future = hosted.compaction
        if future is None:
            return
        if future.cancel():
            return
        with contextlib.suppress(Exception):  # already logged by _report_compaction
            future.result()


def _mark_directory(partition_log: PartitionLog, topic_id: str) -> None:
    """Write the directory's topic id (a new directory, or one from before ids: adopted);
    without it the partition is not opened (KAFKA_STORAGE_ERROR, tried again later)."""
    try:
        write_topic_id(partition_log.directory, topic_id)
    except OSError as error:
        raise ZlogError(ErrorCode.KAFKA_STORAGE_ERROR,
                        f"cannot record the topic id of {partition_log.directory}: "
                        f"{error.strerror or error}") from error


def check_open_files_headroom() -> None:
    """KAFKA_STORAGE_ERROR, naming the limit, when one more partition would leave fewer than
    OPEN_FILES_RESERVE descriptors free."""
    soft_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft_limit == resource.RLIM_INFINITY:
        return
    try:
        in_use = len(os.listdir("/proc/self/fd"))
    except OSError:
        return  # no /proc: the open itself reports EMFILE
    if in_use + FILES_PER_PARTITION + OPEN_FILES_RESERVE > soft_limit:
        raise ZlogError(
            ErrorCode.KAFKA_STORAGE_ERROR,
            f"too many open files: {in_use} of the {soft_limit} allowed are in use and "
            f"{OPEN_FILES_RESERVE} stay free for connections; raise the limit (ulimit -n, or "
            "LimitNOFILE= in the systemd unit)",
        )


def _report_compaction(topic: str, partition: int, future: Future[CompactionStats]) -> None:
    """Runs on the compaction thread: a failure is logged, and the next round tries again."""
    if future.cancelled():
        return
    error = future.exception()
    if error is not None:
        log_failure(log, error, "compaction of %s-%d failed", topic, partition)


def save_producer_state(hosted: HostedPartition) -> None:
    """Snapshot the table at the log end (skipped if one is there already), fsynced as the
    topic fsyncs its segments, and keep the number of snapshots bounded."""
    partition_log = hosted.log
    end = partition_log.log_end_offset
    if hosted.producer_snapshot_offset == end:
        return
    hosted.snapshots.save(hosted.partition.producers, end, fsync=partition_log.config.fsyncs)
    hosted.producer_snapshot_offset = end
    hosted.snapshots.prune(hosted.partition.high_watermark)


def _snapshot_or_log(hosted: HostedPartition, tp: TopicPartition) -> None:
    """A snapshot that cannot be written (a full disk) costs a longer replay later, never
    the partition: logged, and taken again at the next occasion."""
    try:
        save_producer_state(hosted)
    except OSError as error:
        log.warning("producer snapshot of %s-%d not saved: %s", *tp, error)
