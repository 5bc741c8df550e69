"""The classic group member's decisions, step by step with time as an argument: rule by rule
against hand-written replies, then whole groups against the real coordinator core."""

from __future__ import annotations

import pytest

from tests.unit.groups.coordinator_driver import Driver
from zlog.client.group.classic_member import ClassicMember, Phase
from zlog.client.group.member import MemberState, Reconciliation, SentRequest
from zlog.errors import ErrorCode, ZlogError
from zlog.groups.classic.consumer_protocol import (
    Assignment,
    Subscription,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from zlog.groups.config import GroupConfig
from zlog.transport.messages.groups import (
    HeartbeatRequestV0,
    HeartbeatResponseV0,
    JoinGroupMember,
    JoinGroupRequestV0,
    JoinGroupResponseV0,
    LeaveGroupRequestV0,
    SyncGroupRequestV0,
    SyncGroupResponseV0,
)
from zlog.types import TopicPartition

T0, T1, T2, T3 = (TopicPartition("t", p) for p in range(4))
INTERVAL_MS = 500
SESSION_MS = 3_000
REBALANCE_MS = 60_000


def _member(assignors: tuple[str, ...] = ("range",), instance_id: str | None = None,
            ) -> ClassicMember:
    return ClassicMember("g", assignors=assignors, session_timeout_ms=SESSION_MS,
                         rebalance_timeout_ms=REBALANCE_MS, heartbeat_interval_ms=INTERVAL_MS,
                         group_instance_id=instance_id, client_id="c", retry_backoff_ms=100)


def _started(member: ClassicMember, now_ms: int = 0) -> ClassicMember:
    """Subscribed to "t", its coordinator found: its first JoinGroup is due."""
    member.subscribe(["t"], now_ms)
    member.coordinator_found()
    return member


def _joined_reply(member_id: str, generation: int, leader_id: str,
                  **fields: object) -> JoinGroupResponseV0:
    return JoinGroupResponseV0(ErrorCode.NONE, member_id=member_id, generation=generation,
                             protocol_type="consumer", protocol_name="range",
                             leader_id=leader_id, **fields)  # type: ignore[arg-type]


def _send(member: ClassicMember, now_ms: int) -> SentRequest:
    sent = member.next_heartbeat(now_ms)
    assert sent is not None, f"nothing due at {now_ms} ({member.phase}, due {member.due_ms()})"
    return sent


def _assignment(*partitions: TopicPartition) -> bytes:
    return encode_assignment(Assignment(tuple(partitions)))


def _reconcile(member: ClassicMember, now_ms: int) -> Reconciliation | None:
    work = member.take_reconciliation()
    if work is not None:
        member.reconciled(work, now_ms)
    return work


def _stable(member: ClassicMember, *partitions: TopicPartition, generation: int = 1,
            now_ms: int = 0) -> ClassicMember:
    """Joined as a follower of generation `generation` holding `partitions`."""
    _started(member, now_ms)
    member.on_response(_send(member, now_ms), _joined_reply("m-1", generation, "m-0"), now_ms)
    member.on_response(_send(member, now_ms), SyncGroupResponseV0(
        ErrorCode.NONE, _assignment(*partitions)), now_ms)
    _reconcile(member, now_ms)
    assert member.owned == frozenset(partitions)
    return member


def test_a_new_member_asks_for_an_id_then_joins_with_it_at_once() -> None:
    member = _member(("range", "cooperative-sticky"))
    member.subscribe(["b", "a"], 0)
    assert member.next_heartbeat(0) is None  # find the coordinator first
    member.coordinator_found()
    sent = _send(member, 0)
    request = sent.request
    assert isinstance(request, JoinGroupRequestV0)
    assert (request.member_id, request.protocol_type) == ("", "consumer")
    assert [name for name, _ in request.protocols] == ["range", "cooperative-sticky"]
    assert decode_subscription(request.protocols[0][1]).topics == ("a", "b")
    assert request.rebalance_timeout_ms == REBALANCE_MS
    assert sent.timeout_ms is not None and sent.timeout_ms > REBALANCE_MS  # it may park
    assert member.next_heartbeat(0) is None  # one in flight at a time
    member.on_response(sent, JoinGroupResponseV0(ErrorCode.MEMBER_ID_REQUIRED, member_id="c-1"), 5)
    again = _send(member, 5).request
    assert isinstance(again, JoinGroupRequestV0) and again.member_id == "c-1"


def test_the_leader_runs_the_chosen_assignor_and_followers_send_nothing() -> None:
    leader = _member()
    _started(leader)
    subscription = encode_subscription(Subscription(("t",)))
    members = (JoinGroupMember("m-a", None, subscription), JoinGroupMember("m-b", None,
                                                                         subscription))
    leader.on_response(_send(leader, 0), _joined_reply("m-a", 4, "m-a", members=members), 10)
    assert leader.next_heartbeat(10) is None  # partition counts first
    assert leader.assignment_topics() == frozenset({"t"})
    leader.assign({"t": 4}, 11)
    sync = _send(leader, 11).request
    assert isinstance(sync, SyncGroupRequestV0)
    assert (sync.generation, sync.member_id, sync.protocol_name) == (4, "m-a", "range")
    assert dict(sync.assignments) == {"m-a": _assignment(T0, T1), "m-b": _assignment(T2, T3)}

    follower = _member()
    _started(follower)
    follower.on_response(_send(follower, 0), _joined_reply("m-b", 4, "m-a"), 10)
    assert follower.assignment_topics() is None
    follower_sync = _send(follower, 10).request
    assert isinstance(follower_sync, SyncGroupRequestV0) and follower_sync.assignments == ()


def test_a_static_leader_told_to_skip_assignment_syncs_as_a_follower() -> None:
    member = _member(instance_id="i-1")
    _started(member)
    sent = _send(member, 0)
    assert isinstance(sent.request, JoinGroupRequestV0)
    assert (sent.request.member_id, sent.request.group_instance_id) == ("", "i-1")
    member.on_response(sent, JoinGroupResponseV0(
        ErrorCode.NONE, member_id="m-new", generation=3, protocol_name="range",
        leader_id="m-new", skip_assignment=True,
        members=(JoinGroupMember("m-new", "i-1", b""),)), 5)
    sync = _send(member, 5).request
    assert isinstance(sync, SyncGroupRequestV0) and sync.assignments == ()


def test_sync_assigns_then_heartbeats_follow_on_the_interval() -> None:
    member = _stable(_member(), T0, T1, generation=2, now_ms=100)
    assert member.state is MemberState.STABLE
    assert member.commit_identity() == (2, "m-1", None)
    assert member.next_heartbeat(100 + INTERVAL_MS - 1) is None
    heartbeat = _send(member, 100 + INTERVAL_MS).request
    assert isinstance(heartbeat, HeartbeatRequestV0)
    assert (heartbeat.generation, heartbeat.member_id) == (2, "m-1")


def test_eager_rebalance_revokes_everything_before_the_join_goes() -> None:
    member = _stable(_member(("range", "cooperative-sticky")), T0, T1)
    sent = _send(member, INTERVAL_MS)
    member.on_response(sent, HeartbeatResponseV0(ErrorCode.REBALANCE_IN_PROGRESS), INTERVAL_MS)
    assert member.phase is Phase.REVOKING
    # Until the poll thread revokes, it keeps its session with heartbeats, and no join goes.
    heartbeat = _send(member, 2 * INTERVAL_MS)
    assert isinstance(heartbeat.request, HeartbeatRequestV0)
    member.on_response(heartbeat, HeartbeatResponseV0(ErrorCode.REBALANCE_IN_PROGRESS),
                       2 * INTERVAL_MS)
    assert member.phase is Phase.REVOKING
    work = member.take_reconciliation()
    assert work == Reconciliation(revoke=frozenset({T0, T1}))
    member.reconciled(work, 2 * INTERVAL_MS + 5)
    join = _send(member, 2 * INTERVAL_MS + 5).request
    assert isinstance(join, JoinGroupRequestV0) and join.member_id == "m-1"
    assert decode_subscription(join.protocols[0][1]).owned_partitions == ()


def test_cooperative_rebalance_keeps_reading_and_revokes_only_what_moved_then_rejoins() -> None:
    member = _stable(_member(("cooperative-sticky",)), T0, T1, T2)
    member.on_response(_send(member, INTERVAL_MS),
                       HeartbeatResponseV0(ErrorCode.REBALANCE_IN_PROGRESS), INTERVAL_MS)
    assert member.take_reconciliation() is None  # nothing revoked before the join
    sent = _send(member, INTERVAL_MS)
    join = sent.request
    assert isinstance(join, JoinGroupRequestV0)
    subscription = decode_subscription(join.protocols[0][1])
    assert subscription.owned_partitions == (T0, T1, T2) and subscription.generation == 1
    member.on_response(sent, JoinGroupResponseV0(
        ErrorCode.NONE, member_id="m-1", generation=2, protocol_name="cooperative-sticky",
        leader_id="m-0"), 600)
    member.on_response(_send(member, 600), SyncGroupResponseV0(
        ErrorCode.NONE, _assignment(T0, T1)), 610)
    work = member.take_reconciliation()
    assert work == Reconciliation(revoke=frozenset({T2}))
    member.reconciled(work, 620)
    second = _send(member, 620).request  # the follow-up rebalance places T2 (KIP-429)
    assert isinstance(second, JoinGroupRequestV0)
    assert decode_subscription(second.protocols[0][1]).owned_partitions == (T0, T1)


@pytest.mark.parametrize(("code", "member_id_after"), [
    (ErrorCode.ILLEGAL_GENERATION, "m-1"), (ErrorCode.UNKNOWN_MEMBER_ID, "")])
def test_a_fenced_heartbeat_loses_the_partitions_without_commit_then_rejoins(
        code: ErrorCode, member_id_after: str) -> None:
    member = _stable(_member(), T0, T1)
    member.on_response(_send(member, INTERVAL_MS), HeartbeatResponseV0(code), INTERVAL_MS)
    assert member.state is MemberState.DROPPING
    assert member.next_heartbeat(INTERVAL_MS + 1_000) is None
    work = member.take_reconciliation()
    assert work == Reconciliation(lost=frozenset({T0, T1}))
    member.reconciled(work, 700)
    join = _send(member, 700).request
    assert isinstance(join, JoinGroupRequestV0) and join.member_id == member_id_after
    assert member.commit_identity()[0] == -1


def test_fenced_instance_id_and_bad_config_are_fatal() -> None:
    member = _stable(_member(instance_id="i-1"), T0)
    member.on_response(_send(member, INTERVAL_MS),
                       HeartbeatResponseV0(ErrorCode.FENCED_INSTANCE_ID), INTERVAL_MS)
    assert member.state is MemberState.FAILED and member.failure is not None
    assert member.failure.code == ErrorCode.FENCED_INSTANCE_ID
    with pytest.raises(ZlogError) as bad:
        _member(("range", "fastest"))
    assert bad.value.code == ErrorCode.INVALID_CONFIG and "fastest" in str(bad.value)


def test_a_moved_coordinator_is_found_again_and_a_broken_sync_restarts_the_join() -> None:
    member = _member()
    _started(member)
    member.on_response(_send(member, 0), _joined_reply("m-1", 1, "m-0"), 0)
    member.on_failure(_send(member, 0), ZlogError(ErrorCode.REQUEST_TIMED_OUT, "gone"), 10)
    assert member.needs_coordinator and member.next_heartbeat(1_000) is None
    member.coordinator_found()
    assert isinstance(_send(member, 110).request, JoinGroupRequestV0)


@pytest.mark.parametrize("code", [ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.KAFKA_STORAGE_ERROR])
def test_any_other_retriable_error_is_asked_again_never_handed_to_the_caller(
        code: ErrorCode) -> None:
    member = _stable(_member(), T0)
    member.on_response(_send(member, INTERVAL_MS), HeartbeatResponseV0(code), INTERVAL_MS)
    assert member.failure is None and member.state is MemberState.STABLE
    assert member.owned == {T0} and not member.needs_coordinator
    assert isinstance(_send(member, INTERVAL_MS + 100).request, HeartbeatRequestV0)
    joining = _started(_member())
    joining.on_response(_send(joining, 0), JoinGroupResponseV0(code, member_id=""), 0)
    assert joining.failure is None and joining.phase is Phase.JOIN
    assert isinstance(_send(joining, 100).request, JoinGroupRequestV0)


def test_silence_for_a_session_self_fences() -> None:
    member = _stable(_member(), T0)
    _send(member, INTERVAL_MS)  # its reply never comes
    assert member.check_timers(SESSION_MS - 1, SESSION_MS - 1, REBALANCE_MS) is None
    assert member.state is MemberState.STABLE
    member.check_timers(SESSION_MS, SESSION_MS, REBALANCE_MS)
    assert member.take_reconciliation() == Reconciliation(lost=frozenset({T0}))


@pytest.mark.parametrize("instance_id", [None, "i-1"])
def test_a_slow_poll_loop_goes_out_and_rejoins_at_the_next_poll(instance_id: str | None,
                                                                ) -> None:
    member = _stable(_member(instance_id=instance_id), T0, now_ms=REBALANCE_MS)
    leave = member.check_timers(REBALANCE_MS + 1, 0, REBALANCE_MS)
    if instance_id is None:
        assert leave == LeaveGroupRequestV0("g", (("m-1", None),))
    else:
        assert leave is None  # a static member's place waits for it (its session decides)
    assert member.state is MemberState.STALE
    work = member.take_reconciliation()
    assert work == Reconciliation(lost=frozenset({T0}))
    member.reconciled(work, REBALANCE_MS + 2)
    assert member.next_heartbeat(REBALANCE_MS + 2) is None  # not before the next poll
    member.polled(REBALANCE_MS + 3)
    join = _send(member, REBALANCE_MS + 3).request
    assert isinstance(join, JoinGroupRequestV0) and join.member_id == ""


def test_close_leaves_a_dynamic_member_and_keeps_a_static_ones_place() -> None:
    assert _stable(_member(), T0).leave() == LeaveGroupRequestV0("g", (("m-1", None),))
    static = _stable(_member(instance_id="i-1"), T0)
    assert static.leave() is None
    assert static.state is MemberState.UNSUBSCRIBED


# -- whole groups against the coordinator's core ------------------------------------------


class Group:
    """Members and the real GroupCoordinator, wired by hand: each member's due request goes
    in, replies come back when the coordinator releases them, and the application reconciles
    at once. Every step checks that no partition is owned by two members."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.driver = Driver(config=GroupConfig(initial_rebalance_delay_ms=0), counts=counts)
        self.counts = counts
        self.members: list[ClassicMember] = []
        self.parked: dict[int, tuple[ClassicMember, SentRequest]] = {}
        self.revoked: list[tuple[int, frozenset[TopicPartition]]] = []

    def add(self, member: ClassicMember) -> ClassicMember:
        member.subscribe(["t"], self.driver.now_ms)
        member.coordinator_found()
        self.members.append(member)
        return member

    def step(self, delta_ms: int = 50) -> None:
        driver = self.driver
        for index, member in enumerate(self.members):
            work = _reconcile(member, driver.now_ms)
            if work is not None and work.revoke:
                self.revoked.append((index, work.revoke))
            if member.assignment_topics() is not None:
                member.assign(self.counts, driver.now_ms)
            sent = member.next_heartbeat(driver.now_ms)
            if sent is not None:
                self.parked[driver.handle(sent.request)] = (member, sent)
        for request_id in sorted(self.parked):
            reply = driver.reply(request_id)
            if reply is not None:
                member, sent = self.parked.pop(request_id)
                member.on_response(sent, reply, driver.now_ms)
        driver.tick(delta_ms)
        owners: dict[TopicPartition, int] = {}
        for index, member in enumerate(self.members):
            for tp in member.owned:
                assert tp not in owners, f"{tp} owned by members {owners[tp]} and {index}"
                owners[tp] = index

    def settle(self, steps: int = 400) -> None:
        for _ in range(steps):
            self.step()
            everything = {TopicPartition("t", p) for p in range(self.counts["t"])}
            owned = [m.owned for m in self.members]
            if all(m.phase is Phase.STABLE and m.owned == m.target for m in self.members) \
                    and set().union(*owned) == everything:
                return
        state = [(m.phase, sorted(m.owned)) for m in self.members]
        raise AssertionError(f"no settled group: {state}")


@pytest.mark.parametrize("assignors", [("range",), ("roundrobin",), ("cooperative-sticky",)])
def test_members_against_the_coordinator_share_the_partitions_and_never_overlap(
        assignors: tuple[str, ...]) -> None:
    group = Group({"t": 6})
    first = group.add(_member(assignors))
    group.settle()
    assert first.owned == {TopicPartition("t", p) for p in range(6)}
    second, third = group.add(_member(assignors)), group.add(_member(assignors))
    group.settle()
    assert sorted(len(m.owned) for m in (first, second, third)) == [2, 2, 2]
    if assignors == ("cooperative-sticky",):
        # Only what moved was revoked: the first member gave up 4 partitions, kept 2.
        assert all(index == 0 for index, _ in group.revoked)
        assert sum(len(tps) for _, tps in group.revoked) == 4
    else:
        assert any(index == 0 and len(tps) == 6 for index, tps in group.revoked)


def test_a_static_member_back_under_a_new_process_keeps_its_partitions_without_a_rebalance(
        ) -> None:
    group = Group({"t": 4})
    group.add(_member(instance_id="i-a"))
    group.add(_member(instance_id="i-b"))
    group.settle()
    kept = group.members[1].owned
    generation = group.members[0].generation
    group.members.pop()  # the process dies...
    group.add(_member(instance_id="i-b"))  # ...and its successor comes back in time
    group.revoked.clear()
    group.settle()
    assert group.members[1].owned == kept
    assert group.members[0].generation == generation
    assert not group.revoked  # nobody else revoked anything


def test_only_the_leader_watches_its_groups_topics_and_a_change_makes_it_rejoin() -> None:
    group = Group({"t": 2})
    group.add(_member())
    group.add(_member())
    group.settle()
    leader, follower = sorted(group.members, key=lambda m: m.watched_topics() is None)
    assert leader.watched_topics() == {"t"} and follower.watched_topics() is None
    leader.metadata_seen({"t": 2, "other": 9}, group.driver.now_ms)
    assert leader.phase is Phase.STABLE, "unchanged counts of its topics: nothing to do"
    follower.metadata_seen({"t": 5}, group.driver.now_ms)
    assert follower.phase is Phase.STABLE, "a follower leaves it to the leader"
    leader.metadata_seen({"t": 3}, group.driver.now_ms)
    assert leader.phase is Phase.REVOKING, "eager: revokes everything, then rejoins"
    assert leader.watched_topics() is None


@pytest.mark.parametrize("assignors", [("range",), ("cooperative-sticky",)])
def test_partitions_added_to_a_subscribed_topic_are_assigned_after_the_leader_sees_them(
        assignors: tuple[str, ...]) -> None:
    """CreatePartitions tells no member: the leader's look at metadata finds the new count,
    it rejoins, and the rebalance hands out every partition, never one to two members."""
    group = Group({"t": 4})
    group.add(_member(assignors))
    group.add(_member(assignors))
    group.settle()
    group.counts["t"] = 7
    generation = group.members[0].generation
    for member in group.members:
        member.metadata_seen(dict(group.counts), group.driver.now_ms)
    group.settle()
    assert sorted(len(m.owned) for m in group.members) == [3, 4]
    assert group.members[0].generation > generation
