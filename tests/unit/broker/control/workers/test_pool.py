"""The worker pool's side of the supervisor <-> worker contract, over a real in-process channel.

Spec: the contract at the top of zlog/broker/control/workers/pool.py (hello, assign/assigned,
unassign/unassigned, heartbeats, restart with backoff). The workers here are DEALER sockets
driven by the test, and their "processes" are stand-ins, so no process is started.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import zmq

from zlog.broker.control.workers.pool import (
    KILLED_EXIT_TIMEOUT_MS,
    WORKER_RESTART_LIMIT,
    WORKER_START_TIMEOUT_MS,
    DesiredPartition,
    WorkerPool,
    WorkerSettings,
    WorkerState,
    restart_backoff_ms,
    supervisor_endpoint,
)
from zlog_testbed.waiting import wait_until

NOW_MS = 1_000_000
WANT = DesiredPartition({"retention.ms": "1000"}, 0, True)


class StandInProcess:
    """What the pool asks of a Popen: a pid, poll(), kill(), wait()."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.killed = False

    def poll(self) -> int | None:
        return self.returncode

    def kill(self) -> None:
        self.killed = True
        self.returncode = -9

    def wait(self, timeout: float | None = None) -> int | None:
        del timeout
        return self.returncode


class UnkillableProcess(StandInProcess):
    """A process in uninterruptible I/O: SIGKILL is pending until the I/O ends, and a wait
    for it would never return (the loop must never make one)."""

    def kill(self) -> None:
        self.killed = True

    def wait(self, timeout: float | None = None) -> int | None:
        raise AssertionError(f"the pool waited for pid {self.pid} (timeout {timeout})")


class Harness:
    def __init__(self, directory: Path, count: int = 2) -> None:
        self.context: zmq.Context[Any] = zmq.Context.instance()
        self.assigned: list[tuple[tuple[str, int], int]] = []
        settings = WorkerSettings(
            count=count, data_dir=directory, ring_dir=directory / "rings", host="127.0.0.1",
            port_range=None, log_level="info", heartbeat_timeout_ms=10_000,
            backoff_initial_ms=100, backoff_max_ms=1_000,
        )
        self.pool = WorkerPool(settings, self.context,
                               on_assigned=lambda tp, code, _text: self.assigned.append((tp, code)))
        self.dealers = []
        for worker in self.pool.workers:
            worker.process = StandInProcess(5000 + worker.worker_id)  # type: ignore[assignment]
            worker.state = WorkerState.STARTING
            worker.started_ms = worker.last_seen_ms = NOW_MS
            dealer = self.context.socket(zmq.DEALER)
            dealer.setsockopt(zmq.LINGER, 0)
            dealer.setsockopt(zmq.IDENTITY, worker.identity)
            dealer.connect(self.pool.endpoint)
            self.dealers.append(dealer)

    def close(self) -> None:
        for dealer in self.dealers:
            dealer.close(linger=0)
        self.pool.close()

    def send(self, worker_id: int, message: dict[str, Any]) -> None:
        self.dealers[worker_id].send(json.dumps(message).encode())

    def pump(self, until: Any) -> None:
        """Let the pool receive until `until()` holds."""
        def received() -> bool:
            self.pool.receive(NOW_MS)
            return bool(until())
        wait_until(received, 5.0, what="the pool to receive")

    def inbox(self, worker_id: int, count: int) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        for _ in range(count):
            assert self.dealers[worker_id].poll(5000), f"worker {worker_id} got {messages}"
            messages.append(json.loads(self.dealers[worker_id].recv()))
        assert not self.dealers[worker_id].poll(20), "more messages than expected"
        return messages

    def hello_all(self) -> None:
        for worker in self.pool.workers:
            self.send(worker.worker_id, {"type": "hello", "worker_id": worker.worker_id,
                                         "pid": worker.pid, "endpoint": f"tcp://h:{worker.pid}"})
        self.pump(lambda: self.pool.ready_count() == len(self.pool.workers))

    def answer(self, worker_id: int, messages: list[dict[str, Any]], code: int = 0) -> None:
        for message in messages:
            self.send(worker_id, {"type": message["type"] + "ed" if message["type"] == "assign"
                                  else "unassigned", "request_id": message["request_id"],
                                  "error_code": code, "error_message": ""})
        self.pump(lambda: not self.pool.workers[worker_id].pending)


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    instance = Harness(tmp_path)
    try:
        yield instance
    finally:
        instance.close()


