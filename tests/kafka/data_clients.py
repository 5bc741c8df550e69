"""Real Kafka clients driven the same way: produce records to one partition, and read a
partition from the beginning, from an offset or from a timestamp. Each driver uses its
client's ordinary API; tests compare what they wrote and read with what the native client
wrote and read.

Drivers: confluent-kafka (librdkafka), kafka-python, aiokafka, kcat (Debian's, librdkafka
2.0) and kafkajs (node, from the directory `make kafka-clients` fills).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tests.kafka.kafka_clients import CLIENT_TIMEOUT_S, KAFKAJS_DIR, KAFKAJS_SCRIPTS

KAFKAJS_SCRIPT = KAFKAJS_SCRIPTS / "data.js"


@dataclass(frozen=True, slots=True)
class Rec:
    """A record as every door sees it."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int
    offset: int = -1


@dataclass(frozen=True, slots=True)
class ProduceSpec:
    acks: int  # 0, 1 or -1 (all)
    codec: str  # none, gzip, snappy, lz4, zstd
    idempotent: bool


@dataclass(frozen=True, slots=True)
class Client:
    name: str
    codecs: tuple[str, ...]
    produce: Callable[[str, str, Sequence[Rec], ProduceSpec], None]
    read: Callable[[str, str, int, int, int | None], list[Rec]]
    """read(bootstrap, topic, count, from_offset, from_timestamp_ms)"""
    missing: str = ""  # why it cannot run here ("" when it can)
    sets_timestamps: bool = True


# ----------------------------------------------------------------------------- confluent-kafka


def _confluent_produce(bootstrap: str, topic: str, records: Sequence[Rec],
                       spec: ProduceSpec) -> None:
    import confluent_kafka

    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "acks": str(spec.acks), "linger.ms": 5,
        "compression.type": spec.codec, "enable.idempotence": spec.idempotent,
        "message.timeout.ms": CLIENT_TIMEOUT_S * 1000})
    failures: list[object] = []
    for record in records:
        producer.produce(topic, value=record.value, key=record.key, partition=0,
                         timestamp=record.timestamp_ms, headers=list(record.headers),
                         on_delivery=lambda error, _m: error and failures.append(error))
    assert producer.flush(CLIENT_TIMEOUT_S) == 0, "every record delivered"
    assert not failures, failures


def _confluent_read(bootstrap: str, topic: str, count: int, offset: int,
                    timestamp_ms: int | None) -> list[Rec]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
        "enable.auto.commit": False, "isolation.level": "read_committed",
        "fetch.wait.max.ms": 100})
    try:
        start = confluent_kafka.TopicPartition(topic, 0, offset)
        if timestamp_ms is not None:
            (start,) = consumer.offsets_for_times(
                [confluent_kafka.TopicPartition(topic, 0, timestamp_ms)], CLIENT_TIMEOUT_S)
        consumer.assign([start])
        found: list[Rec] = []
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while len(found) < count and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                assert message.error() is None, message.error()
                found.append(Rec(message.key(), message.value(),
                                 tuple(message.headers() or ()), message.timestamp()[1],
                                 message.offset()))
        return found
    finally:
        consumer.close()


# ----------------------------------------------------------------------------- kafka-python


def _kafka_python_produce(bootstrap: str, topic: str, records: Sequence[Rec],
                          spec: ProduceSpec) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all" if spec.acks == -1 else spec.acks,
        compression_type=None if spec.codec == "none" else spec.codec,
        enable_idempotence=spec.idempotent, linger_ms=5)
    try:
        futures = [producer.send(topic, value=r.value, key=r.key, partition=0,
                                 headers=list(r.headers), timestamp_ms=r.timestamp_ms)
                   for r in records]
        producer.flush(CLIENT_TIMEOUT_S)
        for future in futures:
            future.get(CLIENT_TIMEOUT_S)
    finally:
        producer.close(CLIENT_TIMEOUT_S)


def _kafka_python_read(bootstrap: str, topic: str, count: int, offset: int,
                       timestamp_ms: int | None) -> list[Rec]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             isolation_level="read_committed", fetch_max_wait_ms=100)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        if timestamp_ms is not None:
            found_at = consumer.offsets_for_times({tp: timestamp_ms})[tp]
            offset = found_at.offset
        consumer.seek(tp, offset)
        found: list[Rec] = []
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while len(found) < count and time.monotonic() < deadline:
            for batch in consumer.poll(500).values():
                found += [Rec(m.key, m.value, tuple(m.headers), m.timestamp, m.offset)
                          for m in batch]
        return found
    finally:
        consumer.close()


# ----------------------------------------------------------------------------- aiokafka


def _aiokafka_produce(bootstrap: str, topic: str, records: Sequence[Rec],
                      spec: ProduceSpec) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks="all" if spec.acks == -1 else spec.acks,
            compression_type=None if spec.codec == "none" else spec.codec,
            enable_idempotence=spec.idempotent, linger_ms=5)
        await producer.start()
        try:
            sent = [await producer.send(topic, value=r.value, key=r.key, partition=0,
                                        timestamp_ms=r.timestamp_ms, headers=list(r.headers))
                    for r in records]
            await asyncio.gather(*sent)
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(run(), CLIENT_TIMEOUT_S))


