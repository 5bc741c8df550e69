"""The producer's bookkeeping per partition: the next sequence, the batches in flight, and those
waiting out a backoff to be sent again; which failures a batch is retried after, and when a
waiting batch expires.

Only the sender (`sender.py`) uses it, under its I/O lock. Nothing here takes a lock, touches a
socket or completes a future: the sender does those with what these methods hand back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Final

from zlog.client.accumulator import PendingBatch
from zlog.errors import ErrorCode, ZlogError, proves_not_appended
from zlog.types import SEQUENCE_MODULUS, TopicPartition

log = logging.getLogger("zlog.client.producer")

# Retriable in Kafka's table, but a corrupt batch that this producer built would only fail
# again: the transport below checks integrity already.
_NOT_RETRIED: Final = frozenset({ErrorCode.CORRUPT_MESSAGE})


@dataclass(slots=True)
class PartitionSends:
    next_sequence: int = 0
    in_flight: list[PendingBatch] = field(default_factory=list)
    retries: list[PendingBatch] = field(default_factory=list)  # by base_sequence


class SendBook:
    """Every partition's sends, and the earliest moment a queued or waiting batch can expire."""

    def __init__(self, *, idempotent: bool, retries: int, retry_backoff_ms: int,
                 delivery_timeout_ms: int) -> None:
        self._idempotent = idempotent
        self._retries = retries
        self._retry_backoff_ms = retry_backoff_ms
        self._delivery_timeout_ms = delivery_timeout_ms
        self.partitions: dict[TopicPartition, PartitionSends] = {}
        # No queued or retried batch can expire before this (see `expire_retries`).
        self.next_expiry_ms = -(2**62)
        self._retry_causes_logged: set[tuple[TopicPartition, ErrorCode]] = set()

    def partition(self, tp: TopicPartition) -> PartitionSends:
        state = self.partitions.get(tp)
        if state is None:
            state = self.partitions[tp] = PartitionSends()
        return state

    def has_retries(self) -> bool:
        return any(state.retries for state in self.partitions.values())

    def add_retry(self, state: PartitionSends, batch: PendingBatch) -> None:
        """Queue a batch to be sent again, in sequence order; it can expire while it waits."""
        state.retries.append(batch)
        state.retries.sort(key=lambda b: (b.base_sequence, b.created_ms))
        expiry_ms = batch.created_ms + self._delivery_timeout_ms
        self.next_expiry_ms = min(self.next_expiry_ms, expiry_ms)

    def requeue(self, batches: list[PendingBatch], now_ms: int) -> None:
        """Put taken batches back, in order, to be sent on a later pass (no attempt used)."""
        for batch in batches:
            state = self.partition(batch.tp)
            state.in_flight.remove(batch)
            batch.retry_at_ms = now_ms
            self.add_retry(state, batch)

    def retry_later(self, batch: PendingBatch, error: ZlogError, now_ms: int, *,
                    reset_pending: bool) -> bool:
        """Take a failed batch out of flight and queue it to be sent again after the backoff;
        False when its error, its attempts or its age say it fails for good instead."""
        state = self.partition(batch.tp)
        if batch in state.in_flight:
            state.in_flight.remove(batch)
        retriable = error.retriable and error.code not in _NOT_RETRIED
        if self._idempotent and error.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            # Not this batch's fault when an earlier batch of the partition is being retried,
            # or failed for good (then the producer id is renewed and this batch re-encoded).
            retriable = reset_pending or any(
                _sequence_before(other.base_sequence, batch.base_sequence)
                for other in state.retries + state.in_flight
            )
        expired = now_ms - batch.created_ms >= self._delivery_timeout_ms
        if not (retriable and batch.attempts <= self._retries and not expired):
            return False
        batch.retry_at_ms = now_ms + self._retry_backoff_ms
        batch.last_error = error
        note_attempt(batch, error)
        self._log_retry_cause(batch.tp, error)
        self.add_retry(state, batch)
        return True

    def _log_retry_cause(self, tp: TopicPartition, error: ZlogError) -> None:
        """Each (partition, cause) once, until the partition succeeds again: retries are
        silent otherwise, and a cause that persists should be seen before it times out."""
        key = (tp, error.code)
        if key in self._retry_causes_logged:
            return
        self._retry_causes_logged.add(key)
        log.warning("%s-%d: %s; retrying (for up to delivery_timeout_ms=%d)", tp.topic,
                    tp.partition, error, self._delivery_timeout_ms)

    def note_delivered(self, tp: TopicPartition) -> None:
        """A batch of `tp` succeeded: its retry causes may be logged again."""
        if self._retry_causes_logged:
            self._retry_causes_logged = {
                key for key in self._retry_causes_logged if key[0] != tp}

    def retry_wait_ms(self, now_ms: int, wait_ms: int) -> int:
        """`wait_ms`, or less if a backoff ends sooner (backoffs already over do not count)."""
        for state in self.partitions.values():
            if state.retries and state.retries[0].retry_at_ms > now_ms:
                wait_ms = min(wait_ms, state.retries[0].retry_at_ms - now_ms)
        return wait_ms

    def expire_retries(self, now_ms: int, queued_oldest_ms: int | None) -> list[PendingBatch]:
        """Take out the waiting batches that are delivery_timeout_ms old, and note when the
        next one can be, counting the oldest batch still queued (`queued_oldest_ms`).

        The sender asks only once something can have expired (`next_expiry_ms`): a batch
        queued later is younger than every batch seen here, and a batch coming back for a
        retry lowers the mark itself (`add_retry`), so no pass in between has anything to find.
        """
        timeout_ms = self._delivery_timeout_ms
        expired: list[PendingBatch] = []
        oldest_ms = now_ms if queued_oldest_ms is None else min(queued_oldest_ms, now_ms)
        for state in self.partitions.values():
            if not state.retries:
                continue
            keep = [b for b in state.retries if now_ms - b.created_ms < timeout_ms]
            expired.extend(b for b in state.retries if now_ms - b.created_ms >= timeout_ms)
            state.retries = keep
            oldest_ms = min([oldest_ms, *(b.created_ms for b in keep)])
        self.next_expiry_ms = oldest_ms + timeout_ms
        return expired

    def restart_sequences(self) -> None:
        """A new producer id: every sequence starts at 0, and waiting batches are encoded
        again with the new id and sequences."""
        for state in self.partitions.values():
            state.next_sequence = 0
            for batch in state.retries:
                batch.encoded = None

    def take_retries_of(self, topic: str) -> list[PendingBatch]:
        """The waiting batches of `topic`'s partitions, which will not be sent again."""
        taken: list[PendingBatch] = []
        for tp, state in self.partitions.items():
            if tp.topic == topic:
                taken.extend(state.retries)
                state.retries.clear()
        return taken

    def take_all(self) -> list[PendingBatch]:
        """Every waiting and in-flight batch, which will not be sent or answered now."""
        taken: list[PendingBatch] = []
        for state in self.partitions.values():
            # in_flight also holds batches taken but not sent yet when a pass failed midway.
            taken.extend(state.retries + state.in_flight)
            state.retries.clear()
            state.in_flight.clear()
        return taken


