"""The classic group state machine, one rule per test, driven with explicit time."""

from __future__ import annotations

import dataclasses

import pytest

from tests.unit.groups.coordinator_driver import REBALANCE_MS, SESSION_MS, Driver
from zlog.errors import ErrorCode
from zlog.groups.classic.group import ClassicGroup, ClassicState
from zlog.groups.config import GroupConfig
from zlog.groups.coordinator import GroupCoordinator
from zlog.groups.output import TimerKey, TimerKind
from zlog.transport.messages.groups import (
    HeartbeatRequestV0,
    HeartbeatResponseV0,
    JoinGroupResponseV0,
    LeaveGroupRequestV0,
    LeaveGroupResponseV0,
    SyncGroupResponseV0,
)


def joined(d: Driver, request_id: int) -> JoinGroupResponseV0:
    response = d.reply(request_id)
    assert isinstance(response, JoinGroupResponseV0), response
    return response


def synced(d: Driver, request_id: int) -> SyncGroupResponseV0:
    response = d.reply(request_id)
    assert isinstance(response, SyncGroupResponseV0), response
    return response


def group_of(d: Driver, group_id: str = "g") -> ClassicGroup:
    group = d.coordinator.groups[group_id]
    assert isinstance(group, ClassicGroup)
    return group


def join_new(d: Driver, group: str = "g", **kwargs: object) -> tuple[str, int]:
    """KIP-394's two rounds: get an id, then join with it. Returns (member id, request id)."""
    first = joined(d, d.join(group, **kwargs))  # type: ignore[arg-type]
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id
    return first.member_id, d.join(group, first.member_id, **kwargs)  # type: ignore[arg-type]


def stable_group(d: Driver, size: int) -> list[str]:
    """Members joined one by one into one Stable generation; returns their ids, leader first."""
    ids: list[str] = []
    pending: dict[str, int] = {}
    for _ in range(size):
        member_id, request_id = join_new(d)
        pending[member_id] = request_id
        ids.append(member_id)
    group = group_of(d)
    if group.state is ClassicState.PREPARING_REBALANCE:
        for member_id in ids:
            if d.reply(pending[member_id]) is None:
                continue
            pending[member_id] = d.join("g", member_id)
    leader = group.leader_id
    assert leader is not None and group.state is ClassicState.COMPLETING_REBALANCE
    generation = group.generation
    d.sync(leader, generation, {m: m.encode() for m in ids})
    for member_id in ids:
        if member_id != leader:
            d.sync(member_id, generation)
    assert group.state is ClassicState.STABLE
    return [leader] + [m for m in ids if m != leader]


def test_first_join_gets_a_member_id_then_joins_and_leads_generation_one() -> None:
    d = Driver()
    member_id, request_id = join_new(d)
    response = joined(d, request_id)
    assert response.error_code == ErrorCode.NONE
    assert (response.generation, response.leader_id, response.member_id) == (1, member_id,
                                                                              member_id)
    assert [m.member_id for m in response.members] == [member_id]
    assert group_of(d).state is ClassicState.COMPLETING_REBALANCE


def test_unused_member_ids_expire_after_the_session_timeout() -> None:
    d = Driver()
    first = joined(d, d.join())
    assert first.member_id in group_of(d).pending_members
    d.tick(SESSION_MS)
    assert "g" not in d.coordinator.groups


def test_followers_wait_for_the_leaders_sync() -> None:
    d = Driver()
    a, _ = join_new(d)
    d.sync(a, 1, {a: b"A"})
    b, rb = join_new(d)
    assert d.reply(rb) is None and group_of(d).state is ClassicState.PREPARING_REBALANCE
    assert d.heartbeat(a, 1) == HeartbeatResponseV0(ErrorCode.REBALANCE_IN_PROGRESS)
    ra2 = d.join("g", a)
    assert joined(d, ra2).generation == joined(d, rb).generation == 2
    assert joined(d, rb).members == () and len(joined(d, ra2).members) == 2
    follower = d.sync(b, 2)
    assert d.reply(follower) is None
    leader = d.sync(a, 2, {a: b"A2", b: b"B2"})
    assert synced(d, follower).assignment == b"B2" and synced(d, leader).assignment == b"A2"
    assert group_of(d).state is ClassicState.STABLE


