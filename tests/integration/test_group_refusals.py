"""Bad group requests to a real `zlog serve`: each is answered with its Kafka error code, and
what the group had stored before is unchanged afterwards (docs/groups.md §4.2, §5.1)."""

from __future__ import annotations

from dataclasses import replace

import zmq

from tests.group_calls import (
    GROUP_TOPIC,
    SESSION_TIMEOUT_MS,
    collect,
    committed,
    find_coordinator,
    join_request,
    new_member_id,
)
from zlog.errors import ErrorCode
from zlog.transport.codec import decode_response, encode_request
from zlog.transport.messages.groups import (
    DescribeGroupsRequestV0,
    DescribeGroupsResponseV0,
    GroupDescription,
    GroupHeartbeatRequestV0,
    GroupHeartbeatResponseV0,
    HeartbeatRequestV0,
    HeartbeatResponseV0,
    JoinGroupResponseV0,
    OffsetCommitRequestV0,
    OffsetCommitResponseV0,
    OffsetFetchRequestV0,
    OffsetFetchResponseV0,
    PartitionCommit,
    SyncGroupRequestV0,
    SyncGroupResponseV0,
)
from zlog.transport.rpc import RpcClient
from zlog.types import TopicPartition
from zlog_testbed.broker_process import CALL_TIMEOUT_MS, BrokerProcess

GROUP = "careful-readers"
SERVER_SIDE_GROUP = "server-side-readers"
FIRST = TopicPartition(GROUP_TOPIC, 0)


def _join(client: RpcClient, member_id: str, session_timeout_ms: int = SESSION_TIMEOUT_MS,
          *, group_id: str = GROUP, protocol_type: str = "consumer",
          assignor: str = "range") -> JoinGroupResponseV0:
    request = join_request(group_id, member_id, session_timeout_ms=session_timeout_ms)
    request = replace(request, protocol_type=protocol_type, protocols=tuple(
        (assignor, subscription) for _name, subscription in request.protocols))
    [reply] = collect(client, [client.send(request, CALL_TIMEOUT_MS)])
    assert isinstance(reply, JoinGroupResponseV0)
    return reply


def _sync(client: RpcClient, generation: int, leader: str) -> None:
    synced = client.call(SyncGroupRequestV0(GROUP, generation, leader,
                                             assignments=((leader, b""),)), CALL_TIMEOUT_MS)
    assert isinstance(synced, SyncGroupResponseV0) and synced.error_code == ErrorCode.NONE, synced


def _commit(client: RpcClient, generation: int, member_id: str,
            *offsets: tuple[TopicPartition, int]) -> OffsetCommitResponseV0:
    reply = client.call(OffsetCommitRequestV0(
        GROUP, tuple((tp, PartitionCommit(o)) for tp, o in offsets),
        generation, member_id), CALL_TIMEOUT_MS)
    assert isinstance(reply, OffsetCommitResponseV0)
    return reply


def _described(client: RpcClient, group_id: str = GROUP) -> GroupDescription:
    reply = client.call(DescribeGroupsRequestV0((group_id,)), CALL_TIMEOUT_MS)
    assert isinstance(reply, DescribeGroupsResponseV0)
    [group] = reply.groups
    return group


