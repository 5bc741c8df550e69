"""The producer's I/O thread: takes ready batches, sends them to partition leaders, retries.

Kafka's producer design: user threads append to the accumulator (under `lock`), and this
thread does the I/O. Each pass it

1. refreshes metadata for topics that sends wait on (`DeferredSend`: queued once the answer
   comes), that have a partition with no known leader, or whose batch failed with an error
   saying the metadata is stale (NOT_LEADER_OR_FOLLOWER, a lost connection...: retries.py),
   at most once per retry backoff; after such a refusal from another control endpoint than
   the last, whose broker may be cut off and answering from stale metadata. A topic the
   cluster says does not exist fails what waits for it;
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

Reading answers on the user's thread: at a steady rate most records join a batch held while
the previous one of its partition awaits its answer (batching by round trip), so whoever reads
that answer sends the held batch. A `send` that finds the I/O lock free reads the answers that
have come and sends what they release (`pump`); a caller about to block on a send's future reads
its answers itself, polling the connections' ZMQ_FDs in slices of CALLER_WINDOW_MS
(`caller_waits`). While callers have done either within the last CALLER_WINDOW_MS, this thread
sleeps on its wake-up pipe alone, leaving the answers to them, and wakes at the window's end at
the latest: a batch held when the callers stop (the last records of a burst) waits at most that
long for it. So at a steady rate, and for a caller that waits on each send, no second thread
takes the GIL per record; this thread still does everything else (linger timers, retries,
metadata, expiry, flush and close, which wake it into watching the connections at once).
A future's callbacks run on whichever thread resolves it.

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

Beside this module: the bookkeeping per partition, sequences, retries and their expiry
(`partition_sends.py`), the sends that wait for metadata (`deferred_sends.py`), and where this
thread sleeps (`wakeable_poll.py`).
"""

from __future__ import annotations

import logging
import select
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Final

import zmq

from zlog import limits
from zlog.client.accumulator import PendingBatch, RecordAccumulator
from zlog.client.cluster import Connections
from zlog.client.compression_policy import AdaptiveCompression
from zlog.client.deferred_sends import (
    DeferredSend,
    expire_deferred,
    place_deferred,
    take_deferred,
)
from zlog.client.partition_sends import PartitionSends, SendBook, expiry_error, give_up_error
from zlog.client.retries import Next, after_leader_error
from zlog.client.wakeable_poll import WakeablePoll
from zlog.errors import ErrorCode, ZlogError, for_code
from zlog.record.header import Compression
from zlog.transport.messages.admin import (
    InitProducerIdRequestV0,
    InitProducerIdResponseV0,
)
from zlog.transport.messages.data import (
    ProduceEntry,
    ProduceRequestV0,
    ProduceResponseV0,
)
from zlog.transport.rpc import RpcResult
from zlog.types import SEQUENCE_MODULUS, TopicPartition

__all__ = ["DeferredSend", "Sender", "SenderConfig", "SharedState"]

log = logging.getLogger("zlog.client.producer")

# A request leaves once its batches reach this many bytes, before the next batch is encoded:
# the broker appends one request while this thread encodes the next (a pipeline), instead of
# waiting while every ready batch is encoded. Small batches still share a request.
REQUEST_SEND_BYTES: Final = 256 * 1024
# How long after a caller last read answers (or sent) this thread leaves the answers to callers;
# also the slice in which a caller waiting on a future polls the connections.
CALLER_WINDOW_MS: Final = 2
POLL_INTERVAL_MS_MAX: Final = 50  # the longest the thread sleeps without checking deadlines
ACKS_0_CLOSE_LINGER_MS_MAX: Final = 5_000  # the longest close waits for acks=0 sends to leave


@dataclass(frozen=True, slots=True)
class SenderConfig:
    acks: int
    compression: Compression
    idempotent: bool
    retries: int
    retry_backoff_ms: int
    request_timeout_ms: int
    delivery_timeout_ms: int
    metadata_max_age_ms: int = 300_000  # Kafka's metadata.max.age.ms: new partitions show


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


