"""Messages <-> lists of frames: the fixed headers, and dispatch to the body codecs.

A request is `[header][body][record batch frame]...`, a response the same with its own header
(docs/protocol.md, "Frames"). This module never touches a socket (pyzmq's lesson: keep codecs
out of sockets); `sockets.py` moves the frames. Frames may be bytes, memoryviews or received
`zmq.Frame`s; batches are handed through as views, never copied.

Decoding never lets a parsing exception escape. A server sees three outcomes:

* `HeaderError`: frame 0 is not even a header, so there is no correlation id to reply to; the
  message is dropped and counted.
* `RequestBodyError` (carries the decoded `.header`): unknown api key or version
  (UNSUPPORTED_VERSION) or a malformed body (INVALID_REQUEST); reply with
  `encode_error_response(error.header, error.code, error.message)`.
* Success: `(RequestHeader, Request)`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from zlog.errors import ErrorCode, ZlogError
from zlog.transport.api import is_supported, supported_range_text
from zlog.transport.json_codec import decode_json_body, encode_json_body
from zlog.transport.messages import (
    REQUEST_TYPES,
    RESPONSE_TYPES,
    ErrorBody,
    Request,
    Response,
)
from zlog.transport.messages.data import (
    FetchRequestV0,
    FetchRequestV1,
    FetchRequestV2,
    FetchResponseV0,
    FetchResponseV1,
    FetchResponseV2,
    ProduceRequestV0,
    ProduceResponseV0,
)
from zlog.transport.messages.groups import (
    OffsetCommitRequestV0,
    OffsetCommitResponseV0,
)
from zlog.transport.offset_commit_bodies import (
    decode_offset_commit_request,
    decode_offset_commit_response,
    encode_offset_commit_request,
    encode_offset_commit_response,
)
from zlog.transport.struct_bodies import (
    decode_fetch_request,
    decode_fetch_response,
    decode_produce_request,
    decode_produce_response,
    decode_replica_fetch_request,
    decode_replica_fetch_response,
    decode_subscription_response,
    encode_fetch_request,
    encode_fetch_response,
    encode_produce_request,
    encode_produce_response,
    encode_replica_fetch_request,
    encode_replica_fetch_response,
    encode_subscription_response,
)
from zlog.transport.wire import (
    INT32_MAX,
    INT32_MIN,
    Buffer,
    Cursor,
    FrameLike,
    check_range,
    clip_message,
    frame_view,
)

REQUEST_HEADER: Final = struct.Struct(">hhiH")  # api_key, api_version, correlation_id, flags
RESPONSE_HEADER: Final = struct.Struct(">hhih")  # api_key, api_version, correlation_id, error
_ERROR_MESSAGE_LENGTH: Final = struct.Struct(">H")

# What a client reports when a response cannot be decoded: the server misbehaved, and
# retrying the same request would most likely meet the same answer.
RESPONSE_DECODE_ERROR: Final = ErrorCode.UNKNOWN_SERVER_ERROR

Frame = Buffer | FrameLike

# The message classes by (api key, version) as plain ints: the key read off the wire is looked
# up as it is, with no ApiKey(...) conversion per message.
_REQUEST_CLASSES: Final[dict[tuple[int, int], type[Request]]] = {
    (int(key), version): cls for (key, version), cls in REQUEST_TYPES.items()
}
_RESPONSE_CLASSES: Final[dict[tuple[int, int], type[Response]]] = {
    (int(key), version): cls for (key, version), cls in RESPONSE_TYPES.items()
}


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int  # int16; an int, not an ApiKey, so unknown keys can still be answered
    api_version: int  # int16
    correlation_id: int  # int32, echoed in the response
    flags: int = 0  # uint16, reserved


@dataclass(frozen=True, slots=True)
class TranslatedHeader(RequestHeader):
    """The header of a request that came in another protocol (Kafka's, zlog/kafka) and was
    translated into zlog's: its answer, however the data plane reaches it (at once, after a
    long poll, after the in-sync replicas), is encoded back by `answer` in that protocol, so
    the data plane serves both doors with one path and never knows which one it serves."""

    answer: Callable[[Response], list[Buffer]] | None = None
    answer_error: Callable[[ErrorCode, str], list[Buffer]] | None = None
    throttled: Callable[[Sequence[Buffer], int], list[Buffer]] | None = None
    """The answer's frames with the time a quota held them (ms) written in, when that
    protocol's answer says it (Kafka's throttle_time_ms)."""


@dataclass(frozen=True, slots=True)
class ResponseHeader:
    api_key: int  # int16, the request's
    api_version: int  # int16, the request's
    correlation_id: int  # int32, the request's
    error_code: int  # int16: non-zero when the request as a whole failed


class HeaderError(ZlogError):
    """Frame 0 is not a header: there is nobody to reply to, so the server drops the message."""


class RequestBodyError(ZlogError):
    """The header decoded but the rest did not: the server replies with an error response."""

    def __init__(self, header: RequestHeader, code: ErrorCode, message: str) -> None:
        super().__init__(code, message)
        self.header = header


# ---------------------------------------------------------------------------------------------
# Requests.
# ---------------------------------------------------------------------------------------------


def encode_request(correlation_id: int, msg: Request) -> list[Buffer]:
    """[header, body, *batches]; the batches are the caller's buffers, not copies."""
    check_range(correlation_id, INT32_MIN, INT32_MAX, "correlation_id",
                code=ErrorCode.INVALID_REQUEST)
    header = REQUEST_HEADER.pack(msg.API_KEY, msg.API_VERSION, correlation_id, 0)
    frames: list[Buffer]
    if isinstance(msg, ProduceRequestV0):
        body, frames = encode_produce_request(msg)
    elif isinstance(msg, FetchRequestV0 | FetchRequestV2):
        body, frames = encode_fetch_request(msg), []
    elif isinstance(msg, FetchRequestV1):
        body, frames = encode_replica_fetch_request(msg), []
    elif isinstance(msg, OffsetCommitRequestV0):
        body, frames = encode_offset_commit_request(msg), []
    else:
        body, frames = encode_json_body(msg), []
    return [header, body, *frames]


