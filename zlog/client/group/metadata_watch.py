"""What a group member re-reads from the cluster's metadata every `metadata_max_age_ms`.

Two things change under a member without any group request telling it: a subscription by
pattern must follow topics created and deleted after `subscribe`, and a classic group's leader
must notice that a topic of the group's subscription gained partitions (CreatePartitions) or
came into being, since only it assigns: it then rejoins and the coordinator rebalances
(Kafka's leader compares the metadata it assigned from with the current one the same way).
The server-side coordinator watches partition counts itself, so there only the pattern needs
the watch. The heartbeat thread asks for metadata when `due`; the member decides from it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from zlog.client.cluster import Connections
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages.admin import (
    MetadataRequestV0,
    MetadataResponseV0,
)

METADATA_MAX_AGE_MS_DEFAULT: Final = 30_000
"""How often a member watching metadata asks for it. Kafka's `metadata.max.age.ms` is five
minutes; a member here asks for every topic's metadata, one small request, so 30 s lets a new
topic or partition be read within half a minute at little cost."""


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The pattern of a subscription, or INVALID_REQUEST naming what is wrong with it."""
    try:
        return re.compile(pattern)
    except re.error as error:
        raise ZlogError(ErrorCode.INVALID_REQUEST,
                        f"bad topic pattern {pattern!r}: {error}") from None


def matching(pattern: re.Pattern[str], topics: Iterable[str]) -> list[str]:
    """The topics the whole name of which the pattern matches, sorted."""
    return sorted(t for t in topics if pattern.fullmatch(t))


@dataclass(slots=True)
class MetadataWatch:
    """When the next look at metadata is due (time is an argument)."""

    metadata_max_age_ms: int
    next_ms: int = 0

    def __post_init__(self) -> None:
        if self.metadata_max_age_ms <= 0:
            raise ZlogError(ErrorCode.INVALID_CONFIG, f"metadata_max_age_ms must be positive, "
                            f"not {self.metadata_max_age_ms}")

    def due(self, now_ms: int) -> bool:
        return now_ms >= self.next_ms

    def looked(self, now_ms: int) -> None:
        self.next_ms = now_ms + self.metadata_max_age_ms

    def failed(self, now_ms: int, retry_backoff_ms: int) -> None:
        """No answer: look again after a backoff rather than a whole interval later."""
        self.next_ms = now_ms + retry_backoff_ms


def partition_counts(connections: Connections, timeout_ms: int,
                     cancelled: Callable[[], bool] | None = None) -> dict[str, int]:
    """Every topic the cluster has now, with its partition count. Read from the answer itself,
    not the connections' cache, which keeps topics deleted since (the cache is updated too)."""
    response = connections.call_control(MetadataRequestV0(None), timeout_ms,
                                        cancelled=cancelled)
    if not isinstance(response, MetadataResponseV0):
        raise ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR, "metadata answered with the wrong api")
    connections.metadata.update(response)
    return {topic.name: len(topic.partitions) for topic in response.topics
            if topic.error_code == ErrorCode.NONE and topic.partitions}
