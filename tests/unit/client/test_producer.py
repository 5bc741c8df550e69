"""The producer's retries and idempotence, against a scripted fake broker on 127.0.0.1.

KIP-98: a retried batch keeps its producer id, epoch, sequence and bytes, so the broker can
recognise it; later in-flight batches of a partition that failed with it are retried in
sequence order. The fake broker answers Metadata, InitProducerId and Produce, checks sequences
the way the real one does, and fails or drops entries as a test scripts it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future

import pytest
import zmq

from zlog.client import Producer
from zlog.client.accumulator import PendingBatch
from zlog.client.records import RecordMetadata
from zlog.client.sender import REQUEST_SEND_BYTES, Sender
from zlog.errors import ErrorCode, ZlogError
from zlog.record.header import validate_batch
from zlog.record.records import read_records
from zlog.transport.codec import RequestHeader, decode_request, encode_response
from zlog.transport.messages import Request
from zlog.transport.messages.admin import (
    BrokerMetadata,
    InitProducerIdRequestV0,
    InitProducerIdResponseV0,
    MetadataRequestV0,
    MetadataResponseV0,
    PartitionMetadata,
    TopicMetadata,
)
from zlog.transport.messages.data import (
    ProduceRequestV0,
    ProduceResponseV0,
    ProduceResult,
)
from zlog.transport.sockets import make_router, recv_routed, send_routed
from zlog_testbed.waiting import wait_until

TOPIC = "t"
PRODUCER_ID = 42
DROP = "drop"  # a scripted action: no reply to the whole request


class FakeBroker:
    """Control and data endpoint in one, serving TOPIC with `partitions` partitions."""

    def __init__(self, partitions: int = 2) -> None:
        self.socket, self.endpoint = make_router("tcp://127.0.0.1:0")
        self.partitions = partitions
        self.script: deque[ErrorCode | str] = deque()  # consumed one produce entry at a time
        self.attempts: list[tuple[int, bytes]] = []  # (partition, batch) as received
        self.produce_requests: list[int] = []  # entries per produce request, in arrival order
        self.logs: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.next_sequence: dict[int, int] = {}
        self.appended: dict[tuple[int, int], int] = {}  # (partition, sequence) -> base offset
        self.metadata_requests = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.socket.poll(10, zmq.POLLIN):
                continue
            received = recv_routed(self.socket)
            assert received is not None
            identity, frames = received
            header, request = decode_request(frames)
            with self._lock:
                reply = self._answer(header, request)
            if reply is not None:
                send_routed(self.socket, identity, reply)

    def _answer(self, header: RequestHeader, request: Request) -> list[bytes] | None:
        if isinstance(request, MetadataRequestV0):
            self.metadata_requests += 1
            partitions = tuple(PartitionMetadata(p, 1, 0, (1,), (1,), self.endpoint)
                               for p in range(self.partitions))
            topics = tuple(
                TopicMetadata(name, 0, "", {}, partitions) if name == TOPIC
                else TopicMetadata(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "unknown topic")
                for name in (request.topics or (TOPIC,))
            )
            response = MetadataResponseV0("fake", 1, (BrokerMetadata(1, "h", self.endpoint),),
                                          topics)
            return encode_response(header, response)  # type: ignore[return-value]
        if isinstance(request, InitProducerIdRequestV0):
            return encode_response(  # type: ignore[return-value]
                header, InitProducerIdResponseV0(0, PRODUCER_ID, 0))
        assert isinstance(request, ProduceRequestV0)
        self.produce_requests.append(len(request.entries))
        results = []
        dropped = False
        for entry in request.entries:
            (batch,) = entry.batches
            raw = bytes(batch)
            self.attempts.append((entry.partition, raw))
            action = self.script.popleft() if self.script else "ok"
            dropped = dropped or action == DROP
            if isinstance(action, ErrorCode):
                results.append(ProduceResult(entry.topic, entry.partition, action, -1))
                continue
            code, base_offset = self._append(entry.partition, raw)
            results.append(ProduceResult(entry.topic, entry.partition, code, base_offset))
        if dropped or request.acks == 0:
            return None
        return encode_response(header, ProduceResponseV0(tuple(results)))  # type: ignore[return-value]

    def _append(self, partition: int, raw: bytes) -> tuple[int, int]:
        header = validate_batch(raw)
        if header.producer_id >= 0:
            key = (partition, header.base_sequence)
            if key in self.appended:
                return 0, self.appended[key]  # a retry: the original offset, nothing appended
            if header.base_sequence != self.next_sequence.get(partition, 0):
                return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
            self.next_sequence[partition] = header.base_sequence + header.record_count
        base_offset = sum(len(read_records(b)) for b in self.logs[partition])
        self.logs[partition].append(raw)
        if header.producer_id >= 0:
            self.appended[(partition, header.base_sequence)] = base_offset
        return 0, base_offset

    def values(self, partition: int) -> list[bytes | None]:
        with self._lock:
            return [r.value for batch in self.logs[partition] for r in read_records(batch)]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.socket.close(linger=0)


@pytest.fixture
def fake() -> Iterator[FakeBroker]:
    broker = FakeBroker()
    yield broker
    broker.close()


def offsets(futures: list[Future[RecordMetadata]]) -> list[int]:
    return [f.result(timeout=10).offset for f in futures]


def test_retry_keeps_sequence_and_bytes_and_refreshes_metadata(fake: FakeBroker) -> None:
    fake.script.extend([ErrorCode.NOT_LEADER_OR_FOLLOWER])
    with Producer(fake.endpoint, retry_backoff_ms=10, linger_ms=0) as producer:
        future = producer.send(TOPIC, b"v", partition=0)
        assert future.result(timeout=10).offset == 0
    first, second = fake.attempts
    assert first == second  # same bytes: same producer id, epoch and sequence
    header = validate_batch(first[1])
    assert (header.producer_id, header.base_sequence) == (PRODUCER_ID, 0)
    assert fake.metadata_requests >= 2
    assert fake.values(0) == [b"v"]


def test_lost_response_is_retried_and_deduplicated(fake: FakeBroker) -> None:
    fake.script.extend([DROP])
    with Producer(fake.endpoint, request_timeout_ms=200, retry_backoff_ms=10,
                  linger_ms=0) as producer:
        assert offsets([producer.send(TOPIC, b"once", partition=0)]) == [0]
    assert len(fake.attempts) == 2
    assert fake.values(0) == [b"once"]


def test_later_batches_are_retried_in_order_after_a_failure(fake: FakeBroker) -> None:
    fake.script.extend([ErrorCode.NOT_LEADER_OR_FOLLOWER])
    with Producer(fake.endpoint, batch_size=1, linger_ms=0, retry_backoff_ms=10) as producer:
        futures = [producer.send(TOPIC, f"v{i}".encode(), partition=0) for i in range(4)]
        assert offsets(futures) == [0, 1, 2, 3]
    assert fake.values(0) == [b"v0", b"v1", b"v2", b"v3"]
    sequences = [validate_batch(raw).base_sequence for _, raw in fake.attempts]
    assert sorted(set(sequences)) == [0, 1, 2, 3]


def test_non_retriable_error_fails_the_future(fake: FakeBroker) -> None:
    fake.script.extend([ErrorCode.MESSAGE_TOO_LARGE])
    with Producer(fake.endpoint, linger_ms=0) as producer:
        error = producer.send(TOPIC, b"v", partition=1).exception(timeout=10)
        assert isinstance(error, ZlogError) and error.code == ErrorCode.MESSAGE_TOO_LARGE
        assert not error.retriable
        assert producer.send(TOPIC, b"next", partition=1).result(timeout=10).offset == 0


@pytest.mark.slow
def test_delivery_timeout_bounds_the_retries(fake: FakeBroker) -> None:
    fake.script.extend([DROP] * 1000)
    with Producer(fake.endpoint, request_timeout_ms=50, delivery_timeout_ms=300,
                  retry_backoff_ms=10, linger_ms=0) as producer:
        error = producer.send(TOPIC, b"v", partition=0).exception(timeout=10)
    assert isinstance(error, ZlogError) and error.code == ErrorCode.REQUEST_TIMED_OUT


def test_a_batch_waiting_to_be_retried_still_expires_on_time(fake: FakeBroker) -> None:
    """The sender only looks for expired batches when one can have expired; a batch that
    comes back for a retry, older than everything queued, must move that moment earlier."""
    with Producer(fake.endpoint, delivery_timeout_ms=300, retry_backoff_ms=60_000,
                  linger_ms=0) as producer:
        assert producer.send(TOPIC, b"first", partition=1).result(timeout=10).offset == 0
        fake.script.extend([ErrorCode.NOT_LEADER_OR_FOLLOWER])
        future = producer.send(TOPIC, b"v", partition=0)
        error = future.exception(timeout=10)  # long before the 60 s backoff ends
        # It gives up with its last cause (Kafka's rule), and says when it gave up.
        assert isinstance(error, ZlogError) and error.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert "delivery_timeout_ms=300" in error.message
        producer.close(timeout_ms=0)


@pytest.mark.slow
def test_a_batch_back_from_flight_expires_by_its_own_age(fake: FakeBroker) -> None:
    """While a batch is in flight the sender may look for expired batches, find none, and
    note the next look a whole delivery_timeout_ms later; the batch, older, coming back for a
    retry must be looked at by its own deadline."""
    with Producer(fake.endpoint, delivery_timeout_ms=1000, request_timeout_ms=900,
                  retry_backoff_ms=60_000, linger_ms=0) as producer:
        assert producer.send(TOPIC, b"first", partition=1).result(timeout=10).offset == 0
        time.sleep(0.2)  # the next look comes while the batch below is in flight
        fake.script.extend([DROP])
        started = time.monotonic()
        error = producer.send(TOPIC, b"v", partition=0).exception(timeout=10)
        elapsed_s = time.monotonic() - started
        assert isinstance(error, ZlogError) and error.code == ErrorCode.REQUEST_TIMED_OUT
        assert elapsed_s < 1.5, f"expired {elapsed_s:.2f} s after send; the timeout is 1 s"
        producer.close(timeout_ms=0)


def test_full_buffer_blocks_send_then_raises(fake: FakeBroker) -> None:
    fake.script.extend([DROP] * 1000)
    producer = Producer(fake.endpoint, buffer_memory=2000, max_block_ms=200, linger_ms=0,
                        request_timeout_ms=60_000)
    try:
        with pytest.raises(ZlogError) as caught:
            for _ in range(100):
                producer.send(TOPIC, b"x" * 100, partition=0)
        assert caught.value.code == ErrorCode.REQUEST_TIMED_OUT
        assert "buffer_memory" in caught.value.message
    finally:
        producer.close(timeout_ms=0)


def test_sequences_count_records_per_partition(fake: FakeBroker) -> None:
    with Producer(fake.endpoint, bulk_batch_size=5 * 20 + 61) as producer:
        producer.send_many(TOPIC, [b"abcd"] * 10, partition=0).result(timeout=10)
        producer.send_many(TOPIC, [b"abcd"] * 3, partition=1).result(timeout=10)
    by_partition: dict[int, list[int]] = {0: [], 1: []}
    for partition, raw in fake.attempts:
        by_partition[partition].append(validate_batch(raw).base_sequence)
    assert by_partition == {0: [0, 5], 1: [0]}


def test_large_batches_leave_one_request_each_small_ones_share(fake: FakeBroker) -> None:
    """A request leaves once it holds REQUEST_SEND_BYTES, before the next batch is encoded, so
    the broker appends it while the producer encodes the next; small batches still share."""
    batch_bytes = 2 * REQUEST_SEND_BYTES
    with Producer(fake.endpoint, batch_size=batch_bytes, bulk_batch_size=batch_bytes,
                  linger_ms=60_000, compression=None) as producer:
        values = [b"v" * 1000] * (3 * batch_bytes // 1000)  # three batches, each over the mark
        pending = producer.send_many(TOPIC, values, partition=0)
        producer.flush(timeout_ms=10_000)
        assert len(pending.result(timeout=10)) >= 3
        large_requests = list(fake.produce_requests)
        fake.produce_requests.clear()
        small = [producer.send(TOPIC, b"s", partition=p) for p in (0, 1)]
        producer.flush(timeout_ms=10_000)
        offsets(small)
    assert large_requests == [1] * len(large_requests)
    assert fake.produce_requests == [2]


def test_a_ready_batch_leaves_from_the_callers_thread(
    fake: FakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """linger_ms=0: the caller sends its batch itself when the I/O lock is free (no hand-over
    to the I/O thread); the future is resolved by whichever of the two threads reads the
    answer first (the next test shows the caller can do it alone)."""
    senders: list[str] = []
    original = Sender._send_request

    def recording(self: Sender, endpoint: str, batches: list[PendingBatch]) -> None:
        senders.append(threading.current_thread().name)
        original(self, endpoint, batches)

    monkeypatch.setattr(Sender, "_send_request", recording)
    with Producer(fake.endpoint, linger_ms=0) as producer:
        producer.send(TOPIC, b"warm", partition=0).result(timeout=10)  # id and metadata
        senders.clear()
        resolved_in: list[str] = []
        for index in range(20):
            future = producer.send(TOPIC, b"v%d" % index, partition=0)
            future.add_done_callback(
                lambda _f: resolved_in.append(threading.current_thread().name))
            future.result(timeout=10)
    caller = threading.current_thread().name
    assert senders.count(caller) >= 15, senders
    assert set(resolved_in) <= {caller, "zlog-producer-io"}, resolved_in


WAKE_ONLY_PASS_MS = 50


def test_a_caller_waiting_on_its_future_reads_the_answer_itself(
    fake: FakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the I/O thread doing nothing at all (each pass replaced by a sleep on its wake-up
    pipe), synchronous sends still complete: the caller blocked on a future polls the
    connection and takes the answer itself, so its callbacks run on its own thread."""
    with Producer(fake.endpoint, linger_ms=0) as producer:
        producer.send(TOPIC, b"warm", partition=0).result(timeout=10)  # id and metadata
        idle = WAKE_ONLY_PASS_MS
        monkeypatch.setattr(Sender, "_run_once", lambda self: self._poll.wait_wake_only(idle))
        resolved_in: list[str] = []
        try:
            for index in range(20):
                future = producer.send(TOPIC, b"v%d" % index, partition=0)
                future.add_done_callback(
                    lambda _f: resolved_in.append(threading.current_thread().name))
                assert future.result(timeout=10).offset == index + 1
        finally:
            monkeypatch.undo()  # the I/O thread serves close's flush again
    assert set(resolved_in) == {threading.current_thread().name}, resolved_in