def _request_header(view: memoryview) -> RequestHeader:
    if view.nbytes < REQUEST_HEADER.size:
        raise HeaderError(
            ErrorCode.INVALID_REQUEST,
            f"a request header is {REQUEST_HEADER.size} bytes, frame 0 has {view.nbytes}",
        )
    return RequestHeader(*REQUEST_HEADER.unpack_from(view, 0))


def decode_request(frames: Sequence[Frame]) -> tuple[RequestHeader, Request]:
    """Decode a whole request (routing frames already removed)."""
    if not frames:
        raise HeaderError(ErrorCode.INVALID_REQUEST, "an empty message has no header")
    head = frame_view(frames[0])
    header = _request_header(head)
    if not is_supported(header.api_key, header.api_version):
        raise RequestBodyError(
            header,
            ErrorCode.UNSUPPORTED_VERSION,
            f"api key {header.api_key} version {header.api_version} is not supported: "
            f"{supported_range_text(header.api_key)}",
        )
    try:
        return header, _decode_request_body(header, head, frames)
    except RequestBodyError:
        raise
    except ZlogError as error:
        raise RequestBodyError(header, error.code, error.message) from None


def _decode_request_body(
    header: RequestHeader, head: memoryview, frames: Sequence[Frame]
) -> Request:
    if head.nbytes != REQUEST_HEADER.size:
        raise ZlogError(ErrorCode.INVALID_REQUEST, "frame 0 must be exactly the 10-byte header")
    if len(frames) < 2:
        raise ZlogError(ErrorCode.INVALID_REQUEST, "a request needs a body frame after its header")
    body = frame_view(frames[1])
    data = [frame_view(frame) for frame in frames[2:]]
    cls = _REQUEST_CLASSES[(header.api_key, header.api_version)]
    code = ErrorCode.INVALID_REQUEST
    if cls is ProduceRequestV0:
        return decode_produce_request(body, data, code)
    if cls is FetchRequestV0:
        return decode_fetch_request(body, data, code, FetchRequestV0)
    if cls is FetchRequestV1:
        return decode_replica_fetch_request(body, data, code)
    if cls is FetchRequestV2:
        return decode_fetch_request(body, data, code, FetchRequestV2)
    if data:
        raise ZlogError(code, f"{cls.__name__} takes 2 frames, the message has {len(frames)}")
    if cls is OffsetCommitRequestV0:
        return decode_offset_commit_request(body, code)
    return decode_json_body(cls, body, code)


def expects_response(msg: Request) -> bool:
    """False for acks=0 produce requests and for the cancel of subscriptions (a Fetch v2 with
    no entries), which the server never answers."""
    if isinstance(msg, ProduceRequestV0):
        return msg.acks != 0
    return not (isinstance(msg, FetchRequestV2) and not msg.entries)


