"""What a batch that gives up tells its caller (zlog/client/partition_sends.py).

A code that proves nothing was appended (NOT_ENOUGH_REPLICAS) proves it for its own attempt
only: a batch whose earlier attempt timed out waiting for the ISR may be in the log, since a
broker refuses the retry for the ISR before it looks for the duplicate. Told "not appended",
a caller (or the fault harness's checker, docs/reliability.md §8.2) would take records that
are in the log for never written. Pure: the time is handed in.
"""

from __future__ import annotations

from zlog.client.accumulator import BATCH_OVERHEAD_BYTES, PendingBatch
from zlog.client.partition_sends import SendBook, expiry_error, give_up_error
from zlog.errors import ErrorCode, ZlogError, proves_not_appended
from zlog.types import TopicPartition

DELIVERY_TIMEOUT_MS = 5_000
TIMED_OUT = ZlogError(ErrorCode.REQUEST_TIMED_OUT,
                      "request timed out while waiting for the in-sync replicas")
TOO_FEW = ZlogError(ErrorCode.NOT_ENOUGH_REPLICAS,
                    "t-0 has 1 in-sync replicas; min.insync.replicas is 2")


def _book() -> SendBook:
    return SendBook(idempotent=True, retries=1_000, retry_backoff_ms=100,
                    delivery_timeout_ms=DELIVERY_TIMEOUT_MS)


def _batch() -> PendingBatch:
    batch = PendingBatch(TopicPartition("t", 0), 0, [b"v"], [None], [0], None, [], None, 0,
                         BATCH_OVERHEAD_BYTES, 1, is_open=False)
    batch.base_sequence = 0
    return batch


def _attempt(book: SendBook, batch: PendingBatch, error: ZlogError, now_ms: int) -> bool:
    batch.attempts += 1
    book.partition(batch.tp).in_flight.append(batch)
    return book.retry_later(batch, error, now_ms, reset_pending=False)


def test_a_batch_refused_after_an_attempt_that_timed_out_expires_with_an_open_outcome() -> None:
    book, batch = _book(), _batch()
    assert _attempt(book, batch, TIMED_OUT, 1_000)
    assert _attempt(book, batch, TOO_FEW, 2_000)
    error = expiry_error(batch, DELIVERY_TIMEOUT_MS)
    assert error.code == ErrorCode.REQUEST_TIMED_OUT
    assert not proves_not_appended(error.code)
    assert "NOT_ENOUGH_REPLICAS" in str(error) and "may have appended" in str(error)


def test_a_batch_refused_for_good_after_an_attempt_that_lost_its_connection_is_not_definite(
) -> None:
    batch = _batch()
    lost = ZlogError(ErrorCode.NETWORK_EXCEPTION, "the connection to tcp://h:1 was lost")
    assert _attempt(_book(), batch, lost, 1_000)
    refused = ZlogError(ErrorCode.INVALID_PRODUCER_EPOCH, "fenced by a newer producer")
    assert give_up_error(batch, refused).code == ErrorCode.NETWORK_EXCEPTION


def test_a_batch_only_ever_refused_before_an_append_fails_definitely() -> None:
    book, batch = _book(), _batch()
    assert _attempt(book, batch, TOO_FEW, 1_000)
    assert _attempt(book, batch, TOO_FEW, 2_000)
    assert expiry_error(batch, DELIVERY_TIMEOUT_MS).code == ErrorCode.NOT_ENOUGH_REPLICAS


def test_an_open_last_cause_is_reported_as_it_is() -> None:
    book, batch = _book(), _batch()
    assert _attempt(book, batch, TOO_FEW, 1_000)
    assert _attempt(book, batch, TIMED_OUT, 2_000)
    error = expiry_error(batch, DELIVERY_TIMEOUT_MS)
    assert error.code == ErrorCode.REQUEST_TIMED_OUT and "may have appended" not in str(error)
