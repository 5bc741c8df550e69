"""Producers and consumers, one of each per partition.

A producer keeps one request in flight (Kafka's idempotent producer with
max.in.flight = 1, so sequences stay in order). It sends to the broker the latest metadata
names as leader (sometimes to any broker: stale client metadata). An idempotent producer
retries the same batch, byte for byte, after any answer that may hide an append (timeouts,
NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS_AFTER_APPEND) and after definite refusals too (they
stored nothing, so the retry is safe); a sequence error (its state was lost with a truncated
tail) starts a new producer epoch. A plain producer gives up after the first failure, as
`retries = 0` would.

A consumer reads from the leader below the high watermark; the checker looks at what the
broker answered, so a lost answer costs nothing. An admin client now and then deletes a
partition's records below its high watermark (DeleteRecords -1), one request at a time; the
checker learns of a deletion when the leader answers it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from tests.sim.replication.messages import (
    ConsumerFetch,
    ConsumerFetchAnswer,
    DeleteRecords,
    DeleteRecordsAnswer,
    Envelope,
    Produce,
    ProduceAnswer,
)
from tests.sim.replication.profile import Profile
from tests.sim.replication.storage import BATCH_ID_BASE_MS
from zlog.errors import ErrorCode
from zlog.record.arrays import build_batch_from_values
from zlog.types import ACKS_ALL

PRODUCER_BASE = 100
CONSUMER_BASE = 200
DELETER_BASE = 300
DELETE_TIMEOUT_TICKS = 40  # an answer lost, or a broker gone: ask again after this
PRODUCER_ID_BASE = 1000
MAX_ATTEMPTS = 30
_SEQUENCE_ERRORS = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                              ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.INVALID_PRODUCER_EPOCH})

Send = Callable[[int, int, object], None]
Target = Callable[[int], int]  # partition -> the broker to ask


@dataclass(slots=True)
class _InFlight:
    request_id: int
    batch: bytes
    batch_id: int
    acks: int
    sent_at: int
    attempts: int
    record_count: int
    target: int = -1


class Producer:
    def __init__(self, partition: int, profile: Profile, rng: random.Random, *, send: Send,
                 target: Target, new_id: Callable[[], int]) -> None:
        self.partition = partition
        self.node_id = PRODUCER_BASE + partition
        self.profile, self.rng, self.send, self.target, self.new_id = (
            profile, rng, send, target, new_id)
        self.idempotent = profile.idempotent
        self.producer_id = PRODUCER_ID_BASE + partition if self.idempotent else -1
        self.producer_epoch = 0 if self.idempotent else -1
        self.next_sequence = 0
        self.current: _InFlight | None = None
        self.retry_at = 0
        self.acked_all: list[tuple[int, int]] = []  # (batch id, tick) of acks=all successes
        self.outcomes: dict[int, ErrorCode] = {}  # batch id -> how it ended (NONE: success)
        self.produce_p = profile.produce_p
        self.acks_all_p = profile.acks_all_p

    def _new_batch(self, now: int) -> None:
        batch_id = self.new_id()
        count = self.rng.choice([1, 1, 2, 3])
        acks = ACKS_ALL if self.rng.random() < self.acks_all_p else 1
        self._start(now, batch_id, count, acks)

    def send_batch(self, now: int, acks: int, target: int) -> int:
        """A scripted produce (scenarios.py): one record, first sent to `target`, retried as
        any other. Returns its batch id."""
        assert self.current is None, "one request in flight"
        batch_id = self.new_id()
        self._start(now, batch_id, 1, acks, target)
        return batch_id

    def _start(self, now: int, batch_id: int, count: int, acks: int,
               target: int | None = None) -> None:
        batch = build_batch_from_values(
            [f"{batch_id}:{i}".encode() for i in range(count)],
            timestamp_ms=BATCH_ID_BASE_MS + batch_id, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.next_sequence if self.idempotent else -1)
        if self.idempotent:
            self.next_sequence += count
        self.current = _InFlight(0, batch, batch_id, acks, now, 0, count)
        self._send(now, target)

    def _send(self, now: int, target: int | None = None) -> None:
        current = self.current
        assert current is not None
        current.request_id = self.new_id()
        current.sent_at = now
        current.attempts += 1
        current.target = self.target(self.partition) if target is None else target
        self.send(self.node_id, current.target, Produce(
            current.request_id, self.partition, current.batch, current.batch_id, current.acks))

    def tick(self, now: int) -> None:
        current = self.current
        if current is not None:
            if current.request_id < 0:
                if now >= self.retry_at:
                    self._send(now)
            elif now - current.sent_at > self.profile.produce_timeout_ticks + 10:
                self._failed(now, ErrorCode.REQUEST_TIMED_OUT)  # no answer at all
            return
        if now >= self.retry_at and self.rng.random() < self.produce_p:
            self._new_batch(now)

    def receive(self, envelope: Envelope, now: int) -> None:
        body = envelope.body
        current = self.current
        if not isinstance(body, ProduceAnswer) or current is None:
            return
        if body.request_id != current.request_id:
            return
        if body.error == ErrorCode.NONE:
            if current.acks == ACKS_ALL:
                self.acked_all.append((current.batch_id, now))
            self.outcomes[current.batch_id] = ErrorCode.NONE
            self.current = None
            return
        self._failed(now, body.error)

    def disconnected(self, broker: int, now: int) -> None:
        """The broker its request went to died: the connection reset says so at once."""
        current = self.current
        if current is not None and current.request_id >= 0 and current.target == broker:
            self._failed(now, ErrorCode.NETWORK_EXCEPTION)

    def _failed(self, now: int, code: ErrorCode) -> None:
        current = self.current
        assert current is not None
        if code in _SEQUENCE_ERRORS or (self.idempotent and current.attempts >= MAX_ATTEMPTS):
            self.producer_epoch += 1  # a new session: sequences start again
            self.next_sequence = 0
            self.outcomes[current.batch_id] = code
            self.current = None
            return
        if not self.idempotent:
            self.outcomes[current.batch_id] = code
            self.current = None
            return
        current.request_id = -1  # retried from tick(): an answer to this send is ignored
        self.retry_at = now + 2


class Consumer:
    def __init__(self, partition: int, profile: Profile, rng: random.Random, *, send: Send,
                 target: Target, new_id: Callable[[], int]) -> None:
        self.partition = partition
        self.node_id = CONSUMER_BASE + partition
        self.profile, self.rng, self.send, self.target, self.new_id = (
            profile, rng, send, target, new_id)
        self.offset = 0
        self.waiting: int | None = None
        self.sent_at = 0

    def tick(self, now: int) -> None:
        if self.waiting is not None and now - self.sent_at < 20:
            return
        if self.rng.random() < self.profile.consume_p:
            self.waiting, self.sent_at = self.new_id(), now
            self.send(self.node_id, self.target(self.partition),
                      ConsumerFetch(self.waiting, self.partition, self.offset))

    def receive(self, envelope: Envelope, now: int) -> None:
        del now
        body = envelope.body
        if not isinstance(body, ConsumerFetchAnswer) or body.request_id != self.waiting:
            return
        self.waiting = None
        if body.error == ErrorCode.OFFSET_OUT_OF_RANGE:
            self.offset = body.log_start_offset  # auto.offset.reset = earliest
        elif body.batches:
            self.offset = body.batches[-1][1]


class Deleter:
    """An admin client deleting partition `partition`'s records below its HW now and then."""

    def __init__(self, partition: int, delete_p: float, rng: random.Random, *, send: Send,
                 target: Target, new_id: Callable[[], int]) -> None:
        self.partition = partition
        self.node_id = DELETER_BASE + partition
        self.delete_p, self.rng, self.send, self.target, self.new_id = (
            delete_p, rng, send, target, new_id)
        self.waiting: int | None = None
        self.sent_at = 0

    def tick(self, now: int) -> None:
        if self.waiting is not None and now - self.sent_at < DELETE_TIMEOUT_TICKS:
            return
        if self.delete_p and self.rng.random() < self.delete_p:
            self.waiting, self.sent_at = self.new_id(), now
            self.send(self.node_id, self.target(self.partition),
                      DeleteRecords(self.waiting, self.partition, -1))

    def receive(self, envelope: Envelope, now: int) -> None:
        del now
        body = envelope.body
        if isinstance(body, DeleteRecordsAnswer) and body.request_id == self.waiting:
            self.waiting = None
