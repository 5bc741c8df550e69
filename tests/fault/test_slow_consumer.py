"""A consumer that fetches and then stops reading must not stall the worker or its producers.

Spec: DESIGN.md section 1 (one thread per worker serves every client of its partitions) and
zlog/transport/sockets.py (ROUTER_MANDATORY and non-blocking sends: a reply to a peer that is
backed up is dropped and counted, the client times out and retries); row 31 of the bad-input
catalogue in docs/reliability.md §4 ("slow or flooding client: backpressure, never a stall").

The stalled consumer is a DEALER that pipelines many fetches of a large partition, plus long
polls at its end, and never reads a reply. Its receive buffer fills (checked with FIONREAD on
its TCP socket), the worker's queue towards it reaches its high-water mark, and meanwhile a
producer must complete its batches within a deadline, other clients must be answered quickly,
and the worker must not be restarted.
"""

from __future__ import annotations

import contextlib
import fcntl
import struct
import termios
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from zlog.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from zlog.record.records import NewRecord, build_batch
from zlog.transport.codec import encode_request
from zlog.transport.messages import (
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
    ListOffsetsPartition,
    ListOffsetsRequestV0,
    ListOffsetsResponseV0,
    ProduceEntry,
    ProduceRequestV0,
)
from zlog.transport.rpc import RpcClient
from zlog.types import LATEST_TIMESTAMP
from zlog_testbed.broker_process import BrokerProcess, broker_process
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC: Final = "tail"
FILL_RECORDS: Final = 1_000
FILL_VALUE_BYTES: Final = 1_000  # about 1 MB in the partition: each fetch answers ~1 MB
STALLED_FETCHES: Final = 10_500  # more than a worker's per-peer queue, SERVER_HWM_MESSAGES
STALLED_LONG_POLLS: Final = 100  # parked at the log end, woken by the producer's appends
RECEIVE_QUEUE_FULL_BYTES: Final = 64 * 1024
PRODUCED_BATCHES: Final = 200
PRODUCE_DEADLINE_S: Final = 20.0
ANSWER_DEADLINE_S: Final = 3.0  # what "answered quickly" means on a shared CI machine
DEADLINE_S: Final = 30.0


def _receive_queue_bytes(fd: int) -> int:
    """Bytes waiting unread in a TCP socket's receive queue (FIONREAD)."""
    raw = fcntl.ioctl(fd, termios.FIONREAD, b"\x00\x00\x00\x00")
    queued: int = struct.unpack("i", raw)[0]
    return queued


@contextlib.contextmanager
def _stalled_consumer(endpoint: str) -> Iterator[tuple[zmq.Socket[bytes], int]]:
    """A DEALER that will not read: (socket, file descriptor of its TCP connection)."""
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVHWM, 1)  # zmq itself stops draining the TCP socket at once
    sock.setsockopt(zmq.SNDHWM, 0)  # queue every request we send, however many
    monitor = sock.get_monitor_socket(zmq.EVENT_CONNECTED)
    try:
        sock.connect(endpoint)
        assert monitor.poll(int(DEADLINE_S * 1000)), "the stalled consumer did not connect"
        event = recv_monitor_message(monitor)
        assert event["event"] == zmq.EVENT_CONNECTED
        yield sock, int(event["value"])
    finally:
        sock.disable_monitor()
        monitor.close(linger=0)
        sock.close(linger=0)


def _answered_quickly(endpoint: str, request: Request) -> Response:
    started = time.monotonic()
    with RpcClient(endpoint) as rpc:
        response = rpc.call(request, int(DEADLINE_S * 1000))
    waited_s = time.monotonic() - started
    assert waited_s < ANSWER_DEADLINE_S, f"{type(request).__name__} took {waited_s:.2f}s"
    return response


def _log_end(endpoint: str) -> int:
    response = _answered_quickly(endpoint, ListOffsetsRequestV0(
        TOPIC, (ListOffsetsPartition(0, LATEST_TIMESTAMP),)))
    assert isinstance(response, ListOffsetsResponseV0)
    (result,) = response.partitions
    assert result.error_code == 0, result
    return result.offset


