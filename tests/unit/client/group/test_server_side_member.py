"""The server-side group member's decisions, step by step, with time as an argument."""

from __future__ import annotations

import pytest

from zlog.client.group.member import MemberState, Reconciliation, SentRequest
from zlog.client.group.server_side_member import HEARTBEAT_INTERVAL_MS_DEFAULT, ServerSideMember
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages.groups import GroupHeartbeatResponseV0
from zlog.types import TopicPartition

T0, T1, T2, T3 = (TopicPartition("t", p) for p in range(4))
INTERVAL_MS = 500
SESSION_MS = 3_000


def _member(instance_id: str | None = None) -> ServerSideMember:
    return ServerSideMember("g", "m-1", rebalance_timeout_ms=60_000,
                            session_timeout_ms=45_000, group_instance_id=instance_id,
                            client_id="c", retry_backoff_ms=100)


def _ok(member: ServerSideMember, epoch: int,
        assignment: tuple[TopicPartition, ...] | None = None) -> GroupHeartbeatResponseV0:
    return GroupHeartbeatResponseV0(ErrorCode.NONE, member_id=member.member_id,
                                  member_epoch=epoch, heartbeat_interval_ms=INTERVAL_MS,
                                  session_timeout_ms=SESSION_MS, assignment=assignment)


def _send(member: ServerSideMember, now_ms: int) -> SentRequest:
    sent = member.next_heartbeat(now_ms)
    assert sent is not None, f"no heartbeat due at {now_ms} (due {member.due_ms()})"
    return sent


def _joined(member: ServerSideMember, assignment: tuple[TopicPartition, ...],
            epoch: int = 1) -> ServerSideMember:
    member.subscribe(["t"], 0)
    member.coordinator_found()
    member.on_response(_send(member, 0), _ok(member, epoch, assignment), 10)
    work = member.take_reconciliation()
    if work is not None:
        member.reconciled(work, 10)
    return member


def test_nothing_is_sent_before_subscribe_or_before_the_coordinator_is_known() -> None:
    member = _member()
    assert member.next_heartbeat(0) is None
    member.subscribe(["t"], 0)
    assert member.next_heartbeat(0) is None  # find the coordinator first
    member.coordinator_found()
    assert member.next_heartbeat(0) is not None


def test_the_join_is_a_full_request_with_epoch_zero_and_nothing_owned() -> None:
    member = _member()
    member.subscribe(["b", "a"], 0)
    member.coordinator_found()
    request = _send(member, 0).request
    assert (request.member_id, request.member_epoch) == ("m-1", 0)
    assert request.subscribed_topics == ("a", "b")
    assert request.rebalance_timeout_ms == 60_000
    assert request.owned == ()
    assert member.next_heartbeat(0) is None  # one in flight at a time


def test_an_assignment_is_taken_once_then_the_next_heartbeat_reports_it_at_once() -> None:
    member = _member()
    member.subscribe(["t"], 0)
    member.coordinator_found()
    member.on_response(_send(member, 0), _ok(member, 3, (T0, T1)), 10)
    assert member.state is MemberState.STABLE and member.member_epoch == 3
    assert member.heartbeat_interval_ms == INTERVAL_MS
    assert member.reconciliation_due() and member.reconciliation_due(), "a look takes nothing"
    work = member.take_reconciliation()
    assert work == Reconciliation(assign=frozenset({T0, T1}))
    assert member.take_reconciliation() is None  # being done
    assert not member.reconciliation_due()
    member.reconciled(work, 20)
    assert member.owned == {T0, T1} and not member.reconciliation_due()
    request = _send(member, 20).request
    assert request.owned == (T0, T1) and request.member_epoch == 3
    assert request.subscribed_topics is None  # acknowledged already
    assert request.rebalance_timeout_ms is None


def test_heartbeats_follow_the_interval_the_coordinator_names() -> None:
    member = _joined(_member(), (T0,))
    sent = _send(member, 10)
    member.on_response(sent, _ok(member, 1), 40)
    assert member.due_ms() == 40 + INTERVAL_MS
    assert member.next_heartbeat(40 + INTERVAL_MS - 1) is None
    request = _send(member, 40 + INTERVAL_MS).request
    assert request.owned is None and request.subscribed_topics is None  # nothing changed


def test_revocation_comes_first_and_the_release_is_reported_at_once() -> None:
    member = _joined(_member(), (T0, T1, T2))
    member.on_response(_send(member, 10), _ok(member, 1, (T0,)), 20)
    work = member.take_reconciliation()
    assert work == Reconciliation(revoke=frozenset({T1, T2}))
    member.reconciled(work, 30)
    release = _send(member, 30)
    assert release.request.owned == (T0,) and release.request.member_epoch == 1
    member.on_response(release, _ok(member, 2, (T0, T3)), 40)
    assert member.take_reconciliation() == Reconciliation(assign=frozenset({T3}))


