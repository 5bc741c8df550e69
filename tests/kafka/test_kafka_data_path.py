"""A worker's Kafka port against a real `zlog serve`, over raw sockets: Kafka's Produce, Fetch,
ListOffsets and OffsetForLeaderEpoch at several versions, batches written by kafka-python
(an encoder independent of zlog's) stored and served byte for byte, records crossing between
the Kafka and the native doors unchanged, idempotence, long polls, leader epochs, codecs and
bad input. One broker for the module."""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import confluent_kafka
import cramjam
import pytest
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from tests.kafka.kafka_wire import (
    KafkaWire,
    RecordSpec,
    fetch_values,
    kafka_python_batch,
    kafka_python_records,
    produce_values,
)
from tests.unit.record.batch_edits import reseal
from zlog.client.admin import Admin
from zlog.client.consumer import Consumer
from zlog.client.producer import Producer
from zlog.client.records import NewTopic
from zlog.errors import ErrorCode
from zlog.record.header import BATCH_HEADER_BYTES, CODEC_MASK
from zlog.types import TopicPartition
from zlog_testbed.broker_process import BrokerProcess, broker_process
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

PRODUCE, FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH, DELETE_RECORDS = 0, 1, 2, 23, 21
MAX_TIMESTAMP = -3  # ListOffsets: the record of the largest timestamp (KIP-734)
T0_MS = 1_700_000_000_000
RECORDS: list[RecordSpec] = [
    (b"key-%d" % i, b"value-%d" % i * 20, [("trace", b"t%d" % i), ("empty", b"")], T0_MS + i)
    for i in range(25)
] + [(None, None, [], T0_MS + 99)]


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with broker_process(workers=2) as instance:
        yield instance


_names = iter(range(1_000_000))


def new_topic(broker: BrokerProcess, partitions: int = 1, configs: dict[str, str] | None = None,
              ) -> str:
    name = f"k-{next(_names)}"
    with Admin(broker.endpoint) as admin:
        admin.create_topics([NewTopic(name, partitions, configs=configs or {})])
    for partition in range(partitions):
        broker.data_endpoint(name, partition)
    return name


def kafka_address(broker: BrokerProcess, topic: str, partition: int = 0) -> str:
    (found,) = broker.metadata([topic]).topics
    address = next(p.kafka_endpoint for p in found.partitions if p.partition == partition)
    assert address, "the leader's worker has a Kafka port"
    return address


def fetch_all(wire: KafkaWire, topic: str, offset: int = 0, version: int = 11) -> bytes:
    answer = wire.call(FETCH, version, fetch_values(topic, 0, offset))
    (partition,) = answer.responses[0].partitions
    assert partition.error_code == 0, partition
    return bytes(partition.records)


