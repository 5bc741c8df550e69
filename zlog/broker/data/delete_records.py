"""DeleteRecords on a partition's leader: the log start moves up, and the answer waits for the
in-sync followers' log starts to follow (Kafka's DelayedDeleteRecords).

Each partition is answered on its own (Kafka's rules, `Partition.delete_records`): not led here
is NOT_LEADER_OR_FOLLOWER, an offset above the high watermark or negative other than -1 is
OFFSET_OUT_OF_RANGE, a topic without the delete cleanup policy is POLICY_VIOLATION; a refused
partition keeps every record. A leader whose lease ran out answers NOT_LEADER_OR_FOLLOWER too:
another broker may lead the partition by now, and the deletion would be this replica's alone.

A follower's log start follows its leader's with each fetch answer (replica_sync.py) and comes
back in its next fetch, so the leader knows where each in-sync follower's log start is; the
answer for a partition waits until the lowest of them and the leader's own (the low watermark)
reached the offset, so that whichever in-sync replica leads next has deleted the records too.
Waiting followers' fetches are answered at once, to carry the new log start. A partition still
waiting when the request's timeout ends is REQUEST_TIMED_OUT (retriable: its deletion stands,
and asking again waits again), one whose replica stops leading NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from zlog import limits
from zlog.broker.data.partition import Partition
from zlog.broker.log_lines import log_failure
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.codec import RequestHeader, encode_response
from zlog.transport.messages.data import (
    DeleteRecordsEntry,
    DeleteRecordsRequestV0,
    DeleteRecordsResponseV0,
    DeleteRecordsResult,
)
from zlog.transport.server import Reply
from zlog.types import TopicPartition

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Waiting:
    """A DeleteRecords request whose answer waits for in-sync followers."""

    identity: bytes
    header: RequestHeader
    results: list[DeleteRecordsResult]
    waiting: dict[int, tuple[TopicPartition, int]]  # entry index -> (tp, offset to reach)
    deadline_ms: int


@dataclass(slots=True)
class DeleteRecordsWaits:
    """The worker's DeleteRecords requests: applied at once, answered once their partitions'
    low watermarks reached the offsets (or their time is up)."""

    partitions: Mapping[TopicPartition, Partition]
    parked: list[_Waiting] = field(default_factory=list)

    def handle(self, identity: bytes, header: RequestHeader, request: DeleteRecordsRequestV0,
               lease_refusal: str | None, now_ms: int) -> tuple[list[Reply], list[TopicPartition]]:
        """Apply `request`; its answer if nothing waits, and the partitions whose log start
        moved (their followers' parked fetches should be answered now)."""
        results: list[DeleteRecordsResult] = []
        waiting: dict[int, tuple[TopicPartition, int]] = {}
        moved: list[TopicPartition] = []
        for index, entry in enumerate(request.entries):
            tp = TopicPartition(entry.topic, entry.partition)
            partition = self.partitions.get(tp)
            result, target = _delete_one(partition, entry, lease_refusal)
            results.append(result)
            if partition is None or result.error_code != ErrorCode.NONE:
                continue
            if partition.low_watermark < target:
                waiting[index] = (tp, target)
                moved.append(tp)
        parked = _Waiting(identity, header, results, waiting, now_ms + request.timeout_ms)
        if not waiting:
            return [self._answer(parked)], moved
        if request.timeout_ms <= 0 or len(self.parked) >= limits.DELAYED_DELETES_MAX:
            return [self._finish(parked, ErrorCode.REQUEST_TIMED_OUT)], moved
        self.parked.append(parked)
        return [], moved

    def settle(self, tps: Iterable[TopicPartition]) -> list[Reply]:
        """Answer what the followers' progress on `tps` (or a change of role) settled."""
        touched = set(tps)
        replies: list[Reply] = []
        for parked in list(self.parked):
            for index, (tp, target) in list(parked.waiting.items()):
                if tp not in touched:
                    continue
                partition = self.partitions.get(tp)
                if partition is None or not partition.is_leader:
                    parked.results[index] = _refused(
                        parked.results[index], ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        f"{tp.topic}-{tp.partition} is no longer led by this worker; its "
                        "in-sync followers may not have deleted the records")
                    del parked.waiting[index]
                elif partition.low_watermark >= target:
                    parked.results[index] = replace(parked.results[index],
                                                    low_watermark=partition.low_watermark)
                    del parked.waiting[index]
            if not parked.waiting:
                self.parked.remove(parked)
                replies.append(self._answer(parked))
        return replies

    def expire(self, now_ms: int | None) -> list[Reply]:
        """Answer the requests whose time is up (None: all, the worker stops)."""
        due = [parked for parked in self.parked if now_ms is None or parked.deadline_ms <= now_ms]
        for parked in due:
            self.parked.remove(parked)
        return [self._finish(parked, ErrorCode.REQUEST_TIMED_OUT) for parked in due]

    def next_deadline_ms(self) -> int | None:
        return min((parked.deadline_ms for parked in self.parked), default=None)

    def _finish(self, parked: _Waiting, code: ErrorCode) -> Reply:
        for index, (tp, target) in parked.waiting.items():
            parked.results[index] = _refused(
                parked.results[index], code,
                f"{tp.topic}-{tp.partition}: records below {target} are deleted on the leader, "
                "but not yet on every in-sync follower; ask again to wait for them")
        parked.waiting.clear()
        return self._answer(parked)

    @staticmethod
    def _answer(parked: _Waiting) -> Reply:
        response = DeleteRecordsResponseV0(tuple(parked.results))
        return parked.identity, encode_response(parked.header, response)


def _delete_one(partition: Partition | None, entry: DeleteRecordsEntry,
                lease_refusal: str | None) -> tuple[DeleteRecordsResult, int]:
    """One entry applied: its result so far, and the offset its answer waits for."""
    where = f"{entry.topic}-{entry.partition}"
    result = DeleteRecordsResult(entry.topic, entry.partition, ErrorCode.NONE, "", -1)
    if partition is None or not partition.is_leader:
        return _refused(result, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        f"{where} is not led by this worker; refresh metadata"), -1
    if lease_refusal is not None:
        return _refused(result, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        f"{where}: this broker may have been replaced as leader: "
                        f"{lease_refusal}"), -1
    before = partition.log.log_start_offset
    try:
        target = partition.delete_records(entry.offset)
    except ZlogError as error:
        return _refused(result, error.code, error.message), -1
    except OSError as error:  # a full disk under the log start file, say: nothing moved
        log_failure(log, error, "delete records of %s failed", where)
        return _refused(result, ErrorCode.KAFKA_STORAGE_ERROR,
                        f"{where}: the log start could not be stored: {error.strerror}"), -1
    if partition.log.log_start_offset != before:
        log.info("%s: records below %d deleted", where, partition.log.log_start_offset)
    return replace(result, low_watermark=partition.low_watermark), target


def _refused(result: DeleteRecordsResult, code: ErrorCode, message: str) -> DeleteRecordsResult:
    return replace(result, error_code=code, error_message=message, low_watermark=-1)