@pytest.mark.parametrize("code", [ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID])
def test_fencing_loses_everything_then_rejoins_with_epoch_zero_under_the_same_id(
        code: ErrorCode) -> None:
    member = _joined(_member(), (T0, T1), epoch=4)
    member.on_response(_send(member, 10), GroupHeartbeatResponseV0(code), 20)
    assert member.state is MemberState.DROPPING
    assert member.next_heartbeat(10_000) is None  # not before the application dropped them
    work = member.take_reconciliation()
    assert work == Reconciliation(lost=frozenset({T0, T1}))
    member.reconciled(work, 30)
    assert member.owned == frozenset()
    request = _send(member, 30).request
    assert (request.member_id, request.member_epoch, request.owned) == ("m-1", 0, ())
    assert request.subscribed_topics == ("t",)


def test_a_fence_while_a_revocation_commits_rejoins_only_after_the_rest_is_dropped() -> None:
    """The revoked partitions' commit is answered on another thread, so the member can be
    fenced meanwhile: it must not rejoin until the application dropped what it kept."""
    member = _joined(_member(), (T0, T1, T2))
    member.on_response(_send(member, 10), _ok(member, 1, (T0,)), 20)
    revocation = member.take_reconciliation()
    assert revocation == Reconciliation(revoke=frozenset({T1, T2}))
    beat = _send(member, 20 + INTERVAL_MS)  # the commit is slow: a heartbeat goes meanwhile
    member.on_response(beat, GroupHeartbeatResponseV0(ErrorCode.FENCED_MEMBER_EPOCH), 530)
    member.reconciled(revocation, 540)  # the commit's answer arrives after the fence
    assert member.state is MemberState.DROPPING
    assert member.next_heartbeat(10_000) is None  # T0 is still the application's
    work = member.take_reconciliation()
    assert work == Reconciliation(lost=frozenset({T0}))  # not the ones already revoked
    member.reconciled(work, 550)
    request = _send(member, 550).request
    assert (request.member_epoch, request.owned) == (0, ())


def test_a_reply_to_a_heartbeat_sent_before_a_fence_is_ignored() -> None:
    member = _joined(_member(), (T0,))
    old = _send(member, 10)
    member.on_failure(old, ZlogError(ErrorCode.NETWORK_EXCEPTION, "gone"), 20)
    member.coordinator_found()
    member.on_response(old, _ok(member, 9, (T3,)), 25)
    assert member.member_epoch == 1 and member.target == {T0}


@pytest.mark.parametrize("code", [ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                                  ErrorCode.REQUEST_TIMED_OUT])
def test_a_moved_coordinator_is_found_again_and_gets_a_full_heartbeat(code: ErrorCode) -> None:
    member = _joined(_member(), (T0,))
    member.on_failure(_send(member, 10), ZlogError(code, "x"), 20)
    assert member.needs_coordinator and member.state is MemberState.STABLE
    assert member.owned == {T0}  # keeps consuming meanwhile
    member.coordinator_found()
    assert member.next_heartbeat(20 + member.retry_backoff_ms - 1) is None
    request = _send(member, 20 + member.retry_backoff_ms).request
    assert request.member_epoch == 1 and request.owned == (T0,)
    assert request.subscribed_topics == ("t",) and request.rebalance_timeout_ms == 60_000


def test_a_loading_coordinator_is_asked_again_after_a_backoff() -> None:
    member = _joined(_member(), (T0,))
    member.on_response(_send(member, 10),
                       GroupHeartbeatResponseV0(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), 20)
    assert not member.needs_coordinator
    assert member.due_ms() == 20 + member.retry_backoff_ms


@pytest.mark.parametrize("code", [ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.KAFKA_STORAGE_ERROR,
                                  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION])
def test_any_other_retriable_error_is_asked_again_never_handed_to_the_caller(
        code: ErrorCode) -> None:
    """Kafka's retriable codes beyond the coordinator's own (its offsets partition short of
    replicas, a disk error): the member keeps its partitions and heartbeats again."""
    member = _joined(_member(), (T0,))
    member.on_response(_send(member, 10), GroupHeartbeatResponseV0(code, "not now"), 20)
    assert member.failure is None and member.state is MemberState.STABLE
    assert member.owned == {T0} and not member.needs_coordinator
    assert _send(member, 20 + member.retry_backoff_ms).request.owned == (T0,)


@pytest.mark.parametrize("code", [ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                                  ErrorCode.INVALID_REQUEST, ErrorCode.GROUP_MAX_SIZE_REACHED])
def test_a_fatal_error_stops_the_member_and_is_kept_for_the_caller(code: ErrorCode) -> None:
    member = _member()
    member.subscribe(["t"], 0)
    member.coordinator_found()
    member.on_response(_send(member, 0), GroupHeartbeatResponseV0(code, "why"), 10)
    assert member.state is MemberState.FAILED
    assert member.failure is not None and member.failure.code == code
    assert member.next_heartbeat(10_000) is None


def test_no_good_reply_for_a_session_self_fences() -> None:
    member = _joined(_member(), (T0,))  # heard at 10; the coordinator's session is 3 s
    assert member.check_timers(10 + SESSION_MS - 1, last_poll_ms=0,
                               max_poll_interval_ms=10**9) is None
    assert member.state is MemberState.STABLE
    member.check_timers(10 + SESSION_MS, last_poll_ms=0, max_poll_interval_ms=10**9)
    assert member.state is MemberState.DROPPING
    assert member.take_reconciliation() == Reconciliation(lost=frozenset({T0}))


