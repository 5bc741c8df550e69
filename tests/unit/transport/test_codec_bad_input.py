"""Bad input gets the protocol's error code and nothing else (DESIGN.md section 5).

docs/protocol.md: frame 0 shorter than a header gets no reply (HeaderError); an unknown key or
version is UNSUPPORTED_VERSION; anything undecodable after the header is INVALID_REQUEST. No
IndexError, struct.error, UnicodeDecodeError or JSONDecodeError may escape a decoder.
"""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zlog.errors import ErrorCode, ZlogError
from zlog.transport.api import ApiKey
from zlog.transport.codec import (
    RESPONSE_DECODE_ERROR,
    HeaderError,
    RequestBodyError,
    RequestHeader,
    decode_request,
    decode_response,
    encode_error_response,
    encode_request,
    encode_response,
)
from zlog.transport.messages.admin import MetadataResponseV0
from zlog.transport.messages.data import (
    FetchEntry,
    FetchRequestV0,
    ProduceEntry,
    ProduceRequestV0,
)


def header(api_key: int, api_version: int = 0, correlation_id: int = 7) -> bytes:
    return struct.pack(">hhiH", api_key, api_version, correlation_id, 0)


def body_error(frames: list[bytes]) -> RequestBodyError:
    with pytest.raises(RequestBodyError) as caught:
        decode_request(frames)
    return caught.value


def produce_body(acks: int = 1, entries: list[tuple[int, int, bytes]] | None = None,
                 count: int | None = None) -> bytes:
    entries = entries if entries is not None else []
    parts = [struct.pack(">hiI", acks, 100, len(entries) if count is None else count)]
    for partition, batch_count, topic in entries:
        parts.append(struct.pack(">iIH", partition, batch_count, len(topic)) + topic)
    return b"".join(parts)


# -- headers ------------------------------------------------------------------------------


@pytest.mark.parametrize("frames", [[], [b""], [b"\x00" * 9], [b"\x00" * 9, b"{}"]])
def test_short_or_missing_header_is_a_header_error(frames: list[bytes]) -> None:
    with pytest.raises(HeaderError) as caught:
        decode_request(frames)
    assert isinstance(caught.value, ZlogError)


def test_long_header_frame_is_invalid_request_with_a_header_to_reply_to() -> None:
    error = body_error([header(ApiKey.METADATA) + b"x", b"{}"])
    assert error.code == ErrorCode.INVALID_REQUEST
    assert error.header == RequestHeader(ApiKey.METADATA, 0, 7, 0)


@pytest.mark.parametrize(("api_key", "api_version"), [(99, 0), (-1, 0), (0, 1), (3, -1),
                                                      (ApiKey.DESCRIBE_CLUSTER, 5)])
def test_unknown_key_or_version_is_unsupported_version(api_key: int, api_version: int) -> None:
    error = body_error([header(api_key, api_version), b"{}"])
    assert error.code == ErrorCode.UNSUPPORTED_VERSION
    assert error.header.correlation_id == 7
    assert "support" in error.message
    # The server can answer it, echoing the request's key and version.
    reply = encode_error_response(error.header, error.code, error.message)
    response_header, _body = decode_response(reply)
    assert (response_header.api_key, response_header.api_version) == (api_key, api_version)
    assert response_header.error_code == 35


@pytest.mark.parametrize("api_key", list(ApiKey))
def test_missing_body_frame_is_invalid_request(api_key: ApiKey) -> None:
    assert body_error([header(api_key)]).code == ErrorCode.INVALID_REQUEST


