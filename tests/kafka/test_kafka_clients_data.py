"""Real Kafka clients produce to and consume from a real `zlog serve` (one broker for the
module): confluent-kafka, kafka-python, aiokafka, kcat and kafkajs, each with acks 0, 1 and
all, idempotence on, its codecs, keys, headers and timestamps; what they write reads back
byte-identical through the native consumer, and what the native producer writes they read
from the beginning, from an offset and from a timestamp, with isolation.level=read_committed
reading to the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kafka.data_clients import CLIENTS, Client, ProduceSpec, Rec
from zlog.client.admin import Admin
from zlog.client.consumer import Consumer
from zlog.client.producer import Producer
from zlog.client.records import NewTopic
from zlog.types import TopicPartition
from zlog_testbed.broker_process import BrokerProcess, broker_process
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

T0_MS = 1_790_000_000_000


@pytest.fixture(scope="module")
def broker() -> Iterator[tuple[BrokerProcess, str]]:
    with broker_process(workers=2) as b:
        yield b, b.kafka_bootstrap


_names = iter(range(1_000_000))


def new_topic(broker: BrokerProcess) -> str:
    name = f"kc-{next(_names)}"
    with Admin(broker.endpoint) as admin:
        admin.create_topics([NewTopic(name, 1)])
    broker.data_endpoint(name, 0)
    return name


def records(count: int, tag: str, first: int = 0) -> list[Rec]:
    return [Rec(f"key-{tag}-{i}".encode(), f"value-{tag}-{i}".encode() * 3,
                (("trace", f"t{i}".encode()), ("source", tag.encode())), T0_MS + first + i)
            for i in range(count)]


def read_natively(broker: BrokerProcess, topic: str, count: int) -> list[Rec]:
    found: list[Rec] = []
    with Consumer(broker.endpoint, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
        c.assign([TopicPartition(topic, 0)])
        wait_until(lambda: found.extend(
            Rec(r.key, r.value, tuple((k, v or b"") for k, v in r.headers), r.timestamp_ms,
                r.offset) for r in c.poll(200)) or len(found) >= count,
            60, what=f"{count} records read natively from {topic}")
    return found


def _skip_missing(client: Client) -> None:
    if client.missing:
        pytest.skip(client.missing)


@pytest.mark.parametrize("client", CLIENTS, ids=[c.name for c in CLIENTS])
def test_what_a_kafka_client_writes_reads_back_natively_byte_identical(
        broker: tuple[BrokerProcess, str], client: Client) -> None:
    _skip_missing(client)
    process, bootstrap = broker
    topic = new_topic(process)
    specs = [ProduceSpec(-1, codec, idempotent=True) for codec in client.codecs]
    specs += [ProduceSpec(1, "lz4" if "lz4" in client.codecs else "none", idempotent=False),
              ProduceSpec(0, "none", idempotent=False)]
    written: list[Rec] = []
    for index, spec in enumerate(specs):
        batch = records(3, f"{client.name}-{index}", first=len(written))
        client.produce(bootstrap, topic, batch, spec)
        written += batch
    read = read_natively(process, topic, len(written))
    assert [r.offset for r in read] == list(range(len(written))), "each record exactly once"
    if not client.sets_timestamps:  # kcat stamps the time it sends
        written = [Rec(w.key, w.value, w.headers, r.timestamp_ms) for w, r in
                   zip(written, read, strict=True)]
    assert [(r.key, r.value, r.headers, r.timestamp_ms) for r in read] == [
        (w.key, w.value, w.headers, w.timestamp_ms) for w in written]


@pytest.mark.parametrize("client", CLIENTS, ids=[c.name for c in CLIENTS])
def test_a_kafka_client_reads_what_the_native_producer_wrote(
        broker: tuple[BrokerProcess, str], client: Client) -> None:
    _skip_missing(client)
    process, bootstrap = broker
    topic = new_topic(process)
    written = records(30, "native")
    codec = "lz4" if "lz4" in client.codecs else None  # kafkajs reads no LZ4 without a plugin
    with Producer(process.endpoint, linger_ms=0, compression=codec) as producer:
        for r in written:
            producer.send(topic, r.value, key=r.key, partition=0, headers=list(r.headers),
                          timestamp_ms=r.timestamp_ms)
        producer.flush()
    expected = [(w.key, w.value, w.headers, w.timestamp_ms, i) for i, w in enumerate(written)]

    def as_tuples(found: list[Rec]) -> list[tuple[object, ...]]:
        return [(r.key, r.value, r.headers, r.timestamp_ms, r.offset) for r in found]

    assert as_tuples(client.read(bootstrap, topic, 30, 0, None)) == expected
    assert as_tuples(client.read(bootstrap, topic, 10, 20, None)) == expected[20:]
    assert as_tuples(client.read(bootstrap, topic, 5, 0, T0_MS + 25)) == expected[25:]
