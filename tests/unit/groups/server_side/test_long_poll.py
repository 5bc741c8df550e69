"""Held heartbeats (the long poll of the server-side protocol): who is held, and the news that
answers a held heartbeat at once. Time moves only when a test moves it."""

from __future__ import annotations

from typing import Any

from tests.unit.groups.coordinator_driver import Driver
from tests.unit.groups.server_side.test_machine import (
    SESSION_MS,
    group_of,
    hb,
    owners_are_unique,
    tps,
)
from zlog.errors import ErrorCode
from zlog.groups.config import GroupConfig
from zlog.groups.output import TimerKey, TimerKind
from zlog.groups.server_side.group import MemberState
from zlog.groups.server_side.records import group_from_records
from zlog.transport.messages.groups import GroupHeartbeatRequestV0, GroupHeartbeatResponseV0

INTERVAL_MS = 1_000
ALL = frozenset(tps(0, 1, 2, 3, 4, 5))


def poll(d: Driver, member_id: str, epoch: int, **fields: Any) -> int:
    """Send a long-poll heartbeat; its request id (its answer may come later)."""
    return d.handle(GroupHeartbeatRequestV0(
        group_id="g", member_id=member_id, member_epoch=epoch, max_wait_ms=INTERVAL_MS,
        **fields))


def answer(d: Driver, request_id: int) -> GroupHeartbeatResponseV0 | None:
    response = d.reply(request_id)
    assert response is None or isinstance(response, GroupHeartbeatResponseV0)
    return response


def settled_pair(d: Driver) -> tuple[int, int]:
    """a and b share the six partitions, each holding and reporting its half; their epochs."""
    hb(d, "a", 0)
    hb(d, "b", 0)
    told = hb(d, "a", 1)
    hb(d, "a", 1, owned=told.assignment)
    gained = hb(d, "b", 2)
    hb(d, "b", 2, owned=gained.assignment)
    group = group_of(d)
    assert all(m.state is MemberState.STABLE for m in group.members.values())
    return group.members["a"].epoch, group.members["b"].epoch


def log_matches_memory(d: Driver) -> None:
    loaded = d.replayed().groups["g"].consumer
    assert group_from_records("g", loaded) == group_of(d)


def test_an_idle_member_is_held_until_the_interval_then_answered_with_no_news() -> None:
    d = Driver()
    a_epoch, _ = settled_pair(d)
    request_id = poll(d, "a", a_epoch)
    assert answer(d, request_id) is None, "nothing changed for it: held"
    d.tick(INTERVAL_MS - 1)
    assert answer(d, request_id) is None
    d.tick(1)
    response = answer(d, request_id)
    assert response is not None and response.error_code == ErrorCode.NONE
    assert (response.member_epoch, response.assignment) == (a_epoch, None)
    assert response.heartbeat_interval_ms == INTERVAL_MS
    deadlines = d.coordinator.fx.deadlines
    assert deadlines[TimerKey(TimerKind.SESSION, "g", "a")] == d.now_ms + SESSION_MS, (
        "a held member is a live one: its session starts again when it is answered")


def test_a_heartbeat_that_does_not_ask_for_it_is_never_held() -> None:
    d = Driver()
    a_epoch, _ = settled_pair(d)
    assert hb(d, "a", a_epoch).assignment is None


def test_a_member_with_something_to_report_is_answered_at_once() -> None:
    d = Driver()
    hb(d, "a", 0)
    joined = hb(d, "b", 0)
    told = answer(d, poll(d, "a", 1))  # its target lost three partitions: news
    assert told is not None and told.assignment is not None and len(told.assignment) == 3
    # Still owning the three it must revoke (UNREVOKED): it has to report, never held.
    assert answer(d, poll(d, "a", 1)) is not None
    # Given partitions it has not reported taking yet: answered at once too.
    released = answer(d, poll(d, "a", 1, owned=told.assignment))
    assert released is not None and released.member_epoch == joined.member_epoch
    gained = answer(d, poll(d, "b", joined.member_epoch))
    assert gained is not None and gained.assignment is not None
    assert answer(d, poll(d, "b", joined.member_epoch)) is not None


def test_a_join_answers_the_held_members_at_once_and_the_release_reaches_the_new_one() -> None:
    d = Driver()
    a_epoch, b_epoch = settled_pair(d)
    held_a, held_b = poll(d, "a", a_epoch), poll(d, "b", b_epoch)
    joined = hb(d, "c", 0)
    assert joined.assignment == () and group_of(d).members["c"].state is MemberState.UNRELEASED
    told_a, told_b = answer(d, held_a), answer(d, held_b)
    assert told_a is not None and told_b is not None, "the join is news to both"
    for told, old in ((told_a, a_epoch), (told_b, b_epoch)):
        assert told.assignment is not None and len(told.assignment) == 2
        assert told.member_epoch == old, "the epoch moves only once the revocation is done"
    waiting_c = poll(d, "c", joined.member_epoch)
    assert answer(d, waiting_c) is None, "nothing is free for it yet: held"
    answer(d, poll(d, "a", a_epoch, owned=told_a.assignment))
    gained = answer(d, waiting_c)
    assert gained is not None and gained.assignment is not None and len(gained.assignment) == 1
    assert gained.heartbeat_interval_ms == INTERVAL_MS, "a long poll needs no short interval"
    waiting_c = poll(d, "c", joined.member_epoch, owned=gained.assignment)
    assert answer(d, waiting_c) is None, "it has what is free: held again"
    answer(d, poll(d, "b", b_epoch, owned=told_b.assignment))
    gained = answer(d, waiting_c)
    assert gained is not None and gained.assignment is not None and len(gained.assignment) == 2
    group = group_of(d)
    assert len(group.members["c"].assigned) == 2 and group.state.value == "Stable"
    owners_are_unique(group)
    log_matches_memory(d)


