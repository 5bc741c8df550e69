"""DeliveryFuture behaves as a concurrent.futures.Future, with or without its lazy Condition."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

from zlog.client.delivery_future import DeliveryFuture

WAIT_S = 30.0


def test_a_result_set_before_anyone_asks_is_read_without_a_condition() -> None:
    future: DeliveryFuture[int] = DeliveryFuture()
    assert not future.done()
    future.set_result(7)
    assert future.done()
    assert future.result() == 7
    assert future.exception() is None
    assert "_condition" not in vars(future)  # nothing needed one: none was made


def test_an_exception_set_before_anyone_asks_is_raised() -> None:
    future: DeliveryFuture[int] = DeliveryFuture()
    future.set_exception(ValueError("no"))
    with pytest.raises(ValueError, match="no"):
        future.result()
    assert isinstance(future.exception(), ValueError)


def test_setting_a_finished_future_again_is_refused_as_future_refuses_it() -> None:
    for first_waits in (False, True):
        future: DeliveryFuture[int] = DeliveryFuture()
        if first_waits:
            future.add_done_callback(lambda _f: None)  # makes the Condition
        future.set_result(1)
        with pytest.raises(concurrent.futures.InvalidStateError):
            future.set_result(2)
        with pytest.raises(concurrent.futures.InvalidStateError):
            future.set_exception(ValueError())
        assert future.result() == 1


def test_a_waiting_thread_is_woken_by_the_result() -> None:
    future: DeliveryFuture[str] = DeliveryFuture()
    waiting = threading.Event()
    got: list[str] = []

    def wait() -> None:
        waiting.set()
        got.append(future.result(WAIT_S))

    thread = threading.Thread(target=wait)
    thread.start()
    assert waiting.wait(WAIT_S)
    future.set_result("landed")
    thread.join(WAIT_S)
    assert got == ["landed"]


def test_a_result_that_does_not_come_times_out() -> None:
    future: DeliveryFuture[int] = DeliveryFuture()
    with pytest.raises(concurrent.futures.TimeoutError):
        future.result(timeout=0)


def test_callbacks_run_once_whether_added_before_or_after_the_result() -> None:
    future: DeliveryFuture[int] = DeliveryFuture()
    seen: list[int] = []
    future.add_done_callback(lambda f: seen.append(f.result()))
    future.set_result(3)
    future.add_done_callback(lambda f: seen.append(f.result() * 10))
    assert seen == [3, 30]


def test_wait_and_as_completed_see_both_kinds_of_completion() -> None:
    early: DeliveryFuture[int] = DeliveryFuture()
    early.set_result(1)
    late: DeliveryFuture[int] = DeliveryFuture()
    threading.Timer(0.0, late.set_result, (2,)).start()
    done, not_done = concurrent.futures.wait([early, late], timeout=WAIT_S)
    assert done == {early, late} and not not_done
    again: DeliveryFuture[int] = DeliveryFuture()
    threading.Timer(0.0, again.set_exception, (KeyError("k"),)).start()
    finished = list(concurrent.futures.as_completed([early, again], timeout=WAIT_S))
    assert set(finished) == {early, again}


def test_a_cancelled_future_is_done_and_raises_cancelled() -> None:
    future: DeliveryFuture[int] = DeliveryFuture()
    assert future.cancel()
    assert future.done() and future.cancelled()
    with pytest.raises(concurrent.futures.CancelledError):
        future.result()


def test_many_waiters_racing_many_completions_all_wake() -> None:
    """Waiters start as the results are set, so some make the Condition just before and some
    just after the completion decides: none may sleep past it."""
    futures: list[DeliveryFuture[int]] = [DeliveryFuture() for _ in range(2_000)]
    results: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(3)

    def wait_all(step: int) -> None:
        start.wait(WAIT_S)
        for future in futures[step::2]:
            value = future.result(WAIT_S)
            with lock:
                results.append(value)

    waiters = [threading.Thread(target=wait_all, args=(step,)) for step in (0, 1)]
    for thread in waiters:
        thread.start()
    start.wait(WAIT_S)
    for index, future in enumerate(futures):
        future.set_result(index)
    for thread in waiters:
        thread.join(WAIT_S)
        assert not thread.is_alive()
    assert sorted(results) == list(range(len(futures)))
