"""A simulated broker: its supervisor's part (registration, heartbeats, metadata) and its
worker's part (the partitions it holds, the follower fetcher, ISR proposals, acks=all waits),
driving zlog's pure partition code the way worker.py, fetcher.py, isr_proposals.py and
data_plane.py do.

A broker is up, paused (SIGSTOP: it does nothing, messages wait in its socket buffers, the
clock goes on) or down (crashed). A restart is a new process: a new incarnation registers, the
partitions reopen from the disk (log and epoch checkpoint), the producer state is rebuilt from
the log, and the high watermark starts from the ring header's, as partition_host.py does it. A
worker restart (`restart_worker`: the worker killed, its supervisor alive) keeps the broker's
registration and metadata; its partitions reopen at once, at the same leader epochs, and a
leader takes back the ISR change it had stored (isr_proposals.py's `resume`).

A broker leads only while its lease runs (docs/replication.md §4.1): until the send time of
the last heartbeat the controller answered unfenced, plus the session (broker_lifecycle.py's
`_extend_lease`); past it, a produce is refused before it reaches the partition, as
data_plane.py refuses it. A new process has no lease until its first heartbeat is answered.

Every decision point that a planted bug may change goes through `wiring`; every fact the
checker needs goes to `observer` (the code under test never sees either).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Protocol

from tests.sim.replication.controller import TOPIC
from tests.sim.replication.messages import (
    CONTROLLER,
    AlterIsr,
    AlterIsrAnswer,
    ConsumerFetch,
    ConsumerFetchAnswer,
    DeleteRecords,
    DeleteRecordsAnswer,
    Envelope,
    Heartbeat,
    HeartbeatAnswer,
    MetadataPush,
    Produce,
    ProduceAnswer,
    Register,
    Registered,
    ReplicaFetch,
    ReplicaFetchAnswer,
)
from tests.sim.replication.profile import Profile
from tests.sim.replication.storage import BATCH_ID_BASE_MS, SimDisk, SimLog
from tests.sim.replication.wiring import Wiring, rebuilt_producers
from zlog.broker.control.controller.decisions import IsrRequest, liveness
from zlog.broker.control.metadata.state import ClusterState, PartitionInfo
from zlog.broker.data.epoch_cache import LeaderEpochCache
from zlog.broker.data.isr import IsrChange, IsrErrorAction, ReplicaSet
from zlog.broker.data.partition import Partition, ProduceOutcome
from zlog.broker.data.producer_state import ProducerStateTable
from zlog.broker.data.replica_sync import (
    apply_replica_fetch,
    reset_out_of_range,
    serve_replica_fetch,
)
from zlog.errors import ErrorCode, ZlogError
from zlog.record.header import read_header
from zlog.shm_segments.retention import SegmentInfo, wholly_below
from zlog.transport.messages.data import (
    NO_EPOCH,
    ReplicaFetchEntry,
    ReplicaFetchResult,
)
from zlog.types import ACKS_ALL, LATEST_TIMESTAMP, NO_LEADER

REGISTER_RETRY_TICKS = 5
# zlog's lease is a session less an election timeout of the metadata log, for a controller
# that answers heartbeats after a quorum elected another. The simulated controller stops
# answering the instant it fails over, and its successor's sessions start at its takeover, so
# a lease of a full session ends before any controller may fence the broker.
LEASE_MARGIN_TICKS = 0
LONG_POLL_TICKS = 5  # a follower fetch with nothing to answer waits this long on the leader


class Status(Enum):
    UP = "up"
    PAUSED = "paused"
    DOWN = "down"


class BrokerObserver(Protocol):
    """What the checker hears from a broker (see checker.py for what it does with it)."""

    def opened_or_became(self, broker: SimBroker, p: int, partition: Partition,
                         new_term: bool) -> None: ...

    def produced(self, broker: SimBroker, p: int, partition: Partition, *, acks: int,
                 outcome: ProduceOutcome, end_before: int, batch_id: int) -> None: ...

    def acking(self, broker: SimBroker, p: int, partition: Partition, base_offset: int,
               batch_id: int) -> None: ...

    def consumer_read(self, broker: SimBroker, p: int, partition: Partition,
                      batches: tuple[tuple[int, int, int], ...], shown: int) -> None: ...

    def deleting(self, broker: SimBroker, p: int, partition: Partition) -> None: ...

    def records_deleted(self, broker: SimBroker, p: int, partition: Partition,
                        offset: int) -> None: ...

    def log_start_shown(self, broker: SimBroker, p: int, partition: Partition,
                        log_start_offset: int) -> None: ...

    def offsets_listed(self, broker: SimBroker, p: int, partition: Partition,
                       latest: int) -> None: ...

    def fetch_answer(self, broker: SimBroker, p: int, partition: Partition,
                     answer: ReplicaFetchAnswer) -> None: ...

    def follower_truncated(self, broker: SimBroker, p: int, point: int,
                           common_prefix: int) -> None: ...

    def proposing(self, broker: SimBroker, p: int, partition: Partition,
                  new_isr: frozenset[int], member_epochs: dict[int, int]) -> None: ...

    def log(self, line: str) -> None: ...

    def count(self, what: str) -> None: ...


@dataclass(slots=True)
class FollowerFetch:
    in_flight: int | None = None  # the id of the one fetch in flight
    offset: int = 0  # the log end and leader epoch it was sent with
    epoch: int = -1
    sent_at: int = 0
    backoff_until: int = 0
    # B19 only: an answer not yet in the log (and the offset it answered), and whether a
    # fetch has already reported its batches as held
    unstored: tuple[ReplicaFetchAnswer, int] | None = None
    reported: bool = False


@dataclass(slots=True)
class PendingIsrChange:
    """A leader's ISR change the tracker holds pending (isr_proposals._Pending)."""

    change: IsrChange
    request_id: int | None = None  # the request in flight
    sent_at: int = 0
    send_at: int | None = 0  # when to send it (again); None: wait for a newer record


