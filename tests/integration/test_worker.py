"""A real partition worker process, driven through real sockets.

The test plays the supervisor's side of the JSON contract (a ROUTER the worker's DEALER
connects to) and the clients' side of the wire protocol (DEALERs to the worker's data ROUTER),
using the transport codec for the bytes.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import pytest
import zmq

from tests.storage_helpers import base_offset_of, batch_tags, make_batch, split_batches
from zlog.errors import ErrorCode
from zlog.record.arrays import build_batch_from_values
from zlog.record.records import NewRecord, build_batch
from zlog.transport.codec import REQUEST_HEADER, ResponseHeader, decode_response, encode_request
from zlog.transport.messages import (
    ErrorBody,
    Request,
    Response,
)
from zlog.transport.messages.admin import (
    ApiVersionsRequestV0,
    ApiVersionsResponseV0,
)
from zlog.transport.messages.data import (
    FetchEntry,
    FetchRequestV0,
    FetchRequestV1,
    FetchResponseV0,
    FetchResponseV1,
    FetchResult,
    ListOffsetsPartition,
    ListOffsetsRequestV0,
    ListOffsetsResponseV0,
    ProduceEntry,
    ProduceRequestV0,
    ProduceResponseV0,
    ProduceResult,
    ReplicaFetchEntry,
)
from zlog.transport.wire import Buffer
from zlog_testbed.broker_process import process_exited
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

_ROOT = Path(__file__).resolve().parents[2]
RING_BYTES = 1 << 20  # small rings: a 64 MiB ring is faulted in at each open
TIMEOUT_MS = 10_000
T0_MS = 1_700_000_000_000


class FakeSupervisor:
    """The supervisor's side of the worker contract: a ROUTER speaking one-frame JSON."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]]) -> None:
        self.router = context.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        self.router.bind("tcp://127.0.0.1:*")
        self.endpoint = self.router.getsockopt_string(zmq.LAST_ENDPOINT)
        self.heartbeats: dict[int, int] = {}
        self._request_id = 0

    def send(self, identity: bytes, message: dict[str, Any]) -> None:
        self.router.send_multipart([identity, json.dumps(message).encode()])

    def wait_for(
        self, wanted: Callable[[dict[str, Any]], bool], timeout_ms: int = TIMEOUT_MS
    ) -> tuple[bytes, dict[str, Any]]:
        """The next message `wanted` accepts; heartbeats and others are counted and skipped."""
        deadline = time.monotonic() + timeout_ms / 1000
        while (left_ms := int((deadline - time.monotonic()) * 1000)) > 0:
            if not self.router.poll(left_ms):
                break
            identity, raw = self.router.recv_multipart()
            message = json.loads(raw)
            if message.get("type") == "heartbeat":
                worker_id = message["worker_id"]
                self.heartbeats[worker_id] = self.heartbeats.get(worker_id, 0) + 1
            if wanted(message):
                return identity, message
        raise AssertionError(f"no wanted supervisor message within {timeout_ms} ms")

    def request(self, identity: bytes, message: dict[str, Any], reply_type: str) -> dict[str, Any]:
        self._request_id += 1
        request_id = self._request_id
        self.send(identity, {**message, "request_id": request_id})
        _identity, reply = self.wait_for(
            lambda m: m.get("type") == reply_type and m.get("request_id") == request_id
        )
        return reply

    def close(self) -> None:
        self.router.close(linger=0)


def _worker_command(
    supervisor: FakeSupervisor, worker_id: int, data_dir: Path, ring_dir: Path
) -> list[str]:
    return [
        sys.executable, "-m", "zlog.broker.data.worker", "--worker-id", str(worker_id),
        "--supervisor", supervisor.endpoint, "--data-dir", str(data_dir),
        "--ring-dir", str(ring_dir), "--host", "127.0.0.1", "--ring-bytes", str(RING_BYTES),
        "--log-level", "INFO",
    ]


