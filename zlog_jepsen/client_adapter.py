"""What the workload asks of a client, and zlog's own client behind it.

The workload and the checker speak of keys and integer values; a client speaks of topics,
partitions and bytes. This interface is the seam between them: another client (a Kafka
client, say) plugs in by implementing `ClientAdapter` and a factory, and neither the
workload's loop nor the checker changes. Errors are not mapped here: an adapter reports the
exception it got per record, and the workload applies the one fail-vs-info rule
(zlog_jepsen.outcome) to every client alike.

Key k is partition k of one topic; a value is its decimal digits as the record's value.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from zlog.client import Consumer, ConsumerRecord, Producer, RecordMetadata, TopicPartition
from zlog_jepsen.history import Polled


@dataclass(frozen=True)
class ClientSettings:
    """Everything a client needs to reach the cluster, the same for every adapter."""

    bootstrap: str
    topic: str
    group_id: str | None = None  # set when consumers subscribe through a group
    request_timeout_ms: int = 2_000
    delivery_timeout_ms: int = 5_000  # a send's answer, retries included; then info


class SendResult(NamedTuple):
    """One record of a send: where it landed, or the exception it got instead."""

    key: int
    value: int
    offset: int | None
    error: BaseException | None


@dataclass
class PollResult:
    """What one poll read per key, and the keys whose partitions moved while it ran."""

    polled: Polled
    rebalance_log: list[list[int]] = field(default_factory=list)


class ClientAdapter(Protocol):
    """One client process's connection to the log: its producer and its consumer."""

    def send(self, records: Sequence[tuple[int, int]]) -> list[SendResult]:
        """Send each (key, value) and wait for every answer (at most the delivery timeout)."""
        ...

    def poll(self, timeout_ms: int) -> PollResult: ...

    def assign(self, keys: Sequence[int], *, seek_to_beginning: bool = False) -> None: ...

    def subscribe(self, keys: Sequence[int]) -> None:
        """Join the group for the topic; its coordinator picks which of `keys` this reads."""
        ...

    def positions(self) -> dict[int, int]:
        """The next offset this would read, per key it reads now."""
        ...

    def commit(self, offsets: Mapping[int, int]) -> None:
        """Commit `offsets` (the next offset to read, per key) for the group."""
        ...

    def close(self) -> None: ...


ClientFactory = Callable[[ClientSettings], ClientAdapter]


def encode_value(value: int) -> bytes:
    return str(value).encode("ascii")


def decode_value(data: bytes | None) -> int:
    if data is None:
        raise ValueError("a record without a value: the workload never sends one")
    return int(data)


class NativeClient:
    """zlog's Producer (idempotent, acks=all) and Consumer, created lazily, closed together."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._rebalanced: list[list[int]] = []

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            s = self.settings
            self._producer = Producer(
                s.bootstrap, acks="all", enable_idempotence=True, linger_ms=0,
                request_timeout_ms=s.request_timeout_ms,
                delivery_timeout_ms=s.delivery_timeout_ms, retry_backoff_ms=50,
                max_block_ms=s.delivery_timeout_ms)
        return self._producer

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            s = self.settings
            self._consumer = Consumer(
                s.bootstrap, auto_offset_reset="earliest", group_id=s.group_id,
                enable_auto_commit=False, fetch_max_wait_ms=100,
                request_timeout_ms=s.request_timeout_ms, retry_backoff_ms=50,
                session_timeout_ms=6_000)
        return self._consumer

    def send(self, records: Sequence[tuple[int, int]]) -> list[SendResult]:
        topic = self.settings.topic
        futures = [self.producer.send(topic, encode_value(value), partition=key)
                   for key, value in records]
        wait_s = self.settings.delivery_timeout_ms / 1000 + 1.0
        return [_result(key, value, future, wait_s)
                for (key, value), future in zip(records, futures, strict=True)]

    def poll(self, timeout_ms: int) -> PollResult:
        self._rebalanced = []
        polled: Polled = {}
        for record in self.consumer.poll(timeout_ms):
            polled.setdefault(record.partition, []).append(_pair(record))
        return PollResult(polled, self._rebalanced)

    def assign(self, keys: Sequence[int], *, seek_to_beginning: bool = False) -> None:
        partitions = self._partitions(keys)
        self.consumer.assign(partitions)
        if seek_to_beginning:
            self.consumer.seek_to_beginning(partitions)

    def subscribe(self, keys: Sequence[int]) -> None:
        self.consumer.subscribe([self.settings.topic], on_assign=self._moved,
                                on_revoke=self._moved)

    def positions(self) -> dict[int, int]:
        consumer = self.consumer
        return {tp.partition: consumer.position(tp) for tp in consumer.assignment()}

    def commit(self, offsets: Mapping[int, int]) -> None:
        topic = self.settings.topic
        self.consumer.commit({TopicPartition(topic, key): o for key, o in offsets.items()})

    def close(self) -> None:
        """Close both, as fast as they allow: a client dropped after an info may hang on a
        broker that is gone, and nothing it still holds matters to the history."""
        if self._producer is not None:
            with contextlib.suppress(Exception):
                self._producer.close(timeout_ms=1_000)
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                self._consumer.close()
        self._producer = self._consumer = None

    def _partitions(self, keys: Iterable[int]) -> list[TopicPartition]:
        return [TopicPartition(self.settings.topic, key) for key in keys]

    def _moved(self, partitions: set[TopicPartition]) -> None:
        self._rebalanced.append(sorted(tp.partition for tp in partitions))


def _pair(record: ConsumerRecord) -> tuple[int, int]:
    return record.offset, decode_value(record.value)


def _result(key: int, value: int, future: Future[RecordMetadata], wait_s: float) -> SendResult:
    try:
        landed = future.result(timeout=wait_s)
    except Exception as error:  # a timeout too: every error is reported, mapped by the workload
        return SendResult(key, value, None, error)
    return SendResult(key, value, landed.offset, None)


def native_client(settings: ClientSettings) -> ClientAdapter:
    return NativeClient(settings)