def test_kafka_batches_are_stored_and_served_byte_for_byte(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    sent = [kafka_python_batch(RECORDS[:10]), kafka_python_batch(RECORDS[10:], codec=1),
            kafka_python_batch(RECORDS[:3], codec=3)]
    with KafkaWire(kafka_address(broker, topic)) as wire:
        offsets = []
        for version, batch in zip((3, 7, 9), sent, strict=True):
            answer = wire.call(PRODUCE, version, produce_values(topic, 0, batch))
            (result,) = answer.responses[0].partition_responses
            assert result.error_code == 0
            offsets.append(result.base_offset)
        assert offsets == [0, 10, 26]
        for version in (4, 7, 11, 12):
            stored = fetch_all(wire, topic, version=version)
            pos = 0
            for offset, batch in zip(offsets, sent, strict=True):
                got = stored[pos:pos + len(batch)]
                assert struct.unpack_from(">q", got)[0] == offset
                assert got[16:] == batch[16:], "all but the stamped offset and epoch"
                assert struct.unpack_from(">i", got, 12)[0] == 0, "the leader epoch"
                pos += len(batch)
            assert pos == len(stored)


def test_kafka_records_read_natively_and_native_records_read_by_kafka(
        broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    with KafkaWire(kafka_address(broker, topic)) as wire:
        wire.call(PRODUCE, 9, produce_values(topic, 0, kafka_python_batch(RECORDS)))
    with Consumer(broker.endpoint, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
        c.assign([TopicPartition(topic, 0)])
        native: list[RecordSpec] = []
        wait_until(lambda: native.extend((r.key, r.value, list(r.headers), r.timestamp_ms)
                                         for r in c.poll(200)) or len(native) >= len(RECORDS),
                   20, what="the Kafka-written records read by the native consumer")
    assert native == [(k, v, list(h), t) for k, v, h, t in RECORDS]

    with Producer(broker.endpoint, linger_ms=0) as producer:
        for key, value, headers, timestamp_ms in RECORDS:
            producer.send(topic, value, key=key, partition=0, headers=list(headers),
                          timestamp_ms=timestamp_ms)
        producer.flush()
    with KafkaWire(kafka_address(broker, topic)) as wire:
        read_back = kafka_python_records(fetch_all(wire, topic, offset=len(RECORDS)))
    assert [offset for offset, _ in read_back] == list(range(len(RECORDS), 2 * len(RECORDS)))
    assert [(k, v, list(h), t) for _, (k, v, h, t) in read_back] == [
        (k, v, list(h), t) for k, v, h, t in RECORDS]


def _recoded(batch: bytes, codec: int, section: bytes) -> bytes:
    edited = bytearray(batch[:BATCH_HEADER_BYTES] + section)
    attributes = struct.unpack_from(">h", edited, 21)[0]
    struct.pack_into(">h", edited, 21, (attributes & ~CODEC_MASK) | codec)
    return reseal(edited)


def _java_snappy(data: bytes) -> bytes:
    blocks = [bytes(cramjam.snappy.compress_raw(data[i:i + 100]))
              for i in range(0, len(data), 100)]
    return struct.pack(">8sii", b"\x82SNAPPY\x00", 1, 1) + b"".join(
        struct.pack(">i", len(b)) + b for b in blocks)


def test_every_codec_is_validated_stored_and_served_as_sent(broker: BrokerProcess) -> None:
    plain = kafka_python_batch(RECORDS)
    records = plain[BATCH_HEADER_BYTES:]
    gzip = zlib.compressobj(9, zlib.DEFLATED, 31)
    batches = {
        "gzip": kafka_python_batch(RECORDS, codec=1),
        "snappy-raw": _recoded(plain, 2, bytes(cramjam.snappy.compress_raw(records))),
        "snappy-xerial": _recoded(plain, 2, _java_snappy(records)),
        "lz4": kafka_python_batch(RECORDS, codec=3),
        "zstd": _recoded(plain, 4, bytes(cramjam.zstd.compress(records))),
        "gzip-level-9": _recoded(plain, 1, gzip.compress(records) + gzip.flush()),
    }
    topic = new_topic(broker)
    with KafkaWire(kafka_address(broker, topic)) as wire:
        for name, batch in batches.items():
            answer = wire.call(PRODUCE, 9, produce_values(topic, 0, batch))
            assert answer.responses[0].partition_responses[0].error_code == 0, name
        stored = fetch_all(wire, topic, version=12)
        pos = 0
        for name, batch in batches.items():
            assert stored[pos + 16:pos + len(batch)] == batch[16:], name
            pos += len(batch)
        # zstd needs Produce 7 and Fetch 10 (KIP-110); older ones get error 76.
        zstd = batches["zstd"]
        answer = wire.call(PRODUCE, 3, produce_values(topic, 0, zstd))
        assert answer.responses[0].partition_responses[0].error_code == 76
        zstd_offset = 4 * len(RECORDS)
        old = wire.call(FETCH, 9, fetch_values(topic, 0, zstd_offset))
        assert (old.responses[0].partitions[0].error_code, old.responses[0].partitions[0].records
                ) == (76, b"")
        assert fetch_all(wire, topic, zstd_offset, version=10)[16:len(zstd)] == zstd[16:]


def test_a_codec_that_lies_is_corrupt_and_stores_nothing(broker: BrokerProcess) -> None:
    plain = kafka_python_batch(RECORDS)
    topic = new_topic(broker)
    with KafkaWire(kafka_address(broker, topic)) as wire:
        for codec in (1, 2, 3, 4):
            lying = _recoded(plain, codec, plain[BATCH_HEADER_BYTES:])
            answer = wire.call(PRODUCE, 9, produce_values(topic, 0, lying))
            result = answer.responses[0].partition_responses[0]
            assert (result.error_code, result.base_offset) == (2, -1), codec
            assert result.error_message
        garbage = plain[:BATCH_HEADER_BYTES] + b"\xff" * (len(plain) - BATCH_HEADER_BYTES)
        answer = wire.call(PRODUCE, 9, produce_values(topic, 0, garbage))
        assert answer.responses[0].partition_responses[0].error_code == 2
        answer = wire.call(PRODUCE, 9, produce_values(topic, 0, b"\0" * 30))
        assert answer.responses[0].partition_responses[0].error_code == 2
        assert fetch_all(wire, topic) == b"", "nothing stored"


def test_idempotent_batches_dedupe_and_sequence_gaps_are_refused(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    producer_id = 4242

    def produce(sequence: int, pid: int = producer_id) -> tuple[int, int]:
        batch = kafka_python_batch(RECORDS[:5], producer_id=pid, producer_epoch=0,
                                   base_sequence=sequence)
        answer = wire.call(PRODUCE, 9, produce_values(topic, 0, batch, acks=-1))
        result = answer.responses[0].partition_responses[0]
        return int(result.error_code), result.base_offset

    with KafkaWire(kafka_address(broker, topic)) as wire:
        assert produce(0) == (0, 0)
        assert produce(5) == (0, 5)
        assert produce(0) == (0, 0), "a retry is answered with its original offset"
        assert produce(5) == (0, 5)
        assert produce(15)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(3, pid=4343)[0] == ErrorCode.UNKNOWN_PRODUCER_ID
        offsets = [offset for offset, _ in kafka_python_records(fetch_all(wire, topic))]
    assert offsets == list(range(10)), "each batch stored once"


def test_acks_zero_gets_no_answer_and_the_connection_goes_on(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    with KafkaWire(kafka_address(broker, topic)) as wire:
        for _ in range(3):
            wire.send(PRODUCE, 9, produce_values(topic, 0, kafka_python_batch(RECORDS), acks=0))
        # The next answer on the connection is the fetch's: nothing answered the produces.
        wait_until(lambda: len(kafka_python_records(fetch_all(wire, topic)))
                   == 3 * len(RECORDS), 10, what="three acks=0 batches stored")


def test_a_parked_fetch_answers_at_max_wait_or_when_data_arrives(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    address = kafka_address(broker, topic)
    with KafkaWire(address) as wire:
        started = time.monotonic()
        answer = wire.call(FETCH, 11, fetch_values(topic, 0, 0, max_wait_ms=800))
        waited_s = time.monotonic() - started
        assert answer.responses[0].partitions[0].records == b""
        assert waited_s >= 0.7, "parked until max_wait_ms"
        correlation_id = wire.send(FETCH, 11, fetch_values(topic, 0, 0, max_wait_ms=60_000))
        with Producer(broker.endpoint, linger_ms=0) as producer:  # the native door wakes it
            producer.send(topic, b"wake", partition=0).result(10)
        parked = wire.receive(FETCH, 11, correlation_id)
        records = kafka_python_records(bytes(parked.responses[0].partitions[0].records))
        assert [r[1][1] for r in records] == [b"wake"]


def test_the_first_batch_comes_even_when_larger_than_max_bytes(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    big = kafka_python_batch([(None, b"x" * 300_000, [], T0_MS)])
    with KafkaWire(kafka_address(broker, topic)) as wire:
        wire.call(PRODUCE, 9, produce_values(topic, 0, big))
        wire.call(PRODUCE, 9, produce_values(topic, 0, kafka_python_batch(RECORDS[:1])))
        answer = wire.call(FETCH, 11, fetch_values(topic, 0, 0, partition_max_bytes=1000))
        stored = bytes(answer.responses[0].partitions[0].records)
    assert stored[16:] == big[16:], "the whole first batch, and only it"


def list_offset(wire: KafkaWire, topic: str, version: int, timestamp: int) -> Any:
    """ListOffsets of `topic`-0 at `version`: the partition's answer."""
    answer = wire.call(LIST_OFFSETS, version, {"replica_id": -1, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp,
                                        "current_leader_epoch": -1}]}]})
    (found,) = answer.topics[0].partitions
    return found


def test_leader_epochs_list_offsets_and_offset_for_leader_epoch(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    with KafkaWire(kafka_address(broker, topic)) as wire:
        wire.call(PRODUCE, 9, produce_values(topic, 0, kafka_python_batch(RECORDS[:10])))
        wire.call(PRODUCE, 9, produce_values(topic, 0, kafka_python_batch(
            [(None, b"late", [], T0_MS + 5000)])))
        newer = wire.call(FETCH, 11, fetch_values(topic, 0, 0, current_leader_epoch=7))
        assert newer.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
        assert fetch_all(wire, topic), "epoch 0 is the leader's"

        def offsets(version: int, timestamp: int) -> tuple[int, int, int]:
            found = list_offset(wire, topic, version, timestamp)
            return int(found.error_code), found.offset, getattr(found, "leader_epoch", -1)

        assert offsets(7, -2) == (0, 0, 0)
        assert offsets(7, -1) == (0, 11, 0)
        assert offsets(7, T0_MS + 4) == (0, 4, 0)
        assert offsets(7, T0_MS + 1000) == (0, 10, 0)
        assert offsets(7, T0_MS + 9999)[:2] == (0, -1)
        assert offsets(1, -1)[:2] == (0, 11)
        answer = wire.call(OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
            {"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0},
                {"partition": 0, "current_leader_epoch": 3, "leader_epoch": 0}]}]})
        first, second = answer.topics[0].partitions
        assert (first.error_code, first.leader_epoch, first.end_offset) == (0, 0, 11)
        assert second.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_a_partition_this_worker_does_not_lead_is_not_leader(broker: BrokerProcess) -> None:
    topic = new_topic(broker, partitions=2)
    here, there = kafka_address(broker, topic, 0), kafka_address(broker, topic, 1)
    assert here != there, "two workers, one partition each"
    with KafkaWire(here) as wire:
        answer = wire.call(PRODUCE, 9, produce_values(topic, 1, kafka_python_batch(RECORDS)))
        assert answer.responses[0].partition_responses[0].error_code == 6
        fetched = wire.call(FETCH, 12, fetch_values(topic, 1, 0))
        assert fetched.responses[0].partitions[0].error_code == 6


def test_an_absurd_frame_closes_that_connection_only(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    address = kafka_address(broker, topic)
    with KafkaWire(address) as good, KafkaWire(address, timeout_s=10) as bad:
        good.call(PRODUCE, 9, produce_values(topic, 0, kafka_python_batch(RECORDS[:2])))
        bad.send_raw(struct.pack(">i", 2**31 - 1) + b"\0" * 100)
        assert bad.closed_by_peer()
        assert len(kafka_python_records(fetch_all(good, topic))) == 2


def test_requests_a_worker_does_not_serve_are_relayed_to_the_gateway(
        broker: BrokerProcess) -> None:
    """Metadata asked of a worker's port is the gateway's answer; so is a Heartbeat v0, whose
    answer (a correlation id and an error code) is shorter than any request."""
    topic = new_topic(broker)
    with KafkaWire(kafka_address(broker, topic)) as wire:
        metadata = wire.call(3, 9, {"topics": [{"name": topic}],
                                    "allow_auto_topic_creation": False})
        (found,) = metadata.topics
        assert (found.name, found.error_code) == (topic, 0)
        leader = found.partitions[0].leader_id
        assert any(node.node_id == leader for node in metadata.brokers)
        beat = wire.call(12, 0, {"group_id": "nobody", "generation_id": 1,
                                 "member_id": "m"})
        assert beat.error_code != 0, "a group nobody joined"
        again = wire.call(3, 9, {"topics": [{"name": topic}],
                                 "allow_auto_topic_creation": False})
        assert again.topics[0].name == topic, "the connection and the relay go on"


def _stamped(relative_ms: Sequence[int]) -> bytes:
    """One batch whose records carry these timestamps (after T0_MS), in this order."""
    return kafka_python_batch([(None, b"at-%d" % stamp, [], T0_MS + stamp)
                               for stamp in relative_ms])


def test_list_offsets_max_timestamp_finds_the_first_record_of_the_largest_timestamp(
        broker: BrokerProcess) -> None:
    """ListOffsets -3 (KIP-734, from version 7): over out-of-order timestamps spread on
    several segments, the first record holding the largest, below the high watermark and
    at or above the log start; an empty log has none, and an older version, or another
    negative timestamp, is UNSUPPORTED_VERSION as in Kafka."""
    topic = new_topic(broker, configs={"segment.bytes": "1024", "index.interval.bytes": "128"})
    empty = new_topic(broker)
    with KafkaWire(kafka_address(broker, topic)) as wire:
        for stamps in ([5, 1, 9, 2], [3, 9, 4], *[[0, 8, 3, 7]] * 8):
            answer = wire.call(PRODUCE, 9, produce_values(topic, 0, _stamped(stamps)))
            assert answer.responses[0].partition_responses[0].error_code == 0

        def max_timestamp(version: int = 7) -> tuple[int, int, int]:
            found = list_offset(wire, topic, version, MAX_TIMESTAMP)
            return int(found.error_code), found.offset, found.timestamp

        assert max_timestamp() == (0, 2, T0_MS + 9), "the first of the two at T0 + 9"
        assert list_offset(wire, topic, 7, MAX_TIMESTAMP).leader_epoch == 0
        later = wire.call(PRODUCE, 9, produce_values(topic, 0, _stamped([7, 20, 6, 20])))
        base = later.responses[0].partition_responses[0].base_offset
        assert base == 39
        assert max_timestamp() == (0, base + 1, T0_MS + 20)
        assert max_timestamp(6)[0] == ErrorCode.UNSUPPORTED_VERSION
        assert max_timestamp(1)[0] == ErrorCode.UNSUPPORTED_VERSION
        assert list_offset(wire, topic, 7, -4).error_code == ErrorCode.UNSUPPORTED_VERSION

        def delete_below(offset: int) -> None:
            answer = wire.call(DELETE_RECORDS, 2, {"timeout_ms": 10_000, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "offset": offset}]}]})
            assert answer.topics[0].partitions[0].error_code == 0

        delete_below(base + 2)  # the log start inside the batch, past its first T0 + 20
        assert max_timestamp() == (0, base + 3, T0_MS + 20)
        delete_below(base + 4)
        assert max_timestamp() == (0, -1, -1), "every record deleted"
    with KafkaWire(kafka_address(broker, empty)) as wire:
        found = list_offset(wire, empty, 7, MAX_TIMESTAMP)
        assert (found.error_code, found.offset, found.timestamp) == (0, -1, -1)


