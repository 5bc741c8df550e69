"""DeleteRecords on a partition's leader: the log start moves up, per partition of the request.

Each partition is answered on its own (Kafka's rules, `Partition.delete_records`): not led here
is NOT_LEADER_OR_FOLLOWER, an offset above the high watermark or negative other than -1 is
OFFSET_OUT_OF_RANGE, a topic without the delete cleanup policy is POLICY_VIOLATION; a refused
partition keeps every record. A leader whose lease ran out answers NOT_LEADER_OR_FOLLOWER too:
another broker may lead the partition by now, and the deletion would then be this replica's
alone. The answer is the leader's new log start (the low watermark); its followers take it with
their next fetch (replica_sync.py), bounded by their high watermarks.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from zlog.broker.data.partition import Partition
from zlog.broker.log_lines import log_failure
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages.data import (
    DeleteRecordsRequestV0,
    DeleteRecordsResponseV0,
    DeleteRecordsResult,
)
from zlog.types import TopicPartition

log = logging.getLogger(__name__)


def delete_records(partitions: Mapping[TopicPartition, Partition],
                   request: DeleteRecordsRequestV0, lease_refusal: str | None,
                   ) -> DeleteRecordsResponseV0:
    """Apply one request; `lease_refusal` says why this broker's leaderships may no longer
    stand (None: they do)."""
    results = tuple(
        _delete_one(partitions.get(TopicPartition(request.topic, wanted.partition)),
                    request.topic, wanted.partition, wanted.offset, lease_refusal)
        for wanted in request.partitions)
    return DeleteRecordsResponseV0(request.topic, results)


def _delete_one(partition: Partition | None, topic: str, index: int, offset: int,
                lease_refusal: str | None) -> DeleteRecordsResult:
    where = f"{topic}-{index}"
    if partition is None or not partition.is_leader:
        return _refused(index, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        f"{where} is not led by this worker; refresh metadata")
    if lease_refusal is not None:
        return _refused(index, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        f"{where}: this broker may have been replaced as leader: "
                        f"{lease_refusal}")
    before = partition.log.log_start_offset
    try:
        start = partition.delete_records(offset)
    except ZlogError as error:
        return _refused(index, error.code, error.message)
    except OSError as error:  # a full disk under the log start file, say: nothing moved
        log_failure(log, error, "delete records of %s failed", where)
        return _refused(index, ErrorCode.KAFKA_STORAGE_ERROR,
                        f"{where}: the log start could not be stored: {error.strerror}")
    if start != before:
        log.info("%s: records below %d deleted", where, start)
    return DeleteRecordsResult(index, ErrorCode.NONE, "", start)


def _refused(index: int, code: ErrorCode, message: str) -> DeleteRecordsResult:
    return DeleteRecordsResult(index, code, message, -1)