def test_generation_and_member_fencing() -> None:
    d = Driver()
    a, b = stable_group(d, 2)
    assert d.heartbeat(a, 1) == HeartbeatResponseV0(ErrorCode.ILLEGAL_GENERATION)
    assert d.heartbeat("ghost", 2) == HeartbeatResponseV0(ErrorCode.UNKNOWN_MEMBER_ID)
    assert d.heartbeat(b, 2) == HeartbeatResponseV0(ErrorCode.NONE)
    assert synced(d, d.sync(b, 2)).assignment == b.encode()
    assert synced(d, d.sync(b, 3)).error_code == ErrorCode.ILLEGAL_GENERATION


def test_missed_session_removes_the_member_and_rebalances() -> None:
    d = Driver()
    a, b = stable_group(d, 2)
    d.tick(SESSION_MS // 2)
    d.heartbeat(a, 2)
    d.tick(SESSION_MS // 2)
    group = group_of(d)
    assert b not in group.members and group.state is ClassicState.PREPARING_REBALANCE
    response = joined(d, d.join("g", a))
    assert response.generation == 3 and [m.member_id for m in response.members] == [a]


def test_members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout() -> None:
    d = Driver()
    a, b = stable_group(d, 2)
    _, rc = join_new(d)
    ra = d.join("g", a)
    d.tick(SESSION_MS - 1)
    d.heartbeat(b, 2)  # b is alive but never rejoins
    d.tick(REBALANCE_MS - SESSION_MS + 1)
    assert joined(d, ra).generation == joined(d, rc).generation == 3
    assert b not in group_of(d).members


def test_leave_of_the_last_member_empties_the_group() -> None:
    d = Driver()
    (a,) = stable_group(d, 1)
    response = d.send(LeaveGroupRequestV0, group_id="g", members=((a, None),))
    assert response == LeaveGroupResponseV0(ErrorCode.NONE, ((a, None, ErrorCode.NONE),))
    group = group_of(d)
    assert group.state is ClassicState.EMPTY and group.generation == 2
    assert d.log[-1].value is not None and d.log[-1].value.members == ()  # type: ignore[union-attr]


def test_static_member_restart_replaces_its_id_without_a_rebalance() -> None:
    d = Driver()
    ra = d.join(instance_id="i-a")
    a = joined(d, ra).member_id
    d.sync(a, 1, {a: b"A"}, instance_id="i-a")
    restart = joined(d, d.join(instance_id="i-a"))
    assert restart.error_code == ErrorCode.NONE and restart.member_id != a
    assert restart.generation == 1 and restart.skip_assignment
    assert group_of(d).state is ClassicState.STABLE
    assert synced(d, d.sync(restart.member_id, 1, instance_id="i-a")).assignment == b"A"
    assert d.heartbeat(a, 1, instance_id="i-a") == HeartbeatResponseV0(
        ErrorCode.FENCED_INSTANCE_ID)


def test_static_members_stay_through_a_rebalance_they_miss() -> None:
    d = Driver()
    a = joined(d, d.join(instance_id="i-a")).member_id
    d.sync(a, 1, {a: b"A"})
    _, rb = join_new(d)
    for _ in range(REBALANCE_MS // 5_000):
        assert d.heartbeat(a, 1) == HeartbeatResponseV0(ErrorCode.REBALANCE_IN_PROGRESS)
        d.tick(5_000)
    assert joined(d, rb).generation == 2
    assert a in group_of(d).members


def test_initial_delay_gathers_members_into_one_first_generation() -> None:
    d = Driver(config=GroupConfig(initial_rebalance_delay_ms=3_000))
    _, ra = join_new(d)
    d.tick(2_000)
    _, rb = join_new(d)
    d.tick(2_000)
    assert d.reply(ra) is None  # extended by one delay: a new member arrived during it
    d.tick(1_999)
    assert d.reply(ra) is None
    d.tick(1)
    assert joined(d, ra).generation == joined(d, rb).generation == 1


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"session_ms": 10}, ErrorCode.INVALID_SESSION_TIMEOUT),
        ({"session_ms": 10**9}, ErrorCode.INVALID_SESSION_TIMEOUT),
        ({"group": ""}, ErrorCode.INVALID_GROUP_ID),
        ({"protocol_type": "connect"}, ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
        ({"protocols": ("roundrobin",)}, ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
        ({"member_id": "x" * 1025}, ErrorCode.INVALID_REQUEST),
    ],
)
def test_bad_joins_are_refused_and_change_nothing(change: dict[str, object],
                                                 code: ErrorCode) -> None:
    d = Driver()
    stable_group(d, 1)
    before = (dataclasses.replace(group_of(d)), len(d.log))
    assert joined(d, d.join(**change)).error_code == code  # type: ignore[arg-type]
    assert (group_of(d), len(d.log)) == before


def test_group_max_size() -> None:
    d = Driver(config=GroupConfig(initial_rebalance_delay_ms=0, max_group_size=1))
    stable_group(d, 1)
    assert joined(d, d.join()).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_while_loading_heartbeats_pass_and_the_rest_waits() -> None:
    coordinator = GroupCoordinator(GroupConfig())
    out = coordinator.handle(1, HeartbeatRequestV0("g", 1, "m"), 0)
    assert out.replies == [(1, HeartbeatResponseV0(ErrorCode.NONE))]
    d = Driver()
    d.coordinator.loaded = False
    assert joined(d, d.join()).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert synced(d, d.sync("m", 1)).error_code == ErrorCode.REBALANCE_IN_PROGRESS


def test_a_new_coordinator_loads_the_stable_group_and_keeps_its_members() -> None:
    d = Driver()
    a, b = stable_group(d, 2)
    successor = Driver()
    successor.take(successor.coordinator.load(d.replayed(), d.now_ms))
    group = group_of(successor)
    assert group.state is ClassicState.STABLE and group.generation == 2
    assert sorted(group.members) == sorted([a, b])
    assert group.members[b].assignment == b.encode()
    assert successor.heartbeat(b, 2) == HeartbeatResponseV0(ErrorCode.NONE)
    assert TimerKey(TimerKind.SESSION, "g", a) in successor.coordinator.fx.deadlines


def test_a_generation_handed_out_before_a_failover_is_never_reused() -> None:
    d = Driver()
    a, b = stable_group(d, 2)
    _, rc = join_new(d)
    d.join("g", a)
    d.join("g", b)
    assert joined(d, rc).generation == 3  # handed out; the leader never synced
    successor = Driver()
    successor.take(successor.coordinator.load(d.replayed(), d.now_ms))
    assert group_of(successor).state is ClassicState.PREPARING_REBALANCE
    assert successor.heartbeat(b, 3) == HeartbeatResponseV0(ErrorCode.REBALANCE_IN_PROGRESS)
    ra = successor.join("g", a)
    successor.tick(REBALANCE_MS)
    assert joined(successor, ra).generation == 4


def test_members_that_never_sync_are_removed_at_the_sync_timeout() -> None:
    d = Driver()
    a, b = stable_group(d, 2)
    ra, rb = d.join("g", a), d.join("g", b)
    assert joined(d, ra).generation == joined(d, rb).generation == 3
    leader = joined(d, ra).leader_id
    follower = b if leader == a else a
    d.sync(leader, 3, {a: b"A", b: b"B"})
    for _ in range(REBALANCE_MS // 5_000):  # both heartbeat; the follower never syncs
        assert d.heartbeat(leader, 3) == HeartbeatResponseV0(ErrorCode.NONE)
        assert d.heartbeat(follower, 3) == HeartbeatResponseV0(ErrorCode.NONE)
        d.tick(5_000)
    group = group_of(d)
    assert follower not in group.members and group.state is ClassicState.PREPARING_REBALANCE


def test_a_lost_join_reply_is_sent_again_without_a_rebalance() -> None:
    d = Driver()
    a, b = stable_group(d, 2)
    ra, rb = d.join("g", a), d.join("g", b)
    again = joined(d, d.join("g", b))
    assert again.generation == joined(d, rb).generation == 3
    assert group_of(d).state is ClassicState.COMPLETING_REBALANCE
    assert joined(d, ra).generation == 3


def test_an_admin_removes_a_static_member_by_instance_id() -> None:
    d = Driver()
    a = joined(d, d.join(instance_id="i-a")).member_id
    d.sync(a, 1, {a: b"A"})
    response = d.send(LeaveGroupRequestV0, group_id="g", members=(("", "i-a"),))
    assert response == LeaveGroupResponseV0(ErrorCode.NONE, ((a, "i-a", ErrorCode.NONE),))
    assert group_of(d).members == {} and group_of(d).static_members == {}