@dataclass(slots=True)
class Parked:
    """An acks=all produce waiting for the high watermark (data_plane's _DelayedProduce)."""

    client: int
    request_id: int
    partition: int
    required: int
    base_offset: int
    batch_id: int
    deadline: int


@dataclass(slots=True)
class ParkedDelete:
    """A DeleteRecords answer waiting for the in-sync followers' log starts (delete_records.py)."""

    client: int
    request_id: int
    partition: int
    offset: int  # the offset records were deleted below, which the low watermark must reach
    deadline: int


@dataclass(slots=True)
class SimBroker:
    node_id: int
    profile: Profile
    wiring: Wiring
    rng: random.Random
    send: Callable[[int, int, object], None]
    observer: BrokerObserver
    peer_log: Callable[[int, int], SimLog | None]  # ghost access, for the checker's fields
    disk: SimDisk
    status: Status = Status.UP
    starts: int = 0
    incarnation: str = ""
    registered: bool = False
    broker_epoch: int = -1
    next_register: int = 0
    next_heartbeat: int = 0
    lease_until: int = 0  # the supervisor's lease: its workers take writes until then
    state: ClusterState | None = None
    meta_version: int = -1
    partitions: dict[int, Partition] = field(default_factory=dict)
    fetches: dict[int, FollowerFetch] = field(default_factory=dict)
    parked: list[Parked] = field(default_factory=list)
    deletes: list[ParkedDelete] = field(default_factory=list)
    waiting_fetches: list[tuple[int, ReplicaFetch, int]] = field(default_factory=list)
    isr_pending: dict[int, PendingIsrChange] = field(default_factory=dict)
    isr_in_flight: dict[int, int] = field(default_factory=dict)  # request id -> partition
    quiet_until: dict[int, int] = field(default_factory=dict)
    worker_starts: int = 0
    next_isr_check: int = 0
    next_id: int = 1
    now: int = 0

    # -- process life ----------------------------------------------------------------------

    def start(self, now: int) -> None:
        self.starts += 1
        self.incarnation = f"{self.node_id}.{self.starts}"
        self.status = Status.UP
        self.registered, self.broker_epoch = False, -1
        self.lease_until = 0  # none until a heartbeat is answered unfenced
        self.next_register = self.next_heartbeat = now
        self.state, self.meta_version = None, -1
        self._new_worker()
        self.now = now

    def _new_worker(self) -> None:
        """A new worker process: nothing of the last one's memory."""
        self.partitions, self.fetches, self.parked = {}, {}, []
        self.waiting_fetches, self.deletes = [], []
        self.isr_pending, self.isr_in_flight, self.quiet_until = {}, {}, {}
        self.worker_starts += 1

    @property
    def process(self) -> str:
        """Names the worker process: a new one at every broker or worker restart."""
        return f"{self.incarnation}/{self.worker_starts}"

    def restart_worker(self) -> None:
        """kill -9 of the worker alone: its supervisor (registration, session, metadata)
        starts another at once, which reopens the partitions from the disk."""
        self._keep_ring_headers()
        self._new_worker()
        topic = None if self.state is None else self.state.topics.get(TOPIC)
        for info in () if topic is None else topic.partitions:
            if self.node_id in info.replicas:
                self._open(info)

    def bootstrap(self, broker_epoch: int, state: ClusterState, version: int) -> None:
        """The first start, registered before the clock runs."""
        self.start(0)
        self.registered, self.broker_epoch = True, broker_epoch
        self._extend_lease(0)  # its sessions start at 0 too
        self.apply_metadata(state, version)

    def crash(self) -> None:
        self._keep_ring_headers()
        self.status = Status.DOWN
        self.partitions, self.fetches, self.parked = {}, {}, []
        self.waiting_fetches, self.deletes = [], []

    def _keep_ring_headers(self) -> None:
        """The HW each replica last published in its ring header, which outlives it."""
        for p, partition in self.partitions.items():
            self.disk.last_high_watermark[p] = partition.high_watermark

    @property
    def up(self) -> bool:
        return self.status == Status.UP

    # -- ticks -----------------------------------------------------------------------------

    def tick(self, now: int) -> None:
        self.now = now
        if not self.up:
            return
        if now % self.profile.flush_every_ticks == 0:
            self.disk.flush()
        if not self.registered:
            if now >= self.next_register:
                self.next_register = now + REGISTER_RETRY_TICKS
                self.send(self.node_id, CONTROLLER, Register(
                    self.incarnation, self.wiring.directory_id(self.disk)))
            return
        if now >= self.next_heartbeat:
            self.next_heartbeat = now + self.profile.heartbeat_ticks
            self.send(self.node_id, CONTROLLER, Heartbeat(self.broker_epoch, now))
        self._store_reported(now)
        self._send_fetches(now)
        if now >= self.next_isr_check:
            self.next_isr_check = now + self.profile.isr_check_ticks
            self._expire_isr_requests(now)
            self._propose_isr_changes(now)
            self._refresh_high_watermarks()
        for parked in [x for x in self.parked if x.deadline <= now]:
            self._answer_parked(parked, ErrorCode.REQUEST_TIMED_OUT)
        for waiting in [x for x in self.deletes if x.deadline <= now]:
            self._answer_delete(waiting, ErrorCode.REQUEST_TIMED_OUT, -1)
        self._wake_fetches(None, now, expired_only=True)

    # -- messages --------------------------------------------------------------------------

    def receive(self, envelope: Envelope, now: int) -> None:
        self.now = now
        body = envelope.body
        if isinstance(body, Registered):
            if body.incarnation == self.incarnation and not self.registered:
                self.registered, self.broker_epoch = True, body.broker_epoch
                self.next_heartbeat = now
                self.observer.log(f"b{self.node_id} registered epoch {body.broker_epoch}")
                self.apply_metadata(body.state, body.version)
        elif isinstance(body, HeartbeatAnswer):
            if body.error == ErrorCode.STALE_BROKER_EPOCH:
                if body.broker_epoch == self.broker_epoch and self.registered:
                    self.registered = False  # register again (same incarnation: same epoch)
                return
            self.apply_metadata(body.state, body.version)
            if body.broker_epoch == self.broker_epoch and self.registered and not body.fenced:
                self._extend_lease(body.sent_at)
        elif isinstance(body, MetadataPush):
            self.apply_metadata(body.state, body.version)
        elif isinstance(body, AlterIsrAnswer):
            self._isr_answered(body)
        elif isinstance(body, ReplicaFetch):
            self._serve_fetch(envelope.src, body, now)
        elif isinstance(body, ReplicaFetchAnswer):
            self._apply_fetch_answer(body, now)
        elif isinstance(body, Produce):
            self._produce(envelope.src, body)
        elif isinstance(body, ConsumerFetch):
            self._consumer_fetch(envelope.src, body)
        elif isinstance(body, DeleteRecords):
            self._delete_records(envelope.src, body)

    def _extend_lease(self, sent_at: int) -> None:
        """The controller's session for this broker started no earlier than `sent_at`."""
        self.lease_until = max(self.lease_until,
                               sent_at + self.profile.session_ticks - LEASE_MARGIN_TICKS)

    # -- metadata --------------------------------------------------------------------------

    def record(self, p: int) -> PartitionInfo | None:
        return None if self.state is None else self.state.partition(TOPIC, p)

    def _replica_set(self, info: PartitionInfo) -> ReplicaSet:
        """As cluster_node.desired_partitions gives it: a leader also learns which replicas'
        brokers may not join the ISR now (fenced, shutting down)."""
        ineligible: frozenset[int] = frozenset()
        if info.leader == self.node_id and self.state is not None:
            usable = liveness(self.state).usable
            ineligible = frozenset(r for r in info.replicas if r not in usable)
        return self.wiring.replica_set_class(
            self.node_id, frozenset(info.replicas), frozenset(info.isr), self.profile.min_insync,
            info.partition_epoch, ineligible)

    def apply_metadata(self, state: ClusterState, version: int) -> None:
        """Apply a newer committed state (a supervisor pushing PartitionState to workers)."""
        if not self.registered or version <= self.meta_version:
            return
        self.state, self.meta_version = state, version
        topic = state.topics.get(TOPIC)
        if topic is None:
            return
        for info in topic.partitions:
            if self.node_id not in info.replicas:
                continue
            partition = self.partitions.get(info.partition)
            if partition is None:
                self._open(info)
                continue
            if (info.leader_epoch == partition.leader_epoch
                    and info.partition_epoch <= partition.replicas.partition_epoch
                    and (info.partition_epoch < partition.replicas.partition_epoch
                         or self._replica_set(info) == partition.replicas)):
                continue  # nothing new (an assign differs when a replica's broker is fenced)
            self._become(info, partition)

    def _open(self, info: PartitionInfo) -> None:
        p = info.partition
        log = self.disk.logs[p]
        checkpoint = self.disk.epoch_checkpoints.get(p)
        cache_class = self.wiring.epoch_cache_class
        epochs = cache_class.decode(checkpoint) if checkpoint is not None else cache_class()
        if epochs.truncate_from_end(log.log_end_offset):  # load_epoch_cache
            self.disk.epoch_checkpoints[p] = epochs.encode()
        is_leader = info.leader == self.node_id
        disk = self.disk

        def save(cache: LeaderEpochCache) -> None:
            disk.epoch_checkpoints[p] = cache.encode()

        partition = self.wiring.partition_class(
            TOPIC, p, log, leader_epoch=info.leader_epoch, is_leader=is_leader,
            replicas=self._replica_set(info), producers=rebuilt_producers(log),
            epochs=epochs, save_epochs=save,
            recovered_high_watermark=self.disk.last_high_watermark.get(p, -1))
        self.partitions[p] = partition
        self.fetches[p] = FollowerFetch()
        self.observer.log(f"b{self.node_id} opened p{p} {'leader' if is_leader else 'follower'}"
                          f" e{info.leader_epoch} log [{log.log_start_offset},"
                          f"{log.log_end_offset}) cache {_entries(partition)}")
        if is_leader:
            self._start_term(p, partition)
            self.wiring.became_leader(partition)
        else:
            self.wiring.follower_opened(partition, self.disk.last_high_watermark.get(p, 0))
        self.observer.opened_or_became(self, p, partition, True)

    def _become(self, info: PartitionInfo, partition: Partition) -> None:
        p = info.partition
        is_leader = info.leader == self.node_id
        new_term = (info.leader_epoch != partition.leader_epoch
                    or is_leader != partition.is_leader)
        partition.become(leader_epoch=info.leader_epoch, is_leader=is_leader,
                         replicas=self._replica_set(info), now_ms=self.now)
        if new_term:
            self.observer.log(
                f"b{self.node_id} p{p} {'leads' if is_leader else 'follows'} "
                f"e{info.leader_epoch} (leader {info.leader}) isr {list(info.isr)} "
                f"log end {partition.log.log_end_offset} hw {partition.high_watermark}")
            if is_leader:
                self.wiring.became_leader(partition)
            else:
                self.wiring.follower_new_epoch(partition)
        self.observer.opened_or_became(self, p, partition, new_term)
        self._settle(p)
        self._settle_deletes(p)
        self._wake_fetches(p, self.now)

    # -- follower --------------------------------------------------------------------------

    def _send_fetches(self, now: int) -> None:
        for p in sorted(self.partitions):
            partition = self.partitions[p]
            info = self.record(p)
            if partition.is_leader or info is None or info.leader in (NO_LEADER, self.node_id):
                continue
            fetch = self.fetches[p]
            if fetch.in_flight is not None:
                if now - fetch.sent_at <= self.profile.fetch_timeout_ticks:
                    continue
                fetch.in_flight = None  # lost: send another
            if now < fetch.backoff_until:
                continue
            log = partition.log
            position, last_epoch = log.log_end_offset, self.wiring.last_fetched_epoch(partition)
            if fetch.unstored is not None:  # B19: what is still in memory counts as held
                position, last_epoch = _end_of(fetch.unstored[0].result)
                fetch.reported = True
            entry = ReplicaFetchEntry(TOPIC, p, position, partition.leader_epoch, last_epoch,
                                      log.log_start_offset, self.profile.fetch_limit_bytes)
            fetch.in_flight, self.next_id = self.next_id, self.next_id + 1
            fetch.offset, fetch.epoch = position, partition.leader_epoch
            fetch.sent_at = now
            self.send(self.node_id, info.leader, ReplicaFetch(
                fetch.in_flight, entry, self.broker_epoch, self.profile.fetch_limit_bytes))

    def _apply_fetch_answer(self, answer: ReplicaFetchAnswer, now: int) -> None:
        result = answer.result
        p = result.partition
        fetch = self.fetches.get(p)
        partition = self.partitions.get(p)
        if fetch is None or partition is None or fetch.in_flight != answer.fetch_id:
            return  # a duplicate, or an answer to a fetch given up on
        fetch.in_flight = None
        log = self.disk.logs[p]
        stale = (partition.is_leader or log.log_end_offset != fetch.offset
                 or (partition.leader_epoch != fetch.epoch and not self.wiring.apply_stale_answers))
        if stale:
            return
        code = ErrorCode(result.error_code)
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._reset_position(partition, result, fetch.offset)
            return
        if code != ErrorCode.NONE:
            fetch.backoff_until = now + self.profile.fetch_backoff_ticks
            return
        self.observer.fetch_answer(self, p, partition, answer)
        if (result.chunks and result.diverging_epoch == NO_EPOCH
                and not self.wiring.store_before_fetching):
            fetch.unstored, fetch.reported = (answer, fetch.offset), False
            return
        self._store(p, partition, answer, fetch.offset, now)

    def _store(self, p: int, partition: Partition, answer: ReplicaFetchAnswer,
               fetch_offset: int, now: int) -> None:
        """Apply an answer to the log: its batches appended, or the log cut where it
        diverges (apply_replica_fetch)."""
        result = answer.result
        fetch = self.fetches[p]
        log = self.disk.logs[p]
        old_producers = partition.producers

        def rebuild() -> ProducerStateTable:
            if self.wiring.rebuild_after_truncation:
                return rebuilt_producers(log)
            return old_producers

        start_before = log.log_start_offset
        try:
            progress = apply_replica_fetch(partition, result, fetch_offset, rebuild)
        except ZlogError as error:
            self.observer.log(f"b{self.node_id} p{p} dropped a fetch answer: {error.message}")
            fetch.backoff_until = now + self.profile.fetch_backoff_ticks
            return
        if progress.truncated_to is not None:
            self.observer.log(f"b{self.node_id} p{p} diverged (epoch {result.diverging_epoch} "
                              f"ends {result.diverging_end_offset}): cut at "
                              f"{progress.truncated_to}")
            # A cut below the log's own start (retention moved it) drops everything, as a cut
            # at that start does: the common prefix is only known from where both hold data.
            self.observer.follower_truncated(self, p, max(progress.truncated_to, start_before),
                                             answer.ghost_common_prefix)
        elif progress.appended_bytes == 0:
            fetch.backoff_until = now + self.profile.fetch_idle_ticks  # the long poll

    def _store_reported(self, now: int) -> None:
        """B19's late writes: batches that a fetch already reported as held reach the log
        one tick after it left (the writer runs behind the fetcher)."""
        for p in sorted(self.fetches):
            fetch, partition = self.fetches[p], self.partitions.get(p)
            if fetch.unstored is None or not fetch.reported:
                continue
            (answer, fetch_offset), fetch.unstored = fetch.unstored, None
            if (partition is not None and not partition.is_leader
                    and partition.log.log_end_offset == fetch_offset):
                self._store(p, partition, answer, fetch_offset, now)

    def _reset_position(self, partition: Partition, result: ReplicaFetchResult,
                        fetch_offset: int) -> None:
        """fetcher._reset_position: past the leader's log end, cut to it; otherwise start over
        at its log start (replica_sync.reset_out_of_range)."""
        log = self.disk.logs[result.partition]
        done = reset_out_of_range(partition, result, fetch_offset,
                                  lambda: rebuilt_producers(log))
        if done:
            self.observer.log(f"b{self.node_id} p{result.partition} at {fetch_offset}, out of "
                              f"the leader's range [{result.log_start_offset}, "
                              f"{result.log_end_offset}): {done}")

    # -- leader: replica fetches -----------------------------------------------------------

    def _wake_fetches(self, p: int | None, now: int, *, expired_only: bool = False) -> None:
        """Answer the long polls on `p` (new data, a new HW, a new role), or those whose wait
        is over."""
        waiting, self.waiting_fetches = self.waiting_fetches, []
        for follower, request, deadline in waiting:
            due = deadline <= now if expired_only else request.entry.partition == p
            if due:
                self._serve_fetch(follower, request, now, may_wait=False)
            else:
                self.waiting_fetches.append((follower, request, deadline))

    def _serve_fetch(self, follower: int, request: ReplicaFetch, now: int, *,
                     may_wait: bool = True) -> None:
        entry = request.entry
        p = entry.partition
        partition = self.partitions.get(p)
        if partition is None:
            result = ReplicaFetchResult(TOPIC, p, int(ErrorCode.NOT_LEADER_OR_FOLLOWER), -1, -1,
                                        -1, -1, error_message="no such replica here")
            self.send(self.node_id, follower,
                      ReplicaFetchAnswer(request.fetch_id, result, self.incarnation, None, 0))
            return
        hw_before = partition.high_watermark
        read = serve_replica_fetch(partition, entry, replica_id=follower,
                                   broker_epoch=request.broker_epoch, now_ms=now,
                                   limit_bytes=request.limit_bytes)
        self._settle_deletes(p)  # the follower's log start came with its position
        if (may_wait and read.result.error_code == 0 and not read.result.chunks
                and read.result.diverging_epoch == NO_EPOCH
                and partition.high_watermark == hw_before
                and entry.fetch_offset == partition.log.log_end_offset):
            self.waiting_fetches.append((follower, request, now + LONG_POLL_TICKS))
            return
        result = replace(read.result, chunks=tuple(bytes(c) for c in read.result.chunks))
        log = self.disk.logs[p]
        prev: bytes | None = None
        common = 0
        if result.error_code == 0 and result.diverging_epoch == NO_EPOCH:
            index = log.index_of(entry.fetch_offset - 1)
            prev = None if index is None else bytes(log.batches[index])
        elif result.diverging_epoch != NO_EPOCH:
            common = _common_prefix(log, self.peer_log(follower, p))
        self.send(self.node_id, follower,
                  ReplicaFetchAnswer(request.fetch_id, result, self.incarnation, prev, common))
        if partition.high_watermark != hw_before:
            self._settle(p)
            self._wake_fetches(p, now)

    # -- leader: ISR changes (isr_proposals.py) ---------------------------------------------

    def _start_term(self, p: int, partition: Partition) -> None:
        """partition_host's open of a leader: the change stored for this leader epoch and
        record is pending again (and sent again at the next check); any other is stale."""
        change = self.disk.isr_changes.pop(p, None)
        if not partition.start_term(self.now,
                                    change if self.wiring.resume_isr_changes else None):
            return
        assert change is not None
        self.disk.isr_changes[p] = change
        self.isr_pending[p] = PendingIsrChange(change)
        self.observer.log(f"b{self.node_id} p{p} resumes isr change {list(change.new_isr)} "
                          f"pe{change.partition_epoch}")

    def _propose_isr_changes(self, now: int) -> None:
        for p in sorted(self.partitions):
            partition = self.partitions[p]
            if not partition.is_leader:
                self._drop_isr_change(p)
                continue
            pending = self._pending_isr_change(p, partition)
            if pending is not None:
                if pending.send_at is not None and now >= pending.send_at:
                    self._send_isr_change(p, pending, now)
                continue
            tracker = partition.isr_tracker
            if tracker.pending is not None or now < self.quiet_until.get(p, 0):
                continue
            new_isr = self.wiring.next_proposal(tracker, now, partition.log.log_end_offset,
                                                self.profile.lag_max_ticks,
                                                partition.log.log_start_offset)
            if new_isr is None or new_isr == tracker.replicas.isr:
                continue
            epochs = self.wiring.member_epochs(tracker, new_isr)
            self.observer.proposing(self, p, partition, new_isr, epochs)
            proposal = tracker.propose(new_isr, now)
            self.wiring.after_propose(partition, new_isr)
            change = IsrChange(partition.leader_epoch, proposal.partition_epoch,
                               tuple(sorted(new_isr)), tuple(sorted(epochs.items())))
            self.disk.isr_changes[p] = change  # stored before it is sent
            pending = self.isr_pending[p] = PendingIsrChange(change)
            self.observer.log(f"b{self.node_id} p{p} proposes isr {sorted(new_isr)} "
                              f"(was {sorted(tracker.replicas.isr)}) pe{proposal.partition_epoch}")
            self._send_isr_change(p, pending, now)

    def _refresh_high_watermarks(self) -> None:
        """DataPlane.refresh_high_watermarks, after the ISR check."""
        for p in sorted(self.partitions):
            if self.partitions[p].refresh_high_watermark():
                self._settle(p)
                self._wake_fetches(p, self.now)

    def _send_isr_change(self, p: int, pending: PendingIsrChange, now: int) -> None:
        if pending.request_id is not None:
            self.isr_in_flight.pop(pending.request_id, None)
        request_id, self.next_id = self.next_id, self.next_id + 1
        pending.request_id, pending.sent_at, pending.send_at = request_id, now, None
        self.isr_in_flight[request_id] = p
        change = pending.change
        self.send(self.node_id, CONTROLLER, AlterIsr(request_id, IsrRequest(
            self.node_id, self.broker_epoch, TOPIC, p, change.leader_epoch,
            change.partition_epoch, change.new_isr, dict(change.member_epochs))))

    def _pending_isr_change(self, p: int, partition: Partition) -> PendingIsrChange | None:
        """The partition's change, unless a newer record (or leader epoch) replaced it."""
        pending = self.isr_pending.get(p)
        if pending is None:
            return None
        proposal = partition.isr_tracker.pending
        if (proposal is None or proposal.partition_epoch != pending.change.partition_epoch
                or partition.leader_epoch != pending.change.leader_epoch):
            self._drop_isr_change(p)
            return None
        return pending

    def _drop_isr_change(self, p: int) -> None:
        pending = self.isr_pending.pop(p, None)
        if pending is None:
            return
        if pending.request_id is not None:
            self.isr_in_flight.pop(pending.request_id, None)
        self.disk.isr_changes.pop(p, None)

    def _isr_answered(self, answer: AlterIsrAnswer) -> None:
        p = self.isr_in_flight.pop(answer.request_id, None)
        pending = None if p is None else self.isr_pending.get(p)
        if p is None or pending is None or pending.request_id != answer.request_id:
            return  # an answer to a request sent again since, or to a change replaced
        pending.request_id = None
        if answer.error != ErrorCode.NONE:
            self._isr_refused(p, pending, answer.error,
                              self.now + self.profile.isr_refused_backoff_ticks)

    def _isr_refused(self, p: int, pending: PendingIsrChange, code: ErrorCode,
                     retry_at: int) -> None:
        action = self.wiring.isr_error_action(code)
        if action == IsrErrorAction.REVERT:
            partition = self.partitions.get(p)
            if partition is not None:
                partition.isr_tracker.proposal_refused(pending.change.partition_epoch)
            self._drop_isr_change(p)
            self.quiet_until[p] = self.now + self.profile.isr_refused_backoff_ticks
        elif action == IsrErrorAction.RETRY:
            pending.send_at = retry_at

    def _expire_isr_requests(self, now: int) -> None:
        """No answer within the timeout: sent again at once (isr_proposals._expire)."""
        for p, pending in list(self.isr_pending.items()):
            if (pending.request_id is not None
                    and now - pending.sent_at >= self.profile.isr_answer_timeout_ticks):
                self.isr_in_flight.pop(pending.request_id, None)
                pending.request_id = None
                self._isr_refused(p, pending, ErrorCode.REQUEST_TIMED_OUT, now)

    # -- produce ---------------------------------------------------------------------------

    def _produce(self, client: int, request: Produce) -> None:
        p = request.partition
        partition = self.partitions.get(p)
        if partition is None:
            self.send(self.node_id, client, ProduceAnswer(
                request.request_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1))
            return
        if not self.wiring.lease_holds(self.now, self.lease_until):
            self.send(self.node_id, client, ProduceAnswer(
                request.request_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1))
            self.observer.count("produce refused: lease ran out")
            return
        end_before, hw_before = partition.log.log_end_offset, partition.high_watermark
        outcome = partition.produce([request.batch], request.acks)
        self.observer.produced(self, p, partition, acks=request.acks, outcome=outcome,
                               end_before=end_before, batch_id=request.batch_id)
        if outcome.error_code != ErrorCode.NONE or request.acks != ACKS_ALL:
            self.send(self.node_id, client, ProduceAnswer(
                request.request_id, outcome.error_code, outcome.base_offset))
        else:
            parked = Parked(client, request.request_id, p, outcome.required_offset,
                            outcome.base_offset, request.batch_id,
                            self.now + self.profile.produce_timeout_ticks)
            if outcome.appended_bytes == 0 and self.wiring.ack_duplicates_at_once:
                self._answer_parked(parked, ErrorCode.NONE, parked_yet=False)
            else:
                status = self.wiring.acks_status(partition, outcome.required_offset)
                if status is None:
                    self.parked.append(parked)
                else:
                    self._answer_parked(parked, status, parked_yet=False)
        self._appended(p, partition, end_before, hw_before)

    def enforce_retention(self, p: int, due: int) -> int:
        """partition_host.enforce_retention for `p`, whose `due` oldest segments (batches) the
        retention policy says go: those wholly below the wiring's bound go, the epoch cache is
        cut from the start (`log_start_moved`), and a leader computes its HW again (its log
        start is its floor). Returns how many went."""
        partition, log = self.partitions[p], self.disk.logs[p]
        log.flush()  # the log flushes its ring before it deletes anything
        sealed = [SegmentInfo(info.base, info.next, len(stored), -1)
                  for info, stored in zip(log.infos[:-1], log.batches[:-1], strict=True)]
        count = wholly_below(sealed, due, self.wiring.retention_upto(log))
        if count == 0:
            return 0
        log.delete_oldest(count)
        partition.log_start_moved()
        hw_before = partition.high_watermark
        partition.refresh_high_watermark()
        if partition.high_watermark != hw_before:
            self._settle(p)
            self._wake_fetches(p, self.now)
        return count

    def append_local(self, p: int, batch: bytes, batch_id: int) -> None:
        """An acks=1 batch appended as if a producer on this host sent it (the load of
        sim.py's rejoin check), if this broker leads `p`."""
        partition = self.partitions.get(p)
        if (partition is None or not partition.is_leader
                or not self.wiring.lease_holds(self.now, self.lease_until)):
            return
        end_before, hw_before = partition.log.log_end_offset, partition.high_watermark
        outcome = partition.produce([batch], 1)
        self.observer.produced(self, p, partition, acks=1, outcome=outcome,
                               end_before=end_before, batch_id=batch_id)
        self._appended(p, partition, end_before, hw_before)

    def _appended(self, p: int, partition: Partition, end_before: int, hw_before: int) -> None:
        """After a produce: answer the waits it settles, wake the long polls it feeds."""
        if partition.high_watermark != hw_before:
            self._settle(p)
        if partition.log.log_end_offset != end_before or partition.high_watermark != hw_before:
            self._wake_fetches(p, self.now)

    def _settle(self, p: int) -> None:
        """Answer the acks=all waits on `p` that can be answered now (_settle_delayed)."""
        partition = self.partitions.get(p)
        for parked in [x for x in self.parked if x.partition == p]:
            status = (ErrorCode.NOT_LEADER_OR_FOLLOWER if partition is None
                      else self.wiring.acks_status(partition, parked.required))
            if status is not None:
                self._answer_parked(parked, status)

    def _answer_parked(self, parked: Parked, code: ErrorCode, *, parked_yet: bool = True
                       ) -> None:
        if parked_yet:
            self.parked.remove(parked)
        if code == ErrorCode.NONE:
            partition = self.partitions[parked.partition]
            self.observer.acking(self, parked.partition, partition, parked.base_offset,
                                 parked.batch_id)
        self.send(self.node_id, parked.client,
                  ProduceAnswer(parked.request_id, code, parked.base_offset))

    # -- DeleteRecords (delete_records.py) ---------------------------------------------------

    def _delete_records(self, client: int, request: DeleteRecords) -> None:
        p = request.partition
        partition = self.partitions.get(p)
        if (partition is None or not partition.is_leader
                or not self.wiring.lease_holds(self.now, self.lease_until)):
            self.send(self.node_id, client, DeleteRecordsAnswer(
                request.request_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1))
            return
        start_before = partition.log.log_start_offset
        self.observer.deleting(self, p, partition)
        try:
            offset = partition.delete_records(request.offset)
        except ZlogError as error:
            self.send(self.node_id, client, DeleteRecordsAnswer(request.request_id, error.code,
                                                                -1))
            return
        if partition.log.log_start_offset != start_before:
            self.observer.log(f"b{self.node_id} p{p} deletes records below {offset}")
        self.deletes.append(ParkedDelete(client, request.request_id, p, offset,
                                         self.now + self.profile.produce_timeout_ticks))
        self._settle_deletes(p)
        self._wake_fetches(p, self.now)  # the followers' long polls take the new log start

    def _settle_deletes(self, p: int) -> None:
        """Answer the DeleteRecords on `p` whose offset every in-sync replica's log start
        reached (the wiring's rule), or whose partition is no longer led here."""
        partition = self.partitions.get(p)
        for waiting in [x for x in self.deletes if x.partition == p]:
            if partition is None or not partition.is_leader:
                self._answer_delete(waiting, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)
            elif self.wiring.records_deleted(partition, waiting.offset):
                self.observer.records_deleted(self, p, partition, waiting.offset)
                self._answer_delete(waiting, ErrorCode.NONE, partition.low_watermark)

    def _answer_delete(self, waiting: ParkedDelete, code: ErrorCode, low_watermark: int) -> None:
        self.deletes.remove(waiting)
        self.send(self.node_id, waiting.client,
                  DeleteRecordsAnswer(waiting.request_id, code, low_watermark))

    # -- consumers -------------------------------------------------------------------------

    def _consumer_fetch(self, client: int, request: ConsumerFetch) -> None:
        p = request.partition
        partition = self.partitions.get(p)
        if partition is None:
            self.send(self.node_id, client, ConsumerFetchAnswer(
                request.request_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, ()))
            return
        read = partition.read(request.offset, 1 << 20, replica_id=-1, at_least_one=True)
        if read.error_code in (ErrorCode.NONE, ErrorCode.OFFSET_OUT_OF_RANGE):
            self.observer.log_start_shown(self, p, partition, read.log_start_offset)
        batches: list[tuple[int, int, int]] = []
        for chunk in read.chunks:
            position = 0
            while position < chunk.nbytes:
                header = read_header(chunk, position)
                batches.append((header.base_offset, header.next_offset,
                                header.base_timestamp_ms - BATCH_ID_BASE_MS))
                position += header.size_bytes
        found = tuple(batches)
        if read.error_code == ErrorCode.NONE:
            self.observer.consumer_read(self, p, partition, found, read.high_watermark)
        try:
            latest, latest_error = partition.list_offset(LATEST_TIMESTAMP)[0], ErrorCode.NONE
            self.observer.offsets_listed(self, p, partition, latest)
        except ZlogError as error:
            latest, latest_error = -1, error.code
        self.send(self.node_id, client, ConsumerFetchAnswer(
            request.request_id, read.error_code, read.high_watermark, found, latest,
            latest_error, read.log_start_offset))


def _end_of(result: ReplicaFetchResult) -> tuple[int, int]:
    """Where the batches of an answer end, and the epoch of the last one."""
    end, epoch = -1, NO_EPOCH
    for chunk in result.chunks:
        view = memoryview(chunk)
        position = 0
        while position < view.nbytes:
            header = read_header(view, position)
            end, epoch = header.next_offset, header.partition_leader_epoch
            position += header.size_bytes
    return end, epoch


def _entries(partition: Partition) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in partition.epochs.entries]


def _common_prefix(a: SimLog, b: SimLog | None) -> int:
    """The offset up to which two logs hold the same batches."""
    if b is None:
        return 0
    # From where both logs hold batches (retention moves each start on its own); logs that
    # do not overlap agree up to the shorter one's end.
    end = min(max(a.log_start_offset, b.log_start_offset), a.log_end_offset, b.log_end_offset)
    i, j = a.index_of(end), b.index_of(end)
    if i is None or j is None:
        return end
    for x, y, bx, by in zip(a.infos[i:], b.infos[j:], a.batches[i:], b.batches[j:],
                            strict=False):
        if x.base != y.base or bx != by:
            break
        end = x.next
    return end
