"""The sink's acknowledgement check (zlog/spark/delivery.py): a task fails unless all landed."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from zlog.errors import ErrorCode, ZlogError
from zlog.spark.delivery import DeliveryTracker


def test_every_acknowledged_record_passes() -> None:
    tracker = DeliveryTracker()
    futures: list[Future[object]] = [Future(), Future()]
    tracker.watch(futures[0], 100)
    tracker.watch(futures[1], 1)
    for future in futures:
        future.set_result(None)
    tracker.check("t")
    assert (tracker.sent, tracker.acknowledged, tracker.failed) == (101, 101, 0)


def test_a_failed_batch_fails_the_task_with_its_code_and_the_count() -> None:
    tracker = DeliveryTracker()
    done: Future[object] = Future()
    failed: Future[object] = Future()
    tracker.watch(done, 10)
    tracker.watch(failed, 5)
    done.set_result(None)
    failed.set_exception(ZlogError(ErrorCode.NOT_ENOUGH_REPLICAS, "isr too small"))
    with pytest.raises(ZlogError) as caught:
        tracker.check("clicks")
    assert caught.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert caught.value.message == ("5 of 15 records for topic 'clicks' were not delivered "
                                    "(first error: isr too small); Spark retries the task")


def test_an_unanswered_record_fails_the_task_too() -> None:
    tracker = DeliveryTracker()
    tracker.watch(Future(), 3)  # the flush ended (the producer's I/O thread died) unanswered
    with pytest.raises(ZlogError, match=r"3 of 3 records .* no acknowledgement came") as caught:
        tracker.check("t")
    assert caught.value.code == ErrorCode.REQUEST_TIMED_OUT