class WorkerProcess:
    """`python -m zlog.broker.data.worker`, started and greeted through the fake supervisor."""

    def __init__(self, supervisor: FakeSupervisor, worker_id: int, data_dir: Path,
                 ring_dir: Path, log_path: Path, *, ring_flush_bytes: int = 0,
                 extra_args: Sequence[str] = ()) -> None:
        self.supervisor = supervisor
        self.worker_id = worker_id
        self._log: TextIO = log_path.open("a")
        command = _worker_command(supervisor, worker_id, data_dir, ring_dir)
        command += ["--ring-flush-bytes", str(ring_flush_bytes), *extra_args]
        self.process = subprocess.Popen(
            command, cwd=_ROOT, stdout=self._log, stderr=subprocess.STDOUT
        )
        self.identity, self.hello = supervisor.wait_for(
            lambda m: m.get("type") == "hello" and m.get("worker_id") == worker_id
            and m.get("pid") == self.process.pid
        )
        self.endpoint = str(self.hello["endpoint"])

    def assign(self, topic: str = "t", partition: int = 0, epoch: int = 1,
               configs: dict[str, str] | None = None) -> dict[str, Any]:
        return self.supervisor.request(self.identity, {
            "type": "assign", "topic": topic, "partition": partition, "configs": configs or {},
            "leader_epoch": epoch, "is_leader": True,
        }, "assigned")

    def unassign(self, topic: str, partition: int, *, delete: bool) -> dict[str, Any]:
        return self.supervisor.request(self.identity, {
            "type": "unassign", "topic": topic, "partition": partition, "delete": delete,
        }, "unassigned")

    def wait_exit(self, timeout_s: float = 10.0) -> int:
        wait_until(lambda: self.process.poll() is not None, timeout_s, what="worker exit")
        return self.process.wait()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def close(self) -> None:
        self.kill()
        self._log.close()


