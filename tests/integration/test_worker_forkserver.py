"""Workers are forked from a fork server that imported the worker once
(zlog/broker/control/workers/fork_server.py): a killed worker is replaced without an interpreter's
start, on its predecessor's port, and a fork server that dies costs a slower start, never the
broker.

Real processes: a broker, its fork server and workers, and the fork server on its own.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
import pytest

from zlog.broker.control.workers.fork_server import (
    ANSWER_TIMEOUT_MS,
    FORKSERVER_MODULE,
    ForkedWorker,
    ForkServerError,
    WorkerForkServer,
)
from zlog.broker.control.workers.pool import worker_environ
from zlog.client import Admin, NewTopic, Producer
from zlog.clock import monotonic_ms
from zlog_testbed.broker_process import BrokerProcess, broker_process
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC = "forked"
DEADLINE_S = 60.0


def _fork_servers(broker: BrokerProcess) -> list[psutil.Process]:
    assert broker.process is not None
    return [child for child in psutil.Process(broker.process.pid).children()
            if FORKSERVER_MODULE in child.cmdline()]


def _round_trip(broker: BrokerProcess, value: bytes) -> None:
    with Producer(broker.endpoint, request_timeout_ms=5_000,
                  delivery_timeout_ms=int(DEADLINE_S * 1000)) as producer:
        producer.send(TOPIC, value, partition=0).result(DEADLINE_S)


def _replaced(broker: BrokerProcess, worker: int) -> bool:
    pids = broker.worker_pids()  # once: the kill may land between two listings
    return len(pids) == 1 and worker not in pids


def _listens(broker: BrokerProcess, endpoint: str) -> int | None:
    try:
        return broker.worker_pid_for(endpoint)
    except AssertionError:  # nobody listens there yet
        return None


def test_a_killed_worker_is_replaced_by_a_fork(tmp_path: Path) -> None:
    with broker_process(tmp_path, workers=1) as broker:
        (server,) = _fork_servers(broker)
        (worker,) = broker.worker_pids()
        assert psutil.Process(worker).ppid() == server.pid, "forked, not a new interpreter"
        with Admin(broker.endpoint, request_timeout_ms=10_000) as admin:
            admin.create_topics([NewTopic(TOPIC, 1)])
        _round_trip(broker, b"before")
        endpoint = broker.data_endpoint(TOPIC, 0)
        os.kill(worker, signal.SIGKILL)
        wait_until(lambda: _replaced(broker, worker), DEADLINE_S, what="a new worker")
        (replacement,) = broker.worker_pids()
        assert psutil.Process(replacement).ppid() == server.pid
        assert f"(pid {worker}) exited with status -9" in broker.log_text()
        wait_until(lambda: _listens(broker, endpoint) == replacement, DEADLINE_S,
                   what=f"the new worker listening on {endpoint}, the old one's address")
        _round_trip(broker, b"after")


def test_a_killed_fork_server_costs_a_slower_start_not_the_broker(tmp_path: Path) -> None:
    """Its workers stop with it (their parent-death signal); the supervisor starts them as
    new interpreters meanwhile, and the broker serves again."""
    with broker_process(tmp_path, workers=1) as broker:
        with Admin(broker.endpoint, request_timeout_ms=10_000) as admin:
            admin.create_topics([NewTopic(TOPIC, 1)])
        (server,) = _fork_servers(broker)
        (worker,) = broker.worker_pids()
        server.kill()
        wait_until(lambda: not psutil.pid_exists(worker)
                   or psutil.Process(worker).status() == psutil.STATUS_ZOMBIE,
                   DEADLINE_S, what="the fork server's worker to stop with it")
        wait_until(lambda: "worker fork server" in broker.log_text()
                   and len(broker.worker_pids()) == 1, DEADLINE_S,
                   what="the worker started again")
        _round_trip(broker, b"again")


def _started(server: WorkerForkServer, argv: list[str]) -> ForkedWorker:
    """A start, its answer collected (the server never makes a start wait)."""
    pending = server.start(argv, dict(os.environ), monotonic_ms())
    wait_until(lambda: server.collect(0.05) or pending.answered, DEADLINE_S,
               what="the fork server's answer")
    assert pending.worker is not None, pending.failure
    return pending.worker


def _worker_argv(tmp_path: Path) -> list[str]:
    return ["--worker-id", "0", "--supervisor", f"ipc://{tmp_path}/no-supervisor.sock",
            "--data-dir", str(tmp_path / "data"), "--ring-dir", str(tmp_path / "rings"),
            "--host", "127.0.0.1"]


def test_the_fork_server_reports_starts_refusals_and_exits(tmp_path: Path) -> None:
    server = WorkerForkServer(worker_environ(os.environ))
    try:
        refused = _started(server, ["--no-such-flag"])
        assert refused.wait(DEADLINE_S) == 2, "argparse's refusal, as the worker's own exit"
        running = _started(server, _worker_argv(tmp_path))
        assert running.poll() is None
        running.kill()
        assert running.wait(DEADLINE_S) == -signal.SIGKILL
        assert server.stuck(monotonic_ms() + ANSWER_TIMEOUT_MS + 1) is None, "it kept up"
        server.process.kill()
        server.process.wait()
        with pytest.raises(ForkServerError):
            server.start(["--worker-id", "0"], dict(os.environ), monotonic_ms())
    finally:
        server.close()


def test_a_frozen_fork_server_is_judged_stuck_and_killed_without_a_wait(tmp_path: Path) -> None:
    """SIGSTOPped (as a disk stuck in I/O freezes it): a start goes unanswered and a worker's
    end unreported. Nothing waits for it: the start is pending, the killed worker is seen
    ended through its pidfd, and past ANSWER_TIMEOUT_MS the server is stuck; killed, it
    fails the start (made another way) and its worker counts as ended."""
    server = WorkerForkServer(worker_environ(os.environ))
    try:
        worker = _started(server, _worker_argv(tmp_path))  # it answered: its imports are done
        os.kill(server.process.pid, signal.SIGSTOP)
        asked_ms = monotonic_ms()
        pending = server.start(["--worker-id", "1"], dict(os.environ), asked_ms)
        worker.kill()  # SIGKILL ends a process whose parent is frozen: a zombie, unreported
        wait_until(lambda: not worker.lives(), DEADLINE_S, what="the worker's end, by pidfd")
        assert worker.poll() is None, "its status is the server's to report"
        assert server.stuck(asked_ms + ANSWER_TIMEOUT_MS) is None
        why = server.stuck(asked_ms + ANSWER_TIMEOUT_MS + 1_000)
        assert why is not None and ("start" in why or "unreported" in why), why
        server.kill(why)
        assert not server.alive
        assert pending.answered and pending.worker is None and why in pending.failure
        assert worker.poll() == -signal.SIGKILL
        assert server.process.wait(DEADLINE_S) == -signal.SIGKILL, "SIGKILL ends it frozen"
    finally:
        server.close(0)
