"""DeleteRecords through the worker's data path (zlog/broker/data/delete_records.py): real codec
frames and logs, no sockets. The log start moves, reads below it are out of range, ListOffsets
earliest returns it, it survives the partition's reopening, and bad input gets Kafka's code
for its partition alone, deleting nothing."""

from __future__ import annotations

from pathlib import Path

from tests.storage_helpers import make_batch
from tests.unit.broker.data.test_data_plane import Harness, _fetched, harness_at
from zlog.errors import ErrorCode
from zlog.transport.messages.data import (
    DeleteRecordsPartition,
    DeleteRecordsRequestV0,
    DeleteRecordsResponseV0,
    ListOffsetsPartition,
    ListOffsetsRequestV0,
    ListOffsetsResponseV0,
)


def _delete(harness: Harness, *offsets: tuple[int, int], topic: str = "t",
            ) -> list[tuple[int, int, int]]:
    """(partition, error code, low watermark) per partition asked."""
    response = harness.call(DeleteRecordsRequestV0(
        topic, tuple(DeleteRecordsPartition(p, offset) for p, offset in offsets)))
    assert isinstance(response, DeleteRecordsResponseV0), response
    assert all(r.error_message for r in response.partitions if r.error_code)
    return [(r.partition, r.error_code, r.low_watermark) for r in response.partitions]


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
