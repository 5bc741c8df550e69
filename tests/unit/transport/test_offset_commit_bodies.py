"""OffsetCommit's struct bodies: every field survives, and a malformed body is refused with
INVALID_REQUEST (or, for a response, the client's decode error) and a sentence naming the
field, never a struct.error or an IndexError (their round trips are among test_codec.py's).

Spec: zlog/transport/offset_commit_bodies.py, docs/protocol.md "OffsetCommit v0".
"""

from __future__ import annotations

import random
import struct
from dataclasses import replace

import pytest

from zlog.errors import ErrorCode, ZlogError
from zlog.transport import codec, offset_commit_bodies
from zlog.transport.codec import RESPONSE_DECODE_ERROR, RequestBodyError, RequestHeader
from zlog.transport.messages.groups import (
    OffsetCommitRequestV0,
    OffsetCommitResponseV0,
    PartitionCommit,
)
from zlog.types import TopicPartition

T0 = TopicPartition("orders", 0)
COMMIT = OffsetCommitRequestV0("g", ((T0, PartitionCommit(42, 7, "meta")),),
                             3, "m-1", None, retention_ms=None)


def _body(msg: OffsetCommitRequestV0) -> bytes:
    return bytes(codec.encode_request(1, msg)[1])


def _refusal(body: bytes) -> RequestBodyError:
    header = codec.encode_request(1, COMMIT)[0]
    with pytest.raises(RequestBodyError) as refused:
        codec.decode_request([header, body])
    assert refused.value.code == ErrorCode.INVALID_REQUEST
    return refused.value


def test_unset_retention_and_instance_id_stay_unset() -> None:
    """None is "the broker's default retention" and "a dynamic member": neither may come back
    as a value (0 ms retention would expire the offset at once)."""
    assert codec.decode_request(codec.encode_request(1, COMMIT))[1] == COMMIT
    explicit = OffsetCommitRequestV0("g", (), -1, "", "instance-1", 0)
    assert codec.decode_request(codec.encode_request(1, explicit))[1] == explicit


def test_every_truncation_of_a_request_is_refused() -> None:
    body = _body(COMMIT)
    for length in range(len(body)):
        _refusal(body[:length])
    assert "trailing" in _refusal(body + b"\x00").message


def test_a_negative_partition_or_retention_is_refused() -> None:
    body = _body(COMMIT)
    negative_partition = body.replace(struct.pack(">iq", 0, 42), struct.pack(">iq", -1, 42))
    assert "partition" in _refusal(negative_partition).message
    negative_retention = body.replace(struct.pack(">iq", 3, -1), struct.pack(">iq", 3, -5))
    assert "retention_ms" in _refusal(negative_retention).message


def test_a_count_larger_than_the_body_is_refused_before_anything_is_built() -> None:
    body = _body(OffsetCommitRequestV0("g", (), 3, "m-1"))
    assert body.endswith(struct.pack(">I", 0))
    assert "entry_count" in _refusal(body[:-4] + struct.pack(">I", 2**32 - 1)).message


def test_text_that_is_not_utf8_and_a_bad_flag_are_refused() -> None:
    assert "metadata" in _refusal(_body(COMMIT).replace(b"meta", b"\xff\xfe\xfd\xfc")).message
    body = _body(COMMIT).replace(b"m-1\x00", b"m-1\x07", 1)  # the flag follows member_id
    assert "group_instance_id" in _refusal(body).message


def test_unencodable_fields_are_refused_at_the_sender() -> None:
    for msg in (OffsetCommitRequestV0("g", ((T0, PartitionCommit(2**63)),)),
                OffsetCommitRequestV0("g", (), retention_ms=-5),
                OffsetCommitRequestV0("g" * 70_000, ())):
        with pytest.raises(ZlogError) as refused:
            codec.encode_request(1, msg)
        assert refused.value.code == ErrorCode.INVALID_REQUEST


def test_a_response_with_an_unknown_error_code_or_truncated_is_a_decode_error() -> None:
    """A client must not turn a number it does not know into a code it acts on."""
    header = RequestHeader(8, 0, 1)
    response = OffsetCommitResponseV0(ErrorCode.NONE, ((T0, ErrorCode.OFFSET_METADATA_TOO_LARGE),))
    frames = codec.encode_response(header, response)
    assert codec.decode_response(frames)[1] == response
    body = bytes(frames[1])
    unknown = body[:-2] + struct.pack(">h", 31_999)
    for bad in (unknown, body[:-1], body + b"\x00"):
        with pytest.raises(ZlogError) as refused:
            codec.decode_response([frames[0], bad])
        assert refused.value.code == RESPONSE_DECODE_ERROR


def _decoded_or_refusal(body: bytes) -> OffsetCommitRequestV0 | str:
    header = codec.encode_request(1, COMMIT)[0]
    try:
        request = codec.decode_request([header, body])[1]
    except RequestBodyError as error:
        return error.message
    assert isinstance(request, OffsetCommitRequestV0)
    return request


def _checked(body: bytes) -> OffsetCommitRequestV0 | str:
    """What the field-by-field decoder alone makes of `body`."""
    try:
        return offset_commit_bodies._decode_checked(memoryview(body), ErrorCode.INVALID_REQUEST)
    except ZlogError as error:
        return error.message


def test_the_one_pass_decoder_accepts_and_refuses_what_the_checked_one_does() -> None:
    """Well-formed bodies take a one-pass decode and fall back to the field-by-field one on
    anything unusual: over seeded random mutations of valid bodies (bytes flipped, cut,
    added), both must give the same request or the checked decoder's own refusal."""
    rng = random.Random(20)
    two = OffsetCommitRequestV0("group-é", (
        (T0, PartitionCommit(1)), (TopicPartition("t", 3), PartitionCommit(9, 2, "x"))),
        -1, "", None, retention_ms=60_000)
    bodies = [_body(COMMIT), _body(two), _body(replace(COMMIT, group_instance_id="i"))]
    mutated = 0
    for _ in range(3_000):
        body = bytearray(rng.choice(bodies))
        for _ in range(rng.randint(1, 3)):
            position = rng.randrange(len(body) + 1)
            action = rng.randrange(3)
            if action == 0 and position < len(body):
                body[position] = rng.randrange(256)
            elif action == 1:
                del body[position:]
            else:
                body.insert(position, rng.randrange(256))
        checked = _checked(bytes(body))
        assert _decoded_or_refusal(bytes(body)) == checked
        mutated += isinstance(checked, OffsetCommitRequestV0)
    assert mutated > 100  # accepted mutations (offsets, epochs...) were compared field by field
