"""The producer's I/O thread: takes ready batches, sends them to partition leaders, retries.

Kafka's producer design: user threads append to the accumulator (under `lock`), and this
thread does the I/O. Each pass it

1. refreshes metadata for topics that sends wait on (`DeferredSend`: queued once the answer
   comes) or that failed with NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION (at most
   once per retry backoff); a topic the cluster says does not exist fails what waits for it;
2. gets a producer id from the control endpoint (InitProducerId) if idempotence is on;
3. takes ready batches and due retries, encodes new ones with their sequence, and sends one
   Produce request per leader endpoint, each batch as its own entry (one result per batch);
4. waits on all sockets (and a wake-up pipe that user threads write to) for answers.

Sending from the user's thread: a batch that is ready as soon as it is queued (linger_ms=0, or a
batch that just filled up) is sent by the thread that queued it when the I/O lock is free,
instead of waking this thread to send it: that hand-over, a thread wake-up and the GIL passing
between threads, was the largest single delay of a record sent at a low rate. Sockets are never
used by two threads at once: every socket operation, from either thread, holds `_io_lock`, and
this thread waits on the sockets' ZMQ_FD file descriptors (not on the sockets) without it.
ZMQ_FD only signals changes, and any operation on a socket may consume a signal for an answer
that has arrived, so whoever releases the lock first checks each socket's ZMQ_EVENTS: this
thread reads what is there, a user thread wakes this thread to read it.

Idempotence (KIP-98): a batch gets its partition's next sequence when it is first taken and
keeps it, and its bytes, across retries, so the broker recognises a retry and answers it with
the original offset. At most `limits.IDEMPOTENT_IN_FLIGHT_BATCHES_MAX` batches of a partition
are in flight, since the broker remembers five. If a batch fails retriably, later in-flight
batches of its partition come back OUT_OF_ORDER_SEQUENCE_NUMBER; they are retried too, in
sequence order, and no new batch of that partition leaves until the retries are through. A
batch that fails for good leaves a gap in its partition's sequences, so the producer then takes
a new producer id once nothing is in flight and starts every sequence at 0 again; batches
waiting to be retried are re-encoded with the new id (Kafka resets sequences in the same
situation, KIP-360).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import zmq

from zlog import limits
from zlog.client.accumulator import PendingBatch, RecordAccumulator
from zlog.client.cluster import Connections
from zlog.client.compression_policy import AdaptiveCompression
from zlog.errors import ErrorCode, ZlogError, for_code
from zlog.record.header import Compression
from zlog.transport.messages import (
    InitProducerIdRequestV0,
    InitProducerIdResponseV0,
    ProduceEntry,
    ProduceRequestV0,
    ProduceResponseV0,
)
from zlog.transport.rpc import RpcResult
from zlog.types import METADATA_REFRESH_ERRORS, SEQUENCE_MODULUS, TopicPartition

log = logging.getLogger("zlog.client.producer")

# A request leaves once its batches reach this many bytes, before the next batch is encoded:
# the broker appends one request while this thread encodes the next (a pipeline), instead of
# waiting while every ready batch is encoded. Small batches still share a request.
REQUEST_SEND_BYTES: Final = 256 * 1024
POLL_INTERVAL_MS_MAX: Final = 50  # the longest the thread sleeps without checking deadlines
ACKS_0_CLOSE_LINGER_MS_MAX: Final = 5_000  # the longest close waits for acks=0 sends to leave
# Retriable in Kafka's table, but a corrupt batch that this producer built would only fail
# again: the transport below checks integrity already.
_NOT_RETRIED: Final = frozenset({ErrorCode.CORRUPT_MESSAGE})


@dataclass(frozen=True, slots=True)
class SenderConfig:
    acks: int
    compression: Compression
    idempotent: bool
    retries: int
    retry_backoff_ms: int
    request_timeout_ms: int
    delivery_timeout_ms: int


@dataclass(slots=True, eq=False)
class DeferredSend:
    """A send whose topic's partition count is not known yet (`Producer.send` never waits)."""

    size_bytes: int  # held of buffer_memory until placed
    deadline_ms: int  # monotonic: max_block_ms after the send; then it fails
    place: Callable[[int], object]  # with the lock held, given the partition count: queue it
    fail: Callable[[BaseException], None]  # outside the lock: fail its future
    failed: bool = False