# ---------------------------------------------------------------------------------------------
# Responses.
# ---------------------------------------------------------------------------------------------


def _response_header(header: RequestHeader, error_code: int) -> bytes:
    return RESPONSE_HEADER.pack(
        header.api_key, header.api_version, header.correlation_id, error_code
    )


def encode_response(header: RequestHeader, msg: Response) -> list[Buffer]:
    """[header, body, *chunks] answering the request whose header is `header`."""
    if isinstance(header, TranslatedHeader):
        assert header.answer is not None
        return header.answer(msg)
    assert (header.api_key, header.api_version) == (msg.API_KEY, msg.API_VERSION), (
        f"{type(msg).__name__} does not answer api {header.api_key} v{header.api_version}"
    )
    frames: list[Buffer]
    if isinstance(msg, ProduceResponseV0):
        body, frames = encode_produce_response(msg), []
    elif isinstance(msg, FetchResponseV0):
        body, frames = encode_fetch_response(msg)
    elif isinstance(msg, FetchResponseV1):
        body, frames = encode_replica_fetch_response(msg)
    elif isinstance(msg, FetchResponseV2):
        body, frames = encode_subscription_response(msg)
    elif isinstance(msg, OffsetCommitResponseV0):
        body, frames = encode_offset_commit_response(msg), []
    else:
        body, frames = encode_json_body(msg), []
    return [_response_header(header, 0), body, *frames]


def encode_error_response(header: RequestHeader, code: ErrorCode, message: str) -> list[Buffer]:
    """A whole-request failure: the error code in the header, `>H` length + message as body."""
    assert code != ErrorCode.NONE, "an error response carries an error"
    if isinstance(header, TranslatedHeader):
        assert header.answer_error is not None
        return header.answer_error(code, message)
    text = clip_message(message)
    return [_response_header(header, code), _ERROR_MESSAGE_LENGTH.pack(len(text)) + text]


def decode_response_header(frames: Sequence[Frame]) -> ResponseHeader:
    if not frames:
        raise HeaderError(RESPONSE_DECODE_ERROR, "an empty message has no header")
    view = frame_view(frames[0])
    if view.nbytes != RESPONSE_HEADER.size:
        raise HeaderError(
            RESPONSE_DECODE_ERROR,
            f"a response header is {RESPONSE_HEADER.size} bytes, frame 0 has {view.nbytes}",
        )
    return ResponseHeader(*RESPONSE_HEADER.unpack_from(view, 0))


def decode_response(frames: Sequence[Frame]) -> tuple[ResponseHeader, Response | ErrorBody]:
    """Decode a response; `HeaderError` if frame 0 is unusable, else `ZlogError` if the rest is.

    Raises `ZlogError(RESPONSE_DECODE_ERROR)` for a malformed body; a whole-request failure
    reported by the server is not raised but returned as an `ErrorBody`.
    """
    header = decode_response_header(frames)
    code = RESPONSE_DECODE_ERROR
    if len(frames) < 2:
        raise ZlogError(code, "a response needs a body frame after its header")
    body = frame_view(frames[1])
    data = [frame_view(frame) for frame in frames[2:]]
    if header.error_code != 0:
        return header, _decode_error_body(header, body, len(frames))
    if not is_supported(header.api_key, header.api_version):
        raise ZlogError(code, f"a response for api {header.api_key} v{header.api_version}")
    cls = _RESPONSE_CLASSES[(header.api_key, header.api_version)]
    if cls is ProduceResponseV0:
        return header, decode_produce_response(body, data, code)
    if cls is FetchResponseV0:
        return header, decode_fetch_response(body, data, code)
    if cls is FetchResponseV1:
        return header, decode_replica_fetch_response(body, data, code)
    if cls is FetchResponseV2:
        return header, decode_subscription_response(body, data, code)
    if data:
        raise ZlogError(code, f"{cls.__name__} takes 2 frames, the message has {len(frames)}")
    if cls is OffsetCommitResponseV0:
        return header, decode_offset_commit_response(body, code)
    return header, decode_json_body(cls, body, code)


def _decode_error_body(header: ResponseHeader, body: memoryview, frame_count: int) -> ErrorBody:
    cursor = Cursor(body, RESPONSE_DECODE_ERROR, "error response")
    if frame_count != 2:
        raise cursor.fail(f"an error response takes 2 frames, it has {frame_count}")
    message = cursor.short_text("message")
    cursor.expect_end()
    return ErrorBody(header.error_code, message)
