"""The client library against a real `zlog serve`: produce, fetch, idempotence, bad input.

Spec: docs/protocol.md (Produce v0, Fetch v0, ListOffsets v0, the control plane) and DESIGN.md
section 5 (bad input gets its error code and the broker keeps serving). One broker process per
module, on a free port of 127.0.0.1; each test uses its own topics.
"""

from __future__ import annotations

import os
import signal
import struct
import time
from collections.abc import Iterator

import numpy as np
import pytest

from zlog.client import (
    EARLIEST,
    LATEST,
    Admin,
    ConfigEntry,
    Consumer,
    NewTopic,
    Producer,
    TopicPartition,
)
from zlog.client.partitioner import partition_for_key
from zlog.errors import ErrorCode, ZlogError
from zlog.record.arrays import build_batch_from_values
from zlog.record.records import NewRecord, build_batch
from zlog.transport.messages.admin import (
    InitProducerIdRequestV0,
    InitProducerIdResponseV0,
    MetadataRequestV0,
    MetadataResponseV0,
)
from zlog.transport.messages.data import (
    FetchEntry,
    FetchRequestV0,
    FetchResponseV0,
    ProduceEntry,
    ProduceRequestV0,
    ProduceResponseV0,
    ProduceResult,
)
from zlog.transport.rpc import RpcClient, RpcResult
from zlog_testbed.broker_process import BrokerProcess, broker_process
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

CALL_TIMEOUT_MS = 10_000


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with broker_process() as instance:
        yield instance


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[Admin]:
    with Admin(broker.endpoint, request_timeout_ms=CALL_TIMEOUT_MS) as instance:
        yield instance


_names = iter(range(1_000_000))


def new_topic(admin: Admin, partitions: int = 1, prefix: str = "t") -> str:
    name = f"{prefix}-{next(_names)}"
    admin.create_topics([NewTopic(name, partitions)])
    return name


