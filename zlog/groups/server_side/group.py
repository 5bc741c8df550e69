"""A server-side group's state (KIP-848's ConsumerGroup): members, epochs, target, owners.

Only data and the questions asked of it; the transitions live in `machine.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from zlog.transport.messages.groups import DEFAULT_SERVER_ASSIGNOR
from zlog.types import TopicPartition


class MemberState(Enum):
    STABLE = "stable"
    UNREVOKED = "unrevoked"
    """Must give up `pending_revocation` before it gets anything new."""
    UNRELEASED = "unreleased"
    """Its target holds partitions another member has not released yet."""


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    group_instance_id: str | None
    topics: frozenset[str]
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    epoch: int = 0
    previous_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: dict[TopicPartition, int] = field(default_factory=dict)
    """Owned partition -> the assignment epoch it was given in (KIP-1251 fences commits)."""
    pending_revocation: dict[TopicPartition, int] = field(default_factory=dict)
    reported_owned: frozenset[TopicPartition] | None = field(default=None, compare=False)
    """What the member's last heartbeat said it holds (None: not said since the load). Kept
    in memory only: it decides whether a heartbeat may be held (docs/groups.md §7)."""

    def holds(self) -> set[TopicPartition]:
        return set(self.assigned) | set(self.pending_revocation)


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = DEFAULT_SERVER_ASSIGNOR
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    target: dict[str, set[TopicPartition]] = field(default_factory=dict)
    owner: dict[TopicPartition, str] = field(default_factory=dict)
    """Who holds each partition (assigned or pending revocation): at most one member."""
    subscribed_partitions: dict[str, int] = field(default_factory=dict)
    """Partition counts of the subscribed topics the last target was computed from."""

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(m.epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def subscribed_topics(self) -> frozenset[str]:
        return frozenset(t for m in self.members.values() for t in m.topics)
