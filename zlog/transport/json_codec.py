"""One codec for every JSON message: a frozen dataclass <-> one JSON object, read off the
class's annotations (wire_types.py).

A message's fields are declared once, on its class; this module turns them into a plan per
class the first time one is encoded or decoded: per field, how its value becomes JSON and how
`Fields` reads it back (with the field's range, default and rules). Keys are the field names
in declaration order, so the bytes are those the hand-made encoders wrote. A record inside a
message (a dataclass or a NamedTuple) is a nested object; a tuple a list; bytes base64 text; a
frozenset a sorted list. Decoding never lets anything but `ZlogError` escape: every check is
`Fields`', with the caller's code and a sentence naming the field.

The control plane's bodies, the supervisor-worker messages and the metadata log's commands all
go through here; only the data path's bodies (struct_bodies.py, offset_commit_bodies.py) are
written by hand.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import types
from collections.abc import Callable, Mapping
from operator import attrgetter, itemgetter, methodcaller
from typing import Annotated, Any, Final, TypeVar, Union, get_args, get_origin, get_type_hints

from zlog.errors import ErrorCode, ZlogError
from zlog.transport.json_fields import Fields, parse_json_object
from zlog.transport.wire import INT64_MAX, INT64_MIN
from zlog.transport.wire_types import (
    Absent,
    AtLeast,
    Check,
    Code,
    Index32,
    KnownCode,
    Local,
    Range,
    Sentence,
    Sparse,
)
from zlog.types import TopicPartition

T = TypeVar("T")
Encoder = Callable[[Any], object]
Reader = Callable[[Fields], object]

_NO_DEFAULT: Final = object()

# Records defined outside the transport, with the wire shape their fields take.
_FOREIGN_HINTS: Final[Mapping[type, Mapping[str, object]]] = {
    TopicPartition: {"topic": str, "partition": Index32},
}


@dataclasses.dataclass(frozen=True, slots=True)
class _Shape:
    """A type with its Annotated markers taken off and sorted out."""

    base: Any
    markers: tuple[object, ...]
    optional: bool  # `X | None`

    def marker(self, kind: type[T]) -> T | None:
        return next((m for m in reversed(self.markers) if isinstance(m, kind)), None)

    def flagged(self, flag: object) -> bool:
        return any(m is flag for m in self.markers)

    def bounds(self) -> tuple[int, int]:
        low, high = INT64_MIN, INT64_MAX
        for m in self.markers:
            if isinstance(m, Range):
                low, high = m.low, m.high
            elif isinstance(m, AtLeast):
                low = m.low
        return low, high


def _shape(hint: Any) -> _Shape:
    markers: tuple[object, ...] = ()
    if get_origin(hint) is Annotated:
        markers = tuple(hint.__metadata__)
        hint = get_args(hint)[0]
    optional = False
    if get_origin(hint) in (Union, types.UnionType):
        members = [arg for arg in get_args(hint) if arg is not type(None)]
        assert len(members) == 1, f"{hint} is not `X | None`"
        optional = True
        inner = _shape(members[0])
        return _Shape(inner.base, markers + inner.markers, optional)
    return _Shape(hint, markers, optional)


def _is_record(cls: Any) -> bool:
    return isinstance(cls, type) and (
        dataclasses.is_dataclass(cls) or (issubclass(cls, tuple) and hasattr(cls, "_fields")))


# ---------------------------------------------------------------------------------------------
# Plans: per class, each field's encoder and reader.
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    get: Callable[[Any], object]  # the value from a message (by index for a NamedTuple, so
    # that a plain tuple of its shape encodes too)
    encode: Encoder | None  # None: the value is its JSON form already
    read: Reader
    sparse_default: object  # Sparse: the default it is omitted at; else _NO_DEFAULT


class _Plan:
    """One class's fields, ready to encode and decode: built once, used for every message."""

    __slots__ = ("_cls", "_encoding", "_every_field", "_names", "_readers")

    def __init__(self, cls: type, fields: list[_FieldPlan], every_field: bool) -> None:
        self._cls = cls
        self._encoding = tuple((p.name, p.get, p.encode, p.sparse_default) for p in fields)
        self._readers = tuple(p.read for p in fields)
        self._names = tuple(p.name for p in fields)
        self._every_field = every_field  # no Local field: decoded values are the arguments

    def encode(self, value: Any) -> dict[str, object]:
        body: dict[str, object] = {}
        for name, get, encode, sparse_default in self._encoding:
            item = get(value)
            if sparse_default is not _NO_DEFAULT and item == sparse_default:
                continue
            body[name] = item if encode is None else encode(item)
        return body

    def decode(self, f: Fields) -> Any:
        values = [read(f) for read in self._readers]
        if self._every_field:
            return self._cls(*values)
        return self._cls(**dict(zip(self._names, values, strict=True)))