class Client:
    """A DEALER speaking the wire protocol to one worker."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], endpoint: str) -> None:
        self.dealer = context.socket(zmq.DEALER)
        self.dealer.setsockopt(zmq.LINGER, 0)
        self.dealer.connect(endpoint)
        self._correlation_id = 0

    def send(self, request: Request) -> int:
        self._correlation_id += 1
        self.dealer.send_multipart(encode_request(self._correlation_id, request), copy=False)
        return self._correlation_id

    def send_raw(self, frames: list[Buffer]) -> None:
        self.dealer.send_multipart(frames)

    def recv(self, timeout_ms: int = TIMEOUT_MS) -> tuple[ResponseHeader, Response | ErrorBody]:
        if not self.dealer.poll(timeout_ms):
            raise AssertionError(f"no response within {timeout_ms} ms")
        return decode_response(self.dealer.recv_multipart())

    def call(self, request: Request, timeout_ms: int = TIMEOUT_MS) -> Response | ErrorBody:
        correlation_id = self.send(request)
        header, response = self.recv(timeout_ms)
        assert header.correlation_id == correlation_id
        return response

    def produce(self, *batches: Buffer, acks: int = 1, topic: str = "t",
                partition: int = 0) -> ProduceResult:
        response = self.call(ProduceRequestV0(acks, 5000,
                                              (ProduceEntry(topic, partition, batches),)))
        assert isinstance(response, ProduceResponseV0)
        return response.entries[0]

    def fetch(self, offset: int, *, max_bytes: int = 1 << 24, topic: str = "t",
              partition: int = 0) -> FetchResult:
        response = self.call(FetchRequestV0(-1, 0, 0, max_bytes,
                                            (FetchEntry(topic, partition, offset, max_bytes),)))
        assert isinstance(response, FetchResponseV0)
        return response.entries[0]

    def read_all(self, topic: str = "t", partition: int = 0) -> list[bytes]:
        """Every batch from offset 0 up to the high watermark."""
        batches: list[bytes] = []
        offset = 0
        while True:
            result = self.fetch(offset, topic=topic, partition=partition)
            assert result.error_code == ErrorCode.NONE, result
            found = split_batches([memoryview(bytes(chunk)) for chunk in result.chunks])
            if not found:
                assert offset == result.high_watermark
                return batches
            batches.extend(found)
            last = found[-1]
            offset = base_offset_of(last) + int.from_bytes(last[23:27], "big") + 1

    def close(self) -> None:
        self.dealer.close(linger=0)


class Cluster:
    """One fake supervisor, the workers it started, and clients; all closed at the end."""

    def __init__(self, tmp_path: Path, shm_dir: Path) -> None:
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.supervisor = FakeSupervisor(self.context)
        self.data_dir, self.ring_dir, self.tmp_path = tmp_path / "data", shm_dir, tmp_path
        self.workers: list[WorkerProcess] = []
        self.clients: list[Client] = []

    def start_worker(self, worker_id: int = 1, ring_flush_bytes: int = 0,
                     extra_args: Sequence[str] = ()) -> WorkerProcess:
        worker = WorkerProcess(self.supervisor, worker_id, self.data_dir, self.ring_dir,
                               self.log_path(worker_id), ring_flush_bytes=ring_flush_bytes,
                               extra_args=extra_args)
        self.workers.append(worker)
        return worker

    def log_path(self, worker_id: int) -> Path:
        return self.tmp_path / f"worker-{worker_id}.log"

    def client(self, worker: WorkerProcess) -> Client:
        client = Client(self.context, worker.endpoint)
        self.clients.append(client)
        return client

    def close(self) -> None:
        for client in self.clients:
            client.close()
        for worker in self.workers:
            worker.close()
        self.supervisor.close()
        self.context.destroy(linger=0)


@pytest.fixture
def cluster(tmp_path: Path, shm_dir: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path, shm_dir)
    try:
        yield cluster
    finally:
        cluster.close()


def _idempotent(first_sequence: int, count: int = 2, producer_id: int = 42) -> bytes:
    return build_batch_from_values(
        [b"idem-%d" % i for i in range(count)], timestamp_ms=T0_MS, producer_id=producer_id,
        producer_epoch=0, base_sequence=first_sequence,
    )


# ---------------------------------------------------------------------------------- tests


def test_worker_greets_beats_serves_and_stops_on_request(cluster: Cluster) -> None:
    worker = cluster.start_worker(4)
    assert worker.identity == b"worker-4"
    assert worker.hello["endpoint"].startswith("tcp://127.0.0.1:")
    cluster.supervisor.wait_for(lambda m: m.get("type") == "heartbeat")
    assert worker.assign()["error_code"] == 0
    client = cluster.client(worker)
    assert client.produce(make_batch(0)).base_offset == 0
    versions = client.call(ApiVersionsRequestV0())
    assert isinstance(versions, ApiVersionsResponseV0) and versions.server.startswith("zlog")
    cluster.supervisor.send(worker.identity, {"type": "stop"})
    assert worker.wait_exit() == 0


def test_a_replacing_worker_binds_its_predecessors_port_or_another_if_taken(
        cluster: Cluster) -> None:
    """Clients and followers reconnect to the address they knew when the replacement of a
    killed worker binds the same port; a port taken meanwhile costs only that."""
    first = cluster.start_worker(1)
    port = int(first.endpoint.rsplit(":", 1)[1])
    first.kill()
    again = cluster.start_worker(1, extra_args=["--preferred-port", str(port)])
    assert again.endpoint == f"tcp://127.0.0.1:{port}"
    again.kill()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        other = cluster.start_worker(1, extra_args=["--preferred-port", str(port)])
        assert other.endpoint != f"tcp://127.0.0.1:{port}"
        assert cluster.client(other).call(ApiVersionsRequestV0()) is not None


def test_clients_are_served_between_the_opens_of_a_long_assignment(cluster: Cluster) -> None:
    """A restarted worker is given all its partitions at once; its loop serves the data
    socket between them (a bounded time on the supervisor's messages per turn), so a
    partition opened first answers before the last one is open."""
    worker = cluster.start_worker()
    worker.assign("first", 0)
    client = cluster.client(worker)
    opens = 200
    for partition in range(opens):
        cluster.supervisor.send(worker.identity, {
            "type": "assign", "topic": "many", "partition": partition, "configs": {},
            "leader_epoch": 1, "is_leader": True, "request_id": 10_000 + partition})
    cluster.supervisor.wait_for(lambda m: m.get("request_id") == 10_000)  # opening began
    assert client.produce(make_batch(0), topic="first").error_code == ErrorCode.NONE
    answered: list[int] = []
    router = cluster.supervisor.router
    while router.poll(0):  # what the worker had answered by then, and nothing later
        message = json.loads(router.recv_multipart()[1])
        if message.get("type") == "assigned":
            answered.append(int(message["request_id"]))
    assert 10_000 + opens - 1 not in answered, "the produce waited for every open"
    cluster.supervisor.wait_for(lambda m: m.get("request_id") == 10_000 + opens - 1)


def test_produce_fetch_and_list_offsets_through_real_sockets(cluster: Cluster) -> None:
    worker = cluster.start_worker()
    worker.assign()
    client = cluster.client(worker)
    bases = [client.produce(make_batch(tag, 10, timestamp_ms=T0_MS + tag)).base_offset
             for tag in range(5)]
    assert bases == [0, 10, 20, 30, 40]
    batches = client.read_all()
    assert [batch_tags(b)[0] for b in batches] == list(range(5))
    listed = client.call(ListOffsetsRequestV0("t", (
        ListOffsetsPartition(0, -1), ListOffsetsPartition(0, -2),
        ListOffsetsPartition(0, T0_MS + 3),
    )))
    assert isinstance(listed, ListOffsetsResponseV0)
    assert [(p.offset, p.timestamp) for p in listed.partitions] == [
        (50, -1), (0, -1), (30, T0_MS + 3),
    ]


def test_a_long_poll_wakes_on_append_and_times_out_at_max_wait(cluster: Cluster) -> None:
    worker = cluster.start_worker()
    worker.assign()
    waiting, producer = cluster.client(worker), cluster.client(worker)
    waiting.send(FetchRequestV0(-1, 20_000, 1, 1 << 20, (FetchEntry("t", 0, 0, 1 << 20),)))
    assert not waiting.dealer.poll(200), "nothing to read yet: the fetch waits"
    started = time.monotonic()
    assert producer.produce(make_batch(9)).error_code == 0
    _header, response = waiting.recv(timeout_ms=5_000)
    assert time.monotonic() - started < 5, "woken by the append, not by max_wait_ms"
    assert isinstance(response, FetchResponseV0)
    assert batch_tags(bytes(response.entries[0].chunks[0])) == [9] * 3

    started = time.monotonic()
    waiting.send(FetchRequestV0(-1, 400, 1, 1 << 20, (FetchEntry("t", 0, 3, 1 << 20),)))
    _header, response = waiting.recv(timeout_ms=5_000)
    elapsed_s = time.monotonic() - started
    assert isinstance(response, FetchResponseV0) and response.entries[0].chunks == ()
    assert 0.4 <= elapsed_s < 3, f"answered after {elapsed_s:.3f} s for max_wait_ms=400"


def test_an_idempotent_retry_gets_the_same_offset(cluster: Cluster) -> None:
    worker = cluster.start_worker()
    worker.assign()
    client = cluster.client(worker)
    client.produce(make_batch(0))
    first = client.produce(_idempotent(0), acks=-1)
    retry = client.produce(_idempotent(0), acks=-1)
    assert first.error_code == retry.error_code == 0
    assert first.base_offset == retry.base_offset == 3
    assert client.produce(_idempotent(2), acks=-1).base_offset == 5
    assert len(client.read_all()) == 3


def test_bad_inputs_get_their_codes_and_leave_the_data_unchanged(cluster: Cluster) -> None:
    worker = cluster.start_worker()
    worker.assign(configs={"max.message.bytes": "2000"})
    client = cluster.client(worker)
    for tag in range(3):
        client.produce(make_batch(tag))
    client.produce(_idempotent(0))
    stored = client.read_all()

    client.send_raw([b"short"])  # not even a header: dropped, no reply
    client.send_raw([REQUEST_HEADER.pack(77, 0, 1000, 0), b"{}"])
    _header, unknown = client.recv()
    assert isinstance(unknown, ErrorBody) and unknown.error_code == ErrorCode.UNSUPPORTED_VERSION
    client.send_raw([REQUEST_HEADER.pack(0, 0, 1001, 0), b"\x00\x01\xff"])
    _header, garbled = client.recv()
    assert isinstance(garbled, ErrorBody) and garbled.error_code == ErrorCode.INVALID_REQUEST
    body = b"\x00\x01" + b"\x00\x00\x03\xe8" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00"
    body += b"\x00\x00\x00\x02" + b"\x00\x01" + b"t"  # an entry claiming 2 batch frames, 1 sent
    client.send_raw([REQUEST_HEADER.pack(0, 0, 1002, 0), body, make_batch(5)])
    _header, short_frames = client.recv()
    assert isinstance(short_frames, ErrorBody)
    assert short_frames.error_code == ErrorCode.INVALID_REQUEST

    corrupt = bytearray(make_batch(6))
    corrupt[-3] ^= 0x40
    bad_magic = bytearray(make_batch(7))
    bad_magic[16] = 1
    transactional = build_batch([NewRecord(b"v", b"k")], is_transactional=True)
    expected = [
        (client.produce(bytes(corrupt)), ErrorCode.CORRUPT_MESSAGE),
        (client.produce(bytes(bad_magic)), ErrorCode.CORRUPT_MESSAGE),
        (client.produce(b"\x00" * 10), ErrorCode.CORRUPT_MESSAGE),
        (client.produce(make_batch(8, 40, value_bytes=100)), ErrorCode.MESSAGE_TOO_LARGE),
        (client.produce(transactional), ErrorCode.INVALID_RECORD),
        (client.produce(make_batch(9), acks=3), ErrorCode.INVALID_REQUIRED_ACKS),
        (client.produce(make_batch(9), topic="ghost"), ErrorCode.NOT_LEADER_OR_FOLLOWER),
        (client.produce(make_batch(9), partition=1), ErrorCode.NOT_LEADER_OR_FOLLOWER),
        (client.produce(_idempotent(9)), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
        (client.produce(_idempotent(1, producer_id=43)), ErrorCode.UNKNOWN_PRODUCER_ID),
    ]
    assert [result.error_code for result, _code in expected] == [code for _r, code in expected]
    out_of_range = client.fetch(10**9)
    assert out_of_range.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (out_of_range.high_watermark, out_of_range.log_start_offset) == (11, 0)
    client.send_raw([REQUEST_HEADER.pack(2, 0, 1003, 0),
                     b'{"topic": "t", "partitions": [{"partition": 0, "timestamp": -3}]}'])
    _header, listed = client.recv()
    assert isinstance(listed, ErrorBody) and listed.error_code == ErrorCode.INVALID_REQUEST

    assert client.read_all() == stored, "nothing stored changed"
    assert worker.process.poll() is None, "and the worker still serves"
    assert client.produce(make_batch(10)).base_offset == 11


def test_unassign_closes_or_deletes_the_partition(cluster: Cluster) -> None:
    worker = cluster.start_worker()
    worker.assign("keep")
    worker.assign("gone")
    client = cluster.client(worker)
    client.produce(make_batch(0), topic="keep")
    client.produce(make_batch(0), topic="gone")
    assert worker.unassign("keep", 0, delete=False)["error_code"] == 0
    assert worker.unassign("gone", 0, delete=True)["error_code"] == 0
    closed = client.produce(make_batch(1), topic="keep")
    assert closed.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (cluster.data_dir / "keep-0").is_dir()
    assert not (cluster.data_dir / "gone-0").exists()
    worker.assign("keep")
    assert [batch_tags(b)[0] for b in client.read_all("keep")] == [0]


def test_sigterm_flushes_and_exits_zero(cluster: Cluster) -> None:
    worker = cluster.start_worker()
    worker.assign()
    client = cluster.client(worker)
    client.produce(make_batch(0), make_batch(1))
    worker.process.send_signal(signal.SIGTERM)
    assert worker.wait_exit() == 0
    restarted = cluster.start_worker()
    restarted.assign()
    assert [batch_tags(b)[0] for b in cluster.client(restarted).read_all()] == [0, 1]


@pytest.mark.parametrize("ring_flush_bytes", [0, 256 * 1024])
def test_kill_9_mid_produce_loses_no_acknowledged_batch(
    cluster: Cluster, ring_flush_bytes: int
) -> None:
    """DESIGN.md section 5: a worker killed at any moment loses nothing it acknowledged.

    With a ring flush threshold, acknowledged batches sit only in the shared-memory ring when
    the kill lands, and the restarted worker must replay them from it.
    """
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    acknowledged: dict[int, int] = {}  # tag -> base offset
    next_tag = 0
    for _round in range(3):
        worker = cluster.start_worker(ring_flush_bytes=ring_flush_bytes)
        assert worker.assign()["error_code"] == 0
        client = cluster.client(worker)
        in_flight: dict[int, int] = {}  # correlation id -> tag
        target = len(acknowledged) + rng.randrange(50, 300)
        while len(acknowledged) < target:
            while len(in_flight) < 8:
                entry = ProduceEntry("t", 0, (make_batch(next_tag),))
                in_flight[client.send(ProduceRequestV0(1, 5000, (entry,)))] = next_tag
                next_tag += 1
            header, response = client.recv()
            assert isinstance(response, ProduceResponseV0), response
            assert response.entries[0].error_code == 0
            acknowledged[in_flight.pop(header.correlation_id)] = response.entries[0].base_offset
        os.kill(worker.process.pid, signal.SIGKILL)  # with 8 produces still in flight
        worker.kill()
        while client.dealer.poll(0):  # acknowledgements that arrived before the kill
            header, response = client.recv()
            assert isinstance(response, ProduceResponseV0)
            acknowledged[in_flight.pop(header.correlation_id)] = response.entries[0].base_offset
        restarted = cluster.start_worker(ring_flush_bytes=ring_flush_bytes)
        assert restarted.assign()["error_code"] == 0
        stored = {batch_tags(b)[0]: base_offset_of(b) for b in cluster.client(restarted).read_all()}
        lost = {tag: base for tag, base in acknowledged.items() if stored.get(tag) != base}
        assert not lost, f"seed {seed}: acknowledged batches lost: {sorted(lost)[:10]}"
        cluster.supervisor.send(restarted.identity, {"type": "stop"})
        assert restarted.wait_exit() == 0
    worker_log = cluster.log_path(1).read_text()
    replayed = [int(n) for n in re.findall(r"(\d+) batches replayed", worker_log)]
    if ring_flush_bytes:
        assert sum(replayed) > 0, f"seed {seed}: no kill landed with batches only in the ring"


_ORPHANING_PARENT = """
import subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=sys.stderr)
print(child.pid, flush=True)
sys.stdin.read()  # exit, leaving the worker an orphan, once the test closes our stdin
"""


def test_a_worker_stops_when_its_parent_dies_and_the_supervisor_falls_silent(
    cluster: Cluster,
) -> None:
    command = _worker_command(cluster.supervisor, 5, cluster.data_dir, cluster.ring_dir)
    command += ["--supervisor-silence-ms", "1000"]
    with (cluster.tmp_path / "orphan.log").open("w") as log_file:
        parent = subprocess.Popen(
            [sys.executable, "-c", _ORPHANING_PARENT, *command], cwd=_ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file, text=True,
        )
        assert parent.stdout is not None and parent.stdin is not None
        worker_pid = int(parent.stdout.readline())
        parent.stdout.close()
        cluster.supervisor.wait_for(lambda m: m.get("pid") == worker_pid)
        try:
            parent.stdin.close()
            assert parent.wait(timeout=10) == 0
            wait_until(lambda: process_exited(worker_pid), timeout_s=15,
                       what="the orphaned worker's exit")
        finally:
            if not process_exited(worker_pid):
                os.kill(worker_pid, signal.SIGKILL)
    assert "supervisor gone" in (cluster.tmp_path / "orphan.log").read_text()


def _assign_replicated(worker: WorkerProcess, partition_epoch: int,
                       isr: tuple[int, ...]) -> dict[str, Any]:
    """Partition t-0 led by this worker's broker 1 (epoch 3), replicas 1, 2 and 3."""
    return worker.supervisor.request(worker.identity, {
        "type": "assign", "topic": "t", "partition": 0, "configs": {}, "leader_epoch": 3,
        "is_leader": True, "broker_id": 1, "broker_epoch": 10, "leader": 1,
        "partition_epoch": partition_epoch, "replicas": [1, 2, 3], "isr": list(isr),
    }, "assigned")


