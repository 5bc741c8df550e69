"""A worker takes no write once its supervisor is gone (zlog/broker/supervisor_lifeline.py).

kill -9 of a broker's supervisor alone: its control port refuses connections at once, and a
controller that sees that fences the broker and elects other leaders without waiting out its
lease (docs/replication.md §4.1). A worker that went on taking writes from then on would be a
second leader beside the new one. Real processes: a broker whose supervisor is killed while
acks=1 writes go straight to its worker; every write sent after the control port refused a
connection must be refused, for a worker forked by the fork server and for one started as a
new interpreter.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path
from typing import Final

import psutil
import pytest

from tests.cluster_fixtures import produce_to_worker
from zlog.broker.control.workers.fork_server import FORKSERVER_MODULE
from zlog.client import Admin, NewTopic
from zlog.errors import ErrorCode, ZlogError
from zlog_testbed.broker_process import BrokerProcess, broker_process
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC: Final = "lifeline"
DEADLINE_S: Final = 60.0
WRITES_AFTER_S: Final = 0.2  # how long writes go on reaching the orphaned worker


def _refuses(endpoint: str) -> bool:
    """A connect to `endpoint` is refused, as the controller's port check counts it. A dying
    process's port still queues connections (its backlog fills, later ones time out) until
    the kernel closes it, which resets those queued."""
    host, _, port = endpoint.removeprefix("tcp://").rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=0.2).close()
    except ConnectionRefusedError:
        return True
    except OSError:  # timed out, or reset
        return False
    return False


def _write(endpoint: str) -> int | None:
    """One acks=1 batch straight to the worker; None once nothing answers there."""
    try:
        return produce_to_worker(endpoint, TOPIC, 0, acks=1, timeout_ms=1_000)
    except ZlogError:
        return None


def _kill_supervisor_then_write(broker: BrokerProcess) -> list[float]:
    """kill -9 of the supervisor alone; once its control port refuses connections, acks=1
    writes to its worker for WRITES_AFTER_S: how long after the refusal each one taken was
    sent (s)."""
    with Admin(broker.endpoint, request_timeout_ms=10_000) as admin:
        admin.create_topics([NewTopic(TOPIC, 1)])
    endpoint = broker.data_endpoint(TOPIC, 0)
    wait_until(lambda: _write(endpoint) == ErrorCode.NONE, DEADLINE_S,
               what="a write the worker takes")
    assert broker.process is not None
    orphans = psutil.Process(broker.process.pid).children(recursive=True)
    os.kill(broker.process.pid, signal.SIGKILL)
    wait_until(lambda: _refuses(broker.endpoint), DEADLINE_S, interval_s=0.0,
               what="the control port to refuse connections")
    refused_s = time.monotonic()
    taken: list[float] = []
    while (sent_s := time.monotonic()) - refused_s < WRITES_AFTER_S:
        code = _write(endpoint)
        if code is None:
            break
        if code == ErrorCode.NONE:
            taken.append(sent_s - refused_s)
    broker.process.wait()
    broker.process = None
    wait_until(lambda: not any(orphan.is_running() and orphan.status() != psutil.STATUS_ZOMBIE
                               for orphan in orphans),
               DEADLINE_S, what="the fork server and the workers to stop")
    return taken


def test_a_forked_worker_takes_no_write_once_its_supervisor_is_gone(tmp_path: Path) -> None:
    with broker_process(tmp_path, workers=1) as broker:
        taken = _kill_supervisor_then_write(broker)
    assert not taken, (f"the worker took {len(taken)} writes sent after its supervisor's "
                       f"port refused connections, the last {taken[-1] * 1000:.1f} ms after")


def test_a_worker_started_as_a_new_process_takes_no_write_once_its_supervisor_is_gone(
        tmp_path: Path) -> None:
    """The fork server killed first: the supervisor starts its workers as new interpreters
    until a new fork server runs (10 s later)."""
    with broker_process(tmp_path, workers=1) as broker:
        assert broker.process is not None
        (server,) = [child for child in psutil.Process(broker.process.pid).children()
                     if FORKSERVER_MODULE in child.cmdline()]
        server.kill()
        supervisor = broker.process.pid

        def started_as_a_new_process() -> bool:
            pids = broker.worker_pids()  # once: the old worker may exit between two listings
            try:
                return len(pids) == 1 and psutil.Process(pids[0]).ppid() == supervisor
            except psutil.NoSuchProcess:
                return False

        wait_until(started_as_a_new_process, DEADLINE_S, what="a worker started as a new process")
        broker.wait_ready()
        taken = _kill_supervisor_then_write(broker)
    assert not taken, (f"the worker took {len(taken)} writes sent after its supervisor's "
                       f"port refused connections, the last {taken[-1] * 1000:.1f} ms after")
