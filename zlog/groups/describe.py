"""DescribeGroups answers: what an operator sees of a classic or a server-side group."""

from __future__ import annotations

from zlog.errors import ErrorCode
from zlog.groups.classic.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Assignment,
    Subscription,
    encode_assignment,
    encode_subscription,
)
from zlog.groups.classic.group import ClassicGroup, ClassicState
from zlog.groups.server_side.group import ConsumerGroup
from zlog.transport.messages.groups import DescribedMember, GroupDescription


def describe_classic(group: ClassicGroup) -> GroupDescription:
    """Protocol, metadata and assignments are shown only when Stable (Kafka's rule: in any
    other state they are being replaced)."""
    stable = group.state is ClassicState.STABLE
    members = tuple(
        DescribedMember(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.metadata_for(group.protocol_name) if stable else b"",
            m.assignment if stable else b"",
        )
        for _, m in sorted(group.members.items())
    )
    return GroupDescription(
        group.group_id, ErrorCode.NONE, group.state.value, group.protocol_type or "",
        (group.protocol_name or "") if stable else "", "classic", group.generation, members,
    )


def describe_consumer(group: ConsumerGroup) -> GroupDescription:
    members = tuple(
        DescribedMember(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            encode_subscription(Subscription(tuple(sorted(m.topics)))),
            encode_assignment(Assignment(tuple(sorted(m.assigned)))),
            m.epoch,
        )
        for _, m in sorted(group.members.items())
    )
    return GroupDescription(
        group.group_id, ErrorCode.NONE, group.state.value, CONSUMER_PROTOCOL_TYPE,
        group.assignor, "consumer", group.group_epoch, members,
    )
