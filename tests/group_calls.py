"""Raw consumer-group requests against real brokers (RpcClient, no zlog client): finding a
group's coordinator, the two rounds of a classic JoinGroup, and collecting the answers of
requests a coordinator parks (JoinGroup, SyncGroup) while the test sends others."""

from __future__ import annotations

from collections.abc import Sequence

from tests.broker_fixtures import CALL_TIMEOUT_MS
from tests.waiting import wait_until
from zlog.errors import ErrorCode, ZlogError
from zlog.groups.consumer_protocol import Subscription, encode_subscription
from zlog.transport.group_messages import (
    NO_REQUEST_ID,
    FindCoordinatorRequestV0,
    FindCoordinatorResponseV0,
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from zlog.transport.messages import Response
from zlog.transport.rpc import RpcClient
from zlog.types import TopicPartition

GROUP_TOPIC = "orders"
"""The topic the groups of these tests read."""
SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 30_000


def find_coordinator(control_endpoints: Sequence[str], group_id: str,
                     timeout_s: float = 30) -> FindCoordinatorResponseV0:
    """The coordinator FindCoordinator names, asking each control endpoint in turn until one
    names it (COORDINATOR_NOT_AVAILABLE while the offsets topic or its leader is not there
    yet; a dead broker simply does not answer)."""
    found: list[FindCoordinatorResponseV0] = []

    def named() -> bool:
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
                found.append(reply)
                return True
        return False

    wait_until(named, timeout_s=timeout_s, interval_s=0.1, what=f"a coordinator of {group_id}")
    return found[-1]


def join_request(group_id: str, member_id: str = "",
                 topics: tuple[str, ...] = (GROUP_TOPIC,), *,
                 session_timeout_ms: int = SESSION_TIMEOUT_MS) -> JoinGroupRequest:
    """A classic `consumer` JoinGroup (range assignor) subscribing to `topics`."""
    subscription = encode_subscription(Subscription(topics))
    return JoinGroupRequest(NO_REQUEST_ID, group_id, member_id, "consumer",
                            (("range", subscription),), session_timeout_ms,
                            REBALANCE_TIMEOUT_MS, client_id="raw")


def new_member_id(client: RpcClient, group_id: str,
                  topics: tuple[str, ...] = (GROUP_TOPIC,)) -> str:
    """The first round of a join (KIP-394): the id the coordinator hands out."""
    reply = client.call(join_request(group_id, "", topics), CALL_TIMEOUT_MS)
    assert isinstance(reply, JoinGroupResponse), reply
    assert reply.error == ErrorCode.MEMBER_ID_REQUIRED and reply.member_id, reply
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
    reply = client.call(OffsetFetchRequest(NO_REQUEST_ID, group_id), CALL_TIMEOUT_MS)
    assert isinstance(reply, OffsetFetchResponse) and reply.error == ErrorCode.NONE, reply
    return {tp: fetched.offset for tp, fetched in reply.offsets}
