"""The local producer (`Producer(local=True)`) against a real `zlog serve` on this host.

Spec: zlog/client/local_produce.py, zlog/broker/data/local_producers.py, docs/local-path.md.
Its requests reach the worker through a queue pair in shared memory, which the worker maps
(seen in /proc/PID/maps) and unlinks; every record acknowledged must be in the log exactly once
and in order, whichever side is killed, and the worker must go on serving.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from zlog.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from zlog.errors import ErrorCode
from zlog.transport import local_channel
from zlog.transport.api import ApiKey
from zlog.transport.codec import REQUEST_HEADER, decode_response_header
from zlog.transport.shm_queue import QUEUE_NAME_PREFIX, QueuePair, ShmQueue, queue_directory
from zlog_testbed.broker_process import BrokerProcess, broker_process
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

WAIT_S: Final = 60.0
ROUND: Final = 300
REPO_ROOT: Final = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with broker_process(workers=1) as instance:
        yield instance


_names = iter(range(1_000_000))


def new_topic(broker: BrokerProcess, configs: dict[str, str] | None = None) -> str:
    name = f"local-produce-{next(_names)}"
    with Admin(broker.endpoint) as admin:
        admin.create_topics([NewTopic(name, 1, configs=configs or {})])
    broker.data_endpoint(name, 0)
    return name


def queues_mapped(pid: int) -> int:
    """How many local producers' queue pairs the process maps."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except FileNotFoundError:
        return 0
    return len({line.split()[-2] for line in maps.splitlines() if QUEUE_NAME_PREFIX in line})


def queue_files_of(pid: int) -> list[Path]:
    return list(queue_directory().glob(f"{QUEUE_NAME_PREFIX}{pid}-*"))


def read_all(broker: BrokerProcess, topic: str, count: int) -> list[bytes]:
    """The first `count` values of partition 0 (over the network), then nothing more."""
    values: list[bytes] = []
    with Consumer(broker.endpoint, auto_offset_reset="earliest", fetch_max_wait_ms=100) as net:
        net.assign([TopicPartition(topic, 0)])

        def enough() -> bool:
            values.extend(r.value or b"" for r in net.poll(timeout_ms=200))
            return len(values) >= count

        wait_until(enough, WAIT_S, interval_s=0, what=f"{count} records")
        assert net.poll(timeout_ms=200) == []
    return values


