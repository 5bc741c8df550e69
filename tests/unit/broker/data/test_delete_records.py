"""DeleteRecords through the worker's data path (zlog/broker/data/delete_records.py): real codec
frames and logs, no sockets, manual time. The log start moves, reads below it are out of range,
ListOffsets earliest returns it, it survives the partition's reopening, and bad input gets
Kafka's code for its partition alone, deleting nothing. With a follower in sync the answer
waits until the follower reports the new log start, or its time is up."""

from __future__ import annotations

from pathlib import Path

from tests.clock import ManualClock
from tests.storage_helpers import make_batch
from tests.unit.broker.data.test_data_plane import CLIENT, Harness, _decode, _fetched, harness_at
from zlog.broker.data.partition_host import PartitionHost
from zlog.broker.worker_protocol import Assign
from zlog.errors import ErrorCode
from zlog.shm_segments.log_config import LogConfig
from zlog.transport.messages.data import (
    DeleteRecordsEntry,
    DeleteRecordsRequestV0,
    DeleteRecordsResponseV0,
    FetchRequestV1,
    FetchResponseV1,
    ListOffsetsPartition,
    ListOffsetsRequestV0,
    ListOffsetsResponseV0,
    ReplicaFetchEntry,
)
from zlog.transport.server import Reply

FOLLOWER = b"follower"


def _delete(harness: Harness, *offsets: tuple[int, int], topic: str = "t",
            ) -> list[tuple[int, int, int]]:
    """(partition, error code, low watermark) per partition asked."""
    response = harness.call(DeleteRecordsRequestV0(
        1000, tuple(DeleteRecordsEntry(topic, p, offset) for p, offset in offsets)))
    assert isinstance(response, DeleteRecordsResponseV0), response
    assert all(r.error_message for r in response.results if r.error_code)
    return [(r.partition, r.error_code, r.low_watermark) for r in response.results]


def _earliest(harness: Harness, partition: int = 0) -> int:
    response = harness.call(ListOffsetsRequestV0("t", (ListOffsetsPartition(partition, -2),)))
    assert isinstance(response, ListOffsetsResponseV0)
    (result,) = response.partitions
    assert result.error_code == ErrorCode.NONE, result
    return result.offset