# -- JSON bodies ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_key", "body"),
    [
        (ApiKey.METADATA, b"\xff\xfe"),  # not UTF-8
        (ApiKey.METADATA, b"{"),  # not JSON
        (ApiKey.METADATA, b""),  # empty
        (ApiKey.METADATA, b"[]"),  # not an object
        (ApiKey.METADATA, b"null"),
        (ApiKey.METADATA, b'{"topics": "orders"}'),
        (ApiKey.METADATA, b'{"topics": [1]}'),
        (ApiKey.METADATA, b"[" * 100_000 + b"]" * 100_000),  # nesting deeper than the parser
        (ApiKey.CREATE_TOPICS, b'{"topics": [{"name": "t"}]}'),  # partitions missing
        (ApiKey.CREATE_TOPICS, b'{"topics": [{"name": "t", "partitions": true}]}'),
        (ApiKey.CREATE_TOPICS, b'{"topics": [{"name": "t", "partitions": "3"}]}'),
        (ApiKey.CREATE_TOPICS, b'{"topics": [{"name": "t", "partitions": 1.5}]}'),
        (ApiKey.CREATE_TOPICS, b'{"topics": [{"name": "t", "partitions": 1e400}]}'),
        (ApiKey.CREATE_TOPICS, b'{"topics": [{"name": "t", "partitions": NaN}]}'),
        (ApiKey.CREATE_TOPICS, b'{"topics": [{"name": "t", "partitions": 4294967296}]}'),
        (ApiKey.CREATE_TOPICS, b'{"topics": [{"name": "t", "partitions": 1, "configs": []}]}'),
        (ApiKey.CREATE_TOPICS,
         b'{"topics": [{"name": "t", "partitions": 1, "configs": {"a": 1}}]}'),
        (ApiKey.CREATE_TOPICS, b'{"topics": [5]}'),
        (ApiKey.CREATE_TOPICS, b'{"topics": [], "validate_only": 1}'),
        (ApiKey.CREATE_TOPICS, b'{"topics": [{"name": "t", "partitions": ' + b"9" * 5000 + b"}]}"),
        (ApiKey.DELETE_TOPICS, b"{}"),
        (ApiKey.DELETE_TOPICS, b'{"topics": null}'),
        (ApiKey.INIT_PRODUCER_ID, b'{"transactional_id": 5}'),
        (ApiKey.LIST_OFFSETS, b'{"topic": "t", "partitions": [{"partition": 0}]}'),
        (ApiKey.LIST_OFFSETS, b'{"topic": "t", "partitions": [{"partition": 0, "timestamp": -3}]}'),
        (ApiKey.LIST_OFFSETS, b'{"partitions": []}'),
        (ApiKey.API_VERSIONS, b"not json"),
        (ApiKey.DESCRIBE_CLUSTER, b"1"),
        (ApiKey.DESCRIBE_CONFIGS, b'{"resources": [{"resource_type": 2}]}'),
        (ApiKey.DESCRIBE_CONFIGS, b'{"resources": [{"resource_type": 300, "resource_name": "t"}]}'),
        (ApiKey.DESCRIBE_CONFIGS,
         b'{"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": [1]}]}'),
        (ApiKey.INCREMENTAL_ALTER_CONFIGS,
         b'{"resources": [{"resource_type": 2, "resource_name": "t"}]}'),  # configs missing
        (ApiKey.INCREMENTAL_ALTER_CONFIGS, b'{"resources": [{"resource_type": 2, '
         b'"resource_name": "t", "configs": [{"name": "a", "config_operation": 0, "value": 5}]}]}'),
        (ApiKey.INCREMENTAL_ALTER_CONFIGS, b'{"resources": [{"resource_type": 2, '
         b'"resource_name": "t", "configs": [{"name": "a"}]}]}'),  # no operation
    ],
)
def test_bad_json_is_invalid_request(api_key: ApiKey, body: bytes) -> None:
    assert body_error([header(api_key), body]).code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("api_key", [k for k in ApiKey if k not in (ApiKey.PRODUCE, ApiKey.FETCH)])
def test_json_request_with_extra_frames_is_invalid_request(api_key: ApiKey) -> None:
    assert body_error([header(api_key), b"{}", b"extra"]).code == ErrorCode.INVALID_REQUEST


# -- Produce --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "batches"),
    [
        (b"\x00\x01", []),  # truncated struct
        (produce_body(count=1), []),  # an entry promised, none present
        (produce_body(count=0xFFFFFFFF), []),  # a "negative" (-1 as uint32) entry count
        (produce_body(count=400_000_000), []),  # more entries than bytes could hold
        (produce_body(entries=[(0, 1, b"t")]), []),  # batch frame missing
        (produce_body(entries=[(0, 0xFFFFFFFF, b"t")]), [b"x"]),  # batch count far too large
        (produce_body(entries=[(0, 1, b"t")]), [b"x", b"y"]),  # one frame too many
        (produce_body(entries=[(0, 0, b"t")]) + b"\x00", []),  # trailing bytes
        (produce_body(entries=[(0, 0, b"\xff\xfe")]), []),  # topic not UTF-8
        (struct.pack(">hiI", 1, 0, 1) + struct.pack(">iIH", 0, 0, 500) + b"abc", []),  # topic
        # length beyond the frame
    ],
)
def test_bad_produce_bodies_are_invalid_request(body: bytes, batches: list[bytes]) -> None:
    error = body_error([header(ApiKey.PRODUCE), body, *batches])
    assert error.code == ErrorCode.INVALID_REQUEST
    assert error.header.api_key == ApiKey.PRODUCE


