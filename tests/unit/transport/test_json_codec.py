"""The JSON codec's rules, on small classes of their own: a message is its annotated fields,
in order, and a reader refuses what they do not allow with the reader's code and a sentence
naming the field (json_codec.py, wire_types.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, NamedTuple

import pytest

from zlog.errors import ErrorCode, ZlogError
from zlog.transport.json_codec import (
    decode_json_body,
    encode_json_body,
    from_annotations,
    from_fields,
    to_json,
)
from zlog.transport.json_fields import Fields
from zlog.transport.wire_types import (
    Absent,
    Check,
    Code,
    Int16,
    KnownErrorCode,
    Local,
    Range,
    Sentence,
    Sparse,
)
from zlog.types import TopicPartition


class Pair(NamedTuple):
    name: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Item:
    n: Int16
    tag: str = ""


@dataclass(frozen=True, slots=True)
class Message:
    count: Int16
    label: Annotated[str, Absent("none")]
    items: tuple[Item, ...]
    pairs: tuple[Pair, ...] = ()
    states: frozenset[str] = field(default_factory=frozenset)
    epochs: Annotated[Mapping[int, int], Sentence("{field} maps ids to epochs")] = field(
        default_factory=dict)
    owned: tuple[TopicPartition, ...] | None = None
    ids: tuple[Annotated[int, Range(0, 9)], ...] = ()


@dataclass(frozen=True, slots=True)
class Command:
    name: Annotated[str, Check(bool, "must be a non-empty string")]
    fenced: Annotated[bool | None, Sparse] = None
    configs: Annotated[Mapping[str, str], Code(ErrorCode.INVALID_CONFIG)] = field(
        default_factory=dict)
    handle: Annotated[int, Local] = 0


@dataclass(frozen=True, slots=True)
class Answer:
    error_code: KnownErrorCode


def decode(cls: type[object], body: object, code: ErrorCode = ErrorCode.INVALID_REQUEST,
           ) -> object:
    return decode_json_body(cls, memoryview(json.dumps(body).encode()), code)


def refusal(cls: type[object], body: object) -> ZlogError:
    with pytest.raises(ZlogError) as refused:
        decode(cls, body)
    return refused.value


FULL = Message(3, "x", (Item(1, "a"), Item(-2)), (Pair("p", b"\x00\xff"),),
               frozenset({"b", "a"}), {7: 1}, (TopicPartition("t", 2),), (0, 9))


def test_a_message_travels_as_its_fields_in_declaration_order() -> None:
    assert encode_json_body(FULL) == (
        b'{"count":3,"label":"x","items":[{"n":1,"tag":"a"},{"n":-2,"tag":""}],'
        b'"pairs":[{"name":"p","data":"AP8="}],"states":["a","b"],"epochs":{"7":1},'
        b'"owned":[{"topic":"t","partition":2}],"ids":[0,9]}')
    assert decode(Message, to_json(FULL)) == FULL


def test_a_named_tuple_field_takes_plain_tuples_of_its_shape() -> None:
    plain = Message(1, "x", (), (("p", b"\x01"),))  # type: ignore[arg-type]
    assert decode(Message, to_json(plain)) == plain


def test_a_field_with_a_default_may_be_absent_and_one_without_may_not() -> None:
    assert decode(Message, {"count": 1, "items": []}) == Message(1, "none", ())
    assert refusal(Message, {"label": "x", "items": []}).message == "Message.count is required"


@pytest.mark.parametrize(("body", "sentence"), [
    ({"count": 2**15, "items": []}, "Message.count must be an integer in -32768..32767"),
    ({"count": True, "items": []}, "Message.count must be an integer in -32768..32767"),
    ({"count": 1, "items": [{"n": 1}, {"n": "2"}]},
     "Message.items[1].n must be an integer in -32768..32767"),
    ({"count": 1, "items": [], "ids": [10]}, "Message.ids must be a list of integers in 0..9"),
    ({"count": 1, "items": [], "pairs": [{"name": "p", "data": "!"}]},
     "Message.pairs[0].data must be base64 text"),
    ({"count": 1, "items": [], "epochs": {"x": 1}}, "Message: epochs maps ids to epochs"),
    ({"count": 1, "items": [], "owned": [{"topic": "t", "partition": -1}]},
     "Message.owned[0].partition must be an integer in 0..2147483647"),
])
def test_a_value_its_field_does_not_allow_is_the_readers_code_naming_the_field(
        body: object, sentence: str) -> None:
    error = refusal(Message, body)
    assert (error.code, error.message) == (ErrorCode.INVALID_REQUEST, sentence)


def test_a_sparse_field_is_written_only_when_set_and_a_local_one_never() -> None:
    assert to_json(Command("t", handle=5)) == {"name": "t", "configs": {}}
    assert to_json(Command("t", fenced=False)) == {"name": "t", "fenced": False, "configs": {}}
    assert decode(Command, {"name": "t", "handle": 5}) == Command("t")
    assert refusal(Command, {"name": "t", "fenced": None}).message == (
        "Command.fenced must be true or false")


def test_checks_and_codes_of_a_field_are_its_own() -> None:
    assert refusal(Command, {"name": ""}).message == "Command: name must be a non-empty string"
    wrong_config = refusal(Command, {"name": "t", "configs": {"a": 1}})
    assert wrong_config.code == ErrorCode.INVALID_CONFIG


def test_a_known_error_code_refuses_a_number_this_build_does_not_know() -> None:
    assert decode(Answer, {"error_code": 25}) == Answer(ErrorCode.UNKNOWN_MEMBER_ID)
    error = refusal(Answer, {"error_code": 31_999})
    assert error.message == "Answer.error_code must be a known error code"


@dataclass(frozen=True, slots=True)
class Growth:
    added: tuple[Item, ...]

    @classmethod
    def from_fields(cls, f: Fields) -> Growth:
        grown = from_annotations(cls, f)
        if not grown.added:
            raise ZlogError(ErrorCode.INVALID_PARTITIONS, "nothing to add")
        return grown


def test_a_class_with_a_rule_beyond_its_fields_keeps_its_own_reader() -> None:
    fields = Fields({"added": []}, ErrorCode.INVALID_REQUEST, "growth")
    with pytest.raises(ZlogError) as refused:
        from_fields(Growth, fields)
    assert refused.value.code == ErrorCode.INVALID_PARTITIONS


def test_a_default_made_by_a_factory_is_each_messages_own() -> None:
    first = decode(Message, {"count": 1, "items": []})
    second = decode(Message, {"count": 2, "items": []})
    assert isinstance(first, Message) and isinstance(second, Message)
    assert first.epochs == {} and first.epochs is not second.epochs
