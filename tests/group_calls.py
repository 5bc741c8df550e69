"""Raw consumer-group requests against real brokers (RpcClient, no zlog client): finding a
group's coordinator, the two rounds of a classic JoinGroup, and collecting the answers of
requests a coordinator parks (JoinGroup, SyncGroup) while the test sends others.

Raw, but a client all the same: a coordinator just named may not serve the group yet, and
one whose lease lapsed on a busy host refuses it for a moment, so these helpers find a
coordinator that serves and send a request again while the answer says the coordinator is
not ready (COORDINATOR_NOT_READY), as zlog's client does (zlog/client/group/coordinator.py);
every other answer is left to the test to check."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, cast

from zlog.client.group.coordinator import response_error
from zlog.errors import ErrorCode, ZlogError
from zlog.groups.classic.consumer_protocol import Subscription, encode_subscription
from zlog.transport.messages import Response
from zlog.transport.messages.groups import (
    GROUP_RESPONSE_TYPES,
    FindCoordinatorRequestV0,
    FindCoordinatorResponseV0,
    GroupRequest,
    GroupResponse,
    JoinGroupRequestV0,
    JoinGroupResponseV0,
    OffsetFetchRequestV0,
    OffsetFetchResponseV0,
)
from zlog.transport.rpc import RpcClient
from zlog.types import TopicPartition
from zlog_testbed.broker_process import CALL_TIMEOUT_MS
from zlog_testbed.waiting import wait_until

GROUP_TOPIC = "orders"
"""The topic the groups of these tests read."""
SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 30_000


COORDINATOR_NOT_READY: Final = frozenset({
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
})
"""Answers a client retries, and so do these helpers: the worker does not coordinate the group
yet (it has not taken the group's offsets partition or its lease) or no longer does, or it is
still loading the group."""


def _not_ready(reply: Response) -> bool:
    return isinstance(reply, GROUP_RESPONSE_TYPES) and response_error(
        cast(GroupResponse, reply)) in COORDINATOR_NOT_READY


def find_coordinator(control_endpoints: Sequence[str], group_id: str,
                     timeout_s: float = 30) -> FindCoordinatorResponseV0:
    """The coordinator FindCoordinator names, once it serves the group.

    Each control endpoint is asked in turn until one names a coordinator
    (COORDINATOR_NOT_AVAILABLE while the offsets topic or its leader is not there yet; a
    dead broker simply does not answer). The worker named is then asked for the group's
    offsets (OffsetFetch changes nothing): one that does not answer (a killed broker the
    cluster has not fenced yet is still named) or is not ready for the group
    (COORDINATOR_NOT_READY) sends the search back to FindCoordinator, as a client would go
    back."""
    found: list[FindCoordinatorResponseV0] = []

    def serving() -> bool:
        named = _named(control_endpoints, group_id)
        if named is None:
            return False
        with RpcClient(named.endpoint) as coordinator:
            try:
                reply = coordinator.call(OffsetFetchRequestV0(group_id), 2_000,
                                         connect_timeout_ms=1_000)
            except ZlogError:  # gone, or not listening yet
                return False
        if _not_ready(reply):
            return False
        found.append(named)
        return True

    wait_until(serving, timeout_s=timeout_s, interval_s=0.1,
               what=f"a coordinator serving {group_id}")
    return found[-1]


def _named(control_endpoints: Sequence[str], group_id: str) -> FindCoordinatorResponseV0 | None:
    """The first coordinator a control endpoint names, asking each in turn; None if none."""
    for endpoint in control_endpoints:
        with RpcClient(endpoint) as control:
            try:
                reply = control.call(FindCoordinatorRequestV0(group_id), 2_000,
                                     connect_timeout_ms=1_000)
            except ZlogError:  # a broker being killed, or gone: ask the next one
                continue
        assert isinstance(reply, FindCoordinatorResponseV0)
        assert reply.error_code in (0, ErrorCode.COORDINATOR_NOT_AVAILABLE), reply
        if reply.error_code == 0:
            return reply
    return None


def call_coordinator(client: RpcClient, request: GroupRequest,
                     timeout_s: float = 30) -> Response:
    """The coordinator's answer to `request`, sent again while it is not ready for the group
    (COORDINATOR_NOT_READY: a lease that lapsed on a busy host and comes back, a reload), as a
    client would; any other answer is the test's to check. Waits up to `timeout_s`."""
    answers: list[Response] = []

    def answered() -> bool:
        answers.append(client.call(request, CALL_TIMEOUT_MS))
        return not _not_ready(answers[-1])

    wait_until(answered, timeout_s=timeout_s, interval_s=0.05,
               what=f"{type(request).__name__} answered by a ready coordinator")
    return answers[-1]


def join_request(group_id: str, member_id: str = "",
                 topics: tuple[str, ...] = (GROUP_TOPIC,), *,
                 session_timeout_ms: int = SESSION_TIMEOUT_MS) -> JoinGroupRequestV0:
    """A classic `consumer` JoinGroup (range assignor) subscribing to `topics`."""
    subscription = encode_subscription(Subscription(topics))
    return JoinGroupRequestV0(group_id, member_id, "consumer",
                            (("range", subscription),), session_timeout_ms,
                            REBALANCE_TIMEOUT_MS, client_id="raw")


def new_member_id(client: RpcClient, group_id: str,
                  topics: tuple[str, ...] = (GROUP_TOPIC,)) -> str:
    """The first round of a join (KIP-394): the id the coordinator hands out."""
    reply = call_coordinator(client, join_request(group_id, "", topics))
    assert isinstance(reply, JoinGroupResponseV0), reply
    assert reply.error_code == ErrorCode.MEMBER_ID_REQUIRED and reply.member_id, reply
    return reply.member_id


def collect(client: RpcClient, correlation_ids: Sequence[int],
            timeout_s: float = 30) -> list[Response]:
    """The answers to requests sent with `client.send`, in the order of `correlation_ids`."""
    answered: dict[int, Response] = {}

    def all_answered() -> bool:
        for result in client.poll_responses(100):
            answered[result.correlation_id] = result.unwrap()
        return set(correlation_ids) <= set(answered)

    wait_until(all_answered, timeout_s=timeout_s, interval_s=0, what="parked group answers")
    return [answered[c] for c in correlation_ids]


def committed(client: RpcClient, group_id: str) -> dict[TopicPartition, int]:
    """Every committed offset of the group, as OffsetFetch answers."""
    reply = call_coordinator(client, OffsetFetchRequestV0(group_id))
    assert isinstance(reply, OffsetFetchResponseV0) and reply.error_code == ErrorCode.NONE, reply
    return {TopicPartition(f.topic, f.partition): f.offset for f in reply.offsets}