# -- Fetch ----------------------------------------------------------------------------------


def fetch_body(max_wait_ms: int = 0, min_bytes: int = 0, max_bytes: int = 0,
               partition_max_bytes: int = 0, count: int = 1) -> bytes:
    return struct.pack(">iiiiI", -1, max_wait_ms, min_bytes, max_bytes, count) + struct.pack(
        ">iqiH", 0, 0, partition_max_bytes, 1) + b"t"


@pytest.mark.parametrize(
    ("body", "extra"),
    [
        (fetch_body()[:-1], []),  # topic cut short
        (fetch_body()[:10], []),  # truncated struct
        (fetch_body(count=2), []),  # second entry missing
        (fetch_body(count=0xFFFFFFFF), []),
        (fetch_body() + b"\x00", []),
        (fetch_body(), [b"unexpected frame"]),
        (fetch_body(max_wait_ms=-1), []),
        (fetch_body(min_bytes=-1), []),
        (fetch_body(max_bytes=-5), []),
        (fetch_body(partition_max_bytes=-1), []),
    ],
)
def test_bad_fetch_bodies_are_invalid_request(body: bytes, extra: list[bytes]) -> None:
    assert body_error([header(ApiKey.FETCH), body, *extra]).code == ErrorCode.INVALID_REQUEST


# -- Encoding what the wire cannot hold -----------------------------------------------------


def test_unencodable_values_raise_zlog_errors() -> None:
    with pytest.raises(ZlogError) as caught:
        encode_request(1, ProduceRequestV0(1, 0, (ProduceEntry("t" * 70_000, 0, ()),)))
    assert caught.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    with pytest.raises(ZlogError) as caught:
        encode_request(1, FetchRequestV0(-1, 0, 0, 0, (FetchEntry("t", 2**31, 0, 0),)))
    assert caught.value.code == ErrorCode.INVALID_REQUEST
    with pytest.raises(ZlogError) as caught:
        encode_request(2**31, FetchRequestV0(-1, 0, 0, 0, ()))
    assert caught.value.code == ErrorCode.INVALID_REQUEST
    with pytest.raises(ZlogError) as caught:
        encode_request(1, ProduceRequestV0(1, 0, (ProduceEntry("\ud800", 0, ()),)))
    assert caught.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION


# -- Responses (the client's side) --------------------------------------------------------


def test_bad_responses_raise_zlog_errors() -> None:
    with pytest.raises(HeaderError):
        decode_response([b"\x00" * 5])
    with pytest.raises(HeaderError):
        decode_response([])
    good = encode_response(RequestHeader(3, 0, 1), MetadataResponseV0("c", 1, (), ()))
    for frames in ([good[0]], [good[0], b"{"], [good[0], good[1], b"extra"],
                   [struct.pack(">hhih", 77, 0, 1, 0), b"{}"],
                   [struct.pack(">hhih", 3, 0, 1, 35), b"\x00\x09abc"],
                   [struct.pack(">hhih", 3, 0, 1, 35), b"\x00\x00", b"extra"],
                   [struct.pack(">hhih", 1, 0, 1, 0), struct.pack(">I", 1)]):
        with pytest.raises(ZlogError) as caught:
            decode_response(frames)
        assert caught.value.code == RESPONSE_DECODE_ERROR


# -- Fuzz -----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    api_key=st.sampled_from([*list(ApiKey), 7, 99]),
    body=st.binary(max_size=200),
    extra=st.lists(st.binary(max_size=20), max_size=3),
)
def test_random_bodies_raise_only_zlog_errors(
    api_key: int, body: bytes, extra: list[bytes]
) -> None:
    try:
        decode_request([header(api_key), body, *extra])
    except ZlogError as error:
        assert error.code in (ErrorCode.INVALID_REQUEST, ErrorCode.UNSUPPORTED_VERSION)
    try:
        decode_response([struct.pack(">hhih", api_key, 0, 1, 0), body, *extra])
    except ZlogError as error:
        assert error.code == RESPONSE_DECODE_ERROR


@settings(max_examples=200, deadline=None)
@given(frames=st.lists(st.binary(max_size=40), max_size=4))
def test_random_frames_raise_only_zlog_errors(frames: list[bytes]) -> None:
    with contextlib.suppress(ZlogError):
        decode_request(frames)
    with contextlib.suppress(ZlogError):
        decode_response(frames)
