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
    position: int
    encode: Encoder
    read: Reader
    sparse_default: object  # Sparse: the default it is omitted at; else _NO_DEFAULT


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    cls: type
    fields: tuple[_FieldPlan, ...]
    by_position: bool  # a NamedTuple: encoded by index, so plain tuples of its shape encode too

    def encode(self, value: Any) -> dict[str, object]:
        body: dict[str, object] = {}
        for plan in self.fields:
            item = value[plan.position] if self.by_position else getattr(value, plan.name)
            if plan.sparse_default is not _NO_DEFAULT and item == plan.sparse_default:
                continue
            body[plan.name] = plan.encode(item)
        return body

    def decode(self, f: Fields) -> Any:
        return self.cls(**{plan.name: plan.read(f) for plan in self.fields})


_PLANS: dict[type, _Plan] = {}


def _plan(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _make_plan(cls)
    return plan


def _field_defaults(cls: type) -> dict[str, object]:
    """Each field's default as a value (a factory called), for the fields that have one."""
    if dataclasses.is_dataclass(cls):
        defaults: dict[str, object] = {}
        for item in dataclasses.fields(cls):
            if item.default is not dataclasses.MISSING:
                defaults[item.name] = item.default
            elif item.default_factory is not dataclasses.MISSING:
                defaults[item.name] = item.default_factory()
        return defaults
    return dict(cls._field_defaults)  # type: ignore[attr-defined]


def _make_plan(cls: type) -> _Plan:
    hints = _FOREIGN_HINTS.get(cls) or get_type_hints(cls, include_extras=True)
    names = ([item.name for item in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls)
             else list(cls._fields))  # type: ignore[attr-defined]
    defaults = _field_defaults(cls)
    plans = []
    for position, name in enumerate(names):
        shape = _shape(hints[name])
        if shape.flagged(Local):
            continue
        default = defaults.get(name, _NO_DEFAULT)
        absent = shape.marker(Absent)
        if absent is not None:
            default = absent.value
        sparse = shape.flagged(Sparse)
        plans.append(_FieldPlan(name, position, _encoder(shape),
                                _reader(name, shape, default, sparse),
                                default if sparse else _NO_DEFAULT))
    return _Plan(cls, tuple(plans), not dataclasses.is_dataclass(cls))


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
    read = _plain_reader(name, shape, nullable=shape.optional and not sparse)
    code = shape.marker(Code)
    if code is not None:
        inner_code = read
        read = lambda f: inner_code(f.recode(code.code))  # noqa: E731
    check = shape.marker(Check)
    if check is not None:
        read = _checked(name, read, check)
    if default is _NO_DEFAULT or (shape.optional and not sparse):
        return read
    inner = read
    return lambda f: inner(f) if f.has(name) else default


def _checked(name: str, read: Reader, check: Check) -> Reader:
    predicate: Callable[[object], bool] = check.predicate  # type: ignore[assignment]

    def checked(f: Fields) -> object:
        value = read(f)
        if not predicate(value):
            raise f.fail(f"{name} {check.sentence}")
        return value

    return checked


def _plain_reader(name: str, shape: _Shape, *, nullable: bool) -> Reader:
    base, origin = shape.base, get_origin(shape.base)
    low, high = shape.bounds()
    if base is bool:
        return lambda f: f.boolean(name)
    if base is int:
        if shape.flagged(KnownCode):
            return lambda f: f.error_code(name)
        if nullable:
            return lambda f: f.optional_integer(name, low=low, high=high)
        return lambda f: f.integer(name, low=low, high=high)
    if base is str:
        return (lambda f: f.optional_text(name)) if nullable else (lambda f: f.text(name))
    if base is bytes:
        return lambda f: f.data(name)
    if _is_record(base):
        return _record_reader(name, base, nullable=nullable)
    if origin is frozenset:
        return lambda f: frozenset(f.texts(name))
    if origin is Mapping:
        return _mapping_reader(name, shape)
    assert origin is tuple, f"{name}: no JSON form for {base}"
    args = get_args(base)
    if len(args) != 2 or args[1] is not Ellipsis:
        return _fixed_tuple_reader(name, shape, len(args))
    element = _shape(args[0])
    if element.base is str:
        return (lambda f: f.optional_texts(name)) if nullable else (lambda f: f.texts(name))
    if element.base is int:
        low, high = element.bounds()
        if nullable:
            return lambda f: f.optional_integers(name, low=low, high=high)
        return lambda f: f.integers(name, low=low, high=high)
    if get_origin(element.base) is tuple:
        low, high = _shape(get_args(element.base)[0]).bounds()
        return lambda f: f.integer_lists(name, low=low, high=high)
    return _record_list_reader(name, element.base, nullable=nullable)


def _record_reader(name: str, cls: type, *, nullable: bool) -> Reader:
    assert not nullable, f"{name}: a single record is never null"
    decode = _plan(cls).decode
    return lambda f: decode(f.nested(name))


def _record_list_reader(name: str, cls: type, *, nullable: bool) -> Reader:
    decode = _plan(cls).decode
    if nullable:
        return lambda f: f.optional_nested_list(name, decode)
    return lambda f: f.nested_list(name, decode)


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
