"""RpcClient against a small ROUTER server in a thread: correlation, pipelining, deadlines.

The server answers Metadata at once, holds ApiVersions until the next Metadata arrives (so
answers come back out of order), never answers Fetch (timeouts), and answers DescribeCluster
with a whole-request error.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import zmq

from zlog.errors import ErrorCode, ZlogError
from zlog.transport.codec import (
    HeaderError,
    RequestBodyError,
    RequestHeader,
    decode_request,
    encode_error_response,
    encode_response,
)
from zlog.transport.messages import (
    ApiVersionsRequestV0,
    ApiVersionsResponseV0,
    DescribeClusterRequestV0,
    FetchRequestV0,
    MetadataRequestV0,
    MetadataResponseV0,
    ProduceRequestV0,
)
from zlog.transport.rpc import RpcClient, RpcResult
from zlog.transport.sockets import make_router, recv_routed, send_routed


class FakeServer:
    def __init__(self) -> None:
        self.socket, self.endpoint = make_router("tcp://127.0.0.1:0")
        self.held: list[tuple[bytes, RequestHeader]] = []
        self.received_count = 0
        self.header_errors_count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.socket.poll(10, zmq.POLLIN):
                continue
            received = recv_routed(self.socket)
            assert received is not None
            identity, frames = received
            self.received_count += 1
            try:
                header, request = decode_request(frames)
            except HeaderError:
                self.header_errors_count += 1
                continue
            except RequestBodyError as error:
                send_routed(self.socket, identity,
                            encode_error_response(error.header, error.code, error.message))
                continue
            self._answer(identity, header, request)

    def _answer(self, identity: bytes, header: RequestHeader, request: object) -> None:
        if isinstance(request, MetadataRequestV0):
            topics = request.topics or ()
            reply = MetadataResponseV0(",".join(topics), header.correlation_id, (), ())
            send_routed(self.socket, identity, encode_response(header, reply))
            for held_identity, held_header in self.held:
                send_routed(self.socket, held_identity,
                            encode_response(held_header, ApiVersionsResponseV0((), "held")))
            self.held.clear()
        elif isinstance(request, ApiVersionsRequestV0):
            self.held.append((identity, header))
        elif isinstance(request, DescribeClusterRequestV0):
            send_routed(self.socket, identity, encode_error_response(
                header, ErrorCode.NOT_CONTROLLER, "ask another node"))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.socket.close(linger=0)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.close()


@pytest.fixture
def client(server: FakeServer) -> Iterator[RpcClient]:
    rpc = RpcClient(server.endpoint, max_in_flight=4)
    yield rpc
    rpc.close()


def test_call_returns_the_matching_response(client: RpcClient) -> None:
    response = client.call(MetadataRequestV0(("a", "b")), timeout_ms=5000)
    assert isinstance(response, MetadataResponseV0)
    assert response.cluster_id == "a,b"


def test_pipelined_answers_come_back_out_of_order(client: RpcClient) -> None:
    held_id = client.send(ApiVersionsRequestV0(), timeout_ms=5000)
    quick_id = client.send(MetadataRequestV0(("x",)), timeout_ms=5000)
    results: dict[int, object] = {}
    while len(results) < 2:
        for result in client.poll_responses(1000):
            results[result.correlation_id] = result.unwrap()
    assert isinstance(results[quick_id], MetadataResponseV0)
    assert isinstance(results[held_id], ApiVersionsResponseV0)
    assert client.in_flight == 0


def test_unanswered_request_times_out(client: RpcClient) -> None:
    with pytest.raises(ZlogError) as caught:
        client.call(FetchRequestV0(-1, 0, 0, 0, ()), timeout_ms=50)
    assert caught.value.code == ErrorCode.REQUEST_TIMED_OUT
    assert caught.value.retriable
    assert client.in_flight == 0


def test_polled_timeouts_name_their_request(client: RpcClient) -> None:
    request = FetchRequestV0(-1, 0, 0, 0, ())
    correlation_id = client.send(request, timeout_ms=20)
    results: list[RpcResult] = []
    while not results:
        results = client.poll_responses(500)
    assert results[0].correlation_id == correlation_id
    assert results[0].request is request
    assert results[0].error is not None and results[0].error.code == ErrorCode.REQUEST_TIMED_OUT


def test_whole_request_error_raises_its_code(client: RpcClient) -> None:
    with pytest.raises(ZlogError) as caught:
        client.call(DescribeClusterRequestV0(), timeout_ms=5000)
    assert caught.value.code == ErrorCode.NOT_CONTROLLER
    assert caught.value.message == "ask another node"


def test_in_flight_is_bounded(client: RpcClient) -> None:
    for _ in range(4):
        client.send(FetchRequestV0(-1, 0, 0, 0, ()), timeout_ms=60_000)
    assert not client.has_capacity
    with pytest.raises(ZlogError) as caught:
        client.send(MetadataRequestV0(None), timeout_ms=30)
    assert caught.value.code == ErrorCode.REQUEST_TIMED_OUT
    assert client.in_flight == 4


def test_acks_zero_takes_no_slot(client: RpcClient, server: FakeServer) -> None:
    client.send(ProduceRequestV0(0, 0, ()), timeout_ms=1000)
    assert client.in_flight == 0
    # The server still got it and keeps serving.
    assert isinstance(client.call(MetadataRequestV0(None), 5000), MetadataResponseV0)
    assert server.received_count == 2


def test_server_survives_garbage_and_answers_next(client: RpcClient, server: FakeServer) -> None:
    raw = client._socket  # the garbage has to bypass the codec
    raw.send_multipart([b"\x01"])
    raw.send_multipart([b"\x00\x63\x00\x00\x00\x00\x00\x09\x00\x00", b"{}"])  # api key 99
    assert isinstance(client.call(MetadataRequestV0(None), 5000), MetadataResponseV0)
    assert server.header_errors_count == 1
    # The unsupported-version reply had correlation id 9, which this client never sent.
    assert client.late_responses_count == 1
