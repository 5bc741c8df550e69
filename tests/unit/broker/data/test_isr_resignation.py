"""A leader that cannot store a produce (a full disk) or serve a batch (a corrupt segment)
resigns through its ISR proposals; a follower cuts its log at the corrupt batch.

Spec: docs/replication.md §3 (a leader that cannot write), docs/storage.md (a corrupt sealed
segment). The log is the in-memory twin with switches that make appends fail as a full disk
does and reads from an offset on fail as a corrupt segment does.
"""

from __future__ import annotations

from tests.memory_log import MemoryLog
from tests.storage_helpers import make_batch
from zlog.broker import worker_protocol as protocol
from zlog.broker.data.isr import ReplicaSet
from zlog.broker.data.isr_proposals import IsrProposals
from zlog.broker.data.partition import Partition
from zlog.broker.data.producer_state import ProducerStateTable
from zlog.errors import CorruptSegmentError, ErrorCode, ZlogError
from zlog.record.header import BatchHeader
from zlog.types import TopicPartition

TP = TopicPartition("t", 0)


class FullDiskLog(MemoryLog):
    def __init__(self) -> None:
        super().__init__()
        self.full = False
        self.corrupt_from: int | None = None

    def read(self, offset: int, max_bytes: int, upto_offset: int | None = None
             ) -> list[memoryview]:
        if self.corrupt_from is not None and offset >= self.corrupt_from:
            raise CorruptSegmentError(self.corrupt_from, "fails its CRC check")
        return super().read(offset, max_bytes, upto_offset)

    def append(self, batch: bytes | memoryview | bytearray, *, leader_epoch: int = -1,
               header: BatchHeader | None = None) -> int:
        if self.full:
            raise ZlogError(ErrorCode.KAFKA_STORAGE_ERROR, "cannot write: No space left")
        return super().append(batch, leader_epoch=leader_epoch, header=header)


def _leader(isr: set[int]) -> tuple[Partition, FullDiskLog]:
    log = FullDiskLog()
    replicas = ReplicaSet(1, frozenset({1, 2, 3}), frozenset(isr), 1)
    return Partition("t", 0, log, leader_epoch=4, replicas=replicas), log


def _proposals(partition: Partition, now_ms: int) -> list[protocol.AlterIsr]:
    return IsrProposals({TP: partition}, lag_time_max_ms=30_000).due(now_ms)


def test_a_refused_produce_makes_the_leader_propose_the_isr_without_itself() -> None:
    partition, log = _leader({1, 2, 3})
    assert partition.produce([make_batch(0, 1)], acks=1).error_code == ErrorCode.NONE
    assert _proposals(partition, 1_000) == []
    log.full = True
    refused = partition.produce([make_batch(1, 1)], acks=1)
    assert refused.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert "No space left" in refused.error_message
    (resignation,) = _proposals(partition, 2_000)
    assert (resignation.new_isr, resignation.leader_epoch) == ((2, 3), 4)
    assert partition.isr_tracker.pending is not None  # one change in flight, as any other

    log.full = False  # space came back before the controller answered: stays the leader
    fresh, log = _leader({1, 2, 3})
    log.full = True
    fresh.produce([make_batch(2, 1)], acks=1)
    log.full = False
    assert fresh.produce([make_batch(3, 1)], acks=1).error_code == ErrorCode.NONE
    assert fresh.storage_error is None and _proposals(fresh, 3_000) == []


def test_a_leader_alone_in_sync_keeps_the_partition() -> None:
    partition, log = _leader({1})
    log.full = True
    assert partition.produce([make_batch(0, 1)], acks=1).error_code == \
        ErrorCode.KAFKA_STORAGE_ERROR
    assert _proposals(partition, 1_000) == []  # nobody could take over without loss


def test_a_new_role_forgets_the_failure() -> None:
    partition, log = _leader({1, 2})
    log.full = True
    partition.produce([make_batch(0, 1)], acks=1)
    assert partition.storage_error is not None
    partition.become(leader_epoch=5, is_leader=False)
    assert partition.storage_error is None


def test_a_corrupt_read_is_refused_the_leader_resigns_and_as_a_follower_cuts_there() -> None:
    partition, log = _leader({1, 2, 3})
    for tag in range(4):
        partition.produce([make_batch(tag, 2)], acks=1)
    log.corrupt_from = 4
    refused = partition.read(4, 1 << 20, replica_id=2, at_least_one=True)
    assert refused.error_code == ErrorCode.KAFKA_STORAGE_ERROR and not refused.chunks
    assert partition.read(0, 1 << 20, replica_id=2, at_least_one=True).chunks
    (resignation,) = _proposals(partition, 1_000)
    assert resignation.new_isr == (2, 3)
    assert partition.cut_corrupt(ProducerStateTable) is None  # a leader keeps its log
    write = partition.produce([make_batch(9, 1)], acks=1)  # its producer table is in doubt
    assert write.error_code == ErrorCode.KAFKA_STORAGE_ERROR and log.log_end_offset == 8

    partition.become(leader_epoch=5, is_leader=False)
    log.corrupt_from = None
    rebuilt: list[int] = []

    def rebuild() -> ProducerStateTable:
        rebuilt.append(log.log_end_offset)
        return ProducerStateTable()

    assert partition.cut_corrupt(rebuild) == 4
    assert log.log_end_offset == 4 and rebuilt == [4]  # the producers of what is left
    assert partition.corrupt_from is None and partition.cut_corrupt(ProducerStateTable) is None
