"""The client side of a local producer's connection (zlog/client/local_produce.py), against a
worker played by the test: the other end of a real socket pair and a real queue pair file.

What a request becomes in the queue, a reply taken back as the network's would be, and the two
ways the connection ends: the worker's end of file, and a replies queue whose framing is
impossible. Either way every request in flight fails with a retriable code, once.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from zlog.client.local_produce import LocalRpc
from zlog.errors import ErrorCode
from zlog.transport.codec import decode_request, encode_response
from zlog.transport.messages.data import ProduceRequestV0, ProduceResponseV0, ProduceResult
from zlog.transport.shm_queue import QUEUE_NAME_PREFIX, QueuePair
from zlog.transport.spin_window import MachineSpinCheck


@pytest.fixture
def link(tmp_path: Path) -> Iterator[tuple[LocalRpc, socket.socket, QueuePair]]:
    producer_end, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    producer_end.setblocking(False)
    pair = QueuePair.create(tmp_path, f"{QUEUE_NAME_PREFIX}test")
    worker_view = QueuePair.open(pair.path)
    rpc = LocalRpc("tcp://127.0.0.1:1", producer_end, pair, max_in_flight=5, on_broken=None,
                   spin_check=MachineSpinCheck(), on_too_large=lambda _endpoint: None)
    yield rpc, worker_end, worker_view
    rpc.close()
    worker_view.close()
    worker_end.close()


def request() -> ProduceRequestV0:
    return ProduceRequestV0(1, 1_000, ())


def test_a_request_goes_through_the_queue_and_its_reply_comes_back(
        link: tuple[LocalRpc, socket.socket, QueuePair]) -> None:
    rpc, _worker_end, worker = link
    correlation_id = rpc.send(request(), 1_000)
    frames = worker.requests.take()
    assert frames is not None
    header, decoded = decode_request(frames)
    assert header.correlation_id == correlation_id and decoded == request()
    response = ProduceResponseV0((ProduceResult("t", 0, 0, 7, -1, 0, ""),))
    assert worker.replies.put([memoryview(f).cast("B")
                               for f in encode_response(header, response)])
    (result,) = rpc.poll_responses(1_000)
    assert result.correlation_id == correlation_id and result.response == response


def test_the_workers_end_of_file_fails_what_is_in_flight(
        link: tuple[LocalRpc, socket.socket, QueuePair]) -> None:
    rpc, worker_end, _worker = link
    rpc.send(request(), 10_000)
    worker_end.close()
    (result,) = rpc.poll_responses(1_000)
    assert result.error is not None and result.error.code == ErrorCode.NETWORK_EXCEPTION
    assert result.error.retriable and rpc.broken is not None


def test_a_corrupt_replies_queue_fails_what_is_in_flight_once(
        link: tuple[LocalRpc, socket.socket, QueuePair]) -> None:
    rpc, _worker_end, worker = link
    rpc.send(request(), 10_000)
    replies = worker.replies
    struct.pack_into("<I", replies._data, 0, 999_999)  # a worker gone wrong
    replies._head.value += 8
    (result,) = rpc.poll_responses(0)
    assert rpc.broken is not None and rpc.broken.code == ErrorCode.CORRUPT_MESSAGE
    assert result.error is not None and result.error.code == ErrorCode.CORRUPT_MESSAGE
    assert rpc.poll_responses(0) == []
