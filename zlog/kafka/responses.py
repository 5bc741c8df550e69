"""Kafka responses built with kio from plain values, at the version the request asked for.

`build` fills one of kio's version-specific response classes from a mapping and drops what
that version lacks, so one handler answers every version of its API: it says what it knows
(`throttle_time_ms=0`, `error_code=6`, nested lists as mappings) and each version takes the
fields it has. A field not given gets its schema default, else an empty value; records are
empty bytes, never null (librdkafka rejects a null record set).

`error_response` is the answer to any request zlog does not serve or cannot read: the
request's own (key, version) with the error everywhere an error code goes, and the topics and
partitions it named listed back, so that a client finds the answer it expects for each.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

from kio.index import KioIndexError, load_response_schema
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial import entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)

from zlog.errors import ErrorCode
from zlog.kafka.api_versions import ADVERTISED, SASL_ADVERTISED
from zlog.kafka.framing import SIZE
from zlog.transport.api import ApiKey
from zlog.transport.kafka_codec import KafkaWriter

_EPOCH: Final = datetime.datetime.fromtimestamp(0, tz=datetime.UTC)

_MIRRORED_FIELDS: Final = {
    "responses": ("topic_data", "topics"),
    "topics": ("topics", "topic_data"),
    "partition_responses": ("partition_data", "partitions"),
    "partitions": ("partitions", "partition_data", "partition_indexes"),
    "results": ("topics", "groups_names", "groups", "resources"),
    "groups": ("groups", "groups_names"),
}
"""A response's list field -> the request's list fields it answers item for item."""

_ECHOED_FIELDS: Final = {
    "name": ("name", "topic"),
    "topic": ("topic", "name"),
    "topic_id": ("topic_id",),
    "partition_index": ("partition_index", "partition"),
    "partition": ("partition", "partition_index"),
    "group_id": ("group_id", "group"),
    "resource_type": ("resource_type",),
    "resource_name": ("resource_name",),
}
"""A response item's identity field -> the request item's fields it repeats."""


def build(cls: type[Any], values: Mapping[str, Any]) -> Any:
    """An instance of the kio class `cls` from `values`; keys the class lacks are ignored.

    A timedelta field (kio's `throttle_time` for Kafka's throttle_time_ms) also takes the
    Kafka name with `_ms` and an int; a datetime field takes int milliseconds; a uuid field
    takes zlog's 32 hex digits; an error code takes an int; nested entities take mappings.
    """
    arguments: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        kafka_type = field.metadata.get("kafka_type")
        if field.name in values:
            raw = values[field.name]
        elif kafka_type in {"timedelta_i32", "timedelta_i64"} and f"{field.name}_ms" in values:
            raw = values[f"{field.name}_ms"]
        else:
            arguments[field.name] = _default(field)
            continue
        arguments[field.name] = _convert(field, raw)
    return cls(**arguments)


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    kind = classify_field(field)
    if kind.is_array:
        return ()
    if isinstance(kind, EntityField):
        return None if is_optional(field) else build(kind.type_, {})
    return _primitive_default(field.metadata.get("kafka_type", ""), is_optional(field))


def _primitive_default(kafka_type: str, optional: bool) -> Any:
    if kafka_type == "records":
        return b""
    if optional and kafka_type in {"string", "bytes", "uuid", "datetime_i64"}:
        return None
    return {
        "string": "", "bytes": b"", "bool": False, "float64": 0.0, "uuid": None,
        "error_code": KioErrorCode.none,
        "timedelta_i32": datetime.timedelta(0), "timedelta_i64": datetime.timedelta(0),
        "datetime_i64": _EPOCH,
    }.get(kafka_type, 0)


def _convert(field: dataclasses.Field[Any], raw: Any) -> Any:
    kind = classify_field(field)
    if isinstance(kind, EntityTupleField):
        if raw is None:
            return None if is_optional(field) else ()
        return tuple(_entity(kind.type_, item) for item in raw)
    if isinstance(kind, EntityField):
        return None if raw is None else _entity(kind.type_, raw)
    if isinstance(kind, PrimitiveTupleField):
        return None if raw is None else tuple(
            _primitive(field.metadata.get("kafka_type", ""), item) for item in raw)
    return _primitive(field.metadata.get("kafka_type", ""), raw)


def _entity(cls: type[Any], raw: Any) -> Any:
    return build(cls, raw) if isinstance(raw, Mapping) else raw


def _primitive(kafka_type: str, raw: Any) -> Any:
    if raw is None:
        return b"" if kafka_type == "records" else None
    if kafka_type == "error_code" and not isinstance(raw, KioErrorCode):
        return KioErrorCode(int(raw))
    if kafka_type in {"timedelta_i32", "timedelta_i64"} and isinstance(raw, int):
        return datetime.timedelta(milliseconds=raw)
    if kafka_type == "datetime_i64" and isinstance(raw, int):
        return datetime.datetime.fromtimestamp(raw / 1000, tz=datetime.UTC)
    if kafka_type == "uuid" and isinstance(raw, str):
        return uuid.UUID(hex=raw) if raw else None
    return raw


def encode(correlation_id: int, response: Any) -> bytes:
    """The response behind its size prefix and the header its class names."""
    header_class = type(response).__header_schema__
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    entity_writer(header_class)(buffer, header_class(correlation_id=correlation_id))
    entity_writer(type(response))(buffer, response)
    view = buffer.getbuffer()
    SIZE.pack_into(view, 0, len(view) - SIZE.size)
    del view
    return buffer.getvalue()


def respond(api_key: int, api_version: int, correlation_id: int,
            values: Mapping[str, Any]) -> bytes:
    """The framed response of this key and version built from `values` (see `build`)."""
    return encode(correlation_id, build(load_response_schema(api_key, api_version), values))


def api_versions_response(api_version: int, correlation_id: int, *, sasl: bool = False) -> bytes:
    """ApiVersions' answer: the table, or at version 0 with UNSUPPORTED_VERSION when the
    request's version is past ours (KIP-511); with the SASL APIs on a port that asks for a
    login."""
    table = sorted((*ADVERTISED, *SASL_ADVERTISED), key=lambda row: row.api_key) if sasl \
        else ADVERTISED
    rows = [{"api_key": row.api_key, "min_version": row.min_version,
             "max_version": row.max_version} for row in table]
    known = 0 <= api_version <= _API_VERSIONS_MAX
    return respond(ApiKey.API_VERSIONS, api_version if known else 0, correlation_id, {
        "error_code": ErrorCode.NONE if known else ErrorCode.UNSUPPORTED_VERSION,
        "api_keys": rows, "throttle_time_ms": 0})


_API_VERSIONS_MAX: Final = next(row.max_version for row in ADVERTISED
                                if row.api_key == ApiKey.API_VERSIONS)


def error_response(api_key: int, api_version: int, correlation_id: int, error: ErrorCode,
                   *, request: Any = None, message: str = "") -> bytes:
    """A well-formed answer carrying `error` for a request of any key and version.

    `request` is the parsed body when kio could read it: its topics and partitions are
    listed back, each with the error. ApiVersions always gets its table (KIP-511). A
    (key, version) no Kafka schema describes gets the correlation id and the error code
    alone, the first field a client of most APIs reads, rather than a closed connection.
    """
    if api_key == ApiKey.API_VERSIONS:
        return api_versions_response(-1 if error == ErrorCode.UNSUPPORTED_VERSION
                                     else api_version, correlation_id)
    try:
        cls = load_response_schema(api_key, api_version)
    except KioIndexError:
        writer = KafkaWriter()
        writer.int32(correlation_id, "correlation_id")
        writer.int16(error, "error_code")
        body = writer.done()
        return SIZE.pack(len(body)) + body
    values = _mirror(cls, request, error)
    if message:
        values["error_message"] = message
    return encode(correlation_id, build(cls, values))


def _mirror(cls: type[Any], request: Any, error: ErrorCode) -> dict[str, Any]:
    """Values for `cls` answering `request` (a kio request entity, an int or None)."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.name == "error_code":
            values[field.name] = error
            continue
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField):
            items = _request_field(request, _MIRRORED_FIELDS.get(field.name, ()))
            if isinstance(items, Sequence) and not isinstance(items, str | bytes):
                values[field.name] = [_mirror(kind.type_, item, error) for item in items]
        elif field.name in _ECHOED_FIELDS:
            if isinstance(request, int) and "partition" in field.name:
                values[field.name] = request  # a request listing bare partition numbers
                continue
            if isinstance(request, str) and field.name in {"name", "topic", "group_id"}:
                values[field.name] = request  # a request listing bare names
                continue
            echoed = _request_field(request, _ECHOED_FIELDS[field.name])
            if echoed is not None:
                values[field.name] = echoed
    return values


def _request_field(request: Any, names: Sequence[str]) -> Any:
    for name in names:
        value = getattr(request, name, None)
        if value is not None:
            return value
    return None
