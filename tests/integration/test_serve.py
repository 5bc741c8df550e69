"""`zlog serve` as an operator runs it: real processes on 127.0.0.1, talked to over the wire.

Spec: docs/protocol.md ("Control plane") for the requests and replies; DESIGN.md §5 (a worker
crash is survived: the supervisor restarts it and its partitions are served again; bad input
gets an error reply and the broker keeps serving) and §6 (systemd: READY=1, STOPPING=1,
SIGTERM is a graceful stop with exit status 0).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import zmq

from zlog.errors import ErrorCode
from zlog.transport.codec import decode_response, encode_request
from zlog.transport.messages import (
    ErrorBody,
    Request,
)
from zlog.transport.messages.admin import (
    ApiVersionsRequestV0,
    ApiVersionsResponseV0,
    CreateTopicsRequestV0,
    CreateTopicsResponseV0,
    DeleteTopicsRequestV0,
    DescribeClusterRequestV0,
    InitProducerIdRequestV0,
    MetadataRequestV0,
    MetadataResponseV0,
    TopicResult,
    TopicSpec,
)
from zlog.transport.messages.data import (
    ListOffsetsPartition,
    ListOffsetsRequestV0,
    ListOffsetsResponseV0,
)
from zlog.types import LATEST_TIMESTAMP
from zlog_testbed.broker_process import worker_processes
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_DEADLINE_S = 2.0  # the brief: answering ApiVersions in under 2 s after the exec
START_TIMEOUT_S = 20.0  # everything else waits generously: CI machines are shared
REQUEST_HEADER = struct.Struct(">hhiH")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Client:
    """A DEALER speaking the control protocol, with raw frames for the bad-input tests."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(endpoint)
        self._ids = itertools.count(1)

    def close(self) -> None:
        self.socket.close(linger=0)

    def send_raw(self, frames: list[bytes]) -> None:
        self.socket.send_multipart(frames)

    def receive(self, timeout_s: float) -> list[bytes] | None:
        if not self.socket.poll(int(timeout_s * 1000)):
            return None
        frames: list[bytes] = self.socket.recv_multipart()
        return frames

    def call(self, request: Request, timeout_s: float = 40.0) -> Any:
        correlation_id = next(self._ids)
        self.socket.send_multipart(encode_request(correlation_id, request))
        deadline = time.monotonic() + timeout_s
        while True:
            frames = self.receive(max(0.0, deadline - time.monotonic()))
            assert frames is not None, f"no reply to {type(request).__name__} in {timeout_s}s"
            header, body = decode_response(frames)
            if header.correlation_id == correlation_id:
                return body

    def try_call(self, request: Request, timeout_s: float) -> Any | None:
        """The reply, or None if none came in time (a fresh socket each try, no stale replies)."""
        probe = Client(self.endpoint)
        try:
            probe.socket.send_multipart(encode_request(1, request))
            frames = probe.receive(timeout_s)
            return None if frames is None else decode_response(frames)[1]
        finally:
            probe.close()


