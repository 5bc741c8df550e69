"""A Kafka request frame parsed with kio: its header and its body.

Parsing never raises anything but `BadRequest`, which carries what the answer needs (the
key, version and correlation id every request starts with, the error, and the body when kio
could read it), so a port answers bad input with `responses.error_response` and goes on
serving the connection. Bytes after the body are ignored, as Kafka's own broker ignores
them: librdkafka sends a Metadata request with three trailing bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.index import KioIndexError, load_request_schema
from kio.serial import entity_reader
from kio.serial.errors import SerialError

from zlog.errors import ErrorCode
from zlog.kafka.api_versions import served
from zlog.kafka.framing import REQUEST_PREFIX


@dataclass(frozen=True, slots=True)
class KafkaRequest:
    """One parsed request; `body` is kio's request class for its key and version."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any


class BadRequest(Exception):
    """A request that gets an error answer instead of being served."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int, error: ErrorCode,
                 reason: str, *, body: Any = None) -> None:
        super().__init__(reason)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.error = error
        self.reason = reason
        self.body = body


def parse_request(frame: bytes) -> KafkaRequest:
    """The request in one frame (the bytes after the size prefix; bytes, not a bytearray:
    kio's reader refuses writable buffers).

    Raises BadRequest with UNSUPPORTED_VERSION for a (key, version) zlog does not serve, the
    body included when kio can still read it, and with INVALID_REQUEST for a body that does
    not parse. The frame holds at least the fixed prefix (framing.FrameReader checks it).
    """
    api_key, api_version, correlation_id = REQUEST_PREFIX.unpack_from(frame)
    try:
        read_header, read_body = _readers(api_key, api_version)
    except KioIndexError:
        raise BadRequest(api_key, api_version, correlation_id, ErrorCode.UNSUPPORTED_VERSION,
                         f"API key {api_key} version {api_version} is not served") from None
    try:
        header, header_bytes = read_header(frame, 0)
        body, _ = read_body(frame, header_bytes)
    except (SerialError, ValueError) as error:
        if not served(api_key, api_version):
            raise BadRequest(api_key, api_version, correlation_id,
                             ErrorCode.UNSUPPORTED_VERSION,
                             f"API key {api_key} version {api_version} is not served") from None
        raise BadRequest(api_key, api_version, correlation_id, ErrorCode.INVALID_REQUEST,
                         f"a malformed request (API key {api_key} version {api_version}): "
                         f"{error}") from None
    if not served(api_key, api_version):
        raise BadRequest(api_key, api_version, correlation_id, ErrorCode.UNSUPPORTED_VERSION,
                         f"API key {api_key} version {api_version} is not served", body=body)
    return KafkaRequest(api_key, api_version, correlation_id, header.client_id, body)


Reader = Callable[[bytes, int], tuple[Any, int]]


@functools.cache
def _readers(api_key: int, api_version: int) -> tuple[Reader, Reader]:
    """kio's header and body readers for one (key, version), looked up once: the lookup
    resolves module names and was a tenth of a small Produce's cost."""
    schema = load_request_schema(api_key, api_version)
    return entity_reader(schema.__header_schema__), entity_reader(schema)