class Sender:
    """Runs in its own thread; see the module docstring for what one pass does."""

    def __init__(self, config: SenderConfig, shared: SharedState, connections: Connections,
                 clock_ms: Callable[[], int]) -> None:
        self.config = config
        self.shared = shared
        self.connections = connections
        self._clock_ms = clock_ms
        self._book = SendBook(
            idempotent=config.idempotent, retries=config.retries,
            retry_backoff_ms=config.retry_backoff_ms,
            delivery_timeout_ms=config.delivery_timeout_ms,
        )
        self._compression = AdaptiveCompression(config.compression)
        self._requests: dict[tuple[str, int], list[PendingBatch]] = {}
        self._stale_topics: set[str] = set()
        self._refused_topics: set[str] = set()  # stale: a leader said it was not theirs
        self._last_refresh_ms = -(2**62)
        self._next_age_refresh_ms = clock_ms() + config.metadata_max_age_ms
        self._last_init_attempt_ms = -(2**62)
        self._producer_id = -1
        self._producer_epoch = -1
        self._reset_pending = False
        self._stopping = False
        self._abandon = False
        self._poll = WakeablePoll()
        # Held for every socket operation and for this object's send state (module docstring).
        self._io_lock = threading.Lock()
        self._caller_until_ms = 0
        self._sockets_closed = False

    # -- called from any thread -----------------------------------------------------------

    def wake(self) -> None:
        """Cut the thread's wait short (a batch got ready, a flush or metadata is wanted)."""
        self._poll.wake()

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
            if not self._caller_turn():
                return
            opened_connection = self._poll.stale(self.connections)
            if opened_connection or self._stale_topics or self._answers_waiting():
                self.wake()  # to poll the new socket too, to refresh metadata, to read answers
        finally:
            self._io_lock.release()

    def pump(self) -> None:
        """A record joined a held batch: read the answers that came and send what they
        released, from this (user) thread, if the I/O lock is free (module docstring)."""
        if not self._io_lock.acquire(blocking=False):
            return  # the I/O thread is in a pass
        try:
            if self._sockets_closed or not self._may_send_directly():
                return  # retries or no producer id: the I/O thread's work, which it watches
            self._caller_turn()
        finally:
            self._io_lock.release()

    def caller_waits(self, future: Future[Any], timeout_s: float | None) -> float | None:
        """A caller blocks on a send's future: it reads the answers itself, on its own thread,
        until the future is done or its timeout has passed; returns the timeout left.

        It hands over to the I/O thread (and wakes it to watch the connections) when that
        thread is in a pass, or when what is left is that thread's work: retries, a producer
        id, a local connection, nothing in flight.
        """
        deadline_s = None if timeout_s is None else time.monotonic() + timeout_s
        while not future.done():
            if not self._io_lock.acquire(blocking=False):
                break
            try:
                if (self._sockets_closed or not self._may_send_directly()
                        or not self._caller_turn() or future.done()):
                    break
                fds = self._answer_fds()
                if not fds:
                    break
                if self._answers_waiting():
                    continue  # came meanwhile: read them before any wait
            finally:
                self._io_lock.release()
            left_s = None if deadline_s is None else deadline_s - time.monotonic()
            if left_s is not None and left_s <= 0:
                return 0
            poller = select.poll()
            for fd in fds:
                poller.register(fd, select.POLLIN)
            slice_ms = CALLER_WINDOW_MS if left_s is None else min(CALLER_WINDOW_MS,
                                                                   max(1, int(left_s * 1000)))
            poller.poll(slice_ms)
        if not future.done():
            self._caller_until_ms = 0
            self.wake()
        return None if deadline_s is None else max(0.0, deadline_s - time.monotonic())

    def _caller_turn(self) -> bool:
        """Read the answers that came and send what is ready, on a user thread (`_io_lock`
        held, a producer id, no retries); the I/O thread then leaves the answers to callers
        for CALLER_WINDOW_MS. False if it failed: a bug, so everything fails loudly, as it
        would in the I/O thread, and the producer stops."""
        try:
            self._read_answers()
            now_ms = self._clock_ms()
            self._send_ready(now_ms)
            self._caller_until_ms = now_ms + CALLER_WINDOW_MS
        except Exception as error:  # a bug: as in the I/O thread, fail loudly, never hang
            log.exception("the producer failed on the caller's thread")
            self._fail_loudly(error)
            self.stop(abandon=True)
            return False
        return True

    def _answer_fds(self) -> list[int]:
        """The ZMQ_FD of each DEALER with requests in flight; none if a local connection (its
        doorbell is the I/O thread's to watch) has any."""
        fds: list[int] = []
        for rpc in self.connections.clients():
            if not rpc.in_flight:
                continue
            if rpc.raw_fds or not rpc.sockets:
                return []
            fd = rpc.sockets[0].getsockopt(zmq.FD)
            assert isinstance(fd, int)
            fds.append(fd)
        return fds

    def _read_answers(self) -> None:
        """Read the answers of the network connections with requests in flight (`_io_lock`
        held). A local connection's answers stay the I/O thread's: its doorbell is rung only
        while that thread sleeps on it (local_produce.py), which a reader beside it would
        confuse."""
        for rpc in self.connections.clients():
            if rpc.in_flight and not rpc.raw_fds and rpc.has_news():
                for result in rpc.poll_responses(0):
                    self._on_result(rpc.endpoint, result)

    def _may_send_directly(self) -> bool:
        """Whether a pass from a user thread has what it needs: an id, no retries pending."""
        if self.config.idempotent and (self._producer_id < 0 or self._reset_pending):
            return False
        return not self._book.has_retries()

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
        self._poll.close()

    def _run_once(self) -> None:
        """One pass; each step is skipped at the cost of a few reads when it has nothing to do.

        Some of those reads (the topics user threads want, whether anything is queued) are
        made without the lock. That is safe because a user thread that adds to them wakes this
        thread afterwards: a pass that misses the change is followed by one that sees it.
        """
        with self._io_lock:
            self._age_metadata()
            if self._stale_topics or self.shared.wanted_topics:
                self._refresh_metadata_if_needed()
            if self.config.idempotent and (self._producer_id < 0 or self._reset_pending):
                self._maybe_init_producer_id()
            self._receive()  # answers free in-flight slots for what is queued
            now_ms = self._clock_ms()
            if now_ms >= self._book.next_expiry_ms:
                self._expire(now_ms)
            if self.shared.deferred:  # read unlocked: see above
                self._expire_deferred(now_ms)
            self._send_ready(now_ms)
            # A send may leave an answer readable with no signal on ZMQ_FD: look before waiting.
            wait_ms = 0 if self._answers_waiting() else self._wait_ms(now_ms)
            if self._poll.stale(self.connections):
                self._poll.rebuild(self.connections)
            caller_ms = self._caller_until_ms - now_ms
            callers_read = (caller_ms > 0 and wait_ms > 0 and not self._stopping
                            and self.shared.flushes_waiting == 0 and not self.shared.closing)
        if callers_read:
            self._poll.wait_wake_only(min(wait_ms, caller_ms))
            return
        self._poll.wait(wait_ms)  # without the lock

    def _may_stop(self) -> bool:
        """Once stopping: whether nothing is left to send, or what is left is abandoned."""
        with self._io_lock, self.shared.lock:
            idle = (self.shared.accumulator.is_empty and not self.shared.deferred
                    and not self._has_in_flight())
        return idle or self._abandon

    def _has_in_flight(self) -> bool:
        return bool(self._requests) or self._book.has_retries()

    # -- metadata and producer id ---------------------------------------------------------

    def _age_metadata(self) -> None:
        """Every metadata_max_age_ms, every known topic is asked about again, as in Kafka:
        partitions added to a topic are used from then on."""
        now_ms = self._clock_ms()
        if now_ms < self._next_age_refresh_ms:
            return
        self._next_age_refresh_ms = now_ms + self.config.metadata_max_age_ms
        with self.shared.lock:
            self._stale_topics |= set(self.shared.partition_counts)

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
                                              cancelled=self._cancelled,
                                              elsewhere=bool(self._refused_topics & wanted))
        except ZlogError as error:
            errors = dict.fromkeys(wanted, error)
        self._stale_topics -= wanted
        self._refused_topics -= wanted
        failed: list[tuple[DeferredSend, ZlogError]] = []
        gone: list[str] = []
        with self.shared.lock:
            for topic in wanted:
                count = self.connections.metadata.partition_count(topic)
                if count is not None:
                    self.shared.partition_counts[topic] = count
                    self.shared.topic_errors.pop(topic, None)
                    self.shared.wanted_topics.discard(topic)
                    failed.extend(place_deferred(self.shared, topic, count))
                elif topic in errors:
                    topic_error = errors[topic]
                    self.shared.topic_errors[topic] = topic_error
                    if not topic_error.retriable:  # the cluster says so: fail what waits
                        self.shared.wanted_topics.discard(topic)
                        self.shared.partition_counts.pop(topic, None)
                        failed.extend(take_deferred(self.shared, topic, topic_error))
                        if (topic in stale
                                and topic_error.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                            gone.append(topic)
            self.shared.lock.notify_all()
        for send, send_error in failed:
            send.fail(send_error)
        for topic in gone:
            self._fail_topic(topic, errors[topic])

    def _expire_deferred(self, now_ms: int) -> None:
        """Sends that waited max_block_ms for metadata fail, naming the last reason heard."""
        with self.shared.lock:
            expired = expire_deferred(self.shared, now_ms)
            self.shared.lock.notify_all()
        for send, error in expired:
            send.fail(error)

    def _fail_topic(self, topic: str, error: ZlogError) -> None:
        """The topic is gone (deleted): its queued and retried batches fail now, not after
        delivery_timeout_ms of retries that cannot succeed."""
        message = f"topic {topic!r} does not exist (was it deleted?): {error.message}"
        with self.shared.lock:
            doomed = self.shared.accumulator.drain_topic(topic)
        doomed.extend(self._book.take_retries_of(topic))
        for batch in doomed:
            self._finish(batch, ZlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message))

    def _maybe_init_producer_id(self) -> None:
        if self._reset_pending and not self._requests:
            self._producer_id = -1
            self._reset_pending = False
            self._book.restart_sequences()
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

    def _can_take(self, tp: TopicPartition, state: PartitionSends) -> bool:
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
        for tp, state in self._book.partitions.items():
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
                state = self._book.partition(tp)
                endpoint = metadata.leader_endpoint(*tp)
                if endpoint is None:
                    self._stale_topics.add(tp.topic)
                    continue
                # Nothing new overtakes a retry of the same partition.
                while (
                    not state.retries
                    and self._can_take(tp, state)
                    and accumulator.first_is_ready(tp, now_ms, flushing=flushing)
                    and not (state.in_flight and accumulator.first_is_open(tp))
                ):
                    batch = accumulator.pop_first(tp)
                    state.in_flight.append(batch)
                    by_endpoint.setdefault(endpoint, []).append(batch)
        return by_endpoint

    def _encode(self, batch: PendingBatch) -> bool:
        """Encode a batch the first time it leaves; False (batch failed) if it cannot be."""
        if batch.encoded is not None:
            return True
        state = self._book.partition(batch.tp)
        sequence = state.next_sequence if self.config.idempotent else -1
        codec = self._compression.codec_for(batch.tp.topic, batch.size_bytes)
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
                # max_in_flight requests wait on this endpoint: sent on a later pass.
                self._book.requeue(batches, self._clock_ms())
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
                self._book.partition(batch.tp).in_flight.remove(batch)
                self._finish(batch, None, base_offset=-1)
            return
        self._requests[(endpoint, correlation_id)] = batches

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
        return self._book.retry_wait_ms(now_ms, wait_ms)

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

    def _on_result(self, endpoint: str, result: RpcResult) -> None:
        batches = self._requests.pop((endpoint, result.correlation_id), None)
        if batches is None:
            return
        now_ms = self._clock_ms()
        for batch in batches:
            self._book.partition(batch.tp).in_flight.remove(batch)
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
        if after_leader_error(error.code) is Next.RELEARN:
            self._stale_topics.add(batch.tp.topic)
            self._refused_topics.add(batch.tp.topic)
        if not self._book.retry_later(batch, error, now_ms, reset_pending=self._reset_pending):
            self._finish(batch, give_up_error(batch, error))

    # -- completion -----------------------------------------------------------------------

    def _finish(self, batch: PendingBatch, error: ZlogError | None, *, base_offset: int = -1,
                log_append_time_ms: int = -1) -> None:
        if error is None:
            batch.complete(base_offset, log_append_time_ms)
            self._book.note_delivered(batch.tp)
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
        """Fail queued and retried batches that waited delivery_timeout_ms; runs only once
        something can have expired (`SendBook.next_expiry_ms`)."""
        timeout_ms = self.config.delivery_timeout_ms
        with self.shared.lock:
            expired = self.shared.accumulator.expire(now_ms, timeout_ms)
            oldest_ms = self.shared.accumulator.oldest_created_ms()
        expired.extend(self._book.expire_retries(now_ms, oldest_ms))
        for batch in expired:
            self._finish(batch, expiry_error(batch, timeout_ms))

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
                       for send, _ in take_deferred(self.shared, topic, error)]
        for send in waiting:
            send.fail(error)
        for batches in self._requests.values():
            pending.extend(batches)
        self._requests.clear()
        pending.extend(self._book.take_all())
        unique = {id(batch): batch for batch in pending}
        for batch in unique.values():
            self._finish(batch, error)


def _encoded(batch: PendingBatch) -> bytes:
    assert batch.encoded is not None, "batches are encoded before they are sent"
    return batch.encoded