_PLANS: dict[type, _Plan] = {}


def _plan(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _make_plan(cls)
    return plan


@dataclasses.dataclass(frozen=True, slots=True)
class _Factory:
    """A default made anew for each message (a dict, say), never one object shared by all."""

    make: Callable[[], object]


def _field_defaults(cls: type) -> dict[str, object]:
    """Each field's default, for the fields that have one."""
    if dataclasses.is_dataclass(cls):
        defaults: dict[str, object] = {}
        for item in dataclasses.fields(cls):
            if item.default is not dataclasses.MISSING:
                defaults[item.name] = item.default
            elif item.default_factory is not dataclasses.MISSING:
                defaults[item.name] = _Factory(item.default_factory)
        return defaults
    return dict(cls._field_defaults)  # type: ignore[attr-defined]


def _make_plan(cls: type) -> _Plan:
    hints = _FOREIGN_HINTS.get(cls) or get_type_hints(cls, include_extras=True)
    names = ([item.name for item in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls)
             else list(cls._fields))  # type: ignore[attr-defined]
    defaults = _field_defaults(cls)
    by_position = not dataclasses.is_dataclass(cls)
    plans = []
    every_field = True
    for position, name in enumerate(names):
        shape = _shape(hints[name])
        if shape.flagged(Local):
            every_field = False
            continue
        default = defaults.get(name, _NO_DEFAULT)
        absent = shape.marker(Absent)
        if absent is not None:
            default = absent.value
        sparse = shape.flagged(Sparse)
        assert not (sparse and isinstance(default, _Factory)), f"{name}: sparse with a factory"
        get = itemgetter(position) if by_position else attrgetter(name)
        encode = _encoder(shape)
        plans.append(_FieldPlan(name, get, None if encode is _identity else encode,
                                _reader(name, shape, default, sparse),
                                default if sparse else _NO_DEFAULT))
    return _Plan(cls, plans, every_field)


def _identity(value: object) -> object:
    return value


def _encoder(shape: _Shape) -> Encoder:
    plain = _plain_encoder(shape.base)
    if not shape.optional or plain is _identity:
        return plain
    return lambda value: None if value is None else plain(value)


def _plain_encoder(base: Any) -> Encoder:
    origin = get_origin(base)
    if base is bytes:
        return lambda value: base64.b64encode(value).decode("ascii")
    if _is_record(base):
        return _plan(base).encode
    if origin is tuple:
        element = _encoder(_shape(get_args(base)[0]))
        if element is _identity:
            return list
        return lambda value: [element(item) for item in value]
    if origin is frozenset:
        return sorted
    if origin is Mapping:
        return lambda value: {str(key): item for key, item in value.items()}
    return _identity


# ---------------------------------------------------------------------------------------------
# Readers: Fields -> value, each check with the caller's code.
# ---------------------------------------------------------------------------------------------


def _reader(name: str, shape: _Shape, default: object, sparse: bool) -> Reader:
    nullable = shape.optional and not sparse
    code, check = shape.marker(Code), shape.marker(Check)
    plain_default = _NO_DEFAULT if nullable or check is not None else default
    read, took_default = _plain_reader(name, shape, nullable=nullable, default=plain_default)
    if code is not None:
        inner_code = read
        read = lambda f: inner_code(f.recode(code.code))  # noqa: E731
    if check is not None:
        read = _checked(name, read, check)
    if default is _NO_DEFAULT or nullable or took_default:
        return read  # required, or absent already reads as null or as the default
    inner = read
    if isinstance(default, _Factory):
        make = default.make
        return lambda f: inner(f) if f.has(name) else make()
    return lambda f: inner(f) if f.has(name) else default


def _checked(name: str, read: Reader, check: Check) -> Reader:
    predicate: Callable[[object], bool] = check.predicate  # type: ignore[assignment]

    def checked(f: Fields) -> object:
        value = read(f)
        if not predicate(value):
            raise f.fail(f"{name} {check.sentence}")
        return value

    return checked


def _plain_reader(name: str, shape: _Shape, *, nullable: bool, default: object,
                  ) -> tuple[Reader, bool]:
    """The Fields call that reads the field, and whether that call reads an absent field as
    `default` (else `_reader` wraps it)."""
    base, origin = shape.base, get_origin(shape.base)
    low, high = shape.bounds()
    # Fields checks a default's type as a value's: only one of the field's type goes to it.
    scalar = base in (bool, int, str, bytes)
    given = {"default": default} if scalar and isinstance(default, base) else {}
    takes = bool(given)
    if base is bool:
        return methodcaller("boolean", name, **given), takes
    if base is int:
        if shape.flagged(KnownCode):
            return methodcaller("error_code", name, **given), takes
        if nullable:
            return methodcaller("optional_integer", name, low=low, high=high), False
        return methodcaller("integer", name, low=low, high=high, **given), takes
    if base is str:
        if nullable:
            return methodcaller("optional_text", name), False
        return methodcaller("text", name, **given), takes
    if base is bytes:
        return methodcaller("data", name, **given), takes
    if _is_record(base):
        return _record_reader(name, base, nullable=nullable), False
    if origin is frozenset:
        return (lambda f: frozenset(f.texts(name))), False
    if origin is Mapping:
        return _mapping_reader(name, shape), False
    assert origin is tuple, f"{name}: no JSON form for {base}"
    return _tuple_reader(name, shape, nullable=nullable, default=default)


def _tuple_reader(name: str, shape: _Shape, *, nullable: bool, default: object,
                  ) -> tuple[Reader, bool]:
    args = get_args(shape.base)
    if len(args) != 2 or args[1] is not Ellipsis:
        return _fixed_tuple_reader(name, shape, len(args)), False
    element = _shape(args[0])
    if element.base is str:
        return methodcaller("optional_texts" if nullable else "texts", name), False
    if element.base is int:
        low, high = element.bounds()
        kind = "optional_integers" if nullable else "integers"
        return methodcaller(kind, name, low=low, high=high), False
    if get_origin(element.base) is tuple:
        low, high = _shape(get_args(element.base)[0]).bounds()
        return methodcaller("integer_lists", name, low=low, high=high), False
    decode = _plan(element.base).decode
    if nullable:
        return methodcaller("optional_nested_list", name, decode), False
    if default == ():
        return methodcaller("nested_list", name, decode, default=[]), True
    return methodcaller("nested_list", name, decode), False


def _record_reader(name: str, cls: type, *, nullable: bool) -> Reader:
    assert not nullable, f"{name}: a single record is never null"
    decode = _plan(cls).decode
    return lambda f: decode(f.nested(name))


def _fixed_tuple_reader(name: str, shape: _Shape, length: int) -> Reader:
    sentence = shape.marker(Sentence)
    low, high = _shape(get_args(shape.base)[0]).bounds()

    def read(f: Fields) -> tuple[int, ...]:
        items = f.integers(name, low=low, high=high)
        if len(items) != length:
            what = sentence.text if sentence else f"{{field}} must hold {length} items"
            raise f.fail(what.format(field=name))
        return items

    return read


def _mapping_reader(name: str, shape: _Shape) -> Reader:
    key_type, value_hint = get_args(shape.base)
    value_shape = _shape(value_hint)
    if key_type is str and value_shape.base is str:
        return lambda f: f.text_map(name)
    assert value_shape.base is int, f"{name}: no JSON form for {shape.base}"
    low, high = value_shape.bounds()
    sentence = shape.marker(Sentence)

    def read(f: Fields) -> dict[object, int]:
        mapping: dict[object, int] = {}
        for key, value in f.text_map_any(name).items():
            if (not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high
                    or (key_type is int and not key.isdigit())):
                what = sentence.text if sentence else "{field}[{key!r}] must be an integer"
                raise f.fail(what.format(field=name, key=key))
            mapping[int(key) if key_type is int else key] = value
        return mapping

    return read


# ---------------------------------------------------------------------------------------------
# The interface.
# ---------------------------------------------------------------------------------------------


def to_json(value: object) -> dict[str, object]:
    """The JSON-ready dict of a message (a dataclass of the shapes above)."""
    return _plan(type(value)).encode(value)


def from_fields(cls: type[T], f: Fields) -> T:
    """A message of `cls` read from `f`. A class with a rule beyond its fields' shapes (an
    older form to read, a check across fields) says so in its own `from_fields` classmethod,
    which is used instead (and may call `from_annotations` for the shapes)."""
    custom = cls.__dict__.get("from_fields")
    if custom is not None:
        return custom.__get__(None, cls)(f)  # type: ignore[no-any-return]
    return from_annotations(cls, f)


def from_annotations(cls: type[T], f: Fields) -> T:
    """A message of `cls` read from `f` by its fields' annotations alone."""
    return _plan(cls).decode(f)  # type: ignore[no-any-return]


def encode_json_body(msg: object) -> bytes:
    """A request or response body: compact UTF-8 JSON, in field order. NaN and infinities are
    refused since JSON has no such numbers."""
    try:
        return json.dumps(to_json(msg), separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False).encode("utf-8")
    except (ValueError, TypeError) as error:
        raise ZlogError(ErrorCode.INVALID_REQUEST, f"unencodable message: {error}") from None


def decode_json_body(cls: type[T], body: memoryview, code: ErrorCode) -> T:
    """Parse `body` as the JSON form of `cls`; `code` for anything malformed."""
    return from_fields(cls, parse_json_object(body, code, cls.__name__))
