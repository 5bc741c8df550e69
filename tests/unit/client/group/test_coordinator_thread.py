"""The coordinator thread runs calls in order on one thread of its own, and a revocation is
reported only once the commit of its partitions is answered (docs/groups.md §11)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future

from zlog.client.group.coordinator import CoordinatorLink
from zlog.client.group.coordinator_thread import CoordinatorThread
from zlog.client.group.poll_thread import report_after
from zlog.errors import ErrorCode, ZlogError

NOWHERE = "tcp://127.0.0.1:9"  # never dialled: the calls below do not touch the link


def test_calls_run_in_submission_order_on_one_thread_with_one_link() -> None:
    worker = CoordinatorThread(NOWHERE, "g", request_timeout_ms=1_000, retry_backoff_ms=10)
    started = threading.Event()
    release = threading.Event()
    seen: list[tuple[int, int, int]] = []

    def call(index: int) -> Callable[[CoordinatorLink], int]:
        def run(link: CoordinatorLink) -> int:
            if index == 0:
                started.set()
                release.wait(5)
            seen.append((index, threading.get_ident(), id(link)))
            return index
        return run

    futures = [worker.submit(call(i)) for i in range(5)]
    assert started.wait(5)
    assert not any(f.done() for f in futures[1:])  # held behind the first
    release.set()
    assert [f.result(5) for f in futures] == list(range(5))
    assert [index for index, _, _ in seen] == list(range(5))
    assert len({thread for _, thread, _ in seen}) == 1
    assert threading.get_ident() not in {thread for _, thread, _ in seen}
    assert len({link for _, _, link in seen}) == 1  # the connections stay open between calls
    worker.close()


def test_close_waits_for_the_calls_submitted_before_it() -> None:
    worker = CoordinatorThread(NOWHERE, "g", request_timeout_ms=1_000, retry_backoff_ms=10)
    release = threading.Event()
    future = worker.submit(lambda link: release.wait(5))
    closer = threading.Thread(target=worker.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive() and not future.done()
    release.set()
    closer.join(5)
    assert not closer.is_alive() and future.result() is True


def test_a_revocation_is_reported_only_when_its_commit_is_answered() -> None:
    commit: Future[None] = Future()
    reports: list[str] = []
    report_after(commit, lambda: reports.append("done"))
    assert reports == []  # the partitions are not released while their commit is in flight
    commit.set_result(None)
    assert reports == ["done"]


def test_a_refused_commit_still_reports_the_revocation() -> None:
    commit: Future[None] = Future()
    reports: list[str] = []
    report_after(commit, lambda: reports.append("done"))
    commit.set_exception(ZlogError(ErrorCode.STALE_MEMBER_EPOCH, "refused"))
    assert reports == ["done"]


def test_without_a_commit_the_work_is_reported_at_once() -> None:
    reports: list[str] = []
    report_after(None, lambda: reports.append("done"))
    assert reports == ["done"]
