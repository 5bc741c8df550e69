"""A partition leader cut off from the other brokers by the network, under acks=all load.

Three brokers behind fault proxies (`zlog_testbed/cluster_network.py`); the test's own clients reach
every broker throughout, the brokers do not reach the isolated one nor it them. An idempotent
producer sends unique values with acks=all (min.insync.replicas=2) to the partition the
isolated broker leads. The majority fences that broker and elects a new leader; the isolated
leader can acknowledge nothing it cannot replicate, and once its lease has run out it refuses
even acks=1 writes. Healed, it learns the new leader, cuts the tail it alone took, and
rejoins the ISR. Afterwards the partition holds every acknowledged record where the producer
was told, each value once, offsets contiguous, and the three replicas are byte for byte equal.
Rerun a case with `pytest --seed N`.

The second test heals the cut leader's links to the controller and to the partition workers
first and leaves its metadata log slow: heard from again, the broker must not take writes as
the leader its stale metadata still names, however long that metadata takes to catch up. The
third cuts off a leader that is also the controller, which answered its own heartbeats.

Another cuts a leader off and resets the connections to its control port, as a host's or a
middlebox's reset would, while it runs on: the controller sees its own connection to it drop
and hears no heartbeat, but its port still accepts connections, so nothing says its process
is gone. acks=1 writes go straight to it and, once elected, to its replacement: the new leader
takes none before the old one's lease ran out.

The last cuts the leader off one way under the same load: it hears no other broker while they
all hear it ("in": what it sends, heartbeats and Raft messages included, still arrives, and
its followers get the answers to the fetches they sent before the cut), or the reverse
("out": it hears the metadata log's leader and its followers' fetches, and nobody hears it).
Either way a new leader takes the writes, the old one takes none once replaced nor after the
heal before its metadata names the new leader, and the end is as in the first test.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import pytest

from tests.cluster_fixtures import (
    STALE_VALUE,
    assert_one_writer_at_a_time,
    log_bytes,
    produce_to_worker,
    writes_across_a_leader_change,
)
from tests.production import Production, acks_all_production, check_log, producing
from zlog.client import Admin, NewTopic
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages.admin import PartitionMetadata
from zlog_testbed.cluster_network import Cut, Link, ProxiedCluster, proxied_cluster
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC_PREFIX: Final = "partitioned"
RECORDS_PER_S: Final = 3_000
RECORDS_MAX: Final = 1_000_000  # production runs until stopped, well before this
ACKS_PER_PHASE: Final = 1_000  # acknowledged records before the cut, during it, after heal
UNACKED_WINDOW: Final = 300
REQUEST_TIMEOUT_MS: Final = 1_500
DEADLINE_S: Final = 45.0
# The batch `_cut_off_and_replaced` writes to the cut-off leader within its lease: never
# acknowledged, and yet a follower may hold it (a fetch answered before a one-way cut).
CUT_OFF_WRITE: Final = frozenset({STALE_VALUE})
METADATA_DELAY_MS: Final = 700  # the slow metadata log's delay, each way
METADATA_LOG: Final[tuple[Link, ...]] = ("raft",)
CONTROL_AND_DATA: Final[tuple[Link, ...]] = ("control", "data")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ProxiedCluster]:
    with proxied_cluster(3, tmp_path) as running:
        yield running


def _partition_seen_by(cluster: ProxiedCluster, node: int, topic: str) -> PartitionMetadata:
    (found,) = cluster.broker(node).metadata([topic], timeout_ms=2_000).topics
    return next(p for p in found.partitions if p.partition == 0)


def _wait_seen_by(cluster: ProxiedCluster, nodes: set[int], topic: str,
                  check: Callable[[PartitionMetadata], bool], what: str) -> None:
    """Until every broker of `nodes` sees the partition so (metadata from those alone: an
    isolated broker answers from what it knew before the cut)."""
    def holds() -> bool:
        try:
            return all(check(_partition_seen_by(cluster, node, topic)) for node in nodes)
        except (ZlogError, AssertionError, StopIteration):
            return False

    wait_until(holds, DEADLINE_S, interval_s=0.05, what=f"{topic}-0: {what}")


def _topic_led(cluster: ProxiedCluster, *, by_the_controller: bool) -> tuple[str, int]:
    """A new topic (one partition, three replicas, all in sync) whose leader is the controller
    or not, and that leader. Placement spreads leaders over the brokers, so one of three
    topics in a row has such a leader."""
    with Admin(cluster.bootstrap) as admin:
        for attempt in range(3):
            topic = f"{TOPIC_PREFIX}-{attempt}"
            admin.create_topics([NewTopic(topic, 1, replication_factor=3,
                                          configs={"min.insync.replicas": "2"})])
            cluster.wait_isr(topic, 0, {1, 2, 3})
            leader = cluster.partition(topic, 0).leader
            if (leader == cluster.metadata([topic]).controller_id) == by_the_controller:
                return topic, leader
    raise AssertionError(f"no leader of three topics in a row fits by_the_controller="
                         f"{by_the_controller}")


def _one_batch_replicated(cluster: ProxiedCluster, topic: str) -> None:
    """An acks=all batch on every replica before the cut, so the logs compared at the end
    are not empty (the writes of the tests without a producer are all refused). The leader's
    worker may not hold its lease yet when the metadata already names it: NOT_LEADER_OR_FOLLOWER
    (nothing appended) is tried again, as a producer would."""
    endpoint = cluster.partition(topic, 0).endpoint

    def appended() -> bool:
        code = produce_to_worker(endpoint, topic, 0, acks=-1)
        assert code in (ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER), code
        return code == ErrorCode.NONE

    wait_until(appended, DEADLINE_S, interval_s=0.02, what=f"an acks=all batch on {topic}-0")


def _cut_off_and_replaced(cluster: ProxiedCluster, topic: str, victim: int,
                          direction: Cut = "both") -> str:
    """Cut `victim`, the partition's leader, off from the other brokers (both ways, or one
    way): it acknowledges nothing it cannot replicate, and once the others have elected a new
    leader (after its session, so after its lease) it refuses even acks=1 writes. Its worker's
    data endpoint."""
    majority = {1, 2, 3} - {victim}
    old_endpoint = cluster.partition(topic, 0).endpoint
    cluster.isolate(victim, direction=direction)
    # Still the leader in its own eyes and within its lease, it appends this batch (a tail
    # the others never see, or only in answers to fetches sent before a one-way cut) but must
    # not acknowledge it.
    assert produce_to_worker(old_endpoint, topic, 0, acks=-1, timeout_ms=3_000) != \
        ErrorCode.NONE
    _wait_seen_by(cluster, majority, topic,
                  lambda p: p.leader in majority and victim not in p.isr
                  and bool(p.endpoint), f"a leader among {sorted(majority)}")
    assert produce_to_worker(old_endpoint, topic, 0, acks=1) == \
        ErrorCode.NOT_LEADER_OR_FOLLOWER
    if direction != "out":  # it hears nobody: its metadata stops where it was cut
        assert _partition_seen_by(cluster, victim, topic).leader == victim
    return old_endpoint


def _takes_no_write_until_it_learns_the_new_leader(
        cluster: ProxiedCluster, topic: str, victim: int, old_endpoint: str) -> None:
    """Heard from again, the old leader refuses every acks=1 write straight to its worker (a
    client with stale metadata) until its metadata names the new leader: none may be
    acknowledged by a second leader."""
    answers: list[int] = []

    def caught_up() -> bool:
        answers.append(produce_to_worker(old_endpoint, topic, 0, acks=1))
        return _partition_seen_by(cluster, victim, topic).leader != victim

    wait_until(caught_up, DEADLINE_S, interval_s=0.01,
               what=f"broker {victim} learning the new leader")
    assert ErrorCode.NONE not in answers, (
        f"{answers.count(ErrorCode.NONE)} of {len(answers)} writes acknowledged by the old "
        "leader after the new one was elected")


def _healed_rejoins_as_a_follower(cluster: ProxiedCluster, topic: str, victim: int) -> None:
    cluster.heal()
    _rejoins_as_a_follower(cluster, topic, victim)


def _rejoins_as_a_follower(cluster: ProxiedCluster, topic: str, victim: int) -> None:
    """Healed, the old leader learns the new one, cuts the tail it alone took where the
    leader epochs part, and rejoins the ISR as a follower."""
    _wait_seen_by(cluster, {1, 2, 3}, topic,
                  lambda p: set(p.isr) == {1, 2, 3} and p.leader not in (victim, -1),
                  "the old leader back in the ISR, as a follower")
    assert "where it diverged from its leader" in cluster.broker(victim).log_text()


def _replicas_byte_for_byte_equal(cluster: ProxiedCluster, topic: str) -> None:
    assert not cluster.direct_links(), "a broker bypassed the proxies"
    for broker in cluster.brokers.values():
        assert broker.stop() == 0
    stored = {node: log_bytes(broker, topic, 0) for node, broker in cluster.brokers.items()}
    assert stored[1] and stored[1] == stored[2] == stored[3]


def _production_asking_first(cluster: ProxiedCluster, victim: int, topic: str,
                             seed: int) -> Production:
    """acks=all production from an idempotent producer that asks the broker it will cut off
    first (one in its own rack, say): that broker goes on answering Metadata from what it
    knew, naming itself the leader."""
    bootstrap = ",".join([cluster.endpoints[victim]] + [endpoint for node, endpoint
                                                        in cluster.endpoints.items()
                                                        if node != victim])
    return acks_all_production(bootstrap, seed, topic=topic, partitions=1,
                               records=RECORDS_MAX, window=UNACKED_WINDOW,
                               deadline_s=DEADLINE_S, records_per_s=RECORDS_PER_S,
                               request_timeout_ms=REQUEST_TIMEOUT_MS)


def test_a_leader_cut_off_from_the_other_brokers_takes_no_write_it_cannot_replicate(
        cluster: ProxiedCluster, seed: int) -> None:
    topic, victim = _topic_led(cluster, by_the_controller=False)
    production = _production_asking_first(cluster, victim, topic, seed)
    with producing(production):
        production.await_more_acks(ACKS_PER_PHASE)
        assert not cluster.direct_links(), "a broker bypasses the proxies"
        survivors = set(production.acknowledged())
        _cut_off_and_replaced(cluster, topic, victim)
        production.await_more_acks(ACKS_PER_PHASE)  # served by the new leader
        _healed_rejoins_as_a_follower(cluster, topic, victim)
        production.await_more_acks(ACKS_PER_PHASE)
    check_log(cluster.bootstrap, production, seed, survivors, CUT_OFF_WRITE)
    _replicas_byte_for_byte_equal(cluster, topic)


def test_a_cut_off_leader_heard_from_again_takes_no_write_before_its_metadata_caught_up(
        cluster: ProxiedCluster) -> None:
    topic, victim = _topic_led(cluster, by_the_controller=False)
    _one_batch_replicated(cluster, topic)
    old_endpoint = _cut_off_and_replaced(cluster, topic, victim)
    cluster.slow_down(victim, METADATA_DELAY_MS, METADATA_LOG)
    cluster.heal(CONTROL_AND_DATA)
    _takes_no_write_until_it_learns_the_new_leader(cluster, topic, victim, old_endpoint)
    _healed_rejoins_as_a_follower(cluster, topic, victim)
    _replicas_byte_for_byte_equal(cluster, topic)


def _elected_at_s(cluster: ProxiedCluster, nodes: set[int], topic: str, victim: int) -> float:
    """When a controller among `nodes` decided another leader than `victim` (wall clock, from
    the line it logs: `<topic>-0: leader N epoch E, ISR [...]`)."""
    pattern = re.compile(rf"^ts=(\S+) .*{re.escape(topic)}-0: leader (\d+) epoch (\d+),",
                         re.MULTILINE)
    decided = [datetime.strptime(match[1], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
                   tzinfo=UTC).timestamp()
               for node in nodes for match in pattern.finditer(cluster.broker(node).log_text())
               if int(match[2]) != victim and int(match[3]) > 0]
    assert decided, f"no controller among {sorted(nodes)} logged a new leader of {topic}-0"
    return min(decided)


def test_the_controller_cut_off_with_a_leadership_takes_no_write_once_replaced(
        cluster: ProxiedCluster) -> None:
    """The broker cut off leads the partition and is the controller, which answered its own
    heartbeats: the others elect a new controller, which fences it and elects a new leader.
    acks=1 writes go straight to the old leader all along: it takes them for the rest of its
    lease (a tail it alone holds), and none sent after the new leader was decided. Healed, it
    rejoins as a follower and cuts that tail."""
    topic, victim = _topic_led(cluster, by_the_controller=True)
    _one_batch_replicated(cluster, topic)
    majority = {1, 2, 3} - {victim}
    old_endpoint = cluster.partition(topic, 0).endpoint
    cluster.isolate(victim)
    taken_sent_at_s: list[float] = []

    def replaced() -> bool:
        sent_at_s = time.time()
        if produce_to_worker(old_endpoint, topic, 0, acks=1) == ErrorCode.NONE:
            taken_sent_at_s.append(sent_at_s)
        return all(p.leader in majority and bool(p.endpoint)
                   for p in (_partition_seen_by(cluster, node, topic) for node in majority))

    wait_until(replaced, DEADLINE_S, interval_s=0.01, what=f"a leader among {sorted(majority)}")
    assert produce_to_worker(old_endpoint, topic, 0, acks=1) == \
        ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert taken_sent_at_s, "the old leader took nothing even within its lease"
    elected_at_s = _elected_at_s(cluster, majority, topic, victim)
    assert max(taken_sent_at_s) < elected_at_s, (
        f"the old leader took a write sent {max(taken_sent_at_s) - elected_at_s:.3f} s after "
        "the new leader was decided")
    _healed_rejoins_as_a_follower(cluster, topic, victim)
    _replicas_byte_for_byte_equal(cluster, topic)


def test_a_leader_whose_control_connection_dropped_takes_no_write_beside_its_replacement(
        cluster: ProxiedCluster) -> None:
    topic, victim = _topic_led(cluster, by_the_controller=False)
    _one_batch_replicated(cluster, topic)
    majority = {1, 2, 3} - {victim}
    old_endpoint = cluster.partition(topic, 0).endpoint
    cluster.isolate(victim)
    cluster.reset(victim, ("control",))

    def new_endpoint() -> str | None:
        try:
            seen = [_partition_seen_by(cluster, node, topic) for node in majority]
        except (ZlogError, StopIteration):
            return None
        return next((p.endpoint for p in seen if p.leader in majority), None)

    old, new = writes_across_a_leader_change(old_endpoint, topic, new_endpoint,
                                             new_writes=20, deadline_s=DEADLINE_S)
    assert old, "the old leader took nothing even within its lease"
    assert_one_writer_at_a_time(old, new)
    _healed_rejoins_as_a_follower(cluster, topic, victim)
    _replicas_byte_for_byte_equal(cluster, topic)


@pytest.mark.parametrize("direction", ["in", "out"])
def test_a_leader_cut_off_one_way_takes_no_write_beside_its_replacement(
        cluster: ProxiedCluster, seed: int, direction: Cut) -> None:
    topic, victim = _topic_led(cluster, by_the_controller=False)
    production = _production_asking_first(cluster, victim, topic, seed)
    with producing(production):
        production.await_more_acks(ACKS_PER_PHASE)
        survivors = set(production.acknowledged())
        old_endpoint = _cut_off_and_replaced(cluster, topic, victim, direction)
        production.await_more_acks(ACKS_PER_PHASE)  # served by the new leader
        cluster.heal()
        _takes_no_write_until_it_learns_the_new_leader(cluster, topic, victim, old_endpoint)
        _rejoins_as_a_follower(cluster, topic, victim)
        production.await_more_acks(ACKS_PER_PHASE)
    check_log(cluster.bootstrap, production, seed, survivors, CUT_OFF_WRITE)
    _replicas_byte_for_byte_equal(cluster, topic)
