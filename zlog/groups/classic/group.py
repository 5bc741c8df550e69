"""A classic group's state (Kafka's ClassicGroup): its members, generation and chosen protocol.

Only data and the questions asked of it; the transitions live in `machine.py`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from zlog.groups.records import GroupMetadataValue, MemberMetadata


class ClassicState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    join_request: int | None = None
    """The parked JoinGroup's request id, while the member waits for the join to complete."""
    sync_request: int | None = None
    """The parked SyncGroup's request id, while the member waits for the leader's assignment."""
    is_new: bool = True

    def metadata_for(self, protocol: str | None) -> bytes:
        return next((meta for name, meta in self.protocols if name == protocol), b"")

    @property
    def protocol_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.protocols)


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    state: ClassicState = ClassicState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    """None for a "simple" group that only stores offsets (assign() users, admin tools)."""
    protocol_name: str | None = None
    leader_id: str | None = None
    state_timestamp_ms: int = 0
    members: dict[str, ClassicMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    """group instance id -> member id (KIP-345)."""
    pending_members: set[str] = field(default_factory=set)
    """Ids handed out with MEMBER_ID_REQUIRED that have not joined yet (KIP-394)."""
    pending_sync: set[str] = field(default_factory=set)
    """Members of the current generation that have not sent SyncGroup yet."""
    initial_join: bool = False
    """The running join timer is the initial delay of an Empty group (KIP-134)."""
    new_member_added: bool = False
    initial_join_remaining_ms: int = 0
    metadata_written: bool = False
    """A GroupMetadata record exists for this group: deleting it needs a tombstone."""

    def in_state(self, *states: ClassicState) -> bool:
        return self.state in states

    def transition(self, state: ClassicState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp_ms = now_ms

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_joined(self) -> bool:
        return not self.pending_members and all(
            m.join_request is not None for m in self.members.values()
        )

    def joined_members(self) -> list[ClassicMember]:
        return [m for _, m in sorted(self.members.items()) if m.join_request is not None]

    def supports(self, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """Whether a member with these protocols may join: the same type, and at least one
        protocol every member (and it) supports. An empty group accepts any."""
        names = {name for name, _ in protocols}
        if not protocol_type or not names:
            return False
        if not self.members:
            return True
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        common: set[str] | None = None
        for member in self.members.values():
            names = set(member.protocol_names)
            common = names if common is None else common & names
        return common or set()

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that all support; most votes
        wins, ties go to the protocol the leader prefers."""
        candidates = self.candidate_protocols()
        votes = Counter(
            next(name for name in m.protocol_names if name in candidates)
            for m in self.members.values()
        )
        leader = self.members.get(self.leader_id or "")
        preference = leader.protocol_names if leader is not None else tuple(sorted(candidates))
        order = [p for p in preference if p in candidates] + sorted(candidates - set(preference))
        return max(order, key=lambda name: (votes[name], -order.index(name)))

    def to_metadata(self) -> GroupMetadataValue:
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol_name=self.protocol_name,
            leader_id=self.leader_id,
            state_timestamp_ms=self.state_timestamp_ms,
            members=tuple(
                MemberMetadata(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host,
                    m.rebalance_timeout_ms, m.session_timeout_ms,
                    m.metadata_for(self.protocol_name), m.assignment,
                )
                for _, m in sorted(self.members.items())
            ),
        )

    @classmethod
    def from_metadata(cls, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        group = cls(
            group_id, ClassicState.STABLE if value.members else ClassicState.EMPTY,
            value.generation, value.protocol_type or None, value.protocol_name,
            value.leader_id, value.state_timestamp_ms, metadata_written=True,
        )
        for m in value.members:
            group.members[m.member_id] = ClassicMember(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.session_timeout_ms, m.rebalance_timeout_ms,
                ((value.protocol_name or "", m.subscription),), m.assignment, is_new=False,
            )
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        return group