def _replica_fetch(client: Client, replica_id: int, broker_epoch: int, offset: int) -> None:
    response = client.call(FetchRequestV1(replica_id, broker_epoch, 0, 1, 1 << 20, (
        ReplicaFetchEntry("t", 0, offset, 3, 3, 0, 1 << 20),)))
    assert isinstance(response, FetchResponseV1), response
    assert response.entries[0].error_code == ErrorCode.NONE, response


def _latest(client: Client) -> int:
    response = client.call(ListOffsetsRequestV0("t", (ListOffsetsPartition(0, -1),)))
    assert isinstance(response, ListOffsetsResponseV0)
    (result,) = response.partitions
    assert result.error_code == ErrorCode.NONE, result
    return result.offset


def test_a_restarted_leader_worker_resumes_the_isr_change_it_had_sent(cluster: Cluster) -> None:
    """docs/replication.md §3: a leader worker killed while its ISR expansion is with the
    controller (which may commit it) is started again at the same leader epoch; the new
    process sends the same change again and counts the new member in its high watermark until
    a newer record says how it ended."""
    worker = cluster.start_worker()
    assert _assign_replicated(worker, 5, (1, 2))["error_code"] == 0
    client = cluster.client(worker)
    for tag in range(2):
        assert client.produce(make_batch(tag)).error_code == 0
    _replica_fetch(client, 2, 20, 6)
    _replica_fetch(client, 3, 30, 6)  # caught up, outside the ISR: proposed

    def expansion(message: dict[str, Any]) -> bool:
        return message.get("type") == "alter_isr" and message.get("new_isr") == [1, 2, 3]

    _, sent = cluster.supervisor.wait_for(expansion)
    assert (sent["leader_epoch"], sent["partition_epoch"]) == (3, 5)
    worker.kill()  # unanswered: the controller may commit it, or not

    restarted = cluster.start_worker()
    assert _assign_replicated(restarted, 5, (1, 2))["error_code"] == 0
    client = cluster.client(restarted)
    _, again = cluster.supervisor.wait_for(expansion)
    assert {key: again[key] for key in ("leader_epoch", "partition_epoch", "member_epochs")} \
        == {key: sent[key] for key in ("leader_epoch", "partition_epoch", "member_epochs")}
    assert client.produce(make_batch(2)).error_code == 0
    _replica_fetch(client, 2, 20, 9)
    assert _latest(client) == 6, "replica 3 may be in the ISR: the HW waits for it"

    assert _assign_replicated(restarted, 6, (1, 2, 3))["error_code"] == 0  # it was committed
    _replica_fetch(client, 3, 30, 9)
    assert _latest(client) == 9


def test_a_consumer_fetch_naming_a_follower_does_not_move_the_high_watermark(
        cluster: Cluster) -> None:
    """docs/replication.md §2.2: a follower's position comes from its replica fetch (Fetch v1,
    with its broker and leader epochs) only. A Fetch v0 that names replica 2 gets
    INVALID_REQUEST, and the high watermark still waits for replica 2's own fetch."""
    worker = cluster.start_worker()
    assert _assign_replicated(worker, 5, (1, 2, 3))["error_code"] == 0
    client = cluster.client(worker)
    assert client.produce(make_batch(0)).error_code == 0
    for replica_id in (2, 3):
        response = client.call(FetchRequestV0(replica_id, 0, 0, 1 << 20,
                                              (FetchEntry("t", 0, 3, 1 << 20),)))
        assert isinstance(response, FetchResponseV0)
        assert response.entries[0].error_code == ErrorCode.INVALID_REQUEST
    assert _latest(client) == 0
    _replica_fetch(client, 2, 20, 3)
    _replica_fetch(client, 3, 30, 3)
    assert _latest(client) == 3