def test_threads_sending_at_once_lose_and_reorder_nothing(fake: FakeBroker) -> None:
    """Caller threads and the I/O thread share the sockets under one lock; with many threads
    sending unbatched records while answers arrive, every record lands once, in each thread's
    order."""
    threads_count, per_thread = 4, 200
    futures: dict[int, list[Future[RecordMetadata]]] = {}

    def sender(thread_index: int, producer: Producer) -> None:
        futures[thread_index] = [
            producer.send(TOPIC, b"%d:%d" % (thread_index, i), partition=0)
            for i in range(per_thread)
        ]

    with Producer(fake.endpoint, linger_ms=0, max_in_flight=2) as producer:
        workers = [threading.Thread(target=sender, args=(t, producer))
                   for t in range(threads_count)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(30)
        producer.flush(timeout_ms=30_000)
    values = fake.values(0)
    assert len(values) == threads_count * per_thread == len(set(values))
    for thread_index, thread_futures in futures.items():
        landed = offsets(thread_futures)
        assert landed == sorted(landed), f"thread {thread_index} reordered"
        assert [values[o] for o in landed] == [
            b"%d:%d" % (thread_index, i) for i in range(per_thread)
        ]


def test_acks_zero_turns_idempotence_off(fake: FakeBroker) -> None:
    with Producer(fake.endpoint, acks=0, linger_ms=0) as producer:
        assert producer.send(TOPIC, b"v", partition=0).result(timeout=10).offset == -1
    wait_until(lambda: len(fake.attempts) == 1, what="the acks=0 batch to arrive")
    assert validate_batch(fake.attempts[0][1]).producer_id == -1


def test_acks_zero_records_sent_just_before_close_still_arrive(fake: FakeBroker) -> None:
    with Producer(fake.endpoint, acks=0, linger_ms=0) as producer:
        producer.send(TOPIC, b"v", partition=0).result(timeout=10)  # metadata is known
        fake.attempts.clear()
        for index in range(200):
            producer.send(TOPIC, b"%d" % index, partition=0)
        producer.flush(timeout_ms=10_000)
    wait_until(lambda: len(fake.values(0)) == 201, what="every acks=0 record to arrive")


def test_a_failed_io_thread_fails_every_future_even_of_a_batch_taken_to_send(
    fake: FakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Producer(fake.endpoint, linger_ms=60_000) as producer:
        first = producer.send(TOPIC, b"v", partition=0)
        producer.flush(timeout_ms=10_000)
        assert first.result(timeout=0).offset == 0
        from zlog.client import sender

        def broken(self: sender.Sender, endpoint: str, batches: object) -> None:
            raise RuntimeError("a bug in the sender")

        monkeypatch.setattr(sender.Sender, "_send_request", broken)  # after taking the batch
        future = producer.send(TOPIC, b"w", partition=0)
        with contextlib.suppress(ZlogError):  # all finished (failed), or the thread is gone
            producer.flush(timeout_ms=10_000)
        with pytest.raises(ZlogError) as caught:
            future.result(timeout=10)
        assert "I/O thread failed" in caught.value.message
        with pytest.raises(ZlogError):
            producer.send(TOPIC, b"late", partition=0)


def test_a_bug_met_in_the_callers_thread_fails_the_producer_too(
    fake: FakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """linger_ms=0 sends from the caller's thread: a bug met there fails every future and
    every later call, as the same bug in the I/O thread does, instead of stranding the batch."""
    with Producer(fake.endpoint, linger_ms=0) as producer:
        assert producer.send(TOPIC, b"v", partition=0).result(timeout=10).offset == 0
        from zlog.client import sender

        def broken(self: sender.Sender, endpoint: str, batches: object) -> None:
            raise RuntimeError("a bug in the sender")

        monkeypatch.setattr(sender.Sender, "_send_request", broken)
        future = producer.send(TOPIC, b"w", partition=0)
        with pytest.raises(ZlogError) as caught:
            future.result(timeout=10)
        assert "I/O thread failed" in caught.value.message
        with pytest.raises(ZlogError):
            producer.send(TOPIC, b"late", partition=0)


def test_unknown_topic_and_partition_are_refused(fake: FakeBroker) -> None:
    """`send` does not wait for metadata: before the topic is known, its future says what the
    cluster answered; once known, a partition the topic lacks is refused at the call."""
    with Producer(fake.endpoint, max_block_ms=2000) as producer:
        unknown = producer.send("elsewhere", b"v").exception(timeout=10)
        assert isinstance(unknown, ZlogError)
        assert unknown.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        early = producer.send(TOPIC, b"v", partition=5).exception(timeout=10)
        assert isinstance(early, ZlogError)
        assert early.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert producer.partitions_for(TOPIC) == [0, 1]
        with pytest.raises(ZlogError) as caught:
            producer.send(TOPIC, b"v", partition=5)
        assert caught.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_closed_producer_refuses_sends(fake: FakeBroker) -> None:
    producer = Producer(fake.endpoint)
    producer.send(TOPIC, b"v", partition=0)
    producer.close()
    assert fake.values(0) == [b"v"]  # close sent what was queued
    with pytest.raises(ZlogError):
        producer.send(TOPIC, b"late", partition=0)


@pytest.mark.parametrize(("option", "value"), [("acks", 2), ("acks", "some"),
                                              ("compression", "zstd"), ("batch_size", 0),
                                              ("linger_ms", -1)])
def test_bad_configuration_is_invalid_config(option: str, value: object) -> None:
    with pytest.raises(ZlogError) as caught:
        Producer("tcp://127.0.0.1:9", **{option: value})  # type: ignore[arg-type]
    assert caught.value.code == ErrorCode.INVALID_CONFIG


def test_after_a_refusal_metadata_is_asked_of_another_broker() -> None:
    """A broker cut off from the controller answers Metadata from what it knew, naming itself
    the leader, and refuses the batch (NOT_LEADER_OR_FOLLOWER): the producer then asks the
    next broker of its bootstrap list, which names the leader that takes it, rather than the
    same one again and again until the record expires."""
    stale, fresh = FakeBroker(), FakeBroker()
    stale.script.extend([ErrorCode.NOT_LEADER_OR_FOLLOWER] * 1000)
    try:
        with Producer(f"{stale.endpoint},{fresh.endpoint}", retry_backoff_ms=10, linger_ms=0,
                      delivery_timeout_ms=5_000) as producer:
            assert producer.send(TOPIC, b"v", partition=0).result(timeout=10).offset == 0
        assert fresh.values(0) == [b"v"]
        assert stale.values(0) == []
    finally:
        stale.close()
        fresh.close()
