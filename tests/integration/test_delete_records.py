"""DeleteRecords against a real `zlog serve` through zlog's own Admin: the log start moves,
consumers below it hear OFFSET_OUT_OF_RANGE or reset to it, ListOffsets earliest returns it, it
survives a kill -9 and a restart, and bad input gets Kafka's code, deleting nothing. One broker
for the module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.first_read import first_offset_read
from zlog.client import EARLIEST, LATEST, Admin, NewTopic, Producer, TopicPartition
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages.data import (
    DeleteRecordsEntry,
    DeleteRecordsRequestV0,
    DeleteRecordsResponseV0,
)
from zlog.transport.rpc import RpcClient
from zlog_testbed.broker_process import BrokerProcess, broker_process

pytestmark = pytest.mark.slow

TIMEOUT_MS = 10_000


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with broker_process(workers=1) as instance:
        yield instance


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[Admin]:
    with Admin(broker.endpoint, request_timeout_ms=TIMEOUT_MS) as instance:
        yield instance


def _topic(admin: Admin, broker: BrokerProcess, name: str, count: int,
           configs: dict[str, str] | None = None) -> TopicPartition:
    """A two-partition topic with `count` records in partition 0 (offsets 0 to count - 1)."""
    admin.create_topics([NewTopic(name, 2, configs=configs or {})])
    with Producer(broker.endpoint, acks="all", linger_ms=0) as producer:
        for i in range(count):
            producer.send(name, b"%d" % i, key=b"k%d" % i, partition=0).result(
                timeout=TIMEOUT_MS / 1000)
    return TopicPartition(name, 0)


def _earliest(admin: Admin, tp: TopicPartition) -> int:
    return admin.list_offsets({tp: EARLIEST})[tp].offset


def _first_offset_read(broker: BrokerProcess, tp: TopicPartition, from_offset: int,
                       reset: str) -> int:
    return first_offset_read(broker.endpoint, tp, from_offset, reset=reset,
                             timeout_s=TIMEOUT_MS / 1000)


def test_records_below_the_offset_are_gone_for_every_reader(
        broker: BrokerProcess, admin: Admin) -> None:
    tp = _topic(admin, broker, "dr-readers", 10)
    other = TopicPartition(tp.topic, 1)
    assert admin.delete_records({tp: 4}) == {tp: 4}
    assert _earliest(admin, tp) == 4
    assert admin.list_offsets({tp: LATEST})[tp].offset == 10
    assert _first_offset_read(broker, tp, 1, "earliest") == 4  # reset to the new log start
    with pytest.raises(ZlogError) as caught:
        _first_offset_read(broker, tp, 1, "none")
    assert caught.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert _first_offset_read(broker, tp, 5, "none") == 5
    assert admin.delete_records({tp: -1, other: -1}) == {tp: 10, other: 0}
    assert _earliest(admin, tp) == 10


def test_bad_input_gets_kafkas_codes_and_deletes_nothing(
        broker: BrokerProcess, admin: Admin) -> None:
    tp = _topic(admin, broker, "dr-bad", 5)
    compacted = _topic(admin, broker, "dr-compacted", 3, {"cleanup.policy": "compact"})
    cases: list[tuple[dict[TopicPartition, int], ErrorCode]] = [
        ({tp: 6}, ErrorCode.OFFSET_OUT_OF_RANGE),  # above the high watermark
        ({tp: -2}, ErrorCode.OFFSET_OUT_OF_RANGE),  # negative, not -1
        ({TopicPartition(tp.topic, 7): 0}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ({TopicPartition("dr-no-such-topic", 0): 0}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ({compacted: 1}, ErrorCode.POLICY_VIOLATION),
    ]
    for offsets, code in cases:
        with pytest.raises(ZlogError) as caught:
            admin.delete_records(offsets)
        assert caught.value.code == code, (offsets, caught.value)
        assert caught.value.message
    assert _earliest(admin, tp) == 0
    assert _earliest(admin, compacted) == 0
    assert _first_offset_read(broker, tp, 0, "none") == 0


def test_a_partition_this_worker_does_not_lead_is_not_leader_or_follower(
        broker: BrokerProcess, admin: Admin) -> None:
    tp = _topic(admin, broker, "dr-elsewhere", 1)
    with RpcClient(broker.data_endpoint(tp.topic, 0)) as rpc:
        response = rpc.call(DeleteRecordsRequestV0(1000, (
            DeleteRecordsEntry("dr-not-here", 0, 0),)), TIMEOUT_MS)
    assert isinstance(response, DeleteRecordsResponseV0)
    (result,) = response.results
    assert (result.error_code, result.low_watermark) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)


def test_the_log_start_survives_a_kill_and_a_restart(broker: BrokerProcess, admin: Admin) -> None:
    tp = _topic(admin, broker, "dr-restart", 8)
    assert admin.delete_records({tp: 5}) == {tp: 5}
    broker.kill_all()
    broker.start()
    with Admin(broker.endpoint, request_timeout_ms=TIMEOUT_MS) as restarted:
        assert _earliest(restarted, tp) == 5
        assert restarted.list_offsets({tp: LATEST})[tp].offset == 8
    assert _first_offset_read(broker, tp, 0, "earliest") == 5
