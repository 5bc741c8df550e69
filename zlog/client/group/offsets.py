"""Committed offsets of a group: OffsetCommit and OffsetFetch through a CoordinatorLink.

The Consumer commits as a member (its member epoch and id, so the coordinator refuses a commit
for partitions it no longer holds: docs/groups.md §5.1); the Admin commits as a *simple*
member (generation -1, no member id), which the coordinator accepts only while the group has
no members. Both read and write through these functions, so a refusal reads the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from zlog.client.group.coordinator import CoordinatorLink
from zlog.errors import ErrorCode, ZlogError, for_code
from zlog.transport.messages.groups import (
    OffsetCommitRequestV0,
    OffsetCommitResponseV0,
    OffsetFetchRequestV0,
    OffsetFetchResponseV0,
    PartitionCommit,
)
from zlog.types import NO_GENERATION, TopicPartition


def commit_offsets(link: CoordinatorLink, offsets: Mapping[TopicPartition, int], *,
                   generation: int = NO_GENERATION, member_id: str = "",
                   group_instance_id: str | None = None) -> None:
    """Commit `offsets` (the next offset to read, per partition); raises the first refusal
    (top-level, or the first partition's), naming the group and the partition."""
    if not offsets:
        return
    for tp, offset in offsets.items():
        if offset < 0:
            raise ZlogError(ErrorCode.OFFSET_OUT_OF_RANGE,
                            f"{tp.topic}-{tp.partition}: cannot commit offset {offset}")
    request = OffsetCommitRequestV0(
        group_id=link.group_id,
        offsets=tuple((TopicPartition(*tp), PartitionCommit(offset))
                      for tp, offset in sorted(offsets.items())),
        generation=generation, member_id=member_id, group_instance_id=group_instance_id)
    response = link.call(request, OffsetCommitResponseV0)
    raise_commit_error(link.group_id, response)


def raise_commit_error(group_id: str, response: OffsetCommitResponseV0) -> None:
    if response.error_code != ErrorCode.NONE:
        raise _group_error(group_id, response.error_code, "commit refused")
    for tp, code in response.partitions:
        if code != ErrorCode.NONE:
            raise for_code(code, f"group {group_id!r}: commit of {tp.topic}-{tp.partition} "
                                 f"refused ({ErrorCode(code).name.lower()})")


def fetch_committed(link: CoordinatorLink, partitions: Iterable[TopicPartition] | None,
                    ) -> dict[TopicPartition, int]:
    """The committed offset of each partition that has one (None: every committed one)."""
    wanted = None if partitions is None else tuple(sorted(TopicPartition(*tp)
                                                          for tp in partitions))
    response = link.call(OffsetFetchRequestV0(group_id=link.group_id,
                                            partitions=wanted), OffsetFetchResponseV0)
    if response.error_code != ErrorCode.NONE:
        raise _group_error(link.group_id, response.error_code, "offsets not readable")
    return {TopicPartition(fetched.topic, fetched.partition): fetched.offset
            for fetched in response.offsets if fetched.offset >= 0}


def _group_error(group_id: str, code: int, what: str) -> ZlogError:
    return for_code(code, f"group {group_id!r}: {what} ({ErrorCode(code).name.lower()})")
