"""RpcClient against a small ROUTER server in a thread: correlation, pipelining, deadlines.

The server answers Metadata at once, holds ApiVersions until the next Metadata arrives (so
answers come back out of order), never answers Fetch (timeouts), and answers DescribeCluster
with a whole-request error.
"""

from __future__ import annotations

import socket
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
from zlog.transport.messages.admin import (
    ApiVersionsRequestV0,
    ApiVersionsResponseV0,
    DescribeClusterRequestV0,
    MetadataRequestV0,
    MetadataResponseV0,
)
from zlog.transport.messages.data import (
    FetchRequestV0,
    ProduceRequestV0,
)
from zlog.transport.rpc import RpcClient, RpcResult
from zlog.transport.sockets import (
    has_message,
    make_router,
    recv_frames,
    recv_routed,
    send_frames,
    send_routed,
)
from zlog_testbed.waiting import wait_until


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


def test_expire_due_reports_timeouts_without_reading(client: RpcClient) -> None:
    """For a caller polling the socket itself: timeouts come back, answers stay unread."""
    held_id = client.send(ApiVersionsRequestV0(), timeout_ms=5000)  # held by the server
    assert client.expire_due() == []
    late_id = client.send(FetchRequestV0(-1, 0, 0, 0, ()), timeout_ms=20)
    due: list[RpcResult] = []
    wait_until(lambda: bool(due.extend(client.expire_due()) or due), timeout_s=5)
    assert [r.correlation_id for r in due] == [late_id]
    assert due[0].error is not None and due[0].error.code == ErrorCode.REQUEST_TIMED_OUT
    assert client.in_flight == 1, "the held request still waits"
    client.send(MetadataRequestV0(("go",)), timeout_ms=5000)  # the server answers both now
    wait_until(lambda: has_message(client.sockets[0]), timeout_s=5)
    assert client.expire_due() == [], "an answer waiting on the socket is not read"
    answered: set[int] = set()
    while len(answered) < 2:
        answered.update(r.correlation_id for r in client.poll_responses(1000))
    assert held_id in answered and client.in_flight == 0


def test_frames_round_trip_through_the_part_by_part_send_and_receive() -> None:
    """`send_frames`/`recv_frames` move each part as it is, with the multipart boundary kept."""
    server, endpoint = make_router("tcp://127.0.0.1:0")
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.connect(endpoint)
    try:
        parts = [b"header", b"", memoryview(b"body"), bytearray(b"x" * 70_000)]
        assert send_frames(dealer, parts)
        assert server.poll(5000, zmq.POLLIN)
        routed = recv_routed(server)
        assert routed is not None
        identity, frames = routed
        assert [bytes(f.buffer) for f in frames] == [bytes(p) for p in parts]
        assert not has_message(server)
        assert send_routed(server, identity, [b"a", b"b"])
        assert dealer.poll(5000, zmq.POLLIN) and has_message(dealer)
        back = recv_frames(dealer, block=False)
        assert back is not None and [f.bytes for f in back] == [b"a", b"b"]
        assert recv_frames(dealer, block=False) is None
    finally:
        dealer.close(linger=0)
        server.close(linger=0)


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_a_refused_connection_fails_the_call_at_once_not_at_its_deadline() -> None:
    """Nothing listens: the monitor's failed attempt ends the call (NETWORK_EXCEPTION,
    retriable), long before its 60 s deadline; the client stays broken (no late delivery)."""
    with RpcClient(f"tcp://127.0.0.1:{_unused_port()}") as rpc:
        outcome: list[ZlogError] = []

        def call() -> None:
            try:
                rpc.call(MetadataRequestV0(None), 60_000)
            except ZlogError as error:
                outcome.append(error)

        caller = threading.Thread(target=call)
        caller.start()
        caller.join(10)
        assert outcome and outcome[0].code == ErrorCode.NETWORK_EXCEPTION
        assert "cannot connect" in outcome[0].message and outcome[0].retriable
        assert rpc.broken is not None and rpc.sockets == ()
        with pytest.raises(ZlogError) as again:
            rpc.send(MetadataRequestV0(None), 1000)
        assert again.value.code == ErrorCode.NETWORK_EXCEPTION


def test_a_dropped_connection_fails_the_requests_in_flight(server: FakeServer) -> None:
    """A server that goes away: requests waiting on it fail now, answers already in stay."""
    broken: list[bool] = []
    with RpcClient(server.endpoint, on_broken=lambda: broken.append(True)) as rpc:
        answered = rpc.call(MetadataRequestV0(("t",)), 5000)
        assert isinstance(answered, MetadataResponseV0) and rpc.connected
        held = rpc.send(ApiVersionsRequestV0(), timeout_ms=60_000)  # the server holds it
        wait_until(lambda: server.held != [], timeout_s=5, what="the request held")
        server.close()
        results: list[RpcResult] = []
        wait_until(lambda: bool(results.extend(rpc.poll_responses(100)) or results), 10,
                   what="the held request to fail")
        assert [r.correlation_id for r in results] == [held]
        error = results[0].error
        assert error is not None and error.code == ErrorCode.NETWORK_EXCEPTION
        assert broken == [True] and rpc.in_flight == 0


def test_a_peer_that_never_speaks_zeromq_is_given_up_after_the_connect_timeout() -> None:
    """TCP accepts (the kernel does), but no ZMTP handshake ever finishes."""
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen()
        port = mute.getsockname()[1]
        with RpcClient(f"tcp://127.0.0.1:{port}") as rpc:
            with pytest.raises(ZlogError) as failed:
                rpc.call(MetadataRequestV0(None), 60_000, connect_timeout_ms=200)
            assert failed.value.code == ErrorCode.NETWORK_EXCEPTION
            assert "no connection" in failed.value.message


def test_a_cancelled_call_ends_soon_after_its_predicate_turns_true(server: FakeServer) -> None:
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    with RpcClient(server.endpoint) as rpc, pytest.raises(ZlogError) as failed:
        rpc.call(ApiVersionsRequestV0(), 60_000, cancelled=stop.is_set)  # held forever
    assert failed.value.code == ErrorCode.NETWORK_EXCEPTION
    assert "cancelled" in failed.value.message
