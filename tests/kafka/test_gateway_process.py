"""The gateway as a process of its broker: restarted on its port when it dies, gone with its
supervisor, never advertising a wildcard, absent when turned off, and a port in use refused at
start."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys

import psutil
import pytest
from confluent_kafka.admin import AdminClient

from tests.kafka.raw_kafka import gateway_answers, wait_gateway_answers
from zlog.broker.control.kafka_gateway_process import GATEWAY_MODULE
from zlog_testbed.broker_process import REPO_ROOT, broker_process, process_exited
from zlog_testbed.free_ports import free_port
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow


def _gateways(supervisor_pid: int) -> list[psutil.Process]:
    """The supervisor's live gateway processes (a killed one not reaped yet is none)."""
    found = []
    for child in psutil.Process(supervisor_pid).children():
        with contextlib.suppress(psutil.Error):
            if GATEWAY_MODULE in child.cmdline() and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
    return found


def test_a_killed_gateway_comes_back_on_its_port_and_goes_with_its_supervisor() -> None:
    with broker_process(workers=1) as broker:
        wait_gateway_answers(broker.kafka_bootstrap)
        [first] = _gateways(broker.supervisor_pid)
        first.kill()
        wait_until(lambda: len(_gateways(broker.supervisor_pid)) == 1
                   and _gateways(broker.supervisor_pid)[0].pid != first.pid, 30,
                   what="the supervisor starting a new gateway")
        wait_gateway_answers(broker.kafka_bootstrap)
        [second] = _gateways(broker.supervisor_pid)
        workers = [psutil.Process(pid) for pid in broker.worker_pids()]
        assert broker.process is not None
        os.kill(broker.supervisor_pid, signal.SIGKILL)
        broker.process.wait()
        broker.process = None
        try:
            wait_until(lambda: process_exited(second), 30,
                       what="the gateway ending with its supervisor")
            assert not gateway_answers(broker.kafka_bootstrap)
        finally:
            for worker in workers:  # they end by themselves too; the test need not wait
                with contextlib.suppress(psutil.NoSuchProcess):
                    worker.kill()


def test_a_wildcard_kafka_listener_advertises_the_hosts_name() -> None:
    port = free_port()
    with broker_process(workers=1, extra_args=["--kafka-listen", f"0.0.0.0:{port}"]) as broker:
        wait_gateway_answers(f"127.0.0.1:{port}")
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        brokers = admin.list_topics(timeout=30).brokers
        assert [(b.id, b.host, b.port) for b in brokers.values()] == [
            (1, socket.gethostname(), port)]
        assert broker.process is not None


def test_an_empty_kafka_listen_opens_no_kafka_port() -> None:
    with broker_process(workers=1, extra_args=["--kafka-listen", ""]) as broker:
        assert _gateways(broker.supervisor_pid) == []
        assert not gateway_answers(broker.kafka_bootstrap)


def test_a_kafka_port_in_use_stops_the_broker_at_start_with_a_sentence(tmp_path: object) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        done = subprocess.run(
            [sys.executable, "-m", "zlog.cli", "serve", "--data-dir", f"{tmp_path}/data",
             "--listen", f"tcp://127.0.0.1:{free_port()}", "--workers", "1",
             "--kafka-listen", address],
            cwd=REPO_ROOT, capture_output=True, timeout=60, check=False)
    assert done.returncode == 1
    assert f"cannot listen for Kafka clients on {address}" in done.stderr.decode()