def test_a_slow_poll_loop_leaves_the_group_and_rejoins_at_the_next_poll() -> None:
    member = _joined(_member(), (T0,))
    assert member.check_timers(1_000, last_poll_ms=0, max_poll_interval_ms=1_000) is None
    leave = member.check_timers(1_001, last_poll_ms=0, max_poll_interval_ms=1_000)
    assert leave is not None and leave.member_epoch == -1
    assert member.state is MemberState.STALE and member.next_heartbeat(5_000) is None
    member.polled(5_000)
    assert member.state is MemberState.STALE  # the partitions are dropped first
    work = member.take_reconciliation()
    assert work == Reconciliation(lost=frozenset({T0}))
    member.reconciled(work, 5_000)
    member.polled(5_000)
    request = _send(member, 5_000).request
    assert request.member_epoch == 0 and request.owned == ()


def test_a_static_member_leaves_with_epoch_minus_two() -> None:
    member = _joined(_member("instance-a"), (T0,))
    leave = member.leave()
    assert leave is not None
    assert (leave.member_epoch, leave.group_instance_id) == (-2, "instance-a")
    assert member.state is MemberState.UNSUBSCRIBED and member.leave() is None


def test_a_dynamic_member_leaves_with_epoch_minus_one() -> None:
    member = _joined(_member(), (T0,))
    leave = member.leave()
    assert leave is not None and (leave.member_id, leave.member_epoch) == ("m-1", -1)
    assert member.next_heartbeat(10**6) is None


def test_a_subscription_change_is_sent_at_once_and_only_then() -> None:
    member = _joined(_member(), (T0,))
    sent = _send(member, 10)
    member.subscribe(["t", "u"], 15)  # while a heartbeat is in flight
    member.on_response(sent, _ok(member, 1), 20)
    request = _send(member, 20).request
    assert request.subscribed_topics == ("t", "u")


def test_the_default_interval_applies_until_the_coordinator_names_one() -> None:
    assert _member().heartbeat_interval_ms == HEARTBEAT_INTERVAL_MS_DEFAULT


def test_bad_settings_are_refused_with_a_sentence() -> None:
    with pytest.raises(ZlogError) as empty:
        ServerSideMember("", "m", rebalance_timeout_ms=1, session_timeout_ms=1)
    assert empty.value.code == ErrorCode.INVALID_GROUP_ID
    with pytest.raises(ZlogError) as zero:
        ServerSideMember("g", "m", rebalance_timeout_ms=0, session_timeout_ms=1)
    assert zero.value.code == ErrorCode.INVALID_CONFIG


def test_a_member_with_nothing_to_reconcile_long_polls_and_polls_again_at_once() -> None:
    member = _joined(_member(), (T0, T1))
    sent = _send(member, 10)
    assert sent.request.max_wait_ms == INTERVAL_MS, "idle: the coordinator may hold it"
    member.on_response(sent, _ok(member, 1), 10 + INTERVAL_MS)  # held, then no news
    assert member.due_ms() == 10 + INTERVAL_MS
    sent = _send(member, 10 + INTERVAL_MS)
    member.on_response(sent, _ok(member, 2), 10 + INTERVAL_MS + 30)  # news: a new epoch
    assert member.due_ms() == 10 + INTERVAL_MS + 30


def test_a_member_that_must_reconcile_does_not_long_poll_until_it_has() -> None:
    member = _joined(_member(), (T0, T1))
    member.on_response(_send(member, 10), _ok(member, 1, (T0,)), 20)  # revoke T1: news
    assert member.due_ms() == 20 + INTERVAL_MS, "the application reconciles first"
    while_revoking = _send(member, 20 + INTERVAL_MS)
    assert while_revoking.request.max_wait_ms == 0, "a held heartbeat would delay the release"
    member.on_response(while_revoking, _ok(member, 1), 30 + INTERVAL_MS)
    work = member.take_reconciliation()
    assert work == Reconciliation(revoke=frozenset({T1}))
    member.reconciled(work, 40 + INTERVAL_MS)
    release = _send(member, 40 + INTERVAL_MS)
    assert release.request.owned == (T0,) and release.request.max_wait_ms == INTERVAL_MS


def test_a_quick_answer_with_no_news_waits_an_interval() -> None:
    """A coordinator that does not hold heartbeats is not asked again and again."""
    member = _joined(_member(), (T0,))
    sent = _send(member, 10)
    assert sent.request.max_wait_ms > 0
    member.on_response(sent, _ok(member, 1), 15)
    assert member.due_ms() == 15 + INTERVAL_MS


def test_the_join_says_the_member_long_polls() -> None:
    member = _member()
    member.subscribe(["t"], 0)
    member.coordinator_found()
    assert _send(member, 0).request.max_wait_ms == HEARTBEAT_INTERVAL_MS_DEFAULT