def read_all(broker: BrokerProcess, topic: str, partition: int, count: int,
             offset: int | None = None) -> list[tuple[int, bytes | None]]:
    """`count` records from the beginning (or `offset`), as (offset, value)."""
    with Consumer(broker.endpoint, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        if offset is not None:
            c.seek(tp, offset)
        records: list[tuple[int, bytes | None]] = []
        deadline = time.monotonic() + 20
        while len(records) < count and time.monotonic() < deadline:
            records.extend((r.offset, r.value) for r in c.poll(500))
        return records


def leader_endpoint(broker: BrokerProcess, topic: str, partition: int) -> str:
    with RpcClient(broker.endpoint) as rpc:
        response = rpc.call(MetadataRequestV0((topic,)), CALL_TIMEOUT_MS)
    assert isinstance(response, MetadataResponseV0)
    (found,) = response.topics
    return next(p.endpoint for p in found.partitions if p.partition == partition)


def produce_raw(endpoint: str, topic: str, partition: int, batch: bytes,
                acks: int = 1) -> ProduceResult:
    with RpcClient(endpoint) as rpc:
        response = rpc.call(
            ProduceRequestV0(acks, 5000, (ProduceEntry(topic, partition, (batch,)),)),
            CALL_TIMEOUT_MS)
    assert isinstance(response, ProduceResponseV0)
    (result,) = response.entries
    return result


# ---------------------------------------------------------------------------------------------
# Topics.
# ---------------------------------------------------------------------------------------------


def test_create_describe_list_delete(admin: Admin) -> None:
    name = new_topic(admin, partitions=3)
    (description,) = admin.describe_topics([name])
    assert [p.partition for p in description.partitions] == [0, 1, 2]
    assert all(p.leader >= 0 and p.endpoint for p in description.partitions)
    assert name in admin.list_topics()
    cluster = admin.describe_cluster()
    assert cluster.brokers and cluster.raft_leader is not None
    admin.delete_topics([name])
    wait_until(lambda: name not in admin.list_topics(), what="the topic to disappear")


def test_bad_topic_requests_get_their_codes(admin: Admin) -> None:
    cases = [
        (NewTopic("bad/name", 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (NewTopic("..", 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (NewTopic("zero-partitions", 0), ErrorCode.INVALID_PARTITIONS),
        (NewTopic("too-replicated", 1, replication_factor=5),
         ErrorCode.INVALID_REPLICATION_FACTOR),
        (NewTopic("bad-config", 1, configs={"no.such.config": "1"}), ErrorCode.INVALID_CONFIG),
    ]
    for topic, code in cases:
        with pytest.raises(ZlogError) as caught:
            admin.create_topics([topic])
        assert caught.value.code == code, (topic, caught.value)
    existing = new_topic(admin)
    with pytest.raises(ZlogError) as caught:
        admin.create_topics([NewTopic(existing, 1)])
    assert caught.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
    with pytest.raises(ZlogError) as caught:
        admin.describe_topics(["never-created"])
    assert caught.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_topic_grows_and_its_new_partitions_take_records(broker: BrokerProcess,
                                                          admin: Admin) -> None:
    """CreatePartitions: 2 -> 5 partitions; the new ones are served as soon as the call
    returns, a producer that knew the old count finds the new ones once its metadata is
    metadata_max_age_ms old, and the old partitions' records stay where they were."""
    topic = new_topic(admin, partitions=2)
    with Producer(broker.endpoint, linger_ms=0, metadata_max_age_ms=200) as producer:
        producer.send(topic, b"before", partition=1).result(timeout=20)
        admin.create_partitions({topic: 5})
        (description,) = admin.describe_topics([topic])
        assert [p.partition for p in description.partitions] == [0, 1, 2, 3, 4]
        assert all(p.leader >= 0 and p.endpoint for p in description.partitions)
        wait_until(lambda: producer.partitions_for(topic) == [0, 1, 2, 3, 4],
                   what="the producer to see the new partitions at its metadata's max age")
        assert producer.send(topic, b"after", partition=4).result(timeout=20).offset == 0
    assert read_all(broker, topic, 4, 1) == [(0, b"after")]
    assert read_all(broker, topic, 1, 1) == [(0, b"before")]


def test_bad_partition_growth_gets_its_code_and_changes_nothing(admin: Admin) -> None:
    topic = new_topic(admin, partitions=3)
    cases = [
        ({topic: 2}, ErrorCode.INVALID_PARTITIONS),  # topics never shrink
        ({topic: 3}, ErrorCode.INVALID_PARTITIONS),  # nothing to add
        ({topic: 70_000}, ErrorCode.INVALID_PARTITIONS),  # over the bound
        ({"never-created": 4}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    for counts, code in cases:
        with pytest.raises(ZlogError) as caught:
            admin.create_partitions(counts)
        assert caught.value.code == code, (counts, caught.value)
    assert admin.create_partitions({topic: 6}, validate_only=True) == {topic: None}
    (description,) = admin.describe_topics([topic])
    assert len(description.partitions) == 3


def test_topic_configs_described_and_altered(admin: Admin) -> None:
    name = new_topic(admin)
    before = {entry.name: entry for entry in admin.describe_configs([name])[name]}
    assert before["retention.ms"] == ConfigEntry("retention.ms", "604800000", "default")
    assert admin.incremental_alter_configs(
        {name: {"retention.ms": "3600000", "segment.ms": "60000"}}) == {name: None}
    (described,) = admin.describe_topics([name])
    assert dict(described.configs) == {"retention.ms": "3600000", "segment.ms": "60000"}
    admin.incremental_alter_configs({name: {"segment.ms": None}})
    entries = admin.describe_configs([name], names=["retention.ms", "segment.ms"])[name]
    assert entries == [ConfigEntry("retention.ms", "3600000", "topic"),
                       ConfigEntry("segment.ms", "604800000", "default")]
    dry = admin.incremental_alter_configs({name: {"retention.ms": "1"}}, validate_only=True)
    assert dry == {name: None}
    assert dict(admin.describe_topics([name])[0].configs) == {"retention.ms": "3600000"}


def test_a_refused_config_change_changes_nothing(admin: Admin) -> None:
    name = new_topic(admin)
    admin.incremental_alter_configs({name: {"retention.ms": "3600000"}})
    outcome = admin.incremental_alter_configs(
        {name: {"retention.ms": "5", "segment.bytes": "1"}, "never-created": {"flush.ms": "1"}},
        raise_on_error=False)
    assert {topic: error and error.code for topic, error in outcome.items()} == {
        name: ErrorCode.INVALID_CONFIG, "never-created": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    refused = outcome[name]
    assert refused is not None and "segment.bytes must be at least 14, not 1" in refused.message
    assert dict(admin.describe_topics([name])[0].configs) == {"retention.ms": "3600000"}
    for bad, code in [({"compression.type": "brotli"}, ErrorCode.INVALID_CONFIG),
                      ({"no.such.config": "1"}, ErrorCode.INVALID_CONFIG)]:
        with pytest.raises(ZlogError) as caught:
            admin.incremental_alter_configs({name: bad})
        assert caught.value.code == code
    with pytest.raises(ZlogError) as caught:
        admin.describe_configs(["never-created"])
    assert caught.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert caught.value.message == "no topic 'never-created'", "the topic named once"


# ---------------------------------------------------------------------------------------------
# Producing.
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_produce_with_each_acks_and_read_back(broker: BrokerProcess, admin: Admin,
                                              acks: int | str) -> None:
    topic = new_topic(admin)
    values = [f"{acks}-{i}".encode() for i in range(200)]
    with Producer(broker.endpoint, acks=acks, linger_ms=2) as producer:
        futures = [producer.send(topic, v, partition=0) for v in values]
        producer.flush(timeout_ms=20_000)
    offsets = [f.result().offset for f in futures]
    if acks == 0:
        assert offsets == [-1] * len(values)  # nobody told us
        tp = TopicPartition(topic, 0)
        wait_until(lambda: admin.list_offsets({tp: LATEST})[tp].offset == len(values),
                   what="acks=0 records to land")
    else:
        assert offsets == list(range(len(values)))
    assert read_all(broker, topic, 0, len(values)) == list(enumerate(values))


def batch_sizes(broker: BrokerProcess, topic: str, count: int) -> list[int]:
    """The record counts of partition 0's batches, from the beginning, until `count` records."""
    with Consumer(broker.endpoint, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
        c.assign([TopicPartition(topic, 0)])
        sizes: list[int] = []
        deadline = time.monotonic() + 20
        while sum(sizes) < count and time.monotonic() < deadline:
            sizes.extend(len(view) for _tp, view in c.poll_batches(500))
        return sizes


def test_records_sent_while_a_batch_awaits_its_answer_leave_together_with_it(
        broker: BrokerProcess, admin: Admin) -> None:
    """linger_ms 0 (the default): a record to an idle partition leaves at once; the records
    sent while its batch awaits the answer gather in one batch that leaves with the answer,
    instead of one request each (zlog/client/producer.py, "Batching without a timer")."""
    topic = new_topic(admin)
    worker = broker.worker_pid_for(leader_endpoint(broker, topic, 0))
    with Producer(broker.endpoint, acks=1) as producer:
        producer.send(topic, b"warm", partition=0).result(30)  # metadata, id, connection
        os.kill(worker, signal.SIGSTOP)  # the next batch's answer cannot come
        try:
            futures = [producer.send(topic, b"%d" % i, partition=0) for i in range(20)]
        finally:
            os.kill(worker, signal.SIGCONT)
        assert [f.result(30).offset for f in futures] == list(range(1, 21))
    assert batch_sizes(broker, topic, 21) == [1, 1, 19]


def test_a_consumer_at_the_tail_gets_each_new_batch_without_asking_again(
        broker: BrokerProcess, admin: Admin) -> None:
    """Fetch v2: the consumer's one fetch stays at the worker, which sends every new batch
    as it is appended (docs/protocol.md, "Fetch v2")."""
    topic = new_topic(admin)
    tp = TopicPartition(topic, 0)
    with Consumer(broker.endpoint, auto_offset_reset="latest") as consumer, \
            Producer(broker.endpoint, acks=1) as producer:
        consumer.assign([tp])
        consumer.position(tp)
        assert consumer.poll(0) == []  # the subscription leaves
        for index in range(30):
            producer.send(topic, b"%d" % index, partition=0).result(30)
            got: list[bytes | None] = []
            deadline = time.monotonic() + 20
            while not got and time.monotonic() < deadline:
                got = [r.value for r in consumer.poll(200)]
            assert got == [b"%d" % index]
        counts = consumer.metrics()
    assert counts["fetch_answers"] >= 30
    assert counts["fetch_requests"] <= 2, counts


def test_a_seek_while_subscribed_reads_from_the_new_offset(broker: BrokerProcess,
                                                           admin: Admin) -> None:
    topic = new_topic(admin)
    tp = TopicPartition(topic, 0)
    with Producer(broker.endpoint, acks=1) as producer:
        for index in range(10):
            producer.send(topic, b"%d" % index, partition=0)
        producer.flush()
        with Consumer(broker.endpoint, auto_offset_reset="latest",
                      fetch_max_wait_ms=30_000) as consumer:
            consumer.assign([tp])
            assert consumer.poll(100) == []  # subscribed at the end, nothing comes
            consumer.seek(tp, 3)
            got: list[tuple[int, bytes | None]] = []
            deadline = time.monotonic() + 20
            while len(got) < 7 and time.monotonic() < deadline:
                got.extend((r.offset, r.value) for r in consumer.poll(200))
            assert got == [(o, b"%d" % o) for o in range(3, 10)]
            producer.send(topic, b"10", partition=0).result(30)
            more: list[tuple[int, bytes | None]] = []
            while not more and time.monotonic() < deadline:
                more = [(r.offset, r.value) for r in consumer.poll(200)]
            assert more == [(10, b"10")]


def test_subscriptions_that_reach_their_max_bytes_end_and_start_again(
        broker: BrokerProcess, admin: Admin) -> None:
    """A subscription sends at most fetch_max_bytes; the consumer then subscribes again, so
    each record arrives once, in order, however many subscriptions it takes."""
    topic = new_topic(admin)
    tp = TopicPartition(topic, 0)
    values = [b"%04d" % index + bytes(200) for index in range(300)]
    with Consumer(broker.endpoint, auto_offset_reset="earliest", fetch_max_bytes=2048,
                  max_partition_fetch_bytes=1024) as consumer, \
            Producer(broker.endpoint, acks=1, batch_size=600) as producer:
        consumer.assign([tp])
        consumer.position(tp)
        futures = [producer.send(topic, value, partition=0) for value in values]
        producer.flush()
        assert [f.result().offset for f in futures] == list(range(300))
        got: list[tuple[int, bytes | None]] = []
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            got.extend((r.offset, r.value) for r in consumer.poll(200))
        assert got == list(enumerate(values))
        assert consumer.metrics()["fetch_requests"] > 5  # many subscriptions ended and began


def test_keyed_records_land_where_kafka_would_put_them(broker: BrokerProcess,
                                                       admin: Admin) -> None:
    topic = new_topic(admin, partitions=4)
    keys = [f"user-{i}".encode() for i in range(40)]
    with Producer(broker.endpoint) as producer:
        futures = [producer.send(topic, b"v", key=k, headers={"h": b"1"}) for k in keys]
        producer.flush()
    for key, future in zip(keys, futures, strict=True):
        assert future.result().partition == partition_for_key(key, 4)


def test_send_many_fast_path(broker: BrokerProcess, admin: Admin) -> None:
    topic = new_topic(admin, partitions=3)
    values = [f"value-{i:06d}".encode() for i in range(30_000)]
    keys = [f"k{i % 97}".encode() for i in range(30_000)]
    with Producer(broker.endpoint, batch_size=64 * 1024) as producer:
        batches = producer.send_many(topic, values, keys=keys).result(timeout=30)
        keyless = producer.send_many(topic, values[:1000], partition=1).result(timeout=30)
    assert sum(b.record_count for b in batches) == 30_000
    assert sum(b.record_count for b in keyless) == 1000
    expected = {p: [v for v, k in zip(values, keys, strict=True) if partition_for_key(k, 3) == p]
                for p in range(3)}
    expected[1] += values[:1000]
    with Consumer(broker.endpoint, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(3)])
        got: dict[int, list[bytes | None]] = {0: [], 1: [], 2: []}
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < 31_000 and time.monotonic() < deadline:
            for tp, view in consumer.poll_batches(1000):
                got[tp.partition].extend(view.values())
    assert got == expected


def test_send_many_calls_in_a_row_each_learn_where_their_rows_landed(broker: BrokerProcess,
                                                                    admin: Admin) -> None:
    """Calls that queue behind a busy sender travel as one RecordBatch; each call's
    BatchMetadata still names the offsets of its own rows, and every row is stored once, in
    call order."""
    topic = new_topic(admin)
    calls, rows = 200, 300
    stamps = np.arange(calls * rows, dtype=">u4").view(np.uint8).reshape(calls, rows, 4)
    with Producer(broker.endpoint) as producer:
        futures = [producer.send_many(topic, stamps[call], partition=0) for call in range(calls)]
        results = [future.result(timeout=30) for future in futures]
    stored: list[bytes] = []
    batches = 0
    with Consumer(broker.endpoint, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + 30
        while len(stored) < calls * rows and time.monotonic() < deadline:
            for _tp, view in consumer.poll_batches(500):
                stored.extend(value or b"" for value in view.values())
                batches += 1
    assert stored == [bytes(row) for row in stamps.reshape(-1, 4)]
    for call, metadata in enumerate(results):
        assert [(m.base_offset, m.record_count) for m in metadata] == [(call * rows, rows)]
    # The calls came faster than one round trip each: queued ones joined (200 batches before).
    assert batches < calls


def test_idempotent_retry_is_appended_once(broker: BrokerProcess, admin: Admin) -> None:
    """KIP-98: the same (producer id, epoch, sequence) batch sent twice lands once."""
    topic = new_topic(admin)
    with RpcClient(broker.endpoint) as control:
        init = control.call(InitProducerIdRequestV0(None), CALL_TIMEOUT_MS)
    assert isinstance(init, InitProducerIdResponseV0) and init.producer_id >= 0
    batch = build_batch_from_values([b"a", b"b", b"c"], timestamp_ms=1, producer_id=
                                    init.producer_id, producer_epoch=init.producer_epoch,
                                    base_sequence=0)
    endpoint = leader_endpoint(broker, topic, 0)
    first = produce_raw(endpoint, topic, 0, batch)
    retry = produce_raw(endpoint, topic, 0, batch)
    assert first.error_code == 0 and retry.error_code == 0
    assert retry.base_offset == first.base_offset == 0
    tp = TopicPartition(topic, 0)
    assert admin.list_offsets({tp: LATEST})[tp].offset == 3
    # A gap in the sequence is refused.
    gap = build_batch_from_values([b"d"], timestamp_ms=1, producer_id=init.producer_id,
                                  producer_epoch=init.producer_epoch, base_sequence=10)
    assert produce_raw(endpoint, topic, 0, gap).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert admin.list_offsets({tp: LATEST})[tp].offset == 3


def test_producer_refuses_unknown_topics_and_partitions(broker: BrokerProcess,
                                                        admin: Admin) -> None:
    topic = new_topic(admin, partitions=2)
    with Producer(broker.endpoint, max_block_ms=5000) as producer:
        unknown = producer.send("no-such-topic", b"v").exception(10)  # no wait at send
        assert isinstance(unknown, ZlogError)
        assert unknown.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        beyond = producer.send(topic, b"v", partition=2).exception(10)
        assert isinstance(beyond, ZlogError)
        assert beyond.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        with pytest.raises(ZlogError) as caught:  # the topic is known now: refused at once
            producer.send(topic, b"v", partition=2)
        assert caught.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert producer.send(topic, b"still fine", partition=1).result(10).offset == 0


def test_bad_batches_get_their_codes_and_the_broker_keeps_serving(broker: BrokerProcess,
                                                                  admin: Admin) -> None:
    topic = new_topic(admin)
    endpoint = leader_endpoint(broker, topic, 0)
    good = build_batch([NewRecord(b"ok")])
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    assert produce_raw(endpoint, topic, 0, bytes(corrupt)).error_code == ErrorCode.CORRUPT_MESSAGE
    assert produce_raw(endpoint, topic, 0, b"short").error_code == ErrorCode.CORRUPT_MESSAGE
    out_of_range = produce_raw(endpoint, topic, 7, good).error_code
    assert out_of_range in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert produce_raw(endpoint, "nope", 0, good).error_code in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert produce_raw(endpoint, topic, 0, good, acks=5).error_code == (
        ErrorCode.INVALID_REQUIRED_ACKS)
    with RpcClient(endpoint) as rpc:
        rpc.sockets[0].send_multipart([b"\x00"])  # not even a header: dropped
        unknown_api = struct.pack(">hhiH", 99, 0, 2**31 - 1, 0)  # an id the client never uses
        rpc.sockets[0].send_multipart([unknown_api, b"{}"])
        assert isinstance(rpc.call(FetchRequestV0(-1, 0, 0, 0, ()), CALL_TIMEOUT_MS),
                          FetchResponseV0)
        assert rpc.late_responses_count == 1  # the UNSUPPORTED_VERSION reply came first
    # Still serving, nothing appended.
    assert produce_raw(endpoint, topic, 0, good).base_offset == 0
    assert read_all(broker, topic, 0, 1) == [(0, b"ok")]


# ---------------------------------------------------------------------------------------------
# Fetching.
# ---------------------------------------------------------------------------------------------


def test_long_poll_fetch_returns_when_data_arrives(broker: BrokerProcess, admin: Admin) -> None:
    topic = new_topic(admin)
    endpoint = leader_endpoint(broker, topic, 0)
    with RpcClient(endpoint) as rpc:
        started = time.monotonic()
        correlation_id = rpc.send(
            FetchRequestV0(-1, 20_000, 1, 1 << 20, (FetchEntry(topic, 0, 0, 1 << 20),)), 30_000)
        assert rpc.poll_responses(300) == []  # parked: nothing to read yet
        produce_raw(endpoint, topic, 0, build_batch([NewRecord(b"wake up")]))
        results: list[RpcResult] = []
        while not results:
            results = rpc.poll_responses(10_000)
        elapsed_s = time.monotonic() - started
    (result,) = results
    assert result.correlation_id == correlation_id
    response = result.unwrap()
    assert isinstance(response, FetchResponseV0)
    (entry,) = response.entries
    assert entry.error_code == 0 and entry.high_watermark == 1 and entry.chunks
    assert elapsed_s < 10, "the fetch waited for max_wait_ms instead of the data"


def test_consumer_positions_seek_latest_and_reset(broker: BrokerProcess, admin: Admin) -> None:
    topic = new_topic(admin)
    tp = TopicPartition(topic, 0)
    with Consumer(broker.endpoint) as empty_reader:
        assert empty_reader.latest(topic, 0) is None
    with Producer(broker.endpoint, linger_ms=0) as producer:
        for i in range(10):
            producer.send(topic, f"m{i}".encode(), partition=0)
        producer.flush()
    assert [o for o, _ in read_all(broker, topic, 0, 10)] == list(range(10))
    assert read_all(broker, topic, 0, 5, offset=5) == [(i, f"m{i}".encode()) for i in range(5, 10)]
    with Consumer(broker.endpoint, auto_offset_reset="latest", fetch_max_wait_ms=100) as consumer:
        last = consumer.latest(topic, 0)
        assert last is not None and (last.offset, last.value) == (9, b"m9")
        consumer.assign([tp])
        assert consumer.position(tp) == 10
        assert consumer.poll(200) == []
        with Producer(broker.endpoint, linger_ms=0) as producer:
            producer.send(topic, b"new", partition=0).result(10)
        records: list = []  # type: ignore[type-arg]
        deadline = time.monotonic() + 10
        while not records and time.monotonic() < deadline:
            records = consumer.poll(500)
        assert [(r.offset, r.value) for r in records] == [(10, b"new")]
        consumer.seek(tp, 1000)  # past the end: OFFSET_OUT_OF_RANGE, then auto_offset_reset
        assert consumer.poll(500) == []
        wait_until(lambda: consumer.position(tp) == 11, what="the reset to latest")
        consumer.seek_to_beginning()
        assert consumer.position(tp) == 0
        consumer.seek_to_end()
        assert consumer.position(tp) == 11
    offsets = admin.list_offsets({tp: EARLIEST})
    assert offsets[tp].offset == 0


def test_consumer_of_unknown_topic_raises(broker: BrokerProcess) -> None:
    with Consumer(broker.endpoint) as consumer:
        consumer.assign([TopicPartition("never-made", 0)])
        with pytest.raises(ZlogError) as caught:
            consumer.poll(100)
        assert caught.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_throughput_smoke(broker: BrokerProcess, admin: Admin) -> None:
    """Not a benchmark: checks the fast paths move a few hundred thousand records quickly."""
    topic = new_topic(admin)
    count = 200_000
    started = time.monotonic()
    with Producer(broker.endpoint, batch_size=256 * 1024, compression=None) as producer:
        producer.send_many(topic, [b"x" * 100] * count, partition=0).result(60)
    produce_s = time.monotonic() - started
    started = time.monotonic()
    seen = 0
    with Consumer(broker.endpoint, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        while seen < count and time.monotonic() - started < 60:
            seen += sum(len(view) for _, view in consumer.poll_batches(1000))
    consume_s = time.monotonic() - started
    assert seen == count
    print(f"produced {count / produce_s:,.0f} records/s, consumed {count / consume_s:,.0f}/s")


def test_offsets_by_time_and_iteration(broker: BrokerProcess, admin: Admin) -> None:
    topic = new_topic(admin)
    tp = TopicPartition(topic, 0)
    with Producer(broker.endpoint, linger_ms=0) as producer:
        for stamp_ms in (1000, 2000, 3000):
            producer.send(topic, f"at {stamp_ms}".encode(), partition=0,
                          timestamp_ms=stamp_ms).result(10)
    found = admin.list_offsets({tp: 2000})
    assert (found[tp].offset, found[tp].timestamp_ms) == (1, 2000)
    assert admin.list_offsets({tp: 2001})[tp].offset == 2
    assert admin.list_offsets({(topic, 0): 10**12})[tp].offset == -1
    with Consumer(broker.endpoint, auto_offset_reset="earliest", group_id="later",
                  consumer_timeout_ms=300) as consumer:
        consumer.assign([tp])
        records = list(consumer)  # ends after 300 ms without a record
    assert [(r.offset, r.timestamp_ms, r.value) for r in records] == [
        (0, 1000, b"at 1000"), (1, 2000, b"at 2000"), (2, 3000, b"at 3000")]
