"""What a consumer group promises, against one real broker, for both group protocols.

Members that are killed run as their own processes (group_member_main.py) and write down every
assignment, revocation and record with a machine-wide monotonic time, so the test can check that
no partition was owned by two members at one instant and that nothing was skipped. Every wait
has a deadline; the only deliberate pauses are the slow poll loops the tests are about.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.group_members import Members
from zlog.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from zlog.client.cluster import Connections
from zlog.client.group.coordinator import CoordinatorLink
from zlog.client.group.offsets import commit_offsets
from zlog.errors import ErrorCode, ZlogError
from zlog_testbed.broker_process import BrokerProcess, broker_process

pytestmark = pytest.mark.slow

PARTITIONS = 6
SESSION_MS = 3_000
"""The classic members' session, and the broker's group_consumer_session_timeout_ms."""
REJOIN_MARGIN_S = 8.0
"""Beyond the session: heartbeat interval, rejoin and sync, on a busy two-core machine."""
WAIT_S = 60.0
PROTOCOLS = ["classic", "consumer"]


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with broker_process(workers=2, extra_args=[
            "--group-initial-rebalance-delay-ms", "300",
            "--group-consumer-session-timeout-ms", str(SESSION_MS),
            "--group-consumer-heartbeat-interval-ms", "500"]) as instance:
        yield instance


def _topic(broker: BrokerProcess, name: str, records_per_partition: int) -> None:
    with Admin(broker.endpoint) as admin:
        admin.create_topics([NewTopic(name, PARTITIONS)])
    _produce(broker, name, records_per_partition)


def _produce(broker: BrokerProcess, name: str, records_per_partition: int) -> None:
    with Producer(broker.endpoint) as producer:
        for partition in range(PARTITIONS):
            for i in range(records_per_partition):
                producer.send(name, f"{partition}-{i}".encode(), partition=partition)
        producer.flush()


def _wait(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.05)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_three_members_then_a_kill_9_no_overlap_nothing_skipped(
        broker: BrokerProcess, tmp_path: Path, protocol: str) -> None:
    topic, group = f"kill-{protocol}", f"killers-{protocol}"
    _topic(broker, topic, 30)
    members = Members(broker.endpoint, tmp_path, group, topic, protocol, SESSION_MS, PARTITIONS)
    try:
        for _ in range(3):
            members.start()
        _wait(members.split_evenly, "3 members with 2 partitions each")
        _wait(lambda: len(members.consumed()) >= PARTITIONS * 30, "the first records read")
        victim = members.started[1]
        orphans = victim.owned()
        victim.kill()
        _produce(broker, topic, 20)
        _wait(lambda: all(any(p in m.owned() for m in members.alive()) for p in orphans),
              "the victim's partitions assigned again", SESSION_MS / 1000 + REJOIN_MARGIN_S)
        everything = {(p, o) for p in range(PARTITIONS) for o in range(50)}
        _wait(lambda: everything <= members.consumed(), "every record read by someone")
        members.assert_no_overlap()
    finally:
        members.stop()


def test_a_commit_from_an_old_generation_is_refused(broker: BrokerProcess) -> None:
    _topic(broker, "old-generation", 1)
    first = Consumer(broker.endpoint, group_id="fencing", group_protocol="classic",
                     session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500)
    second = Consumer(broker.endpoint, group_id="fencing", group_protocol="classic",
                      session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500)
    try:
        first.subscribe(["old-generation"])
        _wait(lambda: (first.poll(50), len(first.assignment()) == PARTITIONS)[1],
              "the first member to hold everything")
        old = first.group_metadata()
        second.subscribe(["old-generation"])
        _wait(lambda: (first.poll(50), second.poll(50),
                       len(first.assignment()) == len(second.assignment()) == 3)[2],
              "both members to hold 3 partitions")
        assert first.group_metadata().generation > old.generation
        connections = Connections(broker.endpoint)
        try:
            link = CoordinatorLink(connections, "fencing", request_timeout_ms=10_000,
                                   retry_backoff_ms=100)
            with pytest.raises(ZlogError) as refused:
                commit_offsets(link, {TopicPartition("old-generation", 0): 1},
                               generation=old.generation, member_id=old.member_id)
            assert refused.value.code == ErrorCode.ILLEGAL_GENERATION
        finally:
            connections.close()
    finally:
        first.close()
        second.close()


def test_a_static_member_restarted_within_its_session_keeps_its_partitions(
        broker: BrokerProcess, tmp_path: Path) -> None:
    topic = "static-restart"
    _topic(broker, topic, 5)
    members = Members(broker.endpoint, tmp_path, "statics", topic, "classic", SESSION_MS,
                      PARTITIONS)
    try:
        for name in ("a", "b", "c"):
            members.start(instance_id=f"instance-{name}")
        _wait(members.split_evenly, "3 static members with 2 partitions each")
        victim = members.started[1]
        kept = victim.owned()
        others = [members.started[0], members.started[2]]
        before = [len(m.events()) for m in others]
        victim.kill()
        successor = members.start(instance_id="instance-b")
        _wait(lambda: successor.owned() == kept, "the restarted member's old partitions",
              SESSION_MS / 1000)
        _wait(lambda: time.monotonic() > (victim.killed_at or 0) + SESSION_MS / 1000 + 1,
              "the session of the killed process to have passed")
        for member, seen in zip(others, before, strict=True):
            later = [e["event"] for e in member.events()[seen:]]
            assert not {"revoke", "lost", "assign"} & set(later), later
        members.assert_no_overlap()
    finally:
        members.stop()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_slow_poll_loop_keeps_membership_until_max_poll_interval(
        broker: BrokerProcess, protocol: str) -> None:
    topic, group = f"slow-{protocol}", f"slow-{protocol}"
    _topic(broker, topic, 1)
    lost: list[set[TopicPartition]] = []
    slow = Consumer(broker.endpoint, group_id=group, group_protocol=protocol,
                    session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500,
                    max_poll_interval_ms=3 * SESSION_MS)
    other = Consumer(broker.endpoint, group_id=group, group_protocol=protocol,
                     session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500)
    try:
        slow.subscribe([topic], on_lost=lost.append, on_revoke=lost.append)
        other.subscribe([topic])
        _wait(lambda: (slow.poll(50), other.poll(50),
                       len(slow.assignment()) == len(other.assignment()) == 3)[2],
              "both members to hold 3 partitions")
        held = slow.assignment()
        lost.clear()  # the split itself may have revoked some
        # Longer than the session, shorter than max_poll_interval_ms: the background
        # heartbeat keeps the slow member in, so the other never gets its partitions.
        pause_until = time.monotonic() + 2 * SESSION_MS / 1000
        while time.monotonic() < pause_until:
            other.poll(50)
            assert not other.assignment() & held
        slow.poll(0)
        assert slow.assignment() == held and not lost
        # Longer than max_poll_interval_ms: out of the group; the other takes everything.
        _wait(lambda: (other.poll(50), len(other.assignment()) == PARTITIONS)[1],
              "the other member to take every partition", 3 * SESSION_MS / 1000 + WAIT_S)
        slow.poll(0)
        assert lost and set().union(*lost) >= held
    finally:
        slow.close()
        other.close()


@pytest.mark.parametrize(("protocol", "assignors"), [
    ("consumer", ["range", "cooperative-sticky"]), ("classic", ["cooperative-sticky"])])
def test_a_member_whose_partitions_stay_never_stops_while_another_joins(
        broker: BrokerProcess, protocol: str, assignors: list[str]) -> None:
    topic, group = f"stay-{protocol}", f"stay-{protocol}"
    _topic(broker, topic, 1)
    revoked: list[set[TopicPartition]] = []
    first = Consumer(broker.endpoint, group_id=group, group_protocol=protocol,
                     session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500,
                     partition_assignment_strategy=assignors)
    second = Consumer(broker.endpoint, group_id=group, group_protocol=protocol,
                      session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500,
                      partition_assignment_strategy=assignors)
    try:
        first.subscribe([topic], on_revoke=revoked.append, on_lost=revoked.append)
        _wait(lambda: (first.poll(50), len(first.assignment()) == PARTITIONS)[1],
              "the first member to hold everything")
        second.subscribe([topic])
        _wait(lambda: (first.poll(50), second.poll(50),
                       len(first.assignment()) == len(second.assignment()) == 3)[2],
              "both members to hold 3 partitions")
        kept = first.assignment()
        assert revoked and set().union(*revoked) == {TopicPartition(topic, p)
                                                     for p in range(PARTITIONS)} - kept
    finally:
        first.close()
        second.close()


LONG_INTERVAL_MS = 20_000
"""A heartbeat interval far longer than a rebalance: only held heartbeats make one quick."""
QUICK_S = 4.0


def test_a_join_and_a_leave_reach_the_other_member_long_before_its_next_heartbeat() -> None:
    """Held heartbeats: the member already in the group hears of the join and of the leave at
    once, not at its next heartbeat an interval later (docs/groups.md §7)."""
    with broker_process(workers=1, extra_args=[
            "--offsets-topic-num-partitions", "1",  # quick to create
            "--group-consumer-session-timeout-ms", "60000",
            "--group-consumer-heartbeat-interval-ms", str(LONG_INTERVAL_MS)]) as started:
        topic = "quick"
        with Admin(started.endpoint) as admin:
            admin.create_topics([NewTopic(topic, PARTITIONS)])
        first = Consumer(started.endpoint, group_id=topic)
        second = Consumer(started.endpoint, group_id=topic)
        try:
            first.subscribe([topic])
            _wait(lambda: (first.poll(20), len(first.assignment()) == PARTITIONS)[1],
                  "the first member to hold everything")
            joined_at = time.monotonic()
            second.subscribe([topic])
            _wait(lambda: (first.poll(20), second.poll(20),
                           len(first.assignment()) == len(second.assignment()) == 3)[2],
                  "a join to split the partitions", timeout_s=QUICK_S)
            join_s = time.monotonic() - joined_at
            left_at = time.monotonic()
            second.close()
            _wait(lambda: (first.poll(20), len(first.assignment()) == PARTITIONS)[1],
                  "the leave to hand everything back", timeout_s=QUICK_S)
            assert max(join_s, time.monotonic() - left_at) < QUICK_S < LONG_INTERVAL_MS / 1000
        finally:
            first.close()
            second.close()
