"""Server-side assignment: revoke before assign, member epochs, static members, commits."""

from __future__ import annotations

from typing import Any

from tests.unit.groups.coordinator_driver import Driver
from tests.unit.groups.test_offsets import commit
from zlog.errors import ErrorCode
from zlog.groups.output import TimerKey, TimerKind
from zlog.groups.server_side.group import ConsumerGroup, MemberState
from zlog.groups.server_side.machine import UNRELEASED_HEARTBEAT_INTERVAL_MS
from zlog.transport.messages.groups import GroupHeartbeatRequestV0, GroupHeartbeatResponseV0
from zlog.types import TopicPartition as TP

SESSION_MS = 10_000


def hb(d: Driver, member_id: str, epoch: int, **fields: Any) -> GroupHeartbeatResponseV0:
    if epoch == 0:
        fields.setdefault("subscribed_topics", ("t",))
        fields.setdefault("rebalance_timeout_ms", 30_000)
    response = d.send(GroupHeartbeatRequestV0, group_id="g", member_id=member_id,
                      member_epoch=epoch, **fields)
    assert isinstance(response, GroupHeartbeatResponseV0)
    return response


def group_of(d: Driver) -> ConsumerGroup:
    group = d.coordinator.groups["g"]
    assert isinstance(group, ConsumerGroup)
    return group


def tps(*numbers: int) -> tuple[TP, ...]:
    return tuple(TP("t", n) for n in numbers)


def owners_are_unique(group: ConsumerGroup) -> None:
    seen: dict[TP, str] = {}
    for member_id, member in group.members.items():
        for tp in member.holds():
            assert tp not in seen, f"{tp} held by {seen[tp]} and {member_id}"
            seen[tp] = member_id
    assert seen == group.owner


def test_the_first_member_gets_every_partition() -> None:
    d = Driver()
    response = hb(d, "a", 0)
    assert (response.error_code, response.member_epoch, response.assignment) == (
        ErrorCode.NONE, 1, tps(0, 1, 2, 3, 4, 5))
    assert response.heartbeat_interval_ms == 1_000 and response.session_timeout_ms == SESSION_MS


def test_a_partition_moves_only_after_its_owner_revokes_it() -> None:
    d = Driver()
    hb(d, "a", 0)
    joined = hb(d, "b", 0)
    assert joined.member_epoch == 2 and joined.assignment == ()
    group = group_of(d)
    assert group.members["b"].state is MemberState.UNRELEASED
    assert joined.heartbeat_interval_ms == UNRELEASED_HEARTBEAT_INTERVAL_MS, (
        "it takes the partitions at its first heartbeat after their release")
    told = hb(d, "a", 1)
    assert told.member_epoch == 1 and told.assignment is not None and len(told.assignment) == 3
    moving = set(tps(0, 1, 2, 3, 4, 5)) - set(told.assignment)
    owners_are_unique(group)
    assert hb(d, "b", 2).assignment is None  # still held by a
    released = hb(d, "a", 1, owned=told.assignment)
    assert released.member_epoch == 2 and released.assignment is None
    gained = hb(d, "b", 2)
    assert set(gained.assignment or ()) == moving
    assert gained.heartbeat_interval_ms == 1_000, "at its target: the configured interval"
    owners_are_unique(group)
    assert group.state.value == "Stable"


def test_unaffected_members_only_see_their_epoch_change() -> None:
    d = Driver(counts={"t": 4, "u": 2})
    hb(d, "a", 0, subscribed_topics=("t",))
    first = hb(d, "b", 0, subscribed_topics=("u",))
    assert first.assignment == (TP("u", 0), TP("u", 1))
    response = hb(d, "a", 1)
    assert response.member_epoch == 2 and response.assignment is None


def test_epoch_fencing() -> None:
    d = Driver()
    hb(d, "a", 0)
    hb(d, "b", 0)
    assert hb(d, "a", 5).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert hb(d, "ghost", 1).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    told = hb(d, "a", 1)
    hb(d, "a", 1, owned=told.assignment)  # now at epoch 2, previous 1
    # The reply carrying epoch 2 was lost: epoch 1 is accepted while nothing stale is held.
    assert hb(d, "a", 1, owned=told.assignment).error_code == ErrorCode.NONE
    assert hb(d, "a", 1, owned=tps(0, 1, 2, 3, 4, 5)).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    rejoin = hb(d, "a", 0)
    assert rejoin.error_code == ErrorCode.NONE and rejoin.member_epoch == 2


def test_leave_and_session_expiry_free_partitions_at_once() -> None:
    d = Driver()
    hb(d, "a", 0)
    hb(d, "b", 0)
    told = hb(d, "a", 1)
    hb(d, "a", 1, owned=told.assignment)
    hb(d, "b", 2)
    assert hb(d, "a", -1).member_epoch == -1
    assert set(hb(d, "b", 2).assignment or ()) == set(tps(0, 1, 2, 3, 4, 5))
    c_epoch = hb(d, "c", 0).member_epoch
    d.tick(SESSION_MS - 1)
    assert hb(d, "c", c_epoch).error_code == ErrorCode.NONE
    d.tick(1)
    assert sorted(group_of(d).members) == ["c"]
    assert set(hb(d, "c", c_epoch).assignment or ()) == set(tps(0, 1, 2, 3, 4, 5))


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    d = Driver()
    hb(d, "a", 0, rebalance_timeout_ms=5_000)
    hb(d, "b", 0)
    hb(d, "a", 1)  # told to revoke three partitions
    d.tick(4_000)
    hb(d, "b", 2)
    d.tick(1_000)
    group = group_of(d)
    assert "a" not in group.members
    assert set(hb(d, "b", 2).assignment or ()) == set(tps(0, 1, 2, 3, 4, 5))