@dataclass(slots=True)
class SharedState:
    """What user threads and the sender thread share; every field is guarded by `lock`."""

    lock: threading.Condition
    accumulator: RecordAccumulator
    partition_counts: dict[str, int] = field(default_factory=dict)
    topic_errors: dict[str, ZlogError] = field(default_factory=dict)
    wanted_topics: set[str] = field(default_factory=set)
    deferred: dict[str, list[DeferredSend]] = field(default_factory=dict)  # in send order
    deferred_bytes: int = 0
    flushes_waiting: int = 0
    closing: bool = False
    sender_failure: BaseException | None = None


@dataclass(slots=True)
class _PartitionState:
    next_sequence: int = 0
    in_flight: list[PendingBatch] = field(default_factory=list)
    retries: list[PendingBatch] = field(default_factory=list)  # by base_sequence


class Sender:
    """Runs in its own thread; see the module docstring for what one pass does."""

    def __init__(self, config: SenderConfig, shared: SharedState, connections: Connections,
                 clock_ms: Callable[[], int]) -> None:
        self.config = config
        self.shared = shared
        self.connections = connections
        self._clock_ms = clock_ms
        self._partitions: dict[TopicPartition, _PartitionState] = {}
        self._compression = AdaptiveCompression(config.compression)
        self._requests: dict[tuple[str, int], list[PendingBatch]] = {}
        self._stale_topics: set[str] = set()
        self._last_refresh_ms = -(2**62)
        self._last_init_attempt_ms = -(2**62)
        self._producer_id = -1
        self._producer_epoch = -1
        self._reset_pending = False
        self._stopping = False
        self._abandon = False
        self._pipe_closed = False
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        # Held for every socket operation and for this object's send state (module docstring).
        self._io_lock = threading.Lock()
        self._sockets_closed = False
        # One poller for the thread's life, rebuilt only when connections open or close.
        self._poller = select.poll()
        self._polled_generation = -1
        # No queued or retried batch can expire before this (see `_expire`).
        self._next_expiry_ms = -(2**62)
        self._retry_causes_logged: set[tuple[TopicPartition, ErrorCode]] = set()

    # -- called from any thread -----------------------------------------------------------

    def wake(self) -> None:
        """Cut the thread's wait short (a batch got ready, a flush or metadata is wanted)."""
        if self._pipe_closed:
            return
        with contextlib.suppress(BlockingIOError):  # full: a wake-up is pending already
            os.write(self._wake_write, b"w")

    def send_now_or_wake(self) -> None:
        """A batch is ready: send it from this (user) thread if the I/O lock is free.

        Anything the pass cannot finish here (no producer id or leader yet, retries, a full
        connection) is left queued for the I/O thread, which is woken for it.
        """
        if not self._io_lock.acquire(blocking=False):
            self.wake()  # the I/O thread is in a pass: it will send, or be woken to
            return
        try:
            if self._sockets_closed or not self._may_send_directly():
                self.wake()
                return
            try:
                self._send_ready(self._clock_ms())
            except Exception as error:  # a bug: as in the I/O thread, fail loudly, never hang
                log.exception("the producer failed sending from the caller's thread")
                self._fail_loudly(error)
                self.stop(abandon=True)
                return
            opened_connection = self._polled_generation != self.connections.generation
            if opened_connection or self._stale_topics or self._answers_waiting():
                self.wake()  # to poll the new socket too, to refresh metadata, to read answers
        finally:
            self._io_lock.release()

    def _may_send_directly(self) -> bool:
        """Whether a pass from a user thread has what it needs: an id, no retries pending."""
        if self.config.idempotent and (self._producer_id < 0 or self._reset_pending):
            return False
        return not any(state.retries for state in self._partitions.values())

    def _answers_waiting(self) -> bool:
        """Whether a client has an answer or a connection event (ZMQ_EVENTS); `_io_lock`."""
        return any(rpc.has_news() for rpc in self.connections.clients())

    def _cancelled(self) -> bool:
        """A control call of this thread gives up: the producer is closing with nothing to
        deliver, or abandons what is left (read without the lock: a hint, checked again)."""
        if not self._stopping:
            return False
        return self._abandon or (self.shared.accumulator.is_empty and not self.shared.deferred
                                 and not self._has_in_flight())

    def stop(self, *, abandon: bool) -> None:
        """Exit once nothing is left to send, or at once (failing what is left) if `abandon`."""
        self._stopping = True
        self._abandon = abandon
        self.wake()

    # -- the thread -----------------------------------------------------------------------

    def run(self) -> None:
        try:
            while True:
                self._run_once()
                if self._stopping and self._may_stop():
                    break
        except BaseException as error:  # a bug: fail everything loudly, never hang callers
            log.exception("the producer's sender thread failed")
            with self._io_lock:
                self._fail_loudly(error)
        finally:
            with self._io_lock:
                self._sockets_closed = True
                self._fail_everything(ZlogError(ErrorCode.NETWORK_EXCEPTION,
                                                "the producer closed"))
                # acks=0 sends are done once queued: give the queue time to reach the broker.
                self.connections.close(
                    linger_ms=0 if self.config.acks else min(self.config.request_timeout_ms,
                                                             ACKS_0_CLOSE_LINGER_MS_MAX))

    def dispose(self) -> None:
        """Close the wake-up pipe; only after the thread has ended (the producer joins it)."""
        if not self._pipe_closed:
            self._pipe_closed = True
            os.close(self._wake_read)
            os.close(self._wake_write)

    def _run_once(self) -> None:
        """One pass; each step is skipped at the cost of a few reads when it has nothing to do.

        Some of those reads (the topics user threads want, whether anything is queued) are
        made without the lock. That is safe because a user thread that adds to them wakes this
        thread afterwards: a pass that misses the change is followed by one that sees it.
        """
        with self._io_lock:
            if self._stale_topics or self.shared.wanted_topics:
                self._refresh_metadata_if_needed()
            if self.config.idempotent and (self._producer_id < 0 or self._reset_pending):
                self._maybe_init_producer_id()
            self._receive()  # answers free in-flight slots for what is queued
            now_ms = self._clock_ms()
            if now_ms >= self._next_expiry_ms:
                self._expire(now_ms)
            if self.shared.deferred:  # read unlocked: see above
                self._expire_deferred(now_ms)
            self._send_ready(now_ms)
            # A send may leave an answer readable with no signal on ZMQ_FD: look before waiting.
            wait_ms = 0 if self._answers_waiting() else self._wait_ms(now_ms)
            if self._polled_generation != self.connections.generation:
                self._rebuild_poller()
        self._wait(wait_ms)

    def _may_stop(self) -> bool:
        """Once stopping: whether nothing is left to send, or what is left is abandoned."""
        with self._io_lock, self.shared.lock:
            idle = (self.shared.accumulator.is_empty and not self.shared.deferred
                    and not self._has_in_flight())
        return idle or self._abandon

    def _has_in_flight(self) -> bool:
        return bool(self._requests) or any(p.retries for p in self._partitions.values())

    # -- metadata and producer id ---------------------------------------------------------

    def _refresh_metadata_if_needed(self) -> None:
        with self.shared.lock:
            wanted = set(self.shared.wanted_topics)
        stale = set(self._stale_topics)
        wanted |= stale
        now_ms = self._clock_ms()
        if not wanted or now_ms - self._last_refresh_ms < self.config.retry_backoff_ms:
            return
        self._last_refresh_ms = now_ms
        try:
            errors = self.connections.refresh(sorted(wanted), self.config.request_timeout_ms,
                                              cancelled=self._cancelled)
        except ZlogError as error:
            errors = dict.fromkeys(wanted, error)
        self._stale_topics -= wanted
        failed: list[tuple[DeferredSend, ZlogError]] = []
        gone: list[str] = []
        with self.shared.lock:
            for topic in wanted:
                count = self.connections.metadata.partition_count(topic)
                if count is not None:
                    self.shared.partition_counts[topic] = count
                    self.shared.topic_errors.pop(topic, None)
                    self.shared.wanted_topics.discard(topic)
                    failed.extend(self._place_deferred(topic, count))
                elif topic in errors:
                    topic_error = errors[topic]
                    self.shared.topic_errors[topic] = topic_error
                    final = (not topic_error.retriable
                             or topic_error.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    if final:  # the cluster says so: what waits for this topic fails now
                        self.shared.wanted_topics.discard(topic)
                        self.shared.partition_counts.pop(topic, None)
                        failed.extend(self._take_deferred(topic, topic_error))
                        if (topic in stale
                                and topic_error.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                            gone.append(topic)
            self.shared.lock.notify_all()
        for send, send_error in failed:
            send.fail(send_error)
        for topic in gone:
            self._fail_topic(topic, errors[topic])

    def _place_deferred(self, topic: str, count: int) -> list[tuple[DeferredSend, ZlogError]]:
        """Queue the sends that waited for `topic`, in order (lock held); those that cannot be
        placed (a partition the topic does not have) come back to be failed."""
        refused: list[tuple[DeferredSend, ZlogError]] = []
        for send in self.shared.deferred.pop(topic, []):
            self.shared.deferred_bytes -= send.size_bytes
            try:
                send.place(count)
            except ZlogError as error:
                send.failed = True
                refused.append((send, error))
        return refused

    def _take_deferred(
        self, topic: str, error: ZlogError
    ) -> list[tuple[DeferredSend, ZlogError]]:
        """Remove the sends waiting for `topic`; the caller fails them outside the lock."""
        taken = self.shared.deferred.pop(topic, [])
        for send in taken:
            send.failed = True
            self.shared.deferred_bytes -= send.size_bytes
        return [(send, error) for send in taken]

    def _expire_deferred(self, now_ms: int) -> None:
        """Sends that waited max_block_ms for metadata fail, naming the last reason heard."""
        expired: list[tuple[DeferredSend, ZlogError]] = []
        with self.shared.lock:
            for topic in list(self.shared.deferred):
                sends = self.shared.deferred[topic]
                due = [send for send in sends if send.deadline_ms <= now_ms]
                if not due:
                    continue
                error = _metadata_wait_error(topic, self.shared.topic_errors.get(topic))
                for send in due:
                    send.failed = True
                    self.shared.deferred_bytes -= send.size_bytes
                    expired.append((send, error))
                sends[:] = [send for send in sends if send.deadline_ms > now_ms]
                if not sends:
                    del self.shared.deferred[topic]
                    self.shared.wanted_topics.discard(topic)
            self.shared.lock.notify_all()
        for send, error in expired:
            send.fail(error)

    def _fail_topic(self, topic: str, error: ZlogError) -> None:
        """The topic is gone (deleted): its queued and retried batches fail now, not after
        delivery_timeout_ms of retries that cannot succeed."""
        message = f"topic {topic!r} does not exist (was it deleted?): {error.message}"
        with self.shared.lock:
            doomed = self.shared.accumulator.drain_topic(topic)
        for tp, state in self._partitions.items():
            if tp.topic == topic:
                doomed.extend(state.retries)
                state.retries.clear()
        for batch in doomed:
            self._finish(batch, ZlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message))

    def _maybe_init_producer_id(self) -> None:
        if self._reset_pending and not self._requests:
            self._producer_id = -1
            self._reset_pending = False
            for state in self._partitions.values():
                state.next_sequence = 0
                for batch in state.retries:
                    batch.encoded = None  # re-encoded with the new id and sequences
        if self._producer_id >= 0:
            return
        now_ms = self._clock_ms()
        if now_ms - self._last_init_attempt_ms < self.config.retry_backoff_ms:
            return
        self._last_init_attempt_ms = now_ms
        try:
            response = self.connections.call_control(
                InitProducerIdRequestV0(None), self.config.request_timeout_ms,
                cancelled=self._cancelled)
        except ZlogError as error:
            log.warning("InitProducerId failed, will retry: %s", error)
            return
        if not isinstance(response, InitProducerIdResponseV0):
            log.warning("InitProducerId answered with %s", type(response).__name__)
            return
        if response.error_code != ErrorCode.NONE:
            log.warning("InitProducerId answered %s", for_code(response.error_code))
            return
        self._producer_id = response.producer_id
        self._producer_epoch = response.producer_epoch

    # -- sending --------------------------------------------------------------------------

    def _partition(self, tp: TopicPartition) -> _PartitionState:
        state = self._partitions.get(tp)
        if state is None:
            state = self._partitions[tp] = _PartitionState()
        return state

    def _can_take(self, tp: TopicPartition, state: _PartitionState) -> bool:
        if not self.config.idempotent:
            return True
        if self._producer_id < 0 or self._reset_pending:
            return False
        return len(state.in_flight) < limits.IDEMPOTENT_IN_FLIGHT_BATCHES_MAX

    def _take_batches(self, now_ms: int) -> dict[str, list[PendingBatch]]:
        """Due retries first, then ready new batches, grouped by leader endpoint."""
        by_endpoint: dict[str, list[PendingBatch]] = {}
        metadata = self.connections.metadata
        id_missing = self.config.idempotent and (self._producer_id < 0 or self._reset_pending)
        for tp, state in self._partitions.items():
            while not id_missing and state.retries and state.retries[0].retry_at_ms <= now_ms:
                endpoint = metadata.leader_endpoint(*tp)
                if endpoint is None:
                    self._stale_topics.add(tp.topic)
                    break
                if (self.config.idempotent
                        and len(state.in_flight) >= limits.IDEMPOTENT_IN_FLIGHT_BATCHES_MAX):
                    break
                batch = state.retries.pop(0)
                state.in_flight.append(batch)
                by_endpoint.setdefault(endpoint, []).append(batch)
        if self.shared.accumulator.is_empty:  # read unlocked: see `_run_once`
            return by_endpoint
        with self.shared.lock:
            flushing = self.shared.flushes_waiting > 0 or self.shared.closing
            accumulator = self.shared.accumulator
            for tp in accumulator.ready_partitions(now_ms, flushing=flushing):
                state = self._partition(tp)
                endpoint = metadata.leader_endpoint(*tp)
                if endpoint is None:
                    self._stale_topics.add(tp.topic)
                    continue
                # Nothing new overtakes a retry of the same partition.
                while (
                    not state.retries
                    and self._can_take(tp, state)
                    and accumulator.first_is_ready(tp, now_ms, flushing=flushing)
                ):
                    batch = accumulator.pop_first(tp)
                    state.in_flight.append(batch)
                    by_endpoint.setdefault(endpoint, []).append(batch)
        return by_endpoint

    def _encode(self, batch: PendingBatch) -> bool:
        """Encode a batch the first time it leaves; False (batch failed) if it cannot be."""
        if batch.encoded is not None:
            return True
        state = self._partition(batch.tp)
        sequence = state.next_sequence if self.config.idempotent else -1
        codec = self._compression.codec_for(batch.tp.topic)
        try:
            batch.encoded = batch.encode(codec, self._producer_id, self._producer_epoch, sequence)
        except ZlogError as error:
            state.in_flight.remove(batch)
            self._finish(batch, error)
            return False
        self._compression.note(batch.tp.topic, codec, batch.size_bytes, len(batch.encoded))
        if self.config.idempotent:
            batch.base_sequence = sequence
            state.next_sequence = (sequence + batch.record_count) % SEQUENCE_MODULUS
        return True

    def _send_ready(self, now_ms: int) -> None:
        for endpoint, batches in self._take_batches(now_ms).items():
            request: list[PendingBatch] = []
            request_bytes = 0
            for batch in batches:
                if not self._encode(batch):
                    continue
                request.append(batch)
                request_bytes += len(_encoded(batch))
                if request_bytes >= REQUEST_SEND_BYTES:
                    self._send_request(endpoint, request)
                    request, request_bytes = [], 0
            if request:
                self._send_request(endpoint, request)

    def _send_request(self, endpoint: str, batches: list[PendingBatch]) -> None:
        entries = tuple(
            ProduceEntry(b.tp.topic, b.tp.partition, (_encoded(b),)) for b in batches
        )
        request = ProduceRequestV0(self.config.acks, self.config.request_timeout_ms, entries)
        try:
            rpc = self.connections.client(endpoint)
            if not rpc.has_capacity:
                self._requeue(batches)  # max_in_flight requests wait on this endpoint
                return
            for batch in batches:
                batch.attempts += 1
            correlation_id = rpc.send(request, self.config.request_timeout_ms)
        except ZlogError as error:
            for batch in batches:
                self._on_batch_error(batch, error, self._clock_ms())
            return
        if self.config.acks == 0:
            for batch in batches:
                self._partition(batch.tp).in_flight.remove(batch)
                self._finish(batch, None, base_offset=-1)
            return
        self._requests[(endpoint, correlation_id)] = batches

    def _requeue(self, batches: list[PendingBatch]) -> None:
        """Put taken batches back, in order, to be sent on a later pass (no attempt used)."""
        now_ms = self._clock_ms()
        for batch in batches:
            state = self._partition(batch.tp)
            state.in_flight.remove(batch)
            batch.retry_at_ms = now_ms
            self._add_retry(state, batch)

    def _add_retry(self, state: _PartitionState, batch: PendingBatch) -> None:
        """Queue a batch to be sent again, in sequence order; it can expire while it waits."""
        state.retries.append(batch)
        state.retries.sort(key=lambda b: (b.base_sequence, b.created_ms))
        expiry_ms = batch.created_ms + self.config.delivery_timeout_ms
        self._next_expiry_ms = min(self._next_expiry_ms, expiry_ms)

    # -- receiving ------------------------------------------------------------------------

    def _wait_ms(self, now_ms: int) -> int:
        """Until the next linger or backoff ends, at most POLL_INTERVAL_MS_MAX.

        Deadlines already past are ignored: what was due and is still here could not leave
        (no capacity, no leader, no producer id yet), and what unblocks it (an answer, a
        wake-up) ends the wait anyway. Counting them would spin the thread.
        """
        wait_ms = POLL_INTERVAL_MS_MAX
        if not self.shared.accumulator.is_empty:  # read unlocked: see `_run_once`
            with self.shared.lock:
                ready_ms = self.shared.accumulator.next_ready_ms(now_ms)
            if ready_ms is not None and ready_ms > now_ms:
                wait_ms = min(wait_ms, ready_ms - now_ms)
        for state in self._partitions.values():
            if state.retries and state.retries[0].retry_at_ms > now_ms:
                wait_ms = min(wait_ms, state.retries[0].retry_at_ms - now_ms)
        return wait_ms

    def _receive(self) -> None:
        """Take every answer that has arrived, and time out requests past their deadline.

        Under `_io_lock`. Each socket is read until ZMQ_EVENTS shows nothing more, which also
        re-arms its ZMQ_FD for the wait that follows.
        """
        for rpc in list(self.connections.clients()):
            if rpc.has_news():
                results = rpc.poll_responses(0)  # reads until ZMQ_EVENTS shows nothing more
            elif rpc.in_flight:
                results = rpc.expire_due()
            else:
                continue
            for result in results:
                self._on_result(rpc.endpoint, result)

    def _wait(self, wait_ms: int) -> None:
        """Sleep, without the lock, until a socket signals, a wake-up or `wait_ms`."""
        ready = self._poller.poll(wait_ms)
        if any(fd == self._wake_read for fd, _events in ready):
            self._drain_wake_pipe()

    def _rebuild_poller(self) -> None:
        """Poll the wake-up pipe and every connection's ZMQ_FD (a socket with nothing in
        flight is still drained when something arrives on it: a late answer)."""
        poller = select.poll()
        poller.register(self._wake_read, select.POLLIN)
        for rpc in self.connections.clients():
            for sock in rpc.sockets:  # the DEALER and its connection monitor
                fd = sock.getsockopt(zmq.FD)
                assert isinstance(fd, int)
                poller.register(fd, select.POLLIN)
        self._poller = poller
        self._polled_generation = self.connections.generation

    def _drain_wake_pipe(self) -> None:
        with contextlib.suppress(BlockingIOError):  # another pass drained it already
            os.read(self._wake_read, 4096)

    def _on_result(self, endpoint: str, result: RpcResult) -> None:
        batches = self._requests.pop((endpoint, result.correlation_id), None)
        if batches is None:
            return
        now_ms = self._clock_ms()
        for batch in batches:
            self._partition(batch.tp).in_flight.remove(batch)
        if result.error is not None:
            for batch in batches:
                self._on_batch_error(batch, result.error, now_ms)
            return
        response = result.response
        assert isinstance(response, ProduceResponseV0)
        if len(response.entries) != len(batches):
            error = ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR,
                              f"{len(response.entries)} results for {len(batches)} batches")
            for batch in batches:
                self._finish(batch, error)
            return
        for batch, entry in zip(batches, response.entries, strict=True):
            if entry.error_code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                self._finish(batch, None, base_offset=entry.base_offset,
                             log_append_time_ms=entry.log_append_time_ms)
            else:
                self._on_batch_error(batch, for_code(entry.error_code, entry.error_message),
                                     now_ms)

    def _on_batch_error(self, batch: PendingBatch, error: ZlogError, now_ms: int) -> None:
        state = self._partition(batch.tp)
        if batch in state.in_flight:
            state.in_flight.remove(batch)
        if error.code in METADATA_REFRESH_ERRORS:
            self._stale_topics.add(batch.tp.topic)
        retriable = error.retriable and error.code not in _NOT_RETRIED
        if self.config.idempotent and error.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            # Not this batch's fault when an earlier batch of the partition is being retried,
            # or failed for good (then the producer id is renewed and this batch re-encoded).
            retriable = self._reset_pending or any(
                _sequence_before(other.base_sequence, batch.base_sequence)
                for other in state.retries + state.in_flight
            )
        expired = now_ms - batch.created_ms >= self.config.delivery_timeout_ms
        if retriable and batch.attempts <= self.config.retries and not expired:
            batch.retry_at_ms = now_ms + self.config.retry_backoff_ms
            batch.last_error = error
            self._log_retry_cause(batch.tp, error)
            self._add_retry(state, batch)
            return
        self._finish(batch, error)

    def _log_retry_cause(self, tp: TopicPartition, error: ZlogError) -> None:
        """Each (partition, cause) once, until the partition succeeds again: retries are
        silent otherwise, and a cause that persists should be seen before it times out."""
        key = (tp, error.code)
        if key in self._retry_causes_logged:
            return
        self._retry_causes_logged.add(key)
        log.warning("%s-%d: %s; retrying (for up to delivery_timeout_ms=%d)", tp.topic,
                    tp.partition, error, self.config.delivery_timeout_ms)

    # -- completion -----------------------------------------------------------------------

    def _finish(self, batch: PendingBatch, error: ZlogError | None, *, base_offset: int = -1,
                log_append_time_ms: int = -1) -> None:
        if error is None:
            batch.complete(base_offset, log_append_time_ms)
            if self._retry_causes_logged:
                self._retry_causes_logged = {
                    key for key in self._retry_causes_logged if key[0] != batch.tp}
        else:
            batch.fail(error)
            if self.config.idempotent and batch.base_sequence >= 0:
                # Its sequences will never be appended, so later batches of its partition
                # would meet a gap: renew the producer id and start every sequence again.
                self._reset_pending = True
        with self.shared.lock:
            if not batch.finished:
                batch.finished = True
                self.shared.accumulator.release(batch)
            self.shared.lock.notify_all()

    def _expire(self, now_ms: int) -> None:
        """Fail queued and retried batches that waited delivery_timeout_ms; note the next.

        Runs only once something can have expired (`_next_expiry_ms`): a batch queued later is
        younger than every batch seen here, and a batch coming back for a retry lowers the
        mark itself (`_add_retry`), so no pass in between has anything to find.
        """
        timeout_ms = self.config.delivery_timeout_ms
        with self.shared.lock:
            expired = self.shared.accumulator.expire(now_ms, timeout_ms)
            oldest_ms = self.shared.accumulator.oldest_created_ms()
        oldest_ms = now_ms if oldest_ms is None else min(oldest_ms, now_ms)
        for state in self._partitions.values():
            if not state.retries:
                continue
            keep = [b for b in state.retries if now_ms - b.created_ms < timeout_ms]
            expired.extend(b for b in state.retries if now_ms - b.created_ms >= timeout_ms)
            state.retries = keep
            oldest_ms = min([oldest_ms, *(b.created_ms for b in keep)])
        self._next_expiry_ms = oldest_ms + timeout_ms
        for batch in expired:
            self._finish(batch, _expiry_error(batch, timeout_ms))

    def _fail_loudly(self, error: BaseException) -> None:
        """A bug: every batch fails now and every later call raises (under `_io_lock`)."""
        with self.shared.lock:
            self.shared.sender_failure = error
            self.shared.lock.notify_all()
        self._fail_everything(ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                        f"the producer's I/O thread failed: {error!r}"))

    def _fail_everything(self, error: ZlogError) -> None:
        with self.shared.lock:
            pending = self.shared.accumulator.drain_all()
            waiting = [send for topic in list(self.shared.deferred)
                       for send, _ in self._take_deferred(topic, error)]
        for send in waiting:
            send.fail(error)
        for batches in self._requests.values():
            pending.extend(batches)
        self._requests.clear()
        for state in self._partitions.values():
            # in_flight also holds batches taken but not sent yet when a pass failed midway.
            pending.extend(state.retries + state.in_flight)
            state.retries.clear()
            state.in_flight.clear()
        unique = {id(batch): batch for batch in pending}
        for batch in unique.values():
            self._finish(batch, error)