def test_confluent_kafka_lists_the_offset_of_the_max_timestamp(broker: BrokerProcess) -> None:
    """confluent-kafka's AdminClient.list_offsets with OffsetSpec.max_timestamp()."""
    topic, empty = new_topic(broker), new_topic(broker)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.kafka_bootstrap,
                                         "linger.ms": 0})
    for stamp in (5, 1, 30, 2, 30, 4):
        producer.produce(topic, b"at-%d" % stamp, partition=0, timestamp=T0_MS + stamp)
        producer.flush(30)
    admin = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})
    futures = admin.list_offsets({
        confluent_kafka.TopicPartition(topic, 0): OffsetSpec.max_timestamp(),
        confluent_kafka.TopicPartition(empty, 0): OffsetSpec.max_timestamp()},
        request_timeout=30)
    found = {tp.topic: future.result(30) for tp, future in futures.items()}
    assert (found[topic].offset, found[topic].timestamp) == (2, T0_MS + 30)
    assert (found[empty].offset, found[empty].timestamp) == (-1, -1)


def _legacy_batch(magic: int) -> bytes:
    """A message set of the formats before RecordBatch v2 (magic 0 or 1), by kafka-python."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    for offset in range(3):
        builder.append(offset, timestamp=T0_MS + offset if magic else None, key=None,
                       value=b"legacy-%d" % offset)
    return bytes(builder.build())


def test_a_batch_of_an_older_magic_is_unsupported_version_and_stores_nothing(
        broker: BrokerProcess) -> None:
    """Produce 3 and later carry RecordBatch v2: a message set of magic 0 or 1 inside one,
    alone or behind a good batch, is UNSUPPORTED_VERSION (35) for its partition, with a
    sentence; nothing of it is stored and the connection goes on."""
    topic = new_topic(broker)
    good = kafka_python_batch(RECORDS[:2])
    with KafkaWire(kafka_address(broker, topic)) as wire:
        for version in (3, 9):
            for records in (_legacy_batch(0), _legacy_batch(1), good + _legacy_batch(1)):
                answer = wire.call(PRODUCE, version, produce_values(topic, 0, records))
                result = answer.responses[0].partition_responses[0]
                assert (result.error_code, result.base_offset) == (
                    ErrorCode.UNSUPPORTED_VERSION, -1), version
                if version >= 8:  # where the answer has an error message
                    assert "RecordBatch v2" in result.error_message
        assert fetch_all(wire, topic) == b"", "nothing stored"
        answer = wire.call(PRODUCE, 9, produce_values(topic, 0, good))
        assert answer.responses[0].partition_responses[0].error_code == 0
        assert len(kafka_python_records(fetch_all(wire, topic))) == 2
