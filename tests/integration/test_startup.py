"""READY means serving: the workers run the zlog the supervisor runs, whatever the working
directory, and a broker whose workers cannot start says so and exits 1 instead of "ready".

Spec: DESIGN.md section 6 (READY=1 once serving) and docs/reliability.md ("Failure model").
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from zlog.client import Admin, Consumer, NewTopic, Producer
from zlog_testbed.broker_process import broker_process
from zlog_testbed.free_ports import free_port, free_port_pair

pytestmark = pytest.mark.slow


def test_a_zlog_folder_in_the_working_directory_does_not_shadow_the_package(
    tmp_path: Path,
) -> None:
    """Started from the parent of a clone (a `zlog/` folder there), as an operator would."""
    shadow = tmp_path / "cwd" / "zlog"
    shadow.mkdir(parents=True)
    shadow.joinpath("__init__.py").write_text('raise ImportError("the wrong zlog")\n')
    with broker_process(tmp_path, workers=2, cwd=shadow.parent) as broker:
        with Admin(broker.endpoint, request_timeout_ms=10_000) as admin:
            admin.create_topics([NewTopic("t", 2)])
        with Producer(broker.endpoint) as producer:
            producer.send("t", b"v", partition=1).result(timeout=20)
        with Consumer(broker.endpoint, auto_offset_reset="earliest") as consumer:
            consumer.assign([("t", 1)])
            assert [r.value for r in consumer.poll(10_000)] == [b"v"]
        assert "the wrong zlog" not in broker.log_text()


def test_workers_that_cannot_start_stop_the_broker_without_ready(tmp_path: Path) -> None:
    """Every worker dies before its first hello (its ring dir cannot be made): the broker
    never prints its "serving" banner, says why, and exits 1."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    result = subprocess.run(
        [sys.executable, "-m", "zlog.cli", "serve", "--data-dir", str(tmp_path / "data"),
         "--listen", f"tcp://127.0.0.1:{free_port()}", "--workers", "1",
         "--ring-dir", str(blocker / "rings"), "--worker-restart-backoff-initial-ms", "20"],
        capture_output=True, text=True, timeout=120, check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert "serving:" not in result.stdout
    assert "cannot start" in result.stderr
    assert "before it could serve" in result.stderr


def test_a_taken_metadata_log_port_stops_the_broker_with_one_line(tmp_path: Path) -> None:
    """A voter whose Raft port (its control port + 1) another process holds cannot take part
    in the metadata log: it says so in one line and exits 1, instead of serving without a
    metadata log (no controller, ever) after a traceback."""
    # Both ports from this test process's own range: a port the kernel hands out (port 0) has
    # a neighbour any other process's outgoing connection may take, and the broker would
    # then fail on its control port instead.
    control_port = free_port_pair(["127.0.0.1"])
    holder = socket.socket()
    holder.bind(("127.0.0.1", control_port + 1))
    holder.listen()
    listen = f"tcp://127.0.0.1:{control_port}"
    other = f"tcp://127.0.0.2:{free_port()}"
    try:
        result = subprocess.run(
            [sys.executable, "-m", "zlog.cli", "serve", "--data-dir", str(tmp_path / "data"),
             "--listen", listen, "--workers", "1", "--node-id", "1",
             "--voters", f"1@{listen},2@{other}"],
            capture_output=True, text=True, timeout=60, check=False,
            cwd=Path(__file__).resolve().parents[2],
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the broker kept running without its metadata log")
    finally:
        holder.close()
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "cannot start the metadata log: Address already in use" in result.stderr