def expiry_error(batch: PendingBatch, timeout_ms: int) -> ZlogError:
    """Kafka's rule: a batch that kept failing gives up with its last cause, not a bare
    timeout (NOT_ENOUGH_REPLICAS says what to fix; REQUEST_TIMED_OUT would hide it), unless
    that cause would claim more than is known (`give_up_error`)."""
    where = f"{batch.record_count} records for {batch.tp.topic}-{batch.tp.partition}"
    last = batch.last_error
    if last is None:
        return ZlogError(ErrorCode.REQUEST_TIMED_OUT,
                         f"{where} were not acknowledged within delivery_timeout_ms={timeout_ms}")
    return give_up_error(batch, ZlogError(
        last.code, f"{last.message} ({where} gave up after {batch.attempts} attempts within "
                   f"delivery_timeout_ms={timeout_ms})"))


def note_attempt(batch: PendingBatch, error: ZlogError) -> None:
    """Remember the first failed attempt that may have appended the batch anyway."""
    if batch.maybe_appended is None and not proves_not_appended(error.code):
        batch.maybe_appended = error


def give_up_error(batch: PendingBatch, error: ZlogError) -> ZlogError:
    """The error a batch fails with for good. A code that proves nothing was appended (say
    NOT_ENOUGH_REPLICAS) proves it only for its own attempt: when an earlier attempt timed out
    or lost its connection, the records may be in the log (the broker refuses a retry for the
    ISR before it looks for the duplicate), so the caller gets that earlier, indefinite code,
    with both causes named, never a definite failure for records that may have been written."""
    maybe = batch.maybe_appended
    if maybe is None or not proves_not_appended(error.code):
        return error
    return ZlogError(maybe.code, f"{error}; an earlier attempt may have appended these "
                                 f"records: {maybe}")


def _sequence_before(first: int, second: int) -> bool:
    """Whether sequence `first` comes before `second`, allowing for wrap at 2^31."""
    if first < 0 or second < 0:
        return False
    return 0 < (second - first) % SEQUENCE_MODULUS < SEQUENCE_MODULUS // 2
