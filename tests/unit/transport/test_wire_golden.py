"""Every JSON message keeps its bytes: what this build writes is what earlier builds wrote,
and what they wrote decodes to the same value. So brokers of two versions understand each
other mid-upgrade, and a metadata log (commands, results) written before still replays.

`wire_golden.json` holds each sample of wire_samples.py as an earlier build encoded it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.transport.wire_samples import (
    LEGACY_CREATE_TOPIC,
    LEGACY_CREATE_TOPIC_DECODED,
    Kind,
    samples,
)
from zlog.broker import worker_protocol
from zlog.broker.control.metadata import commands as metadata_commands
from zlog.transport.codec import (
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from zlog.transport.messages import REQUEST_TYPES, RESPONSE_TYPES
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
from zlog.transport.messages.groups import OffsetCommitRequestV0, OffsetCommitResponseV0

GOLDEN: dict[str, str] = json.loads(
    (Path(__file__).with_name("wire_golden.json")).read_text(encoding="utf-8"))
SAMPLES = samples()


def encode(kind: Kind, value: object) -> bytes:
    if kind == "request":
        return bytes(encode_request(0, value)[1])  # type: ignore[arg-type]
    if kind == "response":
        header = RequestHeader(value.API_KEY, value.API_VERSION, 0)  # type: ignore[attr-defined]
        return bytes(encode_response(header, value)[1])  # type: ignore[arg-type]
    if kind == "worker":
        return worker_protocol.encode(value)  # type: ignore[arg-type]
    if kind == "command":
        return metadata_commands.encode_command(value)  # type: ignore[arg-type]
    return metadata_commands.encode_result(value)  # type: ignore[arg-type]


def decode(kind: Kind, like: object, body: bytes) -> object:
    if kind == "request":
        header = encode_request(0, like)[0]  # type: ignore[arg-type]
        return decode_request([header, body])[1]
    if kind == "response":
        api = (like.API_KEY, like.API_VERSION, 0)  # type: ignore[attr-defined]
        header = encode_response(RequestHeader(*api), like)[0]  # type: ignore[arg-type]
        return decode_response([header, body])[1]
    if kind == "worker":
        if type(like) in worker_protocol.TO_WORKER.values():
            return worker_protocol.decode_to_worker(body)
        return worker_protocol.decode_from_worker(body)
    if kind == "command":
        return metadata_commands.decode_command(body)
    return metadata_commands.decode_result(type(like), body)  # type: ignore[arg-type]


def test_every_sample_has_its_golden_bytes() -> None:
    assert sorted(SAMPLES) == sorted(GOLDEN)


def test_every_json_message_has_a_sample() -> None:
    """A new message (or a new command) gets its sample and golden bytes here too."""
    struct_bodies = {ProduceRequestV0, ProduceResponseV0, FetchRequestV0, FetchResponseV0,
                     FetchRequestV1, FetchResponseV1, FetchRequestV2, FetchResponseV2,
                     OffsetCommitRequestV0,
                     OffsetCommitResponseV0}
    json_classes = {*REQUEST_TYPES.values(), *RESPONSE_TYPES.values(),
                    *worker_protocol.TO_WORKER.values(), *worker_protocol.FROM_WORKER.values(),
                    *metadata_commands.COMMANDS.values(),
                    *(command.RESULT for command in metadata_commands.COMMANDS.values())}
    assert json_classes - struct_bodies == {type(value) for _, value in SAMPLES.values()}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_message_encodes_to_the_bytes_an_earlier_build_wrote(name: str) -> None:
    kind, value = SAMPLES[name]
    assert encode(kind, value) == GOLDEN[name].encode("utf-8")


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_bytes_an_earlier_build_wrote_decode_to_the_same_message(name: str) -> None:
    kind, value = SAMPLES[name]
    assert decode(kind, value, GOLDEN[name].encode("utf-8")) == value


def test_a_create_topic_of_the_earliest_form_still_decodes() -> None:
    assert metadata_commands.decode_command(LEGACY_CREATE_TOPIC) == LEGACY_CREATE_TOPIC_DECODED


def test_a_config_change_writes_its_deletions_sorted_so_equal_changes_are_equal_bytes() -> None:
    kind, value = SAMPLES["AlterTopicConfigs"]
    assert isinstance(value, metadata_commands.AlterTopicConfigs)
    for names in (("cleanup.policy", "segment.bytes"), ("segment.bytes", "cleanup.policy")):
        change = metadata_commands.AlterTopicConfigs(value.name, value.set, frozenset(names))
        assert encode(kind, change) == GOLDEN["AlterTopicConfigs"].encode("utf-8")