def _expiry_error(batch: PendingBatch, timeout_ms: int) -> ZlogError:
    """Kafka's rule: a batch that kept failing gives up with its last cause, not a bare
    timeout (NOT_ENOUGH_REPLICAS says what to fix; REQUEST_TIMED_OUT would hide it)."""
    where = f"{batch.record_count} records for {batch.tp.topic}-{batch.tp.partition}"
    last = batch.last_error
    if last is None:
        return ZlogError(ErrorCode.REQUEST_TIMED_OUT,
                         f"{where} were not acknowledged within delivery_timeout_ms={timeout_ms}")
    return ZlogError(last.code, f"{last.message} ({where} gave up after {batch.attempts} "
                                f"attempts within delivery_timeout_ms={timeout_ms})")


def _metadata_wait_error(topic: str, last: ZlogError | None) -> ZlogError:
    reason = f"no metadata for topic {topic!r} within max_block_ms"
    if last is None:
        return ZlogError(ErrorCode.REQUEST_TIMED_OUT, reason)
    return ZlogError(last.code, f"{reason}: {last.message}")


def _encoded(batch: PendingBatch) -> bytes:
    assert batch.encoded is not None, "batches are encoded before they are sent"
    return batch.encoded


def _sequence_before(first: int, second: int) -> bool:
    """Whether sequence `first` comes before `second`, allowing for wrap at 2^31."""
    if first < 0 or second < 0:
        return False
    return 0 < (second - first) % SEQUENCE_MODULUS < SEQUENCE_MODULUS // 2
