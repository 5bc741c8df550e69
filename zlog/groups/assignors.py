"""Partition assignors: pure functions from members' subscriptions to a partition per member.

The classic protocol runs them in the members' leader (client side, chosen by name in the
JoinGroup protocols); the server-side protocol runs `sticky` in the coordinator as its target
assignor ("uniform"). Every one is deterministic: members are ordered static first by instance
id, then dynamic by member id (Kafka's order), partitions by (topic, number), and no iteration
depends on hashing, so every process computes the same answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

from zlog.errors import ErrorCode, ZlogError
from zlog.groups.classic.consumer_protocol import (
    Assignment,
    Subscription,
    decode_subscription,
    encode_assignment,
)
from zlog.transport.wire import Buffer
from zlog.types import NO_GENERATION, TopicPartition


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    member_id: str
    topics: frozenset[str]
    instance_id: str | None = None
    owned: frozenset[TopicPartition] = frozenset()
    generation: int = NO_GENERATION
    """The generation in which the member owned `owned` (-1 unknown): decides between two
    members that both claim one partition."""

    @property
    def order_key(self) -> tuple[int, str]:
        if self.instance_id is not None:
            return (0, self.instance_id)
        return (1, self.member_id)


PartitionCounts: TypeAlias = Mapping[str, int]
Assignments: TypeAlias = dict[str, set[TopicPartition]]
Assignor: TypeAlias = Callable[[Sequence[MemberSubscription], PartitionCounts], Assignments]


def ordered(members: Sequence[MemberSubscription]) -> list[MemberSubscription]:
    return sorted(members, key=lambda m: m.order_key)


def _topic_partitions(topic: str, counts: PartitionCounts) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(counts.get(topic, 0))]


def range_assign(members: Sequence[MemberSubscription], counts: PartitionCounts) -> Assignments:
    """Per topic, contiguous runs of partitions; the first `P mod M` subscribers get one more."""
    result: Assignments = {m.member_id: set() for m in members}
    topics = sorted({t for m in members for t in m.topics})
    for topic in topics:
        subscribers = [m for m in ordered(members) if topic in m.topics]
        partitions = _topic_partitions(topic, counts)
        quota, extra = divmod(len(partitions), len(subscribers))
        start = 0
        for index, member in enumerate(subscribers):
            size = quota + (1 if index < extra else 0)
            result[member.member_id].update(partitions[start : start + size])
            start += size
    return result


def roundrobin_assign(
    members: Sequence[MemberSubscription], counts: PartitionCounts
) -> Assignments:
    """Every partition in (topic, number) order, dealt around the members in order, skipping
    members not subscribed to its topic."""
    result: Assignments = {m.member_id: set() for m in members}
    circle = ordered(members)
    if not circle:
        return result
    position = 0
    for topic in sorted({t for m in members for t in m.topics}):
        for tp in _topic_partitions(topic, counts):
            while topic not in circle[position % len(circle)].topics:
                position += 1
            result[circle[position % len(circle)].member_id].add(tp)
            position += 1
    return result


def valid_claims(
    members: Sequence[MemberSubscription], counts: PartitionCounts
) -> dict[TopicPartition, str]:
    """Who may keep each claimed partition: a member still subscribed to its topic; of two
    claimants the higher generation wins, and at the same generation neither keeps it."""
    best: dict[TopicPartition, tuple[int, str | None]] = {}
    for member in ordered(members):
        for tp in sorted(member.owned):
            if tp.topic not in member.topics or not 0 <= tp.partition < counts.get(tp.topic, 0):
                continue
            held = best.get(tp)
            if held is None or member.generation > held[0]:
                best[tp] = (member.generation, member.member_id)
            elif member.generation == held[0]:
                best[tp] = (held[0], None)
    return {tp: owner for tp, (_, owner) in sorted(best.items()) if owner is not None}


def sticky_assign(members: Sequence[MemberSubscription], counts: PartitionCounts) -> Assignments:
    """Balance first, then stickiness: every member keeps what it validly owns, free partitions
    go to the least loaded subscriber, then partitions move from a member to a subscriber with
    at least two fewer until no such pair is left. With equal subscriptions the sizes then
    differ by at most one; a member gives away partitions it did not own before first."""
    members = ordered(members)
    result: Assignments = {m.member_id: set() for m in members}
    if not members:
        return result
    by_id = {m.member_id: m for m in members}
    claims = valid_claims(members, counts)
    for tp, owner in claims.items():
        result[owner].add(tp)
    rank = {m.member_id: i for i, m in enumerate(members)}

    def least_loaded(topic: str) -> str | None:
        eligible = [m.member_id for m in members if topic in m.topics]
        return min(eligible, key=lambda mid: (len(result[mid]), rank[mid]), default=None)

    for topic in sorted({t for m in members for t in m.topics}):
        for tp in _topic_partitions(topic, counts):
            if tp not in claims:
                taker = least_loaded(topic)
                assert taker is not None
                result[taker].add(tp)
    moved = True
    while moved:
        moved = False
        for giver in sorted(result, key=lambda mid: (-len(result[mid]), rank[mid])):
            for tp in sorted(result[giver], key=lambda tp: (tp in by_id[giver].owned, tp)):
                taker = least_loaded(tp.topic)
                if taker is not None and len(result[giver]) - len(result[taker]) > 1:
                    result[giver].discard(tp)
                    result[taker].add(tp)
                    moved = True
                    break
            if moved:
                break
    return result


def cooperative_sticky_assign(
    members: Sequence[MemberSubscription], counts: PartitionCounts
) -> Assignments:
    """`sticky`, minus every partition that another member still claims (KIP-429): that member
    revokes it in this generation and the follow-up rebalance places it. So no partition is
    ever assigned while a different member may still be consuming it."""
    result = sticky_assign(members, counts)
    claimed_by: dict[TopicPartition, set[str]] = {}
    for member in members:
        for tp in member.owned:
            claimed_by.setdefault(tp, set()).add(member.member_id)
    for member_id, partitions in result.items():
        partitions -= {tp for tp in partitions if claimed_by.get(tp, set()) - {member_id}}
    return result


ASSIGNORS: Final[dict[str, Assignor]] = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
    "sticky": sticky_assign,
    "cooperative-sticky": cooperative_sticky_assign,
}


def assign_classic_group(
    protocol_name: str,
    members: Sequence[tuple[str, str | None, Buffer]],
    counts: PartitionCounts,
) -> dict[str, bytes]:
    """The leader's job in a classic "consumer" group: decode every member's subscription
    (member id, instance id, metadata bytes), run the chosen assignor, encode each
    assignment."""
    assignor = ASSIGNORS.get(protocol_name)
    if assignor is None:
        raise ZlogError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                        f"no assignor named {protocol_name!r}; known: {sorted(ASSIGNORS)}")
    subscriptions = []
    for member_id, instance_id, metadata in members:
        sub: Subscription = decode_subscription(metadata)
        subscriptions.append(MemberSubscription(
            member_id, frozenset(sub.topics), instance_id, frozenset(sub.owned_partitions),
            sub.generation,
        ))
    result = assignor(subscriptions, counts)
    return {mid: encode_assignment(Assignment(tuple(sorted(tps))))
            for mid, tps in sorted(result.items())}
