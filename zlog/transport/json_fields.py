"""The one checker of JSON objects read off a socket or a log: typed fields or an error code.

Every JSON message zlog reads (the control plane's bodies, the messages between a supervisor
and its workers, the metadata log's commands) goes through `Fields`: a missing required field or
a value of the wrong type becomes a `ZlogError` with the reader's code and a sentence naming the
field, never a KeyError or TypeError. Unknown fields are ignored, so a newer peer may add some.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Final, TypeVar

from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.wire import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

_MISSING: Final = object()
T = TypeVar("T")


class Fields:
    """Typed access to one JSON object; a wrong or missing field raises the caller's code."""

    __slots__ = ("_code", "_object", "_where")

    def __init__(self, value: object, code: ErrorCode, where: str) -> None:
        if not isinstance(value, dict):
            raise ZlogError(code, f"{where} must be a JSON object, not {type(value).__name__}")
        self._object: dict[str, object] = value
        self._code = code
        self._where = where

    def _fail(self, key: str, expected: str) -> ZlogError:
        return ZlogError(self._code, f"{self._where}.{key} must be {expected}")

    def recode(self, code: ErrorCode) -> Fields:
        """The same object, whose wrong fields are `code` (a config map's INVALID_CONFIG)."""
        return Fields(self._object, code, self._where)

    def has(self, key: str) -> bool:
        return key in self._object

    def fail(self, message: str) -> ZlogError:
        """The error for a field combination that is wrong as a whole; the caller raises it."""
        return ZlogError(self._code, f"{self._where}: {message}")

    def _get(self, key: str, default: object) -> object:
        value = self._object.get(key, _MISSING)
        if value is _MISSING:
            if default is _MISSING:
                raise ZlogError(self._code, f"{self._where}.{key} is required")
            return default
        return value

    def integer(
        self, key: str, *, low: int = INT64_MIN, high: int = INT64_MAX, default: object = _MISSING
    ) -> int:
        value = self._get(key, default)
        # bool is an int in Python but not in JSON's eyes: refuse true/false as numbers.
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise self._fail(key, f"an integer in {low}..{high}")
        return value

    def text(self, key: str, *, default: object = _MISSING) -> str:
        value = self._get(key, default)
        if not isinstance(value, str):
            raise self._fail(key, "a string")
        return value

    def optional_text(self, key: str) -> str | None:
        value = self._get(key, None)
        if value is not None and not isinstance(value, str):
            raise self._fail(key, "a string or null")
        return value

    def data(self, key: str, *, default: object = _MISSING) -> bytes:
        """Bytes, carried as base64 text (JSON has no bytes)."""
        value = self._get(key, default)
        if isinstance(value, bytes):  # the default
            return value
        if not isinstance(value, str):
            raise self._fail(key, "base64 text")
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise self._fail(key, "base64 text") from None

    def error_code(self, key: str = "error_code", *, default: object = _MISSING) -> ErrorCode:
        """A Kafka error code this build knows; an unknown number is the reader's error."""
        value = self.integer(key, default=default)
        try:
            return ErrorCode(value)
        except ValueError:
            raise self._fail(key, "a known error code") from None

    def boolean(self, key: str, *, default: object = _MISSING) -> bool:
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise self._fail(key, "true or false")
        return value

    def array(self, key: str, *, default: object = _MISSING) -> list[object]:
        value = self._get(key, default)
        if not isinstance(value, list):
            raise self._fail(key, "a list")
        return value

    def optional_integer(
        self, key: str, *, low: int = INT64_MIN, high: int = INT64_MAX
    ) -> int | None:
        if self._get(key, None) is None:
            return None
        return self.integer(key, low=low, high=high)

    def texts(self, key: str) -> tuple[str, ...]:
        strings: list[str] = []
        for item in self.array(key):
            if not isinstance(item, str):
                raise self._fail(key, "a list of strings")
            strings.append(item)
        return tuple(strings)

    def optional_texts(self, key: str) -> tuple[str, ...] | None:
        if self._get(key, None) is None:
            return None
        return self.texts(key)

    def optional_integers(
        self, key: str, *, low: int = INT32_MIN, high: int = INT32_MAX
    ) -> tuple[int, ...] | None:
        if self._get(key, None) is None:
            return None
        return self.integers(key, low=low, high=high)

    def integers(self, key: str, *, low: int = INT32_MIN, high: int = INT32_MAX) -> tuple[int, ...]:
        numbers: list[int] = []
        for item in self.array(key):
            if not isinstance(item, int) or isinstance(item, bool) or not low <= item <= high:
                raise self._fail(key, f"a list of integers in {low}..{high}")
            numbers.append(item)
        return tuple(numbers)

    def text_map_any(self, key: str) -> dict[str, object]:
        """An object with any values, for the caller to check (absent: empty)."""
        value = self._get(key, {})
        if not isinstance(value, dict):
            raise self._fail(key, "an object")
        return {str(k): v for k, v in value.items()}

    def integer_lists(
        self, key: str, *, low: int = INT32_MIN, high: int = INT32_MAX
    ) -> tuple[tuple[int, ...], ...]:
        rows: list[tuple[int, ...]] = []
        for row in self.array(key):
            if not isinstance(row, list) or not all(
                isinstance(item, int) and not isinstance(item, bool) and low <= item <= high
                for item in row
            ):
                raise self._fail(key, f"a list of lists of integers in {low}..{high}")
            rows.append(tuple(row))
        return tuple(rows)

    def text_map(self, key: str) -> dict[str, str]:
        value = self._get(key, {})
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise self._fail(key, "an object of string values")
        return {str(k): str(v) for k, v in value.items()}

    def nested_list(
        self, key: str, parse: Callable[[Fields], T], *, default: object = _MISSING
    ) -> tuple[T, ...]:
        items = self.array(key, default=default)
        return tuple(
            parse(Fields(item, self._code, f"{self._where}.{key}[{index}]"))
            for index, item in enumerate(items)
        )

    def optional_nested_list(self, key: str, parse: Callable[[Fields], T]) -> tuple[T, ...] | None:
        """A list of objects, or None when absent or null."""
        if self._get(key, None) is None:
            return None
        return self.nested_list(key, parse)

    def nested(self, key: str) -> Fields:
        return Fields(self._get(key, _MISSING), self._code, f"{self._where}.{key}")


def parse_json_object(body: memoryview, code: ErrorCode, what: str) -> Fields:
    """The body as a JSON object, or `code`: never a parser exception."""
    if body.nbytes > limits.JSON_BODY_BYTES_MAX:
        raise ZlogError(code, f"{what}: a JSON body of {body.nbytes} bytes exceeds the bound")
    try:
        value = json.loads(str(body, "utf-8"))
    except (ValueError, RecursionError) as error:  # JSONDecodeError and UnicodeDecodeError too
        raise ZlogError(code, f"{what}: the body is not UTF-8 JSON ({error})") from None
    return Fields(value, code, what)
