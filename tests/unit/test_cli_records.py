"""Records as `zlog consume` prints them and `zlog produce --json` reads them (docs/cli.md).

Spec: kcat's -f tokens and escapes; --print-key as kafka-console-consumer's print.key; JSON
that carries any bytes without loss or ambiguity (text as strings, other bytes as
{"base64": ...}, null as null), and a tombstone that never prints like an empty value.
"""

from __future__ import annotations

import json

import pytest

from zlog.cli_records import (
    RecordToSend,
    bytes_from_json,
    bytes_to_json,
    format_formatter,
    json_formatter,
    key_value_formatter,
    parse_json_record,
    value_formatter,
)
from zlog.client.records import ConsumerRecord
from zlog.errors import ErrorCode, ZlogError

RECORD = ConsumerRecord("orders", 2, 41, 1_700_000_000_123, b"k1", b"v\xc3\xa9",
                        (("trace", b"abc"), ("empty", None)))
TOMBSTONE = ConsumerRecord("orders", 0, 7, 5, b"k2", None)
EMPTY = ConsumerRecord("orders", 0, 8, 5, None, b"")
NULL_TEXT = ConsumerRecord("orders", 0, 9, 5, None, b"NULL")


def test_every_kcat_token_and_escape() -> None:
    formatter = format_formatter(
        r"%t|%p|%o|%T|%k|%K|%s|%v|%S|%h|%%|\t|\\|\r\n", "NULL")
    assert formatter(RECORD) == (
        b"orders|2|41|1700000000123|k1|2|v\xc3\xa9|v\xc3\xa9|3|trace=abc,empty=NULL|%|\t|\\|\r\n")


def test_a_tombstone_is_told_from_an_empty_value_and_from_the_text_null() -> None:
    lengths = format_formatter(r"%K %S %s\n", "NULL")
    assert [lengths(r) for r in (TOMBSTONE, EMPTY, NULL_TEXT)] == [
        b"2 -1 NULL\n", b"-1 0 \n", b"-1 4 NULL\n"]
    assert value_formatter("<null>")(TOMBSTONE) == b"<null>\n"
    assert value_formatter("<null>")(EMPTY) == b"\n"
    assert key_value_formatter("=", "~")(TOMBSTONE) == b"k2=~\n"
    assert key_value_formatter("\t", "NULL")(EMPTY) == b"NULL\t\n"
    lines = [json.loads(json_formatter()(r)) for r in (TOMBSTONE, EMPTY, NULL_TEXT)]
    assert [(line["key"], line["value"]) for line in lines] == [
        ("k2", None), (None, ""), (None, "NULL")]


@pytest.mark.parametrize(
    ("template", "words"),
    [("%x", "unknown token %x"), ("%", "lone '%'"), ("ab\\", "lone '\\\\'"),
     ("\\q", "unknown escape \\q")],
)
def test_a_bad_format_is_refused_before_any_record(template: str, words: str) -> None:
    with pytest.raises(ZlogError) as caught:
        format_formatter(template, "NULL")
    assert caught.value.code == ErrorCode.INVALID_CONFIG
    assert words in caught.value.message


def test_json_output_names_every_field_and_marks_bytes_that_are_not_text() -> None:
    binary = ConsumerRecord("t", 0, 1, 2, b"\xff\x00", b"\x80", (("h", b"\xfe"),))
    assert json.loads(json_formatter()(RECORD)) == {
        "topic": "orders", "partition": 2, "offset": 41, "timestamp_ms": 1_700_000_000_123,
        "key": "k1", "value": "vé", "headers": [{"key": "trace", "value": "abc"},
                                                {"key": "empty", "value": None}]}
    line = json_formatter()(binary)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    document = json.loads(line)
    assert (document["key"], document["value"]) == ({"base64": "/wA="}, {"base64": "gA=="})
    assert document["headers"] == [{"key": "h", "value": {"base64": "/g=="}}]


@pytest.mark.parametrize(
    "data", [None, b"", b"plain", "ünï €".encode(), b"\xff\xfe", b"\x00\n\"", b"/wA=",
             bytes(range(256))],
)
def test_bytes_survive_json_both_ways(data: bytes | None) -> None:
    encoded = json.loads(json.dumps(bytes_to_json(data)))
    assert bytes_from_json(encoded, "value") == data


def test_a_string_that_looks_like_base64_stays_text() -> None:
    assert bytes_to_json(b"/wA=") == "/wA="
    assert bytes_from_json("/wA=", "value") == b"/wA="
    assert bytes_from_json({"base64": "/wA="}, "value") == b"\xff\x00"


def test_a_json_line_becomes_a_record_to_send() -> None:
    consumed = json_formatter()(RECORD)
    assert parse_json_record(consumed, 1) == RecordToSend(
        b"v\xc3\xa9", b"k1", (("trace", b"abc"), ("empty", None)), 2, 1_700_000_000_123)
    assert parse_json_record(b'{"value": null}', 1) == RecordToSend(None)
    assert parse_json_record(b'{"value": "x", "headers": {"a": "1", "b": null}}', 1).headers == (
        ("a", b"1"), ("b", None))


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (b"not json", "line 3 is not JSON: Expecting value at column 1"),
        (b"\xff", "line 3 is not JSON"),
        (b"[1]", "line 3 must be a JSON object, not list"),
        (b'{"key": "k"}', "line 3 has no value (null sends a tombstone)"),
        (b'{"value": "v", "vaule": 1}', "unknown field 'vaule'"),
        (b'{"value": 5}', "line 3: value must be a string, null or"),
        (b'{"value": {"base64": "!!"}}', "line 3: value.base64 is not base64"),
        (b'{"value": {"base64": "AA==", "x": 1}}', "line 3: value must be a string"),
        (b'{"value": "\\ud800"}', "line 3: value is not valid Unicode text"),
        (b'{"value": "v", "partition": -1}', "partition must be an integer of at least 0"),
        (b'{"value": "v", "partition": true}', "partition must be an integer"),
        (b'{"value": "v", "timestamp_ms": "now"}', "timestamp_ms must be an integer"),
        (b'{"value": "v", "headers": [["a", "b"]]}', "headers must be a list of"),
        (b'{"value": "v", "headers": {"a": 1}}', "line 3: header 'a' must be a string"),
    ],
)
def test_a_bad_json_line_is_invalid_record_naming_the_line(line: bytes, words: str) -> None:
    with pytest.raises(ZlogError) as caught:
        parse_json_record(line, 3)
    assert caught.value.code == ErrorCode.INVALID_RECORD
    assert words in caught.value.message
