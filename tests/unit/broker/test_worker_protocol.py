"""The supervisor <-> worker messages: one encoder and decoder for both sides.

Spec: the contract in zlog/broker/worker_protocol.py. What one side encodes, the other decodes
to an equal message; anything else is a WorkerProtocolError with a sentence, carrying the
request id when it could be read so the request can still be answered.
"""

from __future__ import annotations

import json

import pytest

from zlog import limits
from zlog.broker import worker_protocol as protocol
from zlog.errors import ErrorCode

TO_WORKER: list[protocol.ToWorker] = [
    protocol.Assign(7, "orders", 3, {"retention.ms": "1000"}, leader_epoch=4, is_leader=False),
    protocol.Assign(9, "orders", 0, {"retention.disk.percent": "5"}, disk_share_bytes=1 << 40),
    protocol.Unassign(8, "orders", 3, delete=True),
    protocol.Stop(),
    protocol.Lease(123_456),
    protocol.Lease(-1),
]
FROM_WORKER: list[protocol.FromWorker] = [
    protocol.Hello(2, 4242, "tcp://127.0.0.1:5000"),
    protocol.Heartbeat(2),
    protocol.Assigned(7, 0, ""),
    protocol.Unassigned(8, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "not held here"),
]


@pytest.mark.parametrize("message", TO_WORKER, ids=lambda m: m.TYPE)
def test_messages_to_a_worker_round_trip(message: protocol.ToWorker) -> None:
    assert protocol.decode_to_worker(protocol.encode(message)) == message


@pytest.mark.parametrize("message", FROM_WORKER, ids=lambda m: m.TYPE)
def test_messages_from_a_worker_round_trip(message: protocol.FromWorker) -> None:
    assert protocol.decode_from_worker(protocol.encode(message)) == message


def test_each_side_decodes_only_its_own_messages() -> None:
    with pytest.raises(protocol.WorkerProtocolError, match="unknown message type 'hello'"):
        protocol.decode_to_worker(protocol.encode(protocol.Hello(0, 1, "tcp://h:1")))
    with pytest.raises(protocol.WorkerProtocolError, match="unknown message type 'stop'"):
        protocol.decode_from_worker(protocol.encode(protocol.Stop()))


def test_the_wire_form_is_one_json_object_with_its_type() -> None:
    encoded = json.loads(protocol.encode(protocol.Unassign(1, "t", 0, delete=False)))
    assert encoded == {"type": "unassign", "request_id": 1, "topic": "t", "partition": 0,
                       "delete": False}


@pytest.mark.parametrize(
    ("frame", "words"),
    [
        (b"\xff\xfe", "not UTF-8 JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"request_id": 1}', "type is required"),
        (b'{"type": "assign", "request_id": 1, "topic": "t", "partition": "0"}',
         "partition must be an integer"),
        (b'{"type": "assign", "request_id": 1, "topic": "t", "partition": 0, "is_leader": 1}',
         "is_leader must be true or false"),
        (b'{"type": "assign", "request_id": 1, "topic": "t", "partition": 0, '
         b'"disk_share_bytes": -2}', "disk_share_bytes must be an integer"),
        (b'{"type": "unassign", "request_id": -1, "topic": "t", "partition": 0}',
         "request_id must be an integer"),
        (b"[" * 100_000, "not UTF-8 JSON"),
    ],
)
def test_malformed_frames_are_refused_with_a_sentence(frame: bytes, words: str) -> None:
    with pytest.raises(protocol.WorkerProtocolError) as caught:
        protocol.decode_to_worker(frame)
    assert caught.value.code == ErrorCode.INVALID_REQUEST
    assert words in caught.value.message


def test_a_refused_request_keeps_its_id_and_kind_so_it_can_be_answered() -> None:
    frame = b'{"type": "unassign", "request_id": 12, "topic": "t", "partition": -3}'
    with pytest.raises(protocol.WorkerProtocolError) as caught:
        protocol.decode_to_worker(frame)
    assert (caught.value.kind, caught.value.request_id) == ("unassign", 12)


def test_a_frame_over_the_bound_is_refused_before_parsing() -> None:
    frame = b'{"type": "stop", "pad": "' + b"x" * limits.WORKER_MESSAGE_BYTES_MAX + b'"}'
    with pytest.raises(protocol.WorkerProtocolError, match="exceeds the bound"):
        protocol.decode_to_worker(frame)