def test_records_below_the_offset_go_and_the_log_start_survives_a_reopen(
        tmp_path: Path, shm_dir: Path) -> None:
    with harness_at(tmp_path, shm_dir) as harness:
        harness.produce(make_batch(0), make_batch(1), make_batch(2))  # [0, 9)
        assert _delete(harness, (0, 4)) == [(0, ErrorCode.NONE, 4)]
        assert _earliest(harness) == 4
        (reply,) = harness.fetch(3)
        assert _fetched(reply).entries[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        (reply,) = harness.fetch(4)
        assert _fetched(reply).entries[0].chunks  # the batch holding 4, [3, 6)
        assert _delete(harness, (0, 2)) == [(0, ErrorCode.NONE, 4)]  # never moves back
        assert _delete(harness, (0, -1)) == [(0, ErrorCode.NONE, 9)]  # up to the HW
        harness.produce(make_batch(3))
        assert harness.host.unassign(("t", 0), delete=False)
        harness.assign()
        assert _earliest(harness) == 9
        (reply,) = harness.fetch(8)
        assert _fetched(reply).entries[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_bad_offsets_and_partitions_get_their_codes_and_delete_nothing(
        tmp_path: Path, shm_dir: Path) -> None:
    with harness_at(tmp_path, shm_dir) as harness:
        harness.assign(partition=1, **{"cleanup.policy": "compact"})
        harness.produce(make_batch(0), make_batch(1))  # [0, 6)
        assert _delete(harness, (0, 7), (0, -2), (1, 0), (5, 0)) == [
            (0, ErrorCode.OFFSET_OUT_OF_RANGE, -1),  # above the HW
            (0, ErrorCode.OFFSET_OUT_OF_RANGE, -1),  # negative, not -1
            (1, ErrorCode.POLICY_VIOLATION, -1),  # compact only: nothing is deleted
            (5, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1),  # not led by this worker
        ]
        assert _delete(harness, (0, 0), topic="nope") == [
            (0, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)]
        assert _earliest(harness) == 0
        (reply,) = harness.fetch(0)
        assert _fetched(reply).entries[0].chunks


def _follower_fetch(harness: Harness, offset: int, log_start_offset: int,
                    max_wait_ms: int = 0) -> list[Reply]:
    """Broker 2's Fetch v1 of t-0 at `offset` (its last batch of epoch 1, if any), reporting
    its log start; every reply it causes."""
    last_epoch = 1 if offset else -1
    return harness.send(FetchRequestV1(2, 7, max_wait_ms, 1, 1 << 20, (ReplicaFetchEntry(
        "t", 0, offset, 1, last_epoch, log_start_offset, 1 << 20),)), identity=FOLLOWER)


def _replicated(tmp_path: Path, shm_dir: Path) -> tuple[PartitionHost, Harness]:
    """t-0 led by broker 1 with broker 2 in sync, both holding [0, 6)."""
    clock = ManualClock()
    host = PartitionHost(tmp_path, shm_dir, base_config=LogConfig(ring_bytes=64 * 1024),
                         clock=clock)
    host.assign(Assign(0, "t", 0, {}, leader_epoch=1, broker_id=1, leader=1,
                       replicas=(1, 2), isr=(1, 2)))
    harness = Harness(host, clock)
    harness.produce(make_batch(0), make_batch(1))
    _follower_fetch(harness, 0, 0)
    _follower_fetch(harness, 6, 0)  # the HW is 6
    return host, harness


def test_the_answer_waits_for_the_in_sync_followers_log_start(
        tmp_path: Path, shm_dir: Path) -> None:
    """Kafka's DelayedDeleteRecords: answered once the follower reported a log start at the
    offset, so that it cannot lead next with the records; its parked fetch is answered at
    once with the leader's new log start to bring that about."""
    host, harness = _replicated(tmp_path, shm_dir)
    try:
        assert _follower_fetch(harness, 6, 0, max_wait_ms=5000) == []  # parked: nothing new
        request = DeleteRecordsRequestV0(5000, (DeleteRecordsEntry("t", 0, 4),))
        (woken,) = harness.send(request)  # not the answer: the follower's parked fetch
        assert woken[0] == FOLLOWER
        fetched = _decode(woken)
        assert isinstance(fetched, FetchResponseV1)
        assert fetched.entries[0].log_start_offset == 4
        assert [r for r in _follower_fetch(harness, 6, 0) if r[0] == CLIENT] == []  # not yet
        (answer,) = [r for r in _follower_fetch(harness, 6, 4) if r[0] == CLIENT]
        response = _decode(answer)
        assert isinstance(response, DeleteRecordsResponseV0)
        assert [(r.error_code, r.low_watermark) for r in response.results] == [(0, 4)]
    finally:
        host.close_all()


def test_a_follower_that_does_not_follow_in_time_times_the_request_out(
        tmp_path: Path, shm_dir: Path) -> None:
    host, harness = _replicated(tmp_path, shm_dir)
    try:
        assert harness.send(DeleteRecordsRequestV0(500, (DeleteRecordsEntry("t", 0, 4),))) == []
        assert harness.plane.next_deadline_ms() == harness.clock.now_ms + 500
        harness.clock.advance(500)
        (answer,) = harness.plane.on_timer(harness.clock.now_ms)
        response = _decode(answer)
        assert isinstance(response, DeleteRecordsResponseV0)
        (result,) = response.results
        assert (result.error_code, result.low_watermark) == (ErrorCode.REQUEST_TIMED_OUT, -1)
        assert "follower" in result.error_message
        assert _earliest(harness) == 4  # the deletion stands; asking again waits again
        assert harness.plane.next_deadline_ms() is None
    finally:
        host.close_all()


def test_a_leader_that_stops_leading_answers_the_waiting_request(
        tmp_path: Path, shm_dir: Path) -> None:
    host, harness = _replicated(tmp_path, shm_dir)
    try:
        assert harness.send(DeleteRecordsRequestV0(5000, (DeleteRecordsEntry("t", 0, 4),))) == []
        host.assign(Assign(0, "t", 0, {}, leader_epoch=2, is_leader=False, broker_id=1,
                           leader=2, replicas=(1, 2), isr=(1, 2)))
        (answer,) = [r for r in harness.plane.partition_changed(("t", 0), 0, True)
                     if r[0] == CLIENT]
        response = _decode(answer)
        assert isinstance(response, DeleteRecordsResponseV0)
        assert response.results[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        host.close_all()


def test_a_follower_leaving_the_isr_no_longer_holds_the_answer(
        tmp_path: Path, shm_dir: Path) -> None:
    """Only the replicas that may lead next are waited for: once the controller committed
    the ISR without the follower, the answer goes."""
    host, harness = _replicated(tmp_path, shm_dir)
    try:
        assert harness.send(DeleteRecordsRequestV0(5000, (DeleteRecordsEntry("t", 0, 4),))) == []
        host.assign(Assign(0, "t", 0, {}, leader_epoch=1, broker_id=1, leader=1,
                           partition_epoch=1, replicas=(1, 2), isr=(1,)))
        (answer,) = harness.plane.partition_changed(("t", 0), 0, False)
        response = _decode(answer)
        assert isinstance(response, DeleteRecordsResponseV0)
        assert [(r.error_code, r.low_watermark) for r in response.results] == [(0, 4)]
    finally:
        host.close_all()
