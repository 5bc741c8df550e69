"""What a field is on the wire, said once in its annotation: its width and the rules a reader
checks.

A message class declares each field as `name: Int32` or `name: Annotated[str, NonEmpty]`, and
`json_codec` reads those annotations to encode and decode every JSON body, so a field's name,
type, range and default are written in one place. A bare `int` is an int64, a bare `str` any
text; the markers below narrow or bend that:

* `Range(low, high)` / `AtLeast(low)`: the integers a reader accepts (on a tuple's element
  type, each element's);
* `Absent(value)`: what a missing key reads as, for a field that has no default of its own
  (a field with a default may always be absent, and reads as its default);
* `Sparse`: written only when it differs from its default (the metadata log's commands, whose
  older forms lack the newer fields);
* `Local`: never travels; a decoded message has the field's default;
* `KnownCode`: an error code this build knows, else the reader's error;
* `Code(code)`: a wrong value is `code` rather than the reader's (a config map's
  INVALID_CONFIG);
* `Check(predicate, sentence)`: a value the predicate refuses is the reader's error, saying
  "<field> <sentence>"; `Sentence(template)` words the shape error of a map or a fixed
  tuple, a format string over `field` (and a map's `key`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Final, TypeAlias

from zlog.errors import ErrorCode
from zlog.transport.wire import (
    INT8_MAX,
    INT8_MIN,
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
)


@dataclass(frozen=True, slots=True)
class Range:
    low: int
    high: int


@dataclass(frozen=True, slots=True)
class AtLeast:
    low: int


@dataclass(frozen=True, slots=True)
class Absent:
    value: object


@dataclass(frozen=True, slots=True)
class Code:
    code: ErrorCode


@dataclass(frozen=True, slots=True)
class Check:
    predicate: object  # Callable[[value], bool]; `object` keeps Annotated metadata hashable
    sentence: str


@dataclass(frozen=True, slots=True)
class Sentence:
    text: str


class _Flag:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


Sparse: Final = _Flag("Sparse")
Local: Final = _Flag("Local")
KnownCode: Final = _Flag("KnownCode")

Int8: TypeAlias = Annotated[int, Range(INT8_MIN, INT8_MAX)]
Int16: TypeAlias = Annotated[int, Range(INT16_MIN, INT16_MAX)]
Int32: TypeAlias = Annotated[int, Range(INT32_MIN, INT32_MAX)]
Int64: TypeAlias = Annotated[int, Range(INT64_MIN, INT64_MAX)]

ErrorCode16: TypeAlias = Int16
"""A Kafka error code as an int16, unknown numbers passed through (a newer peer's)."""
KnownErrorCode: TypeAlias = Annotated[int, KnownCode]
"""A Kafka error code this build knows: what a group member acts on by name."""
Index32: TypeAlias = Annotated[int, Range(0, INT32_MAX)]
"""A partition index or a broker id: an int32 that is never negative."""
Epoch32: TypeAlias = Annotated[int, Range(-1, INT32_MAX)]
"""An int32 epoch, -1 when none is known."""
NodeId32: TypeAlias = Annotated[int, Range(-1, INT32_MAX)]
"""An int32 node id, -1 for none."""
