"""Records as the `zlog` command prints and reads them: kcat's format tokens, key + value lines,
and one JSON object per record (docs/cli.md has the user's view).

JSON carries bytes without loss and without guessing: a key, value or header value that is
UTF-8 text is a JSON string; any other bytes are an object `{"base64": "..."}`; a null (a
tombstone's value, a record without a key) is JSON null. So `zlog consume --json` piped into
`zlog produce --json` writes the same bytes again, and a reader can tell a string that looks
like base64 from bytes that were encoded.

The text modes cannot make that promise for every value, so they print a null as a marker
(`NULL` by default, as kcat's -Z) and kcat's `%K`/`%S` print -1 for a null and the length
otherwise, which tells a tombstone from a record whose value is the text "NULL".
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeAlias

from zlog.errors import ErrorCode, ZlogError

if TYPE_CHECKING:  # the client loads only for the commands that need it
    from zlog.client.records import ConsumerRecord

RecordHeaders: TypeAlias = tuple[tuple[str, bytes | None], ...]
Formatter: TypeAlias = Callable[["ConsumerRecord"], bytes]

NULL_TEXT_DEFAULT: Final = "NULL"
BASE64_FIELD: Final = "base64"

_ESCAPES: Final = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\"}
FORMAT_TOKENS: Final = {
    "t": "topic",
    "p": "partition",
    "o": "offset",
    "T": "timestamp (ms)",
    "k": "key",
    "K": "key length (-1 for null)",
    "s": "value",
    "v": "value (same as %s)",
    "S": "value length (-1 for null)",
    "h": "headers as k=v,k=v",
    "%": "a literal %",
}
"""kcat's -f tokens (kcat names the value %s); the help text lists them from here."""


def _length(data: bytes | None) -> bytes:
    return b"-1" if data is None else str(len(data)).encode()


def _headers_text(headers: RecordHeaders, null: bytes) -> bytes:
    return b",".join(
        name.encode() + b"=" + (null if value is None else value) for name, value in headers
    )


def format_formatter(template: str, null_text: str) -> Formatter:
    """kcat's `-f`: tokens (FORMAT_TOKENS) and escapes \\n \\t \\r \\\\; checked once, up
    front, so an unknown token is an error before any record is read."""
    null = null_text.encode()
    fields: dict[str, Callable[[ConsumerRecord], bytes]] = {
        "t": lambda r: r.topic.encode(),
        "p": lambda r: str(r.partition).encode(),
        "o": lambda r: str(r.offset).encode(),
        "T": lambda r: str(r.timestamp_ms).encode(),
        "k": lambda r: null if r.key is None else r.key,
        "K": lambda r: _length(r.key),
        "s": lambda r: null if r.value is None else r.value,
        "v": lambda r: null if r.value is None else r.value,
        "S": lambda r: _length(r.value),
        "h": lambda r: _headers_text(r.headers, null),
    }
    parts: list[bytes | Callable[[ConsumerRecord], bytes]] = []
    literal = bytearray()
    position = 0
    while position < len(template):
        char = template[position]
        if char in "%\\":
            if position + 1 >= len(template):
                raise _format_error(f"the format ends with a lone {char!r}")
            token = template[position + 1]
            position += 2
            if char == "\\":
                if token not in _ESCAPES:
                    raise _format_error(f"unknown escape \\{token}; known: \\n \\t \\r \\\\")
                literal += _ESCAPES[token]
            elif token == "%":
                literal += b"%"
            elif token in fields:
                if literal:
                    parts.append(bytes(literal))
                    literal.clear()
                parts.append(fields[token])
            else:
                known = " ".join(f"%{name}" for name in FORMAT_TOKENS)
                raise _format_error(f"unknown token %{token}; known: {known}")
            continue
        literal += char.encode()
        position += 1
    if literal:
        parts.append(bytes(literal))
    frozen = tuple(parts)
    return lambda record: b"".join(
        part if isinstance(part, bytes) else part(record) for part in frozen
    )


def _format_error(message: str) -> ZlogError:
    return ZlogError(ErrorCode.INVALID_CONFIG, f"--format: {message}")


def value_formatter(null_text: str) -> Formatter:
    """The default: the value and a newline."""
    null = null_text.encode()
    return lambda record: (null if record.value is None else record.value) + b"\n"


def key_value_formatter(separator: str, null_text: str) -> Formatter:
    """--print-key: key, separator, value (kafka-console-consumer's print.key)."""
    null, between = null_text.encode(), separator.encode()
    return lambda record: b"".join((
        null if record.key is None else record.key, between,
        null if record.value is None else record.value, b"\n",
    ))