def test_releases_of_one_batch_reach_a_held_member_in_one_answer_when_wakes_are_deferred(
) -> None:
    d = Driver()
    a_epoch, b_epoch = settled_pair(d)
    held_a, held_b = poll(d, "a", a_epoch), poll(d, "b", b_epoch)
    joined = hb(d, "c", 0)
    told_a, told_b = answer(d, held_a), answer(d, held_b)
    assert told_a is not None and told_b is not None
    waiting_c = poll(d, "c", joined.member_epoch)
    assert answer(d, waiting_c) is None
    d.coordinator.defer_wakes()  # a driver's batch of requests: a and b release in it
    released_a = answer(d, poll(d, "a", a_epoch, owned=told_a.assignment))
    released_b = answer(d, poll(d, "b", b_epoch, owned=told_b.assignment))
    assert released_a is not None and released_b is not None, "the releasers hear at once"
    assert answer(d, waiting_c) is None, "the held member is woken at the end of the batch"
    d.take(d.coordinator.wake_deferred(d.now_ms))
    gained = answer(d, waiting_c)
    assert gained is not None and gained.assignment is not None
    assert len(gained.assignment) == 2, "both releases in one answer, not one per round trip"
    d.take(d.coordinator.wake_deferred(d.now_ms))  # nothing noted since: no answer, no record
    assert not d.coordinator.consumer.deferring_wakes
    owners_are_unique(group_of(d))
    log_matches_memory(d)


def test_a_leave_hands_its_partitions_to_the_held_members_at_once() -> None:
    d = Driver()
    a_epoch, _ = settled_pair(d)
    held_a = poll(d, "a", a_epoch)
    hb(d, "b", -1)
    response = answer(d, held_a)
    assert response is not None and set(response.assignment or ()) == ALL
    assert response.member_epoch > a_epoch
    owners_are_unique(group_of(d))
    log_matches_memory(d)


def test_a_session_expiry_hands_its_partitions_to_the_held_members_at_once() -> None:
    d = Driver()
    settled_pair(d)
    d.tick(SESSION_MS - INTERVAL_MS + 1)
    a_epoch = group_of(d).members["a"].epoch
    held_a = poll(d, "a", a_epoch)
    d.tick(INTERVAL_MS - 1)  # b's session runs out; a is still held
    assert "b" not in group_of(d).members
    response = answer(d, held_a)
    assert response is not None and set(response.assignment or ()) == ALL


def test_a_newer_request_of_the_member_answers_its_held_one_first() -> None:
    d = Driver()
    a_epoch, _ = settled_pair(d)
    held = poll(d, "a", a_epoch)
    left = hb(d, "a", -1)
    assert left.member_epoch == -1
    first = answer(d, held)
    assert first is not None and first.error_code == ErrorCode.NONE
    assert TimerKey(TimerKind.HEARTBEAT_HOLD, "g", "a") not in d.coordinator.fx.deadlines


def test_a_held_member_that_is_removed_hears_it() -> None:
    config = GroupConfig(initial_rebalance_delay_ms=0, consumer_session_timeout_ms=2_000,
                         consumer_heartbeat_interval_ms=5_000)
    d = Driver(config=config)
    hb(d, "a", 0)
    request_id = d.handle(GroupHeartbeatRequestV0(
        group_id="g", member_id="a", member_epoch=1, owned=tps(0, 1, 2, 3, 4, 5),
        max_wait_ms=5_000))
    assert answer(d, request_id) is None
    d.tick(2_000)
    response = answer(d, request_id)
    assert response is not None and response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert "g" not in d.coordinator.groups


def test_no_member_is_held_longer_than_the_heartbeat_interval() -> None:
    d = Driver()
    a_epoch, _ = settled_pair(d)
    request_id = d.handle(GroupHeartbeatRequestV0(
        group_id="g", member_id="a", member_epoch=a_epoch, max_wait_ms=60_000))
    d.tick(INTERVAL_MS)
    assert answer(d, request_id) is not None


def test_a_heartbeat_that_changes_nothing_leaves_the_held_members_alone() -> None:
    """Only a new target or a freed partition can be news to a held member: any other
    heartbeat does not look at them (a heartbeat costs its own member, not the group)."""
    d = Driver()
    a_epoch, b_epoch = settled_pair(d)
    poll(d, "a", a_epoch)
    out = d.coordinator.handle(d.rid(), GroupHeartbeatRequestV0(
        group_id="g", member_id="b", member_epoch=b_epoch), d.now_ms)
    assert out.records == [] and len(out.replies) == 1
    assert d.coordinator.consumer.touched == {"b"}, "a's records were not even looked at"


def test_a_new_partition_count_reaches_a_held_member_at_its_hold_at_the_latest() -> None:
    d = Driver()
    a_epoch, _ = settled_pair(d)
    held_a = poll(d, "a", a_epoch)
    d.take(d.coordinator.update_metadata({"t": 8}))
    assert answer(d, held_a) is None, "a metadata change is no request of the group"
    d.tick(INTERVAL_MS)
    response = answer(d, held_a)
    assert response is not None and response.member_epoch > a_epoch
    assert response.assignment is not None and len(response.assignment) == 4


def test_a_joining_member_that_long_polls_is_told_the_configured_interval() -> None:
    """A member waiting for partitions is told 50 ms only if it does not long-poll."""
    d = Driver()
    settled_pair(d)
    joined = answer(d, poll(d, "c", 0, subscribed_topics=("t",), rebalance_timeout_ms=30_000))
    assert joined is not None and joined.assignment == ()
    assert group_of(d).members["c"].state is MemberState.UNRELEASED
    assert joined.heartbeat_interval_ms == INTERVAL_MS
