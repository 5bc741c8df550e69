"""Clients while leaders move: a retriable error is retried inside the client, within the
call's timeout, and never reaches the caller (docs/reliability.md §5.3, docs/replication.md
§5).

Three brokers, with no automatic preferred elections so that every move is the test's own
(tests/leader_moves.py): the leader's worker killed, the leader's broker killed (then
restarted), and a preferred election moving leadership back without a kill. Each client keeps
calling through each move and every answer is checked. A partition of one replica has no
leader at all while its broker is down: a call then waits out its timeout and names the cause,
and once the broker is back the same client answers again (it never keeps a leaderless view
of a partition). Group calls keep answering while the group's coordinator is killed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Final

import pytest

from tests.leader_moves import (
    MOVES,
    call_until,
    kill_leader_broker,
    kill_leader_worker,
    serving,
)
from zlog.client import EARLIEST, LATEST, Admin, Consumer, NewTopic, Producer, TopicPartition
from zlog.client.records import RecordMetadata
from zlog.errors import ZlogError
from zlog.groups.partitioning import OFFSETS_TOPIC, partition_for
from zlog_testbed.cluster_processes import ClusterProcesses, cluster_processes
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC: Final = "moving"
PARTITIONS: Final = 2
RECORDS: Final = 20  # per partition, before the moves
STAMP_MS: Final = 1_000  # every record's timestamp: a lookup by time finds the first
WAIT_S: Final = 60.0
SHORT_TIMEOUT_MS: Final = 2_000  # a call that cannot succeed while a broker is down
OFFSETS_PARTITIONS: Final = 2


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    with cluster_processes(3, tmp_path, extra_args=(
            "--auto-leader-rebalance", "false",
            "--offsets-topic-num-partitions", str(OFFSETS_PARTITIONS),
            "--group-initial-rebalance-delay-ms", "0")) as running:
        yield running


def _topic(cluster: ClusterProcesses, name: str = TOPIC, *, replication_factor: int = 3,
           records: int = RECORDS) -> None:
    """`name` created, every replica in sync, `records` records in each partition."""
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(name, PARTITIONS, replication_factor=replication_factor)])
    for partition in range(PARTITIONS):
        cluster.wait_for(lambda p: serving(p) and len(p.isr) == replication_factor, name,
                         partition, "every replica in sync")
    with Producer(cluster.bootstrap, linger_ms=0) as producer:
        sent = [producer.send(name, b"%d" % index, partition=partition, timestamp_ms=STAMP_MS)
                for partition in range(PARTITIONS) for index in range(records)]
        for future in sent:
            future.result(WAIT_S)


def _answers(call: Callable[[], object]) -> bool:
    """Whether `call()` answers within its timeout (it retries inside); a retriable error at
    its timeout means the partition has no leader yet, anything else fails the test."""
    try:
        call()
    except ZlogError as error:
        assert error.retriable, error
        return False
    return True


def _admin_offsets(admin: Admin) -> tuple[int, int, int, int]:
    """(latest of partition 0, latest of 1, earliest of 0, the first of 0 at STAMP_MS)."""
    moving, other = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
    latest = admin.list_offsets({moving: LATEST, other: LATEST})
    earliest = admin.list_offsets({moving: EARLIEST})
    by_time = admin.list_offsets({moving: STAMP_MS, other: STAMP_MS + 1})
    assert by_time[other].offset == -1, "every record is older"
    return (latest[moving].offset, latest[other].offset, earliest[moving].offset,
            by_time[moving].offset)


WHOLE: Final = (RECORDS, RECORDS, 0, 0)
"""What `_admin_offsets` answers once the cluster is whole. While a restarted leader's high
watermark catches up with its followers it may answer less (see the last test)."""


def test_admin_calls_answer_while_a_leader_moves(cluster: ClusterProcesses) -> None:
    _topic(cluster)
    with Admin(cluster.bootstrap) as admin:

        def calls() -> None:
            latest, other, earliest, by_time = _admin_offsets(admin)
            assert 0 <= latest <= RECORDS and 0 <= other <= RECORDS and earliest == 0
            assert by_time in (0, -1)
            (described,) = admin.describe_topics([TOPIC])
            assert len(described.partitions) == PARTITIONS

        assert _admin_offsets(admin) == WHOLE  # the admin knows the leaders now
        for move in MOVES:
            made = move(cluster, TOPIC, 0)
            call_until(made.settled, calls, f"admin calls through: {made.what}")
            wait_until(lambda: _admin_offsets(admin) == WHOLE, WAIT_S,
                       what=f"the offsets as they were, after: {made.what}")


def test_a_restarted_leader_never_answers_an_older_latest_offset(
        cluster: ClusterProcesses) -> None:
    """A leader whose worker restarts answers the offsets it answered before, or
    OFFSET_NOT_AVAILABLE (retried inside the client) until its HW is back; never lower."""
    _topic(cluster)
    with Admin(cluster.bootstrap) as admin:

        def exact() -> None:
            found = _admin_offsets(admin)
            assert found == WHOLE, f"{found}, not {WHOLE}"

        exact()
        for _ in range(3):
            made = kill_leader_worker(cluster, TOPIC, 0)
            call_until(made.settled, exact, f"admin calls through: {made.what}")


def test_consumer_calls_answer_while_a_leader_moves(cluster: ClusterProcesses) -> None:
    """The consumer reads partition 0 from the start while its leader moves, and looks up
    offsets of both partitions (by time too: Kafka's offsetsForTimes) in between."""
    _topic(cluster)
    moving, other = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
    read: list[int] = []
    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer, \
            Producer(cluster.bootstrap, linger_ms=0) as producer:
        consumer.assign([moving])
        sent: list[Future[RecordMetadata]] = []

        def calls() -> None:
            sent.append(producer.send(TOPIC, b"more", partition=0))
            read.extend(record.offset for record in consumer.poll(50))
            found = consumer.list_offsets({other: LATEST, moving: STAMP_MS})
            assert set(found) == {other, moving}  # exact once whole again (admin test)
            assert 0 <= found[other] <= RECORDS and found[moving] in (0, -1)
            assert consumer.position(moving) == (read[-1] + 1 if read else 0)
            last = consumer.latest(TOPIC, 1)
            assert last is None or last.offset == RECORDS - 1

        calls()
        for move in MOVES:
            made = move(cluster, TOPIC, 0)
            call_until(made.settled, calls, f"consumer calls through: {made.what}")
        for future in sent:
            future.result(WAIT_S)
        end = RECORDS + len(sent)

        def all_read() -> bool:
            read.extend(record.offset for record in consumer.poll(100))
            return len(read) >= end

        wait_until(all_read, WAIT_S, what=f"all {end} records read")
        assert read == list(range(end)), "every record once, in order"
        consumer.seek_to_end([moving])
        assert consumer.position(moving) == end
        assert consumer.list_offsets({other: LATEST, moving: STAMP_MS}) == {
            other: RECORDS, moving: 0}
        last = consumer.latest(TOPIC, 1)
        assert last is not None and last.offset == RECORDS - 1


def test_producer_delivers_while_a_leader_moves(cluster: ClusterProcesses) -> None:
    _topic(cluster, records=0)
    sent: list[Future[RecordMetadata]] = []
    with Producer(cluster.bootstrap, linger_ms=0) as producer:

        def calls() -> None:
            sent.append(producer.send(TOPIC, b"%d" % len(sent), partition=0))
            assert producer.partitions_for(TOPIC) == [0, 1]

        for move in MOVES:
            made = move(cluster, TOPIC, 0)
            call_until(made.settled, calls, f"sends through: {made.what}")
        offsets = [future.result(WAIT_S).offset for future in sent]
    assert offsets == list(range(len(sent))), "each record once, in send order"


def test_clients_find_a_leader_that_comes_back_after_none_was_left(
        cluster: ClusterProcesses) -> None:
    """One replica: while its broker is down the partition has no leader at all. An Admin or
    Consumer call made then waits out its timeout and names a retriable cause; once the
    broker is back the same clients answer, and the consumer reads what was sent meanwhile."""
    _topic(cluster, "single", replication_factor=1)
    tp = TopicPartition("single", 0)
    victim = cluster.partition("single", 0).leader
    with Admin(cluster.bootstrap, request_timeout_ms=SHORT_TIMEOUT_MS) as admin, \
            Consumer(cluster.bootstrap, auto_offset_reset="earliest",
                     request_timeout_ms=SHORT_TIMEOUT_MS) as consumer, \
            Producer(cluster.bootstrap, linger_ms=0) as producer:
        consumer.assign([tp])
        assert admin.list_offsets({tp: LATEST})[tp].offset == RECORDS
        assert len(consumer.poll(int(WAIT_S * 1000))) > 0
        cluster.broker(victim).kill_all()
        cluster.wait_for(lambda p: not serving(p), "single", 0, "no leader left")
        late = producer.send("single", b"sent while no leader was left", partition=0)
        for call in (lambda: admin.list_offsets({tp: LATEST}),
                     lambda: consumer.list_offsets({tp: LATEST})):
            with pytest.raises(ZlogError) as unavailable:
                call()
            assert unavailable.value.retriable, unavailable.value
        consumer.poll(100)  # nothing to read, and no error

        cluster.broker(victim).start()
        assert late.result(WAIT_S).offset == RECORDS
        cluster.wait_for(serving, "single", 0, "a leader again")
        wait_until(lambda: _answers(lambda: admin.list_offsets({tp: LATEST})[tp].offset),
                   WAIT_S, what="the admin answering about the partition again")
        assert admin.list_offsets({tp: LATEST})[tp].offset == RECORDS + 1
        wait_until(lambda: _answers(lambda: consumer.list_offsets({tp: LATEST})), WAIT_S,
                   what="the consumer answering about the partition again")
        assert consumer.list_offsets({tp: LATEST}) == {tp: RECORDS + 1}
        wait_until(lambda: any(r.offset == RECORDS for r in consumer.poll(100)), WAIT_S,
                   what="the record sent while no leader was left, read")


def _bootstrap(cluster: ClusterProcesses, *, first: int | None = None,
               last: int | None = None) -> str:
    """Every broker, broker `first` first or broker `last` last: a client asks the first one
    of its bootstrap list first."""
    ordered = sorted(cluster.endpoints.items(),
                     key=lambda item: (item[0] != first, item[0] == last))
    return ",".join(endpoint for _node, endpoint in ordered)


def _controller(cluster: ClusterProcesses) -> int:
    with Admin(cluster.bootstrap) as admin:
        return admin.describe_cluster().controller_id


def test_the_first_member_finds_a_coordinator_whichever_broker_it_asks_first(
        cluster: ClusterProcesses) -> None:
    """No offsets topic yet, and the broker the member asks first is not the controller:
    FindCoordinator there answers COORDINATOR_NOT_AVAILABLE, and the member asks the next
    broker rather than the same one again and again."""
    _topic(cluster)
    with Consumer(_bootstrap(cluster, last=_controller(cluster)), group_id="first-group",
                  auto_offset_reset="earliest") as member:
        member.subscribe([TOPIC])
        wait_until(lambda: bool(member.poll(100)) and bool(member.assignment()), WAIT_S,
                   what="the member assigned and reading")


def test_group_calls_answer_while_the_coordinator_moves(cluster: ClusterProcesses) -> None:
    """The Admin lists, describes and reads a group and its member commits and reads its
    commits, while the broker leading the group's offsets partition is killed and
    restarted. The Admin asks a surviving broker first, whose metadata names the killed
    coordinator until the cluster has fenced it."""
    _topic(cluster)
    group = "moving-group"
    offsets_partition = partition_for(group, OFFSETS_PARTITIONS)
    bootstrap = _bootstrap(cluster, first=_controller(cluster))  # the previous test's concern
    with Consumer(bootstrap, group_id=group, auto_offset_reset="earliest",
                  enable_auto_commit=False) as member:
        member.subscribe([TOPIC])
        wait_until(lambda: bool(member.poll(100)) and bool(member.assignment()), WAIT_S,
                   what="the member assigned and reading")
        for partition in range(OFFSETS_PARTITIONS):
            cluster.wait_for(lambda p: serving(p) and len(p.isr) == 3, OFFSETS_TOPIC,
                             partition, "every offsets replica in sync")
        victim = cluster.partition(OFFSETS_TOPIC, offsets_partition).leader
        with Admin(_bootstrap(cluster, last=victim)) as admin:
            _group_calls_through_a_kill(cluster, member, admin, group)


def _group_calls_through_a_kill(cluster: ClusterProcesses, member: Consumer, admin: Admin,
                                group: str) -> None:
    """Group calls of `admin` and `member` until the killed coordinator's broker is back."""
    tp = TopicPartition(TOPIC, 0)
    commits = [0]


    def listed() -> bool:
        return group in [g.group_id for g in admin.list_groups()]

    def calls() -> None:
        # A worker named leader of the group's offsets partition before it took it lists no
        # group of it; the list is whole again once it has (below).
        listed()
        (described,) = admin.describe_groups([group])
        assert described.group_id == group and len(described.members) == 1
        assert admin.list_group_offsets(group).get(tp) == (commits[0] or None)
        member.poll(10)
        commits[0] += 1
        member.commit({tp: commits[0]})
        assert member.committed([tp]) == {tp: commits[0]}

    calls()
    assert listed()
    made = kill_leader_broker(cluster, OFFSETS_TOPIC, partition_for(group, OFFSETS_PARTITIONS))
    call_until(made.settled, calls, f"group calls through: {made.what}")
    wait_until(listed, WAIT_S, what="the group listed again")
    assert member.assignment() == {tp, TopicPartition(TOPIC, 1)}