def test_assignment_is_level_triggered(harness: Harness) -> None:
    harness.hello_all()
    desired = {("t", 0): WANT, ("t", 1): WANT, ("u", 0): WANT}
    harness.pool.reconcile(desired, [], NOW_MS)
    to_first, to_second = harness.inbox(0, 2), harness.inbox(1, 1)
    assert [(m["type"], m["topic"], m["partition"]) for m in to_first] == [
        ("assign", "t", 0), ("assign", "u", 0)]
    assert to_second[0] | {"request_id": 0} == {
        "type": "assign", "request_id": 0, "topic": "t", "partition": 1,
        "configs": {"retention.ms": "1000"}, "leader_epoch": 0, "is_leader": True,
        "broker_id": -1, "broker_epoch": -1, "leader": -1, "partition_epoch": 0,
        "replicas": [], "isr": [], "leader_endpoint": "", "disk_share_bytes": -1,
        "topic_id": "", "ineligible": []}
    assert harness.pool.endpoint_for(("t", 0)) is None  # not confirmed yet
    harness.pool.reconcile(desired, [], NOW_MS)  # in flight: nothing is sent twice
    harness.answer(0, to_first)
    harness.answer(1, to_second)
    assert harness.pool.endpoint_for(("t", 0)) == "tcp://h:5000"
    assert harness.pool.endpoint_for(("t", 1)) == "tcp://h:5001"
    assert sorted(harness.assigned) == [(("t", 0), 0), (("t", 1), 0), (("u", 0), 0)]
    harness.pool.reconcile(desired, [], NOW_MS)  # converged: nothing to send
    harness.inbox(0, 0)
    # A new leader epoch means a new assign of the same partition.
    harness.pool.reconcile({**desired, ("u", 0): DesiredPartition({}, 1, True)}, [], NOW_MS)
    assert [(m["partition"], m["leader_epoch"]) for m in harness.inbox(0, 1)] == [(0, 1)]
    # So does a new share of the topic's disk budget (the topic grew, or a replica moved).
    smaller = {tp: replace(want, disk_share_bytes=1000) for tp, want in desired.items()
               if tp[0] == "t"}
    harness.pool.reconcile({**desired, **smaller}, [], NOW_MS)
    for worker_id, partition in ((0, 0), (1, 1)):
        (message,) = harness.inbox(worker_id, 1)
        assert (message["topic"], message["partition"], message["disk_share_bytes"]) == (
            "t", partition, 1000)


def test_deleted_topics_are_unassigned_with_delete(harness: Harness) -> None:
    harness.hello_all()
    harness.pool.reconcile({("t", 0): WANT, ("t", 1): WANT}, [], NOW_MS)
    harness.answer(0, harness.inbox(0, 1))
    harness.answer(1, harness.inbox(1, 1))
    harness.pool.reconcile({}, [("t", 0), ("t", 1)], NOW_MS)
    first, second = harness.inbox(0, 1)[0], harness.inbox(1, 1)[0]
    assert (first["type"], first["delete"], second["delete"]) == ("unassign", True, True)
    harness.answer(0, [first])
    harness.answer(1, [second])
    assert harness.pool.deleted == {("t", 0), ("t", 1)}
    assert harness.pool.endpoint_for(("t", 0)) is None
    harness.pool.reconcile({}, [("t", 0), ("t", 1)], NOW_MS)  # done: nothing sent again
    harness.inbox(0, 0)
    harness.pool.reconcile({}, [], NOW_MS)  # the deletion committed: forgotten
    assert harness.pool.deleted == set() and harness.pool.placement == {}


def test_unheld_partitions_of_deleted_topics_are_deleted_too(harness: Harness) -> None:
    """After a restart nobody holds a deleted topic's partition; its data must still go."""
    harness.hello_all()
    harness.pool.reconcile({}, [("gone", 0)], NOW_MS)
    (message,) = harness.inbox(0, 1)
    assert (message["type"], message["delete"]) == ("unassign", True)
    # A worker that deletes only what it holds refuses: open it, then delete it.
    harness.answer(0, [message], code=3)
    harness.pool.reconcile({}, [("gone", 0)], NOW_MS)
    (opening,) = harness.inbox(0, 1)
    assert opening["type"] == "assign" and opening["is_leader"] is False
    harness.answer(0, [opening])
    harness.pool.reconcile({}, [("gone", 0)], NOW_MS)
    (deleting,) = harness.inbox(0, 1)
    assert (deleting["type"], deleting["delete"]) == ("unassign", True)
    harness.answer(0, [deleting])
    assert harness.pool.deleted == {("gone", 0)}


def test_a_dead_worker_loses_its_partitions_until_it_says_hello_again(
    harness: Harness,
) -> None:
    harness.hello_all()
    harness.pool.reconcile({("t", 0): WANT, ("t", 1): WANT}, [], NOW_MS)
    harness.answer(0, harness.inbox(0, 1))
    harness.answer(1, harness.inbox(1, 1))
    process: Any = harness.pool.workers[1].process
    process.returncode = -9  # SIGKILL
    harness.pool.check(NOW_MS + 1)
    worker = harness.pool.workers[1]
    assert (worker.state, worker.restarts, worker.opened) == (WorkerState.BACKOFF, 1, {})
    assert worker.restart_at_ms == NOW_MS + 1 + 100
    assert harness.pool.endpoint_for(("t", 1)) is None
    assert harness.pool.endpoint_for(("t", 0)) == "tcp://h:5000"  # the other is untouched
    harness.pool.reconcile({("t", 0): WANT, ("t", 1): WANT}, [], NOW_MS + 2)
    assert harness.pool.placement[("t", 1)] == 1  # stays placed on the restarting worker
    harness.inbox(0, 0)


