"""A consumer's group settings, checked once, and the callbacks a rebalance calls.

The names and defaults are Kafka's consumer configs (docs/groups.md, "Client"); a bad value is
INVALID_CONFIG with a sentence when the Consumer is made, not a surprise at the first poll.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from zlog.client.group.classic_member import check_assignors
from zlog.errors import ErrorCode, ZlogError
from zlog.types import TopicPartition

GROUP_PROTOCOLS: Final = ("consumer", "classic")
SERVER_SIDE_PROTOCOL: Final = "consumer"
ASSIGNMENT_STRATEGY_DEFAULT: Final = ("range", "cooperative-sticky")
"""Kafka 3's default: the group votes range (eager) until every member lists only
cooperative-sticky, so a rolling upgrade can switch to cooperative without a stop."""
HEARTBEAT_INTERVAL_MS_CLASSIC_DEFAULT: Final = 3_000
"""Kafka's `heartbeat.interval.ms` (a server-side member is told its interval instead)."""

PartitionsCallback = Callable[[set[TopicPartition]], None]


@dataclass(frozen=True, slots=True)
class GroupSettings:
    group_id: str | None
    group_protocol: str
    enable_auto_commit: bool
    auto_commit_interval_ms: int
    session_timeout_ms: int
    max_poll_interval_ms: int
    group_instance_id: str | None
    client_id: str
    partition_assignment_strategy: tuple[str, ...] = ASSIGNMENT_STRATEGY_DEFAULT
    """Classic only: the assignors this member can run, in order of preference."""
    heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS_CLASSIC_DEFAULT
    """Classic only."""

    @classmethod
    def checked(cls, group_id: str | None, *, group_protocol: str, enable_auto_commit: bool,
                auto_commit_interval_ms: int, session_timeout_ms: int,
                max_poll_interval_ms: int, group_instance_id: str | None,
                client_id: str,
                partition_assignment_strategy: Sequence[str] = ASSIGNMENT_STRATEGY_DEFAULT,
                heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS_CLASSIC_DEFAULT,
                ) -> GroupSettings:
        if group_id is not None and not group_id:
            raise ZlogError(ErrorCode.INVALID_GROUP_ID, "group_id must not be empty")
        if group_protocol not in GROUP_PROTOCOLS:
            raise ZlogError(ErrorCode.INVALID_CONFIG, f"group_protocol must be consumer or "
                            f"classic, not {group_protocol!r}")
        if isinstance(partition_assignment_strategy, str):
            partition_assignment_strategy = [partition_assignment_strategy]
        assignors = check_assignors(list(partition_assignment_strategy))
        for name, value in (("auto_commit_interval_ms", auto_commit_interval_ms),
                            ("session_timeout_ms", session_timeout_ms),
                            ("max_poll_interval_ms", max_poll_interval_ms),
                            ("heartbeat_interval_ms", heartbeat_interval_ms)):
            if value <= 0:
                raise ZlogError(ErrorCode.INVALID_CONFIG,
                                f"{name} must be positive, not {value}")
        if group_instance_id is not None and not group_instance_id:
            raise ZlogError(ErrorCode.INVALID_CONFIG, "group_instance_id must not be empty")
        if group_protocol != SERVER_SIDE_PROTOCOL and heartbeat_interval_ms >= session_timeout_ms:
            raise ZlogError(ErrorCode.INVALID_CONFIG, f"heartbeat_interval_ms "
                            f"({heartbeat_interval_ms}) must be below session_timeout_ms "
                            f"({session_timeout_ms})")
        return cls(group_id, group_protocol, enable_auto_commit, auto_commit_interval_ms,
                   session_timeout_ms, max_poll_interval_ms, group_instance_id, client_id,
                   assignors, heartbeat_interval_ms)

    def required_group_id(self, what: str) -> str:
        if self.group_id is None:
            raise ZlogError(ErrorCode.INVALID_GROUP_ID, f"{what} needs a group_id")
        return self.group_id


@dataclass(frozen=True, slots=True)
class GroupMetadata:
    """Who this consumer is in its group now (Kafka's ConsumerGroupMetadata): what a commit
    from it carries. `generation` is the classic generation or the server-side member epoch;
    -1 and "" when not in the group."""

    group_id: str
    generation: int
    member_id: str
    group_instance_id: str | None


@dataclass(slots=True)
class RebalanceCallbacks:
    """Kafka's ConsumerRebalanceListener: called on the poll thread. `on_lost` (partitions
    another member may own already, not committed) defaults to `on_revoke`."""

    on_assign: PartitionsCallback | None = None
    on_revoke: PartitionsCallback | None = None
    on_lost: PartitionsCallback | None = None

    def assigned(self, partitions: set[TopicPartition]) -> None:
        if partitions and self.on_assign is not None:
            self.on_assign(partitions)

    def revoked(self, partitions: set[TopicPartition]) -> None:
        if partitions and self.on_revoke is not None:
            self.on_revoke(partitions)

    def lost(self, partitions: set[TopicPartition]) -> None:
        if not partitions:
            return
        if self.on_lost is not None:
            self.on_lost(partitions)
        else:
            self.revoked(partitions)