class Broker:
    """One `python -m zlog.broker` process with its own data dir, port and notify socket."""

    def __init__(self, directory: Path, ring_dir: Path, workers: int = 2) -> None:
        self.directory = directory
        self.data_dir = directory / "data"
        self.ring_dir = ring_dir
        self.port = _free_port()
        self.endpoint = f"tcp://127.0.0.1:{self.port}"
        self.workers = workers
        self.notify_path = str(directory / "notify.sock")
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(self.notify_path)
        self.notify.settimeout(START_TIMEOUT_S)
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.runs = 0

    @property
    def log_path(self) -> Path:
        return self.directory / f"broker-{self.runs}.log"

    def start(self) -> None:
        self.runs += 1
        environ = {**os.environ, "NOTIFY_SOCKET": self.notify_path, "PYTHONUNBUFFERED": "1"}
        command = [sys.executable, "-m", "zlog.cli", "serve", "--data-dir", str(self.data_dir),
                   "--listen", self.endpoint, "--workers", str(self.workers),
                   "--ring-dir", str(self.ring_dir), "--worker-heartbeat-timeout-ms", "5000"]
        self.started_at = time.monotonic()
        with self.log_path.open("wb") as log_file:
            self.process = subprocess.Popen(command, cwd=REPO_ROOT, env=environ,
                                            stdout=log_file, stderr=subprocess.STDOUT)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready_notification(self) -> bytes:
        message = self.notify.recv(4096)
        assert b"READY=1" in message, message
        return message

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.process is not None
        self.process.send_signal(sig)
        status = self.process.wait(START_TIMEOUT_S)
        self.process = None
        return status

    def kill(self) -> None:
        if self.process is not None:
            with contextlib.suppress(psutil.NoSuchProcess):
                for child in psutil.Process(self.process.pid).children(recursive=True):
                    child.kill()
            self.process.kill()
            self.process.wait()
            self.process = None

    def worker_pids(self) -> list[int]:
        assert self.process is not None
        return [worker.pid for worker in worker_processes(self.process.pid)]


@pytest.fixture
def broker(tmp_path: Path, shm_dir: Path) -> Iterator[Broker]:
    # Short paths: the supervisor's ipc socket lives in the data dir.
    directory = Path(tempfile.mkdtemp(prefix="zs-", dir="/tmp"))
    instance = Broker(directory, shm_dir)
    try:
        yield instance
    finally:
        instance.kill()
        instance.notify.close()
        for path in directory.glob("broker-*.log"):
            shutil.copy(path, tmp_path / path.name)  # kept for a failing test's report
        shutil.rmtree(directory, ignore_errors=True)


def _wait_api_versions(broker: Broker, timeout_s: float) -> float:
    """Poll ApiVersions until it answers; the seconds since the exec."""
    client = Client(broker.endpoint)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            reply = client.try_call(ApiVersionsRequestV0(), 0.05)
            if isinstance(reply, ApiVersionsResponseV0):
                return time.monotonic() - broker.started_at
        raise AssertionError(f"no ApiVersions reply within {timeout_s}s:\n{broker.log_text()}")
    finally:
        client.close()


def _metadata(client: Client, topics: list[str] | None) -> MetadataResponseV0:
    reply = client.call(MetadataRequestV0(None if topics is None else tuple(topics)))
    assert isinstance(reply, MetadataResponseV0)
    return reply


def _served(client: Client, topic: str) -> dict[int, str]:
    """partition -> data endpoint, for partitions whose leader is serving."""
    (found,) = _metadata(client, [topic]).topics
    return {p.partition: p.endpoint for p in found.partitions if p.error_code == 0}


def _create(client: Client, name: str, partitions: int) -> TopicResult:
    reply = client.call(CreateTopicsRequestV0((TopicSpec(name, partitions),)))
    assert isinstance(reply, CreateTopicsResponseV0)
    (result,) = reply.topics
    return result


def test_ready_fast_notifies_systemd_and_stops_cleanly_on_sigterm(broker: Broker) -> None:
    broker.start()
    ready_s = _wait_api_versions(broker, READY_DEADLINE_S)
    print(f"\nzlog serve answered ApiVersions {ready_s * 1000:.0f} ms after exec")
    notification = broker.wait_ready_notification()
    print(f"READY=1 {(time.monotonic() - broker.started_at) * 1000:.0f} ms after exec")
    assert b"STATUS=serving on tcp://127.0.0.1:" in notification
    client = Client(broker.endpoint)
    versions = client.call(ApiVersionsRequestV0())
    assert {v.api_key for v in versions.api_versions} == {
        3, 10, 18, 19, 20, 22, 32, 37, 43, 44, 45, 46, 56, 60, 62, 63, 64, 1000, 1001, 1002}
    assert versions.server.startswith("zlog ")
    described = client.call(DescribeClusterRequestV0())
    assert described.controller_id == 1 and described.raft.leader == 1
    assert [b.node_id for b in described.brokers] == [1]
    assert described.brokers[0].control_endpoint == broker.endpoint
    client.close()
    assert "serving: control tcp://127.0.0.1:" in broker.log_text()
    assert broker.stop(signal.SIGTERM) == 0
    assert broker.notify.recv(4096).startswith(b"STOPPING=1")
    assert "worker 0 stopped (status 0)" in broker.log_text()