def _aiokafka_read(bootstrap: str, topic: str, count: int, offset: int,
                   timestamp_ms: int | None) -> list[Rec]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[Rec]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                    isolation_level="read_committed", fetch_max_wait_ms=100)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            start = offset
            if timestamp_ms is not None:
                start = (await consumer.offsets_for_times({tp: timestamp_ms}))[tp].offset
            consumer.seek(tp, start)
            found: list[Rec] = []
            while len(found) < count:
                for batch in (await consumer.getmany(timeout_ms=500)).values():
                    found += [Rec(m.key, m.value, tuple(m.headers), m.timestamp, m.offset)
                              for m in batch]
            return found
        finally:
            await consumer.stop()

    return asyncio.run(asyncio.wait_for(run(), CLIENT_TIMEOUT_S))


# ----------------------------------------------------------------------------- kcat


def _kcat_produce(bootstrap: str, topic: str, records: Sequence[Rec],
                  spec: ProduceSpec) -> None:
    """One kcat per record set; keys and values are text here (kcat's line format)."""
    for record in records:
        assert record.key is not None and record.value is not None
        command = ["kcat", "-b", bootstrap, "-P", "-t", topic, "-p", "0", "-K", "\t",
                   "-z", spec.codec, "-X", f"request.required.acks={spec.acks}",
                   "-X", f"enable.idempotence={str(spec.idempotent).lower()}"]
        for name, value in record.headers:
            command += ["-H", f"{name}={value.decode()}"]
        subprocess.run(command, input=record.key + b"\t" + record.value + b"\n", check=True,
                       timeout=CLIENT_TIMEOUT_S, capture_output=True)


def _kcat_read(bootstrap: str, topic: str, count: int, offset: int,
               timestamp_ms: int | None) -> list[Rec]:
    start = f"s@{timestamp_ms}" if timestamp_ms is not None else str(offset)
    output = subprocess.run(
        ["kcat", "-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", start, "-c", str(count),
         "-X", "isolation.level=read_committed", "-J"],
        check=True, timeout=CLIENT_TIMEOUT_S, capture_output=True).stdout
    found = []
    for line in output.decode().splitlines():
        message = json.loads(line)
        headers = message.get("headers") or []
        found.append(Rec(
            None if message["key"] is None else message["key"].encode(),
            None if message["payload"] is None else message["payload"].encode(),
            tuple((headers[i], headers[i + 1].encode()) for i in range(0, len(headers), 2)),
            message["ts"], message["offset"]))
    return found


# ----------------------------------------------------------------------------- kafkajs


def _kafkajs(command: dict[str, object]) -> list[Rec]:
    environ = dict(os.environ, NODE_PATH=str(KAFKAJS_DIR / "node_modules"))
    result = subprocess.run(["node", str(KAFKAJS_SCRIPT), json.dumps(command)], env=environ,
                            check=False, timeout=CLIENT_TIMEOUT_S, capture_output=True)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    found = json.loads(result.stdout.decode().strip().splitlines()[-1])
    return [Rec(None if m["key"] is None else bytes.fromhex(m["key"]),
                None if m["value"] is None else bytes.fromhex(m["value"]),
                tuple((k, bytes.fromhex(v)) for k, v in m["headers"]),
                int(m["timestamp"]), int(m["offset"])) for m in found]


def _kafkajs_produce(bootstrap: str, topic: str, records: Sequence[Rec],
                     spec: ProduceSpec) -> None:
    _kafkajs({"op": "produce", "bootstrap": bootstrap, "topic": topic, "acks": spec.acks,
              "codec": spec.codec, "idempotent": spec.idempotent,
              "records": [{"key": r.key and r.key.hex(), "value": r.value and r.value.hex(),
                           "headers": [[k, v.hex()] for k, v in r.headers],
                           "timestamp": str(r.timestamp_ms)} for r in records]})


def _kafkajs_read(bootstrap: str, topic: str, count: int, offset: int,
                  timestamp_ms: int | None) -> list[Rec]:
    return _kafkajs({"op": "read", "bootstrap": bootstrap, "topic": topic, "count": count,
                     "offset": str(offset), "timestamp": timestamp_ms})


def _missing_kcat() -> str:
    return "" if shutil.which("kcat") else "kcat is not installed (make kafka-clients)"


def _missing_kafkajs() -> str:
    if not shutil.which("node"):
        return "node is not installed"
    if not (KAFKAJS_DIR / "node_modules" / "kafkajs").is_dir():
        return "kafkajs is not installed (make kafka-clients)"
    return ""


CLIENTS: tuple[Client, ...] = (
    Client("confluent-kafka", ("none", "gzip", "snappy", "lz4", "zstd"), _confluent_produce,
           _confluent_read),
    Client("kafka-python", ("none", "gzip", "lz4"), _kafka_python_produce, _kafka_python_read),
    Client("aiokafka", ("none", "gzip", "lz4"), _aiokafka_produce, _aiokafka_read),
    Client("kcat", ("none", "gzip", "snappy", "lz4", "zstd"), _kcat_produce, _kcat_read,
           _missing_kcat(), sets_timestamps=False),
    Client("kafkajs", ("none", "gzip"), _kafkajs_produce, _kafkajs_read, _missing_kafkajs()),
)