def _produce_batches(broker: BrokerProcess, count: int) -> float:
    """Seconds a producer takes for `count` acks=1 batches (fails past the deadline)."""
    values = [f"p{index:05d}".encode().ljust(100, b".") for index in range(count * 20)]
    started = time.monotonic()
    with Producer(broker.endpoint, acks=1, linger_ms=0, bulk_batch_size=20 * 100 + 200,
                  compression=None, request_timeout_ms=5_000) as producer:
        batches = producer.send_many(TOPIC, values, partition=0).result(PRODUCE_DEADLINE_S)
    elapsed_s = time.monotonic() - started
    assert sum(b.record_count for b in batches) == len(values)
    assert len(batches) >= count, len(batches)
    return elapsed_s


def test_a_consumer_that_stops_reading_does_not_stall_producers(tmp_path: Path) -> None:
    with broker_process(tmp_path, workers=1) as broker:
        with Admin(broker.endpoint, request_timeout_ms=10_000) as admin:
            admin.create_topics([NewTopic(TOPIC, 1)])
        endpoint = broker.data_endpoint(TOPIC, 0)
        (worker,) = broker.worker_pids()
        with Producer(broker.endpoint, acks=1, compression=None) as filler:
            filler.send_many(TOPIC, [bytes(FILL_VALUE_BYTES)] * FILL_RECORDS,
                             partition=0).result(DEADLINE_S)
        baseline_s = _produce_batches(broker, PRODUCED_BATCHES)
        end = _log_end(endpoint)

        with _stalled_consumer(endpoint) as (stalled, fd):
            fetch_all = FetchRequestV0(-1, 0, 1, 1 << 20, (
                FetchEntry(TOPIC, 0, 0, 1 << 20),))
            for correlation_id in range(1, STALLED_FETCHES + 1):
                stalled.send_multipart(encode_request(correlation_id, fetch_all))
            long_poll = FetchRequestV0(-1, 60_000, 1 << 20, 1 << 20, (
                FetchEntry(TOPIC, 0, end, 1 << 20),))
            for correlation_id in range(STALLED_LONG_POLLS):
                stalled.send_multipart(encode_request(STALLED_FETCHES + 1 + correlation_id,
                                                      long_poll))
            # Requests on one connection are handled in order: once this marker is in the
            # log, the worker has answered (or dropped the answers to) every fetch above.
            marker = build_batch([NewRecord(b"marker")])
            stalled.send_multipart(encode_request(0, ProduceRequestV0(
                1, 5_000, (ProduceEntry(TOPIC, 0, (marker,)),))))
            wait_until(lambda: _log_end(endpoint) == end + 1, DEADLINE_S, interval_s=0.05,
                       what="the worker to get through the stalled consumer's requests")
            wait_until(lambda: _receive_queue_bytes(fd) >= RECEIVE_QUEUE_FULL_BYTES, DEADLINE_S,
                       what="the stalled consumer's receive queue to fill")
            queued = _receive_queue_bytes(fd)

            # The stalled consumer is still connected, its long polls parked: others go on.
            stalled_s = _produce_batches(broker, PRODUCED_BATCHES)
            assert isinstance(_answered_quickly(endpoint, ApiVersionsRequestV0()),
                              ApiVersionsResponseV0)
            final_end = _log_end(endpoint)
            assert final_end >= end + 1 + PRODUCED_BATCHES * 20
            with Consumer(broker.endpoint, auto_offset_reset="earliest",
                          fetch_max_wait_ms=100) as reader:
                reader.assign([TopicPartition(TOPIC, 0)])
                seen: list[int] = []

                def read_to_the_end() -> bool:
                    seen.extend(len(view) for _, view in reader.poll_batches(100))
                    return sum(seen) >= final_end

                wait_until(read_to_the_end, DEADLINE_S, interval_s=0,
                           what="another consumer to read the whole partition")
            assert _receive_queue_bytes(fd) >= queued  # it never read a byte meanwhile

        print(f"\n{PRODUCED_BATCHES} batches: {baseline_s:.2f}s alone, {stalled_s:.2f}s beside a "
              f"consumer with {queued} unread bytes and {STALLED_FETCHES} unread replies")
        assert broker.worker_pids() == [worker], "the worker was restarted (it stalled)"
        assert _log_end(endpoint) == final_end
        assert "Traceback" not in broker.log_text(), broker.log_tail()