def test_topics_and_producer_ids_survive_a_restart(broker: Broker) -> None:
    broker.start()
    _wait_api_versions(broker, START_TIMEOUT_S)
    client = Client(broker.endpoint)
    assert _create(client, "orders", 3).error_code == 0
    # The reply came after the workers opened the partitions: all are served at once.
    served = _served(client, "orders")
    assert sorted(served) == [0, 1, 2]
    assert len(set(served.values())) == 2  # 3 partitions over 2 workers
    first_id = client.call(InitProducerIdRequestV0()).producer_id
    assert client.call(InitProducerIdRequestV0()).producer_id == first_id + 1
    cluster_id = _metadata(client, None).cluster_id
    client.close()
    assert broker.stop(signal.SIGINT) == 0

    broker.start()
    _wait_api_versions(broker, START_TIMEOUT_S)
    client = Client(broker.endpoint)
    wait_until(lambda: sorted(_served(client, "orders")) == [0, 1, 2], START_TIMEOUT_S,
               what="the partitions reopened after the restart")
    metadata = _metadata(client, None)
    assert metadata.cluster_id == cluster_id
    assert [t.name for t in metadata.topics] == ["orders"]
    assert _create(client, "orders", 1).error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert client.call(InitProducerIdRequestV0()).producer_id > first_id + 1  # no reuse
    client.close()
    assert broker.stop() == 0


def test_a_killed_worker_is_restarted_and_serves_its_partitions_again(broker: Broker) -> None:
    broker.start()
    _wait_api_versions(broker, START_TIMEOUT_S)
    client = Client(broker.endpoint)
    assert _create(client, "events", 2).error_code == 0
    before = _served(client, "events")
    assert len(set(before.values())) == 2  # one partition per worker
    wait_until(lambda: len(broker.worker_pids()) == 2, START_TIMEOUT_S, what="two workers")
    victim = broker.worker_pids()[0]
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: "restarting worker" in broker.log_text(), START_TIMEOUT_S,
               what="the supervisor to log the restart")
    wait_until(lambda: victim not in broker.worker_pids() and len(broker.worker_pids()) == 2,
               START_TIMEOUT_S, what="a new worker process")
    wait_until(lambda: sorted(_served(client, "events")) == [0, 1], START_TIMEOUT_S,
               what="both partitions served again")
    after = _served(client, "events")
    assert after == before  # the restarted worker bound its predecessor's port again
    for partition, endpoint in after.items():
        data = Client(endpoint)
        reply = data.call(ListOffsetsRequestV0(
            "events", (ListOffsetsPartition(partition, LATEST_TIMESTAMP),)))
        assert isinstance(reply, ListOffsetsResponseV0)
        assert [(p.error_code, p.offset) for p in reply.partitions] == [(0, 0)]
        data.close()
    client.close()
    assert broker.stop() == 0


def _raw_request(api_key: int, version: int, correlation_id: int, body: bytes) -> list[bytes]:
    return [REQUEST_HEADER.pack(api_key, version, correlation_id, 0), body]


