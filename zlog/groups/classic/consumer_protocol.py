"""The subscription and assignment bytes of Kafka's ConsumerProtocol (protocol type "consumer").

A classic group's coordinator treats these bytes as opaque; the members' leader decodes every
subscription, runs an assignor and encodes one assignment per member. zlog uses Kafka's layouts
so its assignors interoperate with Kafka clients in one group:

    Subscription v0: version int16, topics [string], user_data bytes
                 v1: + owned_partitions [topic string, partitions [int32]]   (KIP-429)
                 v2: + generation_id int32                                  (KIP-792)
                 v3: + rack_id nullable string                              (KIP-881)
    Assignment   v0: version int16, assigned_partitions [topic, [int32]], user_data bytes
                 (v1-v3 add nothing)

A reader decodes the fields of the versions it knows and ignores what a newer writer appended.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import groupby
from typing import Final

from zlog.errors import ErrorCode
from zlog.transport.kafka_codec import KafkaReader, KafkaWriter
from zlog.transport.wire import Buffer
from zlog.types import NO_GENERATION, TopicPartition

CONSUMER_PROTOCOL_TYPE: Final = "consumer"
SUBSCRIPTION_VERSION: Final = 3
ASSIGNMENT_VERSION: Final = 3


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation: int = NO_GENERATION
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


def _write_partitions(out: KafkaWriter, partitions: Iterable[TopicPartition]) -> None:
    by_topic = [(topic, [p for _, p in tps])
                for topic, tps in groupby(sorted(partitions), key=lambda tp: tp.topic)]
    out.array(len(by_topic), "topics")
    for topic, numbers in by_topic:
        out.string(topic, "topic")
        out.int32_array(numbers, "partitions")


def _read_partitions(reader: KafkaReader) -> tuple[TopicPartition, ...]:
    found: list[TopicPartition] = []
    for _ in range(reader.array(6, "topics")):
        topic = reader.string("topic")
        found.extend(TopicPartition(topic, p) for p in reader.int32_array("partitions"))
    return tuple(found)


def _version(reader: KafkaReader) -> int:
    version = reader.int16()
    if version < 0:
        raise reader.fail(f"version {version} is negative")
    return version


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    out = KafkaWriter(ErrorCode.INVALID_REQUEST)
    out.int16(version, "version")
    out.string_array(sub.topics, "topics")
    out.bytes_(sub.user_data, "user data")
    if version >= 1:
        _write_partitions(out, sub.owned_partitions)
    if version >= 2:
        out.int32(sub.generation, "generation")
    if version >= 3:
        out.string(sub.rack_id, "rack id")
    return out.done()


def decode_subscription(data: Buffer, code: ErrorCode = ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                        ) -> Subscription:
    """Malformed bytes raise `code` (by default INCONSISTENT_GROUP_PROTOCOL, what Kafka's
    consumer reports for a member's metadata it cannot read)."""
    reader = KafkaReader(data, "consumer subscription", code)
    version = _version(reader)
    topics = tuple(reader.string_array("topics"))
    user_data = reader.nullable_bytes("user data")
    owned = _read_partitions(reader) if version >= 1 else ()
    generation = reader.int32() if version >= 2 else NO_GENERATION
    rack_id = reader.nullable_string("rack id") if version >= 3 else None
    return Subscription(topics, user_data, owned, generation, rack_id)


def encode_assignment(assignment: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    out = KafkaWriter(ErrorCode.INVALID_REQUEST)
    out.int16(version, "version")
    _write_partitions(out, assignment.partitions)
    out.bytes_(assignment.user_data, "user data")
    return out.done()


def decode_assignment(data: Buffer, code: ErrorCode = ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                      ) -> Assignment:
    reader = KafkaReader(data, "consumer assignment", code)
    _version(reader)
    partitions = _read_partitions(reader)
    return Assignment(partitions, reader.nullable_bytes("user data"))