def test_bad_requests_get_their_codes_and_change_nothing(group_broker: BrokerProcess) -> None:
    # An unknown group, at its coordinator: described as Dead, no offsets, no error.
    unknown_coordinator = find_coordinator([group_broker.endpoint], "never-seen").endpoint
    with RpcClient(unknown_coordinator) as client:
        unknown = _described(client, "never-seen")
        assert (unknown.error_code, unknown.state, unknown.members) == (ErrorCode.NONE, "Dead", ())
        fetched = client.call(OffsetFetchRequestV0("never-seen"),
                              CALL_TIMEOUT_MS)
        assert fetched == OffsetFetchResponseV0(ErrorCode.NONE, ())

    coordinator = find_coordinator([group_broker.endpoint], GROUP).endpoint
    with RpcClient(coordinator) as client:
        # A member that committed in generation 1, now in generation 2.
        member = new_member_id(client, GROUP)
        assert _join(client, member).generation == 1
        _sync(client, 1, member)
        assert _commit(client, 1, member, (FIRST, 10)).partitions == ((FIRST, ErrorCode.NONE),)
        generation = _join(client, member).generation  # a leader's rejoin: a rebalance
        assert generation == 2
        _sync(client, generation, member)
        stored = committed(client, GROUP)
        assert stored == {FIRST: 10}
        before = _described(client)
        assert (before.state, before.epoch, len(before.members)) == ("Stable", generation, 1)

        refusals = {
            "old generation": _commit(client, generation - 1, member, (FIRST, 11)),
            "unknown member": _commit(client, generation, "ghost", (FIRST, 12)),
            "no identity while it has members": _commit(client, -1, "", (FIRST, 13)),
            "unknown topic and partition": _commit(
                client, generation, member, (TopicPartition("no-such-topic", 0), 14),
                (TopicPartition(GROUP_TOPIC, 99), 15)),
        }
        assert {why: [code for _tp, code in r.partitions] for why, r in refusals.items()} == {
            "old generation": [ErrorCode.ILLEGAL_GENERATION],
            "unknown member": [ErrorCode.UNKNOWN_MEMBER_ID],
            "no identity while it has members": [ErrorCode.UNKNOWN_MEMBER_ID],
            "unknown topic and partition": [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2,
        }
        joins = {
            "session 0 ms": _join(client, "", session_timeout_ms=0),
            "session over the maximum": _join(client, "", session_timeout_ms=2_000_000_000),
            "member id over 1024 bytes": _join(client, "m" * 1025),
            "member id never handed out": _join(client, "not-a-member"),
            "another protocol type": _join(client, member, protocol_type="connect"),
            "a new member of another protocol type": _join(client, "", protocol_type="connect"),
            "no assignor in common": _join(client, member, assignor="roundrobin"),
            "a new member with no assignor in common": _join(client, "", assignor="roundrobin"),
        }
        assert {why: r.error_code for why, r in joins.items()} == {
            "session 0 ms": ErrorCode.INVALID_SESSION_TIMEOUT,
            "session over the maximum": ErrorCode.INVALID_SESSION_TIMEOUT,
            "member id over 1024 bytes": ErrorCode.INVALID_REQUEST,
            "member id never handed out": ErrorCode.UNKNOWN_MEMBER_ID,
            "another protocol type": ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            "a new member of another protocol type": ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            "no assignor in common": ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            "a new member with no assignor in common": ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
        }
        sync = SyncGroupRequestV0(GROUP, generation, member)
        for protocol in (replace(sync, protocol_type="connect"),
                         replace(sync, protocol_name="roundrobin")):
            synced = client.call(protocol, CALL_TIMEOUT_MS)
            assert isinstance(synced, SyncGroupResponseV0), synced
            assert synced.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL, (protocol, synced)
        server_side = client.call(GroupHeartbeatRequestV0(
            GROUP, "", 0, rebalance_timeout_ms=30_000,
            subscribed_topics=(GROUP_TOPIC,), owned=()), CALL_TIMEOUT_MS)
        assert isinstance(server_side, GroupHeartbeatResponseV0)
        assert server_side.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL, \
            "a server-side member cannot join a classic group with members"
        beat = client.call(HeartbeatRequestV0(GROUP, generation, "ghost"),
                           CALL_TIMEOUT_MS)
        assert beat == HeartbeatResponseV0(ErrorCode.UNKNOWN_MEMBER_ID)

        assert committed(client, GROUP) == stored
        after = _described(client)
        assert (after.state, after.epoch, after.members) == (
            before.state, before.epoch, before.members)


def test_a_classic_join_to_a_server_side_group_is_refused_and_changes_nothing(
        group_broker: BrokerProcess) -> None:
    coordinator = find_coordinator([group_broker.endpoint], SERVER_SIDE_GROUP).endpoint
    with RpcClient(coordinator) as client:
        joined = client.call(GroupHeartbeatRequestV0(
            SERVER_SIDE_GROUP, "", 0, rebalance_timeout_ms=30_000,
            subscribed_topics=(GROUP_TOPIC,), owned=()), CALL_TIMEOUT_MS)
        assert isinstance(joined, GroupHeartbeatResponseV0), joined
        assert joined.error_code == ErrorCode.NONE and joined.member_epoch > 0, joined
        before = _described(client, SERVER_SIDE_GROUP)
        assert (before.group_type, len(before.members)) == ("consumer", 1), before
        for member_id in ("", joined.member_id):
            refused = _join(client, member_id, group_id=SERVER_SIDE_GROUP)
            assert refused.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL, (member_id, refused)
        after = _described(client, SERVER_SIDE_GROUP)
        assert (after.state, after.epoch, after.members) == (
            before.state, before.epoch, before.members)


def test_malformed_offset_commit_bodies_are_refused_and_change_nothing(
        group_broker: BrokerProcess) -> None:
    """OffsetCommit's binary body, cut short, with bytes after its end, or with a length that
    runs past it: INVALID_REQUEST each, the group's committed offsets as they were, and the
    coordinator still answering."""
    group = "binary-committers"
    coordinator = find_coordinator([group_broker.endpoint], group).endpoint
    with RpcClient(coordinator) as client:
        good = OffsetCommitRequestV0(group,
                                      ((FIRST, PartitionCommit(7)),))
        assert client.call(good, CALL_TIMEOUT_MS).partitions == ((FIRST, ErrorCode.NONE),)
    header, body = (bytes(frame) for frame in encode_request(1, good)[:2])
    bad_bodies = {"cut short": body[:-3], "trailing bytes": body + b"\x00\x01",
                  "empty": b"", "length past the end": body[:2] + b"\xff\xff" + body[4:]}
    with zmq.Context.instance().socket(zmq.DEALER) as raw:
        raw.setsockopt(zmq.LINGER, 0)
        raw.connect(coordinator)
        for what, bad in bad_bodies.items():
            raw.send_multipart([header, bad])
            assert raw.poll(CALL_TIMEOUT_MS), f"no answer to a body {what}"
            _, answer = decode_response(raw.recv_multipart())
            assert getattr(answer, "error_code", getattr(answer, "error", None)) \
                == ErrorCode.INVALID_REQUEST, (what, answer)
    with RpcClient(coordinator) as client:
        assert committed(client, group) == {FIRST: 7}
        assert client.call(good, CALL_TIMEOUT_MS).partitions == ((FIRST, ErrorCode.NONE),)
