"""KIP-848's ConsumerGroupHeartbeat answered by zlog's server-side coordinators, so that a
Kafka consumer with `group.protocol=consumer` and a native consumer of the server-side
protocol share a group, its partitions and its committed offsets.

zlog's GroupHeartbeat has ConsumerGroupHeartbeat's shape (docs/groups.md §7), so the request
passes through renamed, except for partitions: Kafka names them by topic id, zlog by topic
name, and the ids are the ones Metadata gives (the metadata log's, topology.py). A topic id no
topic has any more (deleted) is left out of what the member says it owns; an assigned topic
that vanished between the coordinator's answer and the lookup is left out of the assignment,
which the member's next heartbeat corrects.

What zlog's coordinator does not have is refused with a sentence rather than ignored: a regex
subscription (the coordinator matches names only) and a server assignor other than its own.
librdkafka takes both answers as fatal, so the application hears of them at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from zlog.errors import ErrorCode, ZlogError
from zlog.kafka_gateway.calls import Call, Gateway, milliseconds
from zlog.kafka_gateway.group_handlers import call_coordinator
from zlog.transport.messages.admin import MetadataRequestV0, MetadataResponseV0
from zlog.transport.messages.groups import (
    DEFAULT_SERVER_ASSIGNOR,
    GroupHeartbeatRequestV0,
    GroupHeartbeatResponseV0,
)
from zlog.types import TopicPartition

CLIENT_MEMBER_ID_FROM_VERSION: Final = 1
"""KIP-1082: from version 1 the consumer makes its member id, and must send one."""
UNCHANGED: Final = -1
"""A rebalance timeout of -1 means unchanged since the last heartbeat."""


def consumer_group_heartbeat(gateway: Gateway, call: Call) -> dict[str, Any]:
    body = call.body
    _refuse_what_zlog_lacks(call)
    owned_ids = body.topic_partitions
    names = _topic_names(gateway) if owned_ids else {}  # looked up only when ids are named
    request = GroupHeartbeatRequestV0(
        group_id=body.group_id, member_id=body.member_id, member_epoch=body.member_epoch,
        group_instance_id=body.instance_id,
        rebalance_timeout_ms=_rebalance_timeout_ms(body.rebalance_timeout),
        subscribed_topics=(None if body.subscribed_topic_names is None
                           else tuple(body.subscribed_topic_names)),
        owned=None if owned_ids is None else tuple(_named(owned_ids, names)),
        client_id=call.request.client_id or "", client_host=call.client_host)
    response: GroupHeartbeatResponseV0 = call_coordinator(
        gateway, body.group_id, request, GroupHeartbeatResponseV0)
    assignment = None  # unchanged since the member's last heartbeat
    if response.assignment is not None:
        if response.assignment and not names:
            names = _topic_names(gateway)
        ids = {name: topic_id for topic_id, name in names.items()}
        assignment = {"topic_partitions": _by_topic_id(response.assignment, ids)}
    return {"throttle_time_ms": 0, "error_code": response.error_code,
            "error_message": response.message or None,
            "member_id": response.member_id or body.member_id or None,
            "member_epoch": response.member_epoch,
            "heartbeat_interval_ms": response.heartbeat_interval_ms,
            "assignment": assignment}


def _refuse_what_zlog_lacks(call: Call) -> None:
    body = call.body
    if call.version >= CLIENT_MEMBER_ID_FROM_VERSION and not body.member_id:
        raise ZlogError(ErrorCode.INVALID_REQUEST,
                        "from ConsumerGroupHeartbeat version 1 the consumer makes its member "
                        "id (KIP-1082); this one is empty")
    if call.field("subscribed_topic_regex"):
        raise ZlogError(ErrorCode.INVALID_REQUEST,
                        "zlog's coordinator matches subscribed topic names only, not a regex: "
                        "subscribe by name, or use group.protocol=classic, where the client "
                        "resolves the regex itself")
    assignor = body.server_assignor
    if assignor is not None and assignor != DEFAULT_SERVER_ASSIGNOR:
        raise ZlogError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                        f"zlog's coordinator assigns with {DEFAULT_SERVER_ASSIGNOR!r} only, "
                        f"not {assignor!r}: leave group.remote.assignor unset")


def _rebalance_timeout_ms(value: Any) -> int | None:
    ms = milliseconds(value, UNCHANGED)
    return None if ms == UNCHANGED else ms


def _topic_names(gateway: Gateway) -> dict[str, str]:
    """Every topic's name by its id (zlog's 32 hex digits), as Metadata gives them."""
    known = gateway.native.control(MetadataRequestV0(None), MetadataResponseV0,
                                   kafka_ports=False)
    return {topic.topic_id: topic.name for topic in known.topics if topic.topic_id}


def _named(owned: Iterable[Any], names: dict[str, str]) -> Iterable[TopicPartition]:
    for topic in owned:
        name = names.get(topic.topic_id.hex) if topic.topic_id is not None else None
        if name is not None:
            yield from (TopicPartition(name, partition) for partition in topic.partitions)


def _by_topic_id(assignment: Iterable[TopicPartition],
                 ids: dict[str, str]) -> list[dict[str, Any]]:
    partitions: dict[str, list[int]] = {}
    for tp in assignment:
        topic_id = ids.get(tp.topic)
        if topic_id is not None:
            partitions.setdefault(topic_id, []).append(tp.partition)
    return [{"topic_id": topic_id, "partitions": sorted(indexes)}
            for topic_id, indexes in partitions.items()]
