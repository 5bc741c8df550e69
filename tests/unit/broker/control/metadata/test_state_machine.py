"""The metadata state machine: deterministic apply, error results, snapshot/restore.

Spec: zlog.raft.fsm.StateMachine (docs/raft.md §4.8 Apply and §4.10 Snapshot): the same
commands in the same order give the same state and results on every node; a bad command is an
error result, never an exception; a snapshot restores exactly the state it was taken from.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from zlog.broker.control.metadata import state as metadata_state
from zlog.broker.control.metadata.commands import (
    AddPartitions,
    AllocateProducerIds,
    AlterTopicConfigs,
    CreateTopic,
    DeleteTopic,
    ProducerIdsAllocated,
    RegisterBroker,
    SetPartitionState,
    TopicCreated,
    TopicDeleted,
    decode_result,
    encode_command,
)
from zlog.broker.control.metadata.state_machine import MetadataStateMachine
from zlog.broker.control.placement import place_replicas
from zlog.errors import ErrorCode, ZlogError


def _assignment(partitions: int, factor: int = 1, brokers: tuple[int, ...] = (1,)) -> list[
    tuple[int, ...]
]:
    return [p.replicas for p in place_replicas(partitions, factor, list(brokers), 0)]


def _create(name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> bytes:
    return encode_command(CreateTopic(name, partitions, 1, configs or {}, _assignment(partitions)))


def _apply(fsm: MetadataStateMachine, command: bytes) -> dict[str, Any]:
    result = json.loads(fsm.apply(command))
    assert isinstance(result, dict)
    return result


def _registered() -> MetadataStateMachine:
    fsm = MetadataStateMachine()
    assert _apply(fsm, encode_command(RegisterBroker(1, "h1", "tcp://h1:7400", "cluster-a")))[
        "error_code"] == 0
    return fsm


def test_first_registration_sets_the_cluster_id_later_ones_keep_it() -> None:
    fsm = _registered()
    again = _apply(fsm, encode_command(RegisterBroker(1, "h1b", "tcp://h1b:7400", "cluster-b")))
    assert again == {"error_code": 0, "error_message": "", "cluster_id": "cluster-a",
                     "broker_epoch": 1}
    assert fsm.state.brokers[1].host == "h1b"
    no_id = MetadataStateMachine()
    result = _apply(no_id, encode_command(RegisterBroker(1, "h", "tcp://h:1")))
    assert result["error_code"] == ErrorCode.INVALID_REQUEST


def test_create_topic_records_leader_epoch_replicas_and_isr() -> None:
    fsm = _registered()
    result = _apply(fsm, _create("orders", 3, {"retention.ms": "1000"}))
    assert result == {"error_code": 0, "error_message": "", "topic_seq": 0}
    topic = fsm.state.topics["orders"]
    assert topic.configs == {"retention.ms": "1000"}
    assert [(p.partition, p.leader, p.leader_epoch, p.replicas, p.isr) for p in topic.partitions] \
        == [(index, 1, 0, (1,), (1,)) for index in range(3)]


def test_create_existing_topic_is_topic_already_exists() -> None:
    fsm = _registered()
    _apply(fsm, _create("orders"))
    before = fsm.state
    result = _apply(fsm, _create("orders", 2))
    assert result["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS
    assert fsm.state.topics == before.topics  # nothing changed but the command count


@pytest.mark.parametrize(
    ("command", "code"),
    [
        (b"not json", ErrorCode.INVALID_REQUEST),
        (b"[1, 2]", ErrorCode.INVALID_REQUEST),
        (b'{"type": "Explode"}', ErrorCode.INVALID_REQUEST),
        (b'{"type": ["CreateTopic"]}', ErrorCode.INVALID_REQUEST),
        (b"\xff\xfe", ErrorCode.INVALID_REQUEST),
        (b"[" * 100_000, ErrorCode.INVALID_REQUEST),
        (encode_command(CreateTopic("a/b", 1, 1, {}, _assignment(1))),
         ErrorCode.INVALID_TOPIC_EXCEPTION),
        (encode_command(CreateTopic("t", 2, 1, {}, _assignment(1))),
         ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (encode_command(CreateTopic("t", 1, 1, {}, _assignment(1, 1, (7,)))),
         ErrorCode.BROKER_ID_NOT_REGISTERED),
        (encode_command(CreateTopic("t", 1, 1, {"a": 1}, _assignment(1))),  # type: ignore[dict-item]
         ErrorCode.INVALID_CONFIG),
        (encode_command(DeleteTopic("missing")), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (encode_command(TopicDeleted("missing")), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (encode_command(AllocateProducerIds(0)), ErrorCode.INVALID_REQUEST),
        (encode_command(AllocateProducerIds(10**7)), ErrorCode.INVALID_REQUEST),
        (encode_command(SetPartitionState("missing", 0, 1, 1, [1])),
         ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ],
)
def test_bad_commands_become_error_results(command: bytes, code: ErrorCode) -> None:
    fsm = _registered()
    before = fsm.state
    result = _apply(fsm, command)
    assert result["error_code"] == code
    assert result["error_message"]
    assert fsm.state.topics == before.topics
    assert fsm.state.applied_commands == before.applied_commands + 1


def test_delete_then_topic_deleted_frees_the_name() -> None:
    fsm = _registered()
    _apply(fsm, _create("t", 2))
    assert _apply(fsm, encode_command(DeleteTopic("t")))["error_code"] == 0
    assert "t" not in fsm.state.topics
    assert fsm.state.deleting == {"t": 2}
    refused = _apply(fsm, _create("t"))
    assert refused["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS
    assert "marked for deletion" in refused["error_message"]
    assert _apply(fsm, encode_command(TopicDeleted("t")))["error_code"] == 0
    assert fsm.state.deleting == {}
    assert _apply(fsm, _create("t"))["topic_seq"] == 1


def test_producer_ids_come_in_disjoint_blocks() -> None:
    fsm = _registered()
    first = _apply(fsm, encode_command(AllocateProducerIds(1000)))
    second = _apply(fsm, encode_command(AllocateProducerIds(5)))
    assert (first["first_id"], second["first_id"]) == (0, 1000)
    assert fsm.state.next_producer_id == 1005


def test_create_topic_commands_of_earlier_versions_still_apply() -> None:
    """Raft logs written before the compact form carry a full assignment per partition."""
    fsm = _registered()
    _apply(fsm, encode_command(RegisterBroker(2, "h2", "tcp://h2:7400")))
    old_form = json.dumps({
        "type": "CreateTopic", "name": "old", "partitions": 2, "replication_factor": 2,
        "configs": {}, "assignment": [
            {"partition": 0, "replicas": [1, 2], "leader": 1, "leader_epoch": 0, "isr": [1, 2]},
            {"partition": 1, "replicas": [2, 1], "leader": 2, "leader_epoch": 0, "isr": [2, 1]},
        ]}).encode()
    assert _apply(fsm, old_form)["error_code"] == 0
    new_form = encode_command(CreateTopic("new", 2, 2, {}, [(1, 2), (2, 1)]))
    assert _apply(fsm, new_form)["error_code"] == 0
    old, new = fsm.state.topics["old"], fsm.state.topics["new"]
    assert [(p.replicas, p.leader, p.isr) for p in old.partitions] == [
        (p.replicas, p.leader, p.isr) for p in new.partitions]


def test_set_partition_state_fences_old_epochs() -> None:
    fsm = _registered()
    _apply(fsm, encode_command(RegisterBroker(2, "h2", "tcp://h2:7400")))
    _apply(fsm, encode_command(CreateTopic("t", 1, 2, {}, _assignment(1, 2, (1, 2)))))
    shrink = _apply(fsm, encode_command(SetPartitionState("t", 0, 1, 0, [1])))
    assert shrink == {"error_code": 0, "error_message": "", "partition_epoch": 1}
    moved = _apply(fsm, encode_command(SetPartitionState("t", 0, 2, 0, [2])))
    assert moved["error_code"] == ErrorCode.INVALID_REQUEST  # new leader, same epoch
    assert _apply(fsm, encode_command(SetPartitionState("t", 0, 2, 1, [1, 2])))["error_code"] == 0
    stale = _apply(fsm, encode_command(SetPartitionState("t", 0, 1, 0, [1])))
    assert stale["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
    outside = _apply(fsm, encode_command(SetPartitionState("t", 0, 2, 2, [2, 9])))
    assert outside["error_code"] == ErrorCode.INVALID_REQUEST
    not_in_isr = _apply(fsm, encode_command(SetPartitionState("t", 0, 2, 2, [1])))
    assert not_in_isr["error_code"] == ErrorCode.INVALID_REQUEST
    partition = fsm.state.topics["t"].partitions[0]
    assert (partition.leader, partition.leader_epoch, partition.isr) == (2, 1, (1, 2))


def test_alter_topic_configs_sets_and_deletes_overrides() -> None:
    fsm = _registered()
    _apply(fsm, _create("t", 2, {"retention.ms": "5", "segment.ms": "60000"}))
    altered = _apply(fsm, encode_command(AlterTopicConfigs(
        "t", {"max.message.bytes": "1000", "retention.ms": "7"}, ["segment.ms", "flush.ms"])))
    assert altered["error_code"] == 0
    topic = fsm.state.topics["t"]
    assert dict(topic.configs) == {"max.message.bytes": "1000", "retention.ms": "7"}
    assert [p.partition_epoch for p in topic.partitions] == [0, 0]  # only configs changed
    # Two changes committed one after the other both hold: a command is a change, not a map.
    _apply(fsm, encode_command(AlterTopicConfigs("t", {"flush.ms": "10"}, [])))
    _apply(fsm, encode_command(AlterTopicConfigs("t", {"segment.ms": "9"}, ["retention.ms"])))
    assert dict(fsm.state.topics["t"].configs) == {
        "flush.ms": "10", "max.message.bytes": "1000", "segment.ms": "9"}


@pytest.mark.parametrize(
    ("command", "code"),
    [
        (encode_command(AlterTopicConfigs("nosuch", {"retention.ms": "1"}, [])),
         ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (b'{"type": "AlterTopicConfigs", "name": "t", "set": {"retention.ms": 1}, "delete": []}',
         ErrorCode.INVALID_CONFIG),
        (b'{"type": "AlterTopicConfigs", "name": "t", "set": {}, "delete": "retention.ms"}',
         ErrorCode.INVALID_CONFIG),
        (b'{"type": "AlterTopicConfigs", "set": {}, "delete": []}', ErrorCode.INVALID_REQUEST),
    ],
)
def test_a_refused_alteration_changes_nothing(command: bytes, code: ErrorCode) -> None:
    fsm = _registered()
    _apply(fsm, _create("t", 1, {"retention.ms": "5"}))
    before = fsm.snapshot()
    result = _apply(fsm, command)
    assert result["error_code"] == code
    after = json.loads(fsm.snapshot())
    after["applied_commands"] -= 1  # the refused command was applied, as an error result
    assert after == json.loads(before)


def test_add_partitions_appends_new_partitions_in_their_initial_state() -> None:
    fsm = _registered()
    _apply(fsm, _create("t", 2))
    assert _apply(fsm, encode_command(AddPartitions("t", 2, ((1,), (1,)))))["error_code"] == 0
    topic = fsm.state.topics["t"]
    assert [p.partition for p in topic.partitions] == [0, 1, 2, 3]
    assert all((p.leader, p.leader_epoch, p.isr, p.partition_epoch) == (1, 0, (1,), 0)
               for p in topic.partitions[2:])


@pytest.mark.parametrize(
    ("command", "code"),
    [
        # Proposed from an older count: another growth committed first.
        (AddPartitions("t", 1, ((1,),)), ErrorCode.INVALID_PARTITIONS),
        (AddPartitions("nosuch", 1, ((1,),)), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (AddPartitions("t", 2, ((2,),)), ErrorCode.BROKER_ID_NOT_REGISTERED),
        (AddPartitions("t", 2, ((1, 1),)), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (AddPartitions("t", 2, ((),)), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ],
)
def test_a_refused_growth_changes_nothing(command: AddPartitions, code: ErrorCode) -> None:
    fsm = _registered()
    _apply(fsm, _create("t", 2))
    before = fsm.snapshot()
    assert _apply(fsm, encode_command(command))["error_code"] == code
    after = json.loads(fsm.snapshot())
    after["applied_commands"] -= 1
    assert after == json.loads(before)


def _random_commands(rng: random.Random, count: int) -> list[bytes]:
    names = ["a", "b", "c", "d.e", "f_g"]
    pool: list[Callable[[], bytes]] = [
        lambda: encode_command(RegisterBroker(rng.randint(1, 3), "h", "tcp://h:1", "c")),
        lambda: _create(rng.choice(names), rng.randint(1, 4), {"retention.ms": "5"}),
        lambda: encode_command(DeleteTopic(rng.choice(names))),
        lambda: encode_command(TopicDeleted(rng.choice(names))),
        lambda: encode_command(AllocateProducerIds(rng.randint(1, 100))),
        lambda: encode_command(SetPartitionState(rng.choice(names), 0, 1, rng.randint(0, 3), [1])),
        lambda: encode_command(AlterTopicConfigs(
            rng.choice(names), {"segment.ms": str(rng.randint(1, 9))}, ["retention.ms"])),
        lambda: b"garbage",
    ]
    return [rng.choice(pool)() for _ in range(count)]


def test_apply_is_deterministic_and_snapshots_restore_exactly() -> None:
    for seed in range(20):
        script = _random_commands(random.Random(seed), 60)
        one, two = MetadataStateMachine(), MetadataStateMachine()
        results_one = [one.apply(command) for command in script]
        results_two = [two.apply(command) for command in script]
        assert results_one == results_two, f"seed {seed}"
        assert one.snapshot() == two.snapshot()
        assert one.digest() == two.digest()
        restored = MetadataStateMachine()
        restored.restore(one.snapshot())
        assert restored.state == one.state, f"seed {seed}"
        assert list(restored.state.topics) == list(one.state.topics)  # creation order kept
        # A node restored from a snapshot then applies the same tail as one that never stopped.
        tail = _random_commands(random.Random(seed + 1000), 20)
        assert [restored.apply(c) for c in tail] == [one.apply(c) for c in tail]
        assert restored.snapshot() == one.snapshot()


def test_published_state_is_never_mutated() -> None:
    """Another thread holding an old state keeps a consistent view (copy on write)."""
    fsm = _registered()
    _apply(fsm, _create("t", 2))
    old = fsm.state
    old_snapshot = metadata_state.state_to_json(old)
    _apply(fsm, encode_command(DeleteTopic("t")))
    _apply(fsm, _create("u"))
    assert metadata_state.state_to_json(old) == old_snapshot


def test_decode_result_raises_the_carried_error() -> None:
    with pytest.raises(ZlogError) as caught:
        decode_result(TopicCreated, b'{"error_code": 36, "error_message": "exists"}')
    assert caught.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
    allocated = decode_result(ProducerIdsAllocated, b'{"error_code": 0, "first_id": 3, "count": 2}')
    assert (allocated.first_id, allocated.count) == (3, 2)


def test_query_reads_the_whole_state() -> None:
    fsm = _registered()
    _apply(fsm, _create("t"))
    assert json.loads(fsm.query(b""))["topics"][0]["name"] == "t"