def test_a_static_member_returns_to_its_partitions_without_a_new_epoch() -> None:
    d = Driver()
    hb(d, "a1", 0, group_instance_id="i")
    hb(d, "b", 0)
    told = hb(d, "a1", 1, group_instance_id="i")
    hb(d, "a1", 1, group_instance_id="i", owned=told.assignment)
    held = set(group_of(d).members["a1"].assigned)
    epoch = group_of(d).group_epoch
    assert hb(d, "a2", 0, group_instance_id="i").error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    assert hb(d, "a1", 2, group_instance_id="i").error_code == ErrorCode.NONE
    assert hb(d, "a1", -2, group_instance_id="i").member_epoch == -2
    back = hb(d, "a2", 0, group_instance_id="i")
    assert back.error_code == ErrorCode.NONE and set(back.assignment or ()) == held
    assert group_of(d).group_epoch == epoch and "a1" not in group_of(d).members
    owners_are_unique(group_of(d))


def test_new_partitions_go_out_without_revocations() -> None:
    d = Driver()
    hb(d, "a", 0)
    d.take(d.coordinator.update_metadata({"t": 8}))
    response = hb(d, "a", 1)
    assert response.member_epoch == 2 and set(response.assignment or ()) == set(tps(*range(8)))


def test_commits_are_accepted_per_partition_by_assignment_epoch() -> None:
    d = Driver()
    hb(d, "a", 0)
    hb(d, "b", 0)
    told = hb(d, "a", 1)
    kept = told.assignment or ()
    moving = next(tp for tp in tps(0, 1, 2, 3, 4, 5) if tp not in kept)
    ok = commit(d, {kept[0]: 1, moving: 1}, member_id="a", generation=1)
    assert dict(ok.partitions) == {kept[0]: ErrorCode.NONE, moving: ErrorCode.NONE}
    hb(d, "a", 1, owned=kept)
    stale = commit(d, {moving: 2}, member_id="a", generation=2)
    assert dict(stale.partitions) == {moving: ErrorCode.STALE_MEMBER_EPOCH}
    assert commit(d, {kept[0]: 1}, member_id="a", generation=3).error_code == (
        ErrorCode.STALE_MEMBER_EPOCH)
    assert commit(d, {kept[0]: 1}, member_id="x", generation=1).error_code == (
        ErrorCode.UNKNOWN_MEMBER_ID)
    assert commit(d, {kept[0]: 1}).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_protocols_do_not_mix_in_a_live_group() -> None:
    d = Driver()
    hb(d, "a", 0)
    assert d.reply(d.join()).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL  # type: ignore[union-attr]
    other = Driver()
    first = other.reply(other.join())
    assert first is not None
    other.join("g", first.member_id)  # type: ignore[union-attr]
    assert hb(other, "a", 0).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_malformed_heartbeats_are_invalid_requests() -> None:
    d = Driver()
    assert hb(d, "a", -3).error_code == ErrorCode.INVALID_REQUEST
    assert hb(d, "a", 0, subscribed_topics=()).error_code == ErrorCode.INVALID_REQUEST
    assert hb(d, "a", 0, owned=tps(1)).error_code == ErrorCode.INVALID_REQUEST
    assert hb(d, "a", -2).error_code == ErrorCode.INVALID_REQUEST
    assert "g" not in d.coordinator.groups


def test_a_new_coordinator_continues_the_group_from_the_log() -> None:
    d = Driver()
    hb(d, "a", 0)
    hb(d, "b", 0)
    told = hb(d, "a", 1)  # a is revoking three partitions
    successor = Driver()
    successor.take(successor.coordinator.load(d.replayed(), d.now_ms))
    assert group_of(successor) == group_of(d)
    deadlines = successor.coordinator.fx.deadlines
    assert TimerKey(TimerKind.REBALANCE, "g", "a") in deadlines
    assert TimerKey(TimerKind.SESSION, "g", "b") in deadlines
    assert hb(successor, "a", 1, owned=told.assignment).member_epoch == 2
    gained = hb(successor, "b", 2).assignment or ()
    assert len(gained) == 3 and not set(gained) & set(told.assignment or ())
    owners_are_unique(group_of(successor))


def test_an_emptied_group_without_offsets_leaves_nothing_in_the_log() -> None:
    d = Driver()
    hb(d, "a", 0)
    hb(d, "a", -1)
    assert "g" not in d.coordinator.groups and d.replayed().groups == {}


def test_a_static_member_that_left_must_rejoin_and_keeps_its_partitions_under_its_id() -> None:
    d = Driver()
    first = hb(d, "a", 0, group_instance_id="i")
    hb(d, "a", -2, group_instance_id="i")
    assert hb(d, "a", 1, group_instance_id="i").error_code == ErrorCode.FENCED_MEMBER_EPOCH
    back = hb(d, "a", 0, group_instance_id="i")
    assert (back.error_code, back.member_epoch, back.assignment) == (
        ErrorCode.NONE, first.member_epoch, first.assignment)
    assert group_of(d).group_epoch == first.member_epoch