# ---------------------------------------------------------------------------------------------
# JSON.
# ---------------------------------------------------------------------------------------------


def bytes_to_json(data: bytes | None) -> str | dict[str, str] | None:
    """UTF-8 text as a string, other bytes as {"base64": ...}, null as None."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {BASE64_FIELD: base64.b64encode(data).decode("ascii")}


def bytes_from_json(value: object, where: str) -> bytes | None:
    """The inverse of bytes_to_json; anything else is INVALID_RECORD naming `where`."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate from a \ud800 escape
            raise _record_error(f"{where} is not valid Unicode text") from None
    if isinstance(value, dict) and set(value) == {BASE64_FIELD} and isinstance(
        value[BASE64_FIELD], str
    ):
        try:
            return base64.b64decode(value[BASE64_FIELD], validate=True)
        except (binascii.Error, ValueError):
            raise _record_error(f"{where}.{BASE64_FIELD} is not base64") from None
    raise _record_error(
        f'{where} must be a string, null or {{"{BASE64_FIELD}": "..."}}, not {json.dumps(value)}'
    )


def _record_error(message: str) -> ZlogError:
    return ZlogError(ErrorCode.INVALID_RECORD, message)


def json_formatter() -> Formatter:
    """One JSON object per line: topic, partition, offset, timestamp_ms, key, value, headers."""

    def line(record: ConsumerRecord) -> bytes:
        document = {
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "timestamp_ms": record.timestamp_ms,
            "key": bytes_to_json(record.key),
            "value": bytes_to_json(record.value),
            "headers": [{"key": name, "value": bytes_to_json(value)}
                        for name, value in record.headers],
        }
        return json.dumps(document, ensure_ascii=False).encode("utf-8") + b"\n"

    return line


@dataclass(frozen=True, slots=True)
class RecordToSend:
    """One line of `zlog produce --json`."""

    value: bytes | None
    key: bytes | None = None
    headers: RecordHeaders = ()
    partition: int | None = None
    timestamp_ms: int | None = None


_JSON_INPUT_FIELDS: Final = frozenset(
    {"value", "key", "headers", "partition", "timestamp_ms", "topic", "offset"}
)
"""What a line may hold: consume --json's fields; its topic and offset are not used."""


def parse_json_record(line: bytes, line_number: int) -> RecordToSend:
    """One JSON object: value (required, null for a tombstone), key, headers (a list of
    {"key", "value"} as consume --json writes them, or an object of name: value), partition,
    timestamp_ms. INVALID_RECORD naming the line for anything else."""
    where = f"line {line_number}"
    try:
        document = json.loads(line)
    except json.JSONDecodeError as error:
        raise _record_error(f"{where} is not JSON: {error.msg} at column {error.colno}") from None
    except (ValueError, RecursionError) as error:  # not UTF-8, or nested too deep
        raise _record_error(f"{where} is not JSON: {error}") from None
    if not isinstance(document, dict):
        raise _record_error(f"{where} must be a JSON object, not {type(document).__name__}")
    unknown = sorted(set(document) - _JSON_INPUT_FIELDS)
    if unknown:
        known = ", ".join(sorted(_JSON_INPUT_FIELDS - {"topic", "offset"}))
        raise _record_error(f"{where}: unknown field {unknown[0]!r}; a record has {known}")
    if "value" not in document:
        raise _record_error(f"{where} has no value (null sends a tombstone)")
    return RecordToSend(
        value=bytes_from_json(document["value"], f"{where}: value"),
        key=bytes_from_json(document.get("key"), f"{where}: key"),
        headers=_headers_from_json(document.get("headers"), where),
        partition=_optional_int(document, "partition", where, minimum=0),
        timestamp_ms=_optional_int(document, "timestamp_ms", where, minimum=0),
    )


def _optional_int(document: Mapping[str, object], name: str, where: str, *,
                  minimum: int) -> int | None:
    value = document.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise _record_error(f"{where}: {name} must be an integer of at least {minimum}")
    return value


def _headers_from_json(value: object, where: str) -> RecordHeaders:
    if value is None:
        return ()
    pairs: Sequence[tuple[object, object]]
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, list) and all(
        isinstance(item, dict) and set(item) == {"key", "value"} for item in value
    ):
        pairs = [(item["key"], item["value"]) for item in value]
    else:
        raise _record_error(
            f'{where}: headers must be a list of {{"key": ..., "value": ...}} or an object'
        )
    headers: list[tuple[str, bytes | None]] = []
    for name, header_value in pairs:
        if not isinstance(name, str):
            raise _record_error(f"{where}: a header key must be a string")
        headers.append((name, bytes_from_json(header_value, f"{where}: header {name!r}")))
    return tuple(headers)