def test_a_silent_worker_is_killed(harness: Harness) -> None:
    harness.hello_all()
    harness.pool.check(NOW_MS + 10_001)
    for worker in harness.pool.workers:
        assert worker.state == WorkerState.BACKOFF
    assert all(worker.restarts == 1 for worker in harness.pool.workers)


def test_a_silent_worker_that_does_not_die_is_not_waited_for_and_its_partitions_go_offline(
    harness: Harness,
) -> None:
    """A stalled worker stuck in uninterruptible I/O outlives its SIGKILL: the check returns
    at once, the worker is not replaced while it lives (it could still write its files), and
    once it outlived the kill by KILLED_EXIT_TIMEOUT_MS its partitions are offline, so the
    supervisor can have them led elsewhere; when it finally ends it is restarted."""
    harness.hello_all()
    harness.pool.reconcile({("t", 0): WANT, ("t", 1): WANT}, [], NOW_MS)
    harness.answer(0, harness.inbox(0, 1))
    harness.answer(1, harness.inbox(1, 1))
    stuck = UnkillableProcess(5001)
    harness.pool.workers[1].process = stuck  # type: ignore[assignment]
    harness.pool.workers[0].last_seen_ms = NOW_MS + 10_000  # the other one keeps beating
    killed_ms = NOW_MS + 10_001
    harness.pool.check(killed_ms)
    worker = harness.pool.workers[1]
    assert stuck.killed and worker.state == WorkerState.KILLED
    assert harness.pool.endpoint_for(("t", 1)) is None
    assert harness.pool.offline(killed_ms + KILLED_EXIT_TIMEOUT_MS) == frozenset()
    harness.pool.check(killed_ms + KILLED_EXIT_TIMEOUT_MS + 1)
    assert worker.state == WorkerState.KILLED, "no replacement while it lives"
    assert harness.pool.offline(killed_ms + KILLED_EXIT_TIMEOUT_MS + 1) == {("t", 1)}
    stuck.returncode = -9  # the I/O ended; the pending SIGKILL took it
    harness.pool.check(killed_ms + 60_000)
    assert (worker.state, worker.restarts) == (WorkerState.BACKOFF, 1)
    assert harness.pool.offline(killed_ms + 60_000) == frozenset()


def test_a_worker_crashing_again_and_again_has_its_partitions_offline(
    harness: Harness,
) -> None:
    harness.hello_all()
    harness.pool.reconcile({("t", 0): WANT, ("t", 1): WANT}, [], NOW_MS)
    worker = harness.pool.workers[1]
    worker.crashes_in_row = WORKER_RESTART_LIMIT - 1
    worker.process.returncode = 1  # type: ignore[union-attr]
    harness.pool.workers[0].last_seen_ms = NOW_MS + 1
    harness.pool.check(NOW_MS + 1)
    assert worker.state == WorkerState.BACKOFF
    assert harness.pool.offline(NOW_MS + 1) == {("t", 1)}


def test_a_starting_worker_has_its_start_timeout_not_the_heartbeat_timeout(
    harness: Harness,
) -> None:
    """A worker slow to import on a starved host is not killed before its hello; one that
    never says hello is, after the start timeout."""
    harness.pool.check(NOW_MS + 10_001)
    assert [w.state for w in harness.pool.workers] == [WorkerState.STARTING] * 2
    harness.send(0, {"type": "hello", "worker_id": 0, "pid": harness.pool.workers[0].pid,
                     "endpoint": "tcp://h:5000"})
    harness.pump(lambda: harness.pool.ready_count() == 1)
    harness.pool.check(NOW_MS + WORKER_START_TIMEOUT_MS + 1)
    assert [(w.state, w.restarts) for w in harness.pool.workers] == [
        (WorkerState.BACKOFF, 1), (WorkerState.BACKOFF, 1)]


def test_hello_from_the_wrong_pid_is_ignored(harness: Harness) -> None:
    harness.send(0, {"type": "hello", "worker_id": 0, "pid": 1, "endpoint": "tcp://h:1"})
    harness.send(0, {"type": "heartbeat", "worker_id": 0})
    harness.pump(lambda: True)
    harness.pool.receive(NOW_MS)
    assert harness.pool.workers[0].state == WorkerState.STARTING


def test_restart_backoff_doubles_up_to_its_cap() -> None:
    assert [restart_backoff_ms(n, 100, 1_000) for n in range(1, 7)] == [
        100, 200, 400, 800, 1_000, 1_000]
    assert restart_backoff_ms(10_000, 100, 1_000) == 1_000


def test_supervisor_endpoint_is_ipc_unless_the_path_is_too_long(tmp_path: Path) -> None:
    assert supervisor_endpoint(Path("/tmp/d")) == "ipc:///tmp/d/.zlog-supervisor.sock"
    assert supervisor_endpoint(tmp_path / ("x" * 120)) == "tcp://127.0.0.1:*"