def test_bad_requests_get_error_replies_and_the_broker_keeps_serving(broker: Broker) -> None:
    broker.start()
    _wait_api_versions(broker, START_TIMEOUT_S)
    client = Client(broker.endpoint)

    client.send_raw([b"short"])  # not even a header: dropped without a reply
    assert client.receive(0.2) is None
    for api_key, version, body, code in [
        (999, 0, b"{}", ErrorCode.UNSUPPORTED_VERSION),  # unknown api key
        (3, 7, b"{}", ErrorCode.UNSUPPORTED_VERSION),  # unknown version
        (3, 0, b"{not json", ErrorCode.INVALID_REQUEST),
        (3, 0, b'{"topics": "orders"}', ErrorCode.INVALID_REQUEST),
        (19, 0, b'{"topics": [{"name": "x"}]}', ErrorCode.INVALID_REQUEST),  # no partitions
        (1, 0, b"\x00" * 20, ErrorCode.UNSUPPORTED_VERSION),  # Fetch: a data-path api
    ]:
        client.send_raw(_raw_request(api_key, version, 41, body))
        frames = client.receive(5.0)
        assert frames is not None, (api_key, version, body)
        header, reply = decode_response(frames)
        assert (header.correlation_id, header.error_code) == (41, code), reply
        assert isinstance(reply, ErrorBody) and reply.message

    reply = client.call(CreateTopicsRequestV0((
        TopicSpec("bad/name", 1), TopicSpec("zero", 0), TopicSpec("rf", 1, 3),
        TopicSpec("cfg", 1, 1, {"retention.mss": "1"}), TopicSpec("good", 1),
        TopicSpec("good", 1),
    )))
    assert [(t.name, t.error_code) for t in reply.topics] == [
        ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION), ("zero", ErrorCode.INVALID_PARTITIONS),
        ("rf", ErrorCode.INVALID_REPLICATION_FACTOR), ("cfg", ErrorCode.INVALID_CONFIG),
        ("good", ErrorCode.INVALID_REQUEST),  # named twice in one request
    ]
    checked = client.call(CreateTopicsRequestV0((TopicSpec("later", 2),),
                                                     validate_only=True))
    assert [(t.name, t.error_code) for t in checked.topics] == [("later", 0)]
    assert _metadata(client, ["later"]).topics[0].error_code == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    deleted = client.call(DeleteTopicsRequestV0(("missing",)))
    assert deleted.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    transactional = client.call(InitProducerIdRequestV0("tx-1"))
    assert transactional.error_code != 0

    # The broker still serves, and a real create/delete cycle works end to end.
    assert _create(client, "gone", 2).error_code == 0
    assert (broker.data_dir / "gone-1").is_dir()
    deleted = client.call(DeleteTopicsRequestV0(("gone",)))
    assert [(t.name, t.error_code) for t in deleted.topics] == [("gone", 0)]
    assert not (broker.data_dir / "gone-0").exists()
    assert not (broker.data_dir / "gone-1").exists()
    assert _metadata(client, None).topics == ()
    assert _create(client, "gone", 1).error_code == 0  # the name is free again
    assert isinstance(client.call(ApiVersionsRequestV0()), ApiVersionsResponseV0)
    client.close()
    assert broker.stop() == 0


def test_a_second_broker_on_the_same_data_dir_refuses_to_start(broker: Broker) -> None:
    broker.start()
    _wait_api_versions(broker, START_TIMEOUT_S)
    second = subprocess.run(
        [sys.executable, "-m", "zlog.cli", "serve", "--data-dir", str(broker.data_dir),
         "--listen", f"tcp://127.0.0.1:{_free_port()}", "--workers", "1"],
        cwd=REPO_ROOT, capture_output=True, timeout=START_TIMEOUT_S, check=False,
        env={key: value for key, value in os.environ.items() if key != "NOTIFY_SOCKET"},
    )
    assert second.returncode == 1
    assert b"in use by another zlog serve" in second.stderr
    assert broker.stop() == 0


def test_bad_configuration_exits_2(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "zlog.cli", "serve", "--data-dir", str(tmp_path), "--workers", "0"],
        cwd=REPO_ROOT, capture_output=True, timeout=START_TIMEOUT_S, check=False,
    )
    assert result.returncode == 2
    assert b"--workers must be between 1 and" in result.stderr