def test_records_go_through_shared_memory_and_land_once_in_order(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    worker = broker.worker_pid_for(broker.data_endpoint(topic, 0))
    with Producer(broker.endpoint, local=True, linger_ms=0) as producer:
        futures = [producer.send(topic, b"%d" % index, partition=0) for index in range(ROUND)]
        offsets = [future.result(WAIT_S).offset for future in futures]
        assert queues_mapped(worker) == 1
        assert queue_files_of(os.getpid()) == [], "the worker unlinks the file it mapped"
    assert offsets == list(range(ROUND))
    wait_until(lambda: queues_mapped(worker) == 0, WAIT_S, what="the queues unmapped")
    assert read_all(broker, topic, ROUND) == [b"%d" % index for index in range(ROUND)]


def test_a_request_larger_than_the_queue_goes_over_the_network(broker: BrokerProcess) -> None:
    topic = new_topic(broker, {"max.message.bytes": str(16 * 1024 * 1024)})
    large = os.urandom(6 * 1024 * 1024)  # more than half of the 8 MiB requests queue
    with Producer(broker.endpoint, local=True, linger_ms=0, compression=None,
                  batch_size=8 * 1024 * 1024) as producer:
        assert producer.send(topic, b"small", partition=0).result(WAIT_S).offset == 0
        assert producer.send(topic, large, partition=0).result(WAIT_S).offset == 1
        assert producer.send(topic, b"after", partition=0).result(WAIT_S).offset == 2
    assert read_all(broker, topic, 3) == [b"small", large, b"after"]


def test_a_killed_worker_loses_and_repeats_nothing_acknowledged(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    endpoint = broker.data_endpoint(topic, 0)
    killed = broker.worker_pid_for(endpoint)
    with Producer(broker.endpoint, local=True, linger_ms=0, retry_backoff_ms=20) as producer:
        first = [producer.send(topic, b"%d" % index, partition=0) for index in range(ROUND)]
        for future in first[:ROUND // 2]:
            future.result(WAIT_S)
        broker.kill_worker(killed)  # half of the round may still be in flight
        second = [producer.send(topic, b"%d" % index, partition=0)
                  for index in range(ROUND, 2 * ROUND)]
        offsets = [future.result(WAIT_S).offset for future in first + second]
        replacement = broker.worker_pid_for(broker.data_endpoint(topic, 0))
        assert replacement != killed
        assert queues_mapped(replacement) == 1, "the producer is back on shared memory"
    assert offsets == list(range(2 * ROUND))
    assert read_all(broker, topic, 2 * ROUND) == [b"%d" % index for index in range(2 * ROUND)]


_PRODUCER_SCRIPT: Final = """
import sys
from zlog.client import Producer
producer = Producer(sys.argv[1], local=True, linger_ms=0)
index = 0
while True:
    producer.send(sys.argv[2], b"%d" % index, partition=0).result(30)
    print(index, flush=True)
    index += 1
"""


def test_a_killed_producer_is_let_go_and_the_worker_serves_on(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    worker = broker.worker_pid_for(broker.data_endpoint(topic, 0))
    child = subprocess.Popen([sys.executable, "-c", _PRODUCER_SCRIPT, broker.endpoint, topic],
                             stdout=subprocess.PIPE, cwd=REPO_ROOT,
                             env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert child.stdout is not None
    acknowledged = -1
    try:
        while acknowledged < ROUND:
            line = child.stdout.readline()
            assert line, "the producer process ended"
            acknowledged = int(line)
        assert queues_mapped(worker) == 1
        child.send_signal(signal.SIGKILL)
        child.wait(WAIT_S)
        acknowledged = max([acknowledged, *(int(line) for line in child.stdout)])
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
    wait_until(lambda: queues_mapped(worker) == 0, WAIT_S, what="the dead producer let go")
    assert queue_files_of(child.pid) == []
    with Producer(broker.endpoint, local=True, linger_ms=0) as producer:
        after = producer.send(topic, b"after", partition=0).result(WAIT_S).offset
    assert after >= acknowledged + 1
    values = read_all(broker, topic, after + 1)
    assert values[:acknowledged + 1] == [b"%d" % index for index in range(acknowledged + 1)]
    assert values[after] == b"after"
    assert len(set(values)) == len(values), "nothing appended twice"


def _hello(endpoint: str, path: Path) -> tuple[socket.socket, bytes]:
    connection = local_channel.connect(endpoint)
    assert connection is not None
    connection.settimeout(WAIT_S)
    connection.send(local_channel.HELLO + str(path).encode())
    return connection, connection.recv(local_channel.MESSAGE_BYTES_MAX)


def test_a_hello_naming_another_file_is_refused_and_nothing_is_unlinked(
        broker: BrokerProcess, tmp_path: Path) -> None:
    topic = new_topic(broker)
    endpoint = broker.data_endpoint(topic, 0)
    outside = tmp_path / f"{QUEUE_NAME_PREFIX}outside"
    outside.write_bytes(b"x" * 8192)
    connection, answer = _hello(endpoint, outside)
    connection.close()
    assert answer.startswith(local_channel.REFUSED) and b"not a queue pair of" in answer
    assert outside.exists()
    other = QueuePair.create(queue_directory(), f"{QUEUE_NAME_PREFIX}{os.getpid()}-other")
    other.close()
    try:
        with open(other.path, "r+b") as header:  # a pair claiming another process made it
            header.seek(8)
            header.write((1).to_bytes(8, "little"))
        connection, answer = _hello(endpoint, other.path)
        connection.close()
        assert answer.startswith(local_channel.REFUSED) and b"not by the producer" in answer
        assert other.path.exists()
    finally:
        other.path.unlink()


def test_a_producer_writing_garbage_is_let_go_and_others_are_served(
        broker: BrokerProcess) -> None:
    """A request that does not decode is answered with its Kafka code, as on the socket; a
    queue whose framing is impossible gets its producer let go (end of file on its connection)
    and the worker serves on."""
    topic = new_topic(broker)
    endpoint = broker.data_endpoint(topic, 0)
    pair = QueuePair.create(queue_directory(), f"{QUEUE_NAME_PREFIX}{os.getpid()}-garbage")
    try:
        connection, answer = _hello(endpoint, pair.path)
        assert answer == local_channel.OK
        garbage = REQUEST_HEADER.pack(ApiKey.PRODUCE, 0, 7, 0)
        assert pair.requests.put([memoryview(garbage), memoryview(b"not a produce body")])
        local_channel.ring(connection)
        replies: list[list[memoryview]] = []

        def answered() -> bool:
            reply = pair.replies.take()
            if reply is not None:
                replies.append(reply)
            return bool(replies)

        wait_until(answered, WAIT_S, what="the answer to a request that does not decode")
        header = decode_response_header(replies[0])
        assert header.correlation_id == 7 and header.error_code != ErrorCode.NONE
        scribble(pair.requests)
        local_channel.ring(connection)
        assert connection.recv(local_channel.MESSAGE_BYTES_MAX) == b"", "let go"
        connection.close()
    finally:
        pair.close()
    with Producer(broker.endpoint, local=True, linger_ms=0) as producer:
        assert producer.send(topic, b"fine", partition=0).result(WAIT_S).offset == 0


def scribble(queue: ShmQueue) -> None:
    """What a writer gone wrong leaves: a message length past everything it wrote."""
    struct.pack_into("<I", queue._data, queue._head.value % queue.capacity, 999_999)
    queue._head.value += 8


def test_a_producer_that_stops_reading_is_let_go(broker: BrokerProcess) -> None:
    """Its replies queue fills (it never takes a reply): the worker lets it go instead of
    waiting for room, and serves on."""
    topic = new_topic(broker)
    endpoint = broker.data_endpoint(topic, 0)
    pair = QueuePair.create(queue_directory(), f"{QUEUE_NAME_PREFIX}{os.getpid()}-deaf")
    request = [memoryview(REQUEST_HEADER.pack(ApiKey.PRODUCE, 0, 1, 0)), memoryview(b"?")]
    try:
        connection, answer = _hello(endpoint, pair.path)
        assert answer == local_channel.OK
        connection.setblocking(False)
        let_go = False

        def gone() -> bool:
            nonlocal let_go
            while pair.requests.put(request):  # each is answered with an error code
                pass
            local_channel.ring(connection)
            let_go = not local_channel.drain(connection)
            return let_go

        wait_until(gone, WAIT_S, interval_s=0.01, what="the deaf producer let go")
        assert pair.replies.used_bytes > pair.replies.capacity // 2, "its replies filled up"
        connection.close()
    finally:
        pair.close()
    with Producer(broker.endpoint, local=True, linger_ms=0) as producer:
        assert producer.send(topic, b"fine", partition=0).result(WAIT_S).offset == 0
