"""A wipe's sole-ISR shape: the wiped broker was the only in-sync replica of its partitions,
and an operator brings them back (zlog_jepsen.disk_wipe; docs/reliability.md §9.3).

For a key whose leader L is a voter and whose other replicas are the spare S and one voter V,
S is killed, then V, each once the controller shows it out of the key's ISR; then L, alone
in sync, is wiped. Every partition whose replicas are those three brokers then has the ISR
[L]: the "sole partitions", recorded with their leader epochs in the fault's start event.

Why S first and V last. While the ISR is {L, V} (S out), writes are acknowledged once L and
V hold them, and S lacks them: of the replicas that keep their data (kill -9 leaves it), the
one that left the ISR last, V, holds everything acknowledged, and S may not. An unclean
election takes the first usable replica in replica order that is still in its recorded
directory (docs/replication.md §4.2), which is S as often as V when both are back; electing S
would truncate what it lacks from V. So the operator lets only V back before turning unclean
election on, as a Kafka operator brings back the replica that left the ISR last: V is then
the only usable replica with its data, and it is elected in every sole partition. V, not S,
is the one kept: V votes, and the metadata log usually has no quorum without it (L's new
directory counts only once a leader has swapped it in, docs/raft.md §4.15).

From the moment L is alone in sync, every running broker's Metadata answers about the sole
partitions are watched (zlog_jepsen.broker_watch), and recorded at the end of each step of
the fault's end as an "observed" event (the checker's wiped-replica-elected rule,
zlog_jepsen.checker.wiped_replicas):

1. `wiped-back`: L wiped and running again on its empty disk (at once, or after the hold),
   then OBSERVE_S more. The metadata log usually has no quorum (V down, L's new directory not
   counted); it has one again if the surviving voter still led it when L came back and
   swapped L's new directory in (docs/raft.md §4.15), and then the controller takes in L's
   registration. Either way L must not lead.
2. `last-in-sync-back`: V starting, watched from its start (a new controller takes over as
   the quorum forms, and decides at once): until the controller shows L and V registered
   again and every sole partition decided since the wipe (a leader epoch after the wipe's),
   then OBSERVE_S more. zlog must leave each without a leader, unclean election being off.
3. The operator turns `unclean.leader.election.enable` on for exactly the topics that have a
   sole partition still without a leader (the workload's, and `__consumer_offsets` when group
   offsets partitions are among them), recorded as an "operator" event, and
   `unclean-election` watches until each such partition has a serving leader.
4. S started; once every replica of the cluster is in sync and every voter counts (the end
   of every wipe), the configs are deleted again (neither topic is created with one), which
   is recorded too.

The group offsets topic has min.insync.replicas 1 (zlog's default, as Kafka's), so a commit
acknowledged while L was alone in sync was on L only and is gone with its disk; the checker
sees that as consumers reading some records again, which it allows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from zlog.broker.topic_configs import UNCLEAN_LEADER_ELECTION
from zlog.client import Admin, ClusterDescription
from zlog.client.records import BrokerDescription
from zlog.errors import ZlogError
from zlog.transport.messages.admin import PartitionMetadata, TopicMetadata
from zlog_jepsen.broker_watch import BrokerWatch
from zlog_jepsen.checker.wiped_replicas import (
    ACTION,
    NO_LEADER,
    SEEN,
    SOLE_PARTITIONS,
    UNCLEAN_ELECTION_OFF,
    UNCLEAN_ELECTION_ON,
    Sighting,
    SolePartition,
)
from zlog_jepsen.cluster import TOPIC_CONFIGS
from zlog_jepsen.cluster_view import ADMIN_TIMEOUT_MS, POLL_INTERVAL_S, controller_view
from zlog_jepsen.topic_alter import alter_configs, restoring
from zlog_testbed.waiting import wait_until

if TYPE_CHECKING:
    from zlog_jepsen.history import FaultPhase
    from zlog_jepsen.nemesis import Nemesis

WIPED_BACK: Final = "wiped-back"
LAST_IN_SYNC_BACK: Final = "last-in-sync-back"
UNCLEAN_ELECTION: Final = "unclean-election"
SOLE_TIMEOUT_S: Final = 30.0
"""For the controller to drop a killed replica from the ISR: at once when its port refuses
connections, its session (1.5 s) at the latest."""
STAGE_TIMEOUT_S: Final = 120.0
"""For a step's outcome: a broker's restart and registration, or an election, on a shared
two-core machine."""
OBSERVE_S: Final = 2.0
"""How long a step's answers are watched once its outcome is there: some 40 rounds of the
controller (one every 50 ms), where a wrong election would come in the next one."""

Record = Callable[["FaultPhase", dict[str, Any]], None]
ControllerView = tuple[ClusterDescription, tuple[TopicMetadata, ...]]


def kill_order(others: Collection[int], spares: Collection[int]) -> tuple[int, ...]:
    """The other replicas in the order they are killed: the spares first, the voter last, so
    the voter is the last in sync besides the wiped leader."""
    return tuple(sorted(others, key=lambda node: (node not in spares, node)))


def _partitions(topics: Iterable[TopicMetadata]) -> dict[tuple[str, int], PartitionMetadata]:
    return {(t.name, p.partition): p for t in topics for p in t.partitions}


def sole_partitions(topics: Iterable[TopicMetadata], node: int) -> list[SolePartition]:
    """The partitions whose ISR is `node` alone, each with its leader epoch."""
    return [SolePartition(topic, number, p.leader_epoch)
            for (topic, number), p in _partitions(topics).items() if tuple(p.isr) == (node,)]


def sightings(topics: Iterable[TopicMetadata], sole: Collection[SolePartition],
              broker: int) -> list[Sighting]:
    """The sole partitions as broker `broker`'s Metadata answer shows them."""
    wanted = {(s.topic, s.partition) for s in sole}
    return [Sighting(topic, number, p.leader, p.leader_epoch, tuple(p.isr), broker)
            for (topic, number), p in _partitions(topics).items() if (topic, number) in wanted]


def decided(topics: Iterable[TopicMetadata], sole: Collection[SolePartition]) -> bool:
    """Whether every sole partition is in a leader epoch after the one it had at the wipe: the
    controller has decided it again since (without a leader, once the wiped replica
    registered on its new directory)."""
    found = _partitions(topics)
    return all((s.topic, s.partition) in found
               and found[(s.topic, s.partition)].leader_epoch > s.leader_epoch for s in sole)


def leaderless(topics: Iterable[TopicMetadata], sole: Collection[SolePartition],
               node: int) -> list[SolePartition]:
    """The sole partitions still without a leader and with `node` alone in sync: what the
    operator must bring back."""
    found = _partitions(topics)
    return [s for s in sole if (p := found.get((s.topic, s.partition))) is not None
            and p.leader == NO_LEADER and set(p.isr) <= {node}]


def served(topics: Iterable[TopicMetadata], wanted: Collection[SolePartition]) -> bool:
    """Whether every one of `wanted` has a leader serving it."""
    found = _partitions(topics)
    return all((p := found.get((s.topic, s.partition))) is not None and p.leader != NO_LEADER
               and bool(p.endpoint) and p.error_code == 0 for s in wanted)


def registered_again(brokers: Iterable[BrokerDescription], before: Mapping[int, int]) -> bool:
    """Whether each broker of `before` (node -> its broker epoch then) is live under a newer
    registration: the controller has taken in its restart."""
    live = {b.node_id: b.broker_epoch for b in brokers if b.state == "live"}
    return all(live.get(node, -1) > epoch for node, epoch in before.items())


class SoleIsr:
    """One sole-ISR wipe of broker `node`, the leader of `key`'s partition, whose `others`
    replicas are the spare and a voter; `record` writes a nemesis event of the fault."""

    def __init__(self, nemesis: Nemesis, key: int, node: int, others: Collection[int],
                 record: Record) -> None:
        self.nemesis = nemesis
        self.key = key
        self.node = node
        self.killed = kill_order(others, nemesis.cluster.spares)
        self.record = record
        self.sole: list[SolePartition] = []
        self.epochs: dict[int, int] = {}  # the wiped broker's and the last killed one's
        self.unclean_topics: list[str] = []
        self.answers: BrokerWatch[Sighting] | None = None

    # -- the start: the others killed, the leader left alone in sync ------------------------

    def leave_alone(self) -> dict[str, Any]:
        """Kill the other replicas in turn, each once the previous one is out of the key's
        ISR, until `node` is alone there; what to add to the start event."""
        cluster = self.nemesis.cluster
        with Admin(cluster.bootstrap, request_timeout_ms=ADMIN_TIMEOUT_MS) as admin:
            described, topics = self._view(admin, "the controller before the kills")
            self.epochs = {b.node_id: b.broker_epoch for b in described.brokers
                           if b.node_id in (self.node, self.killed[-1])}
            in_sync = {self.node, *self.killed}
            for other in self.killed:
                cluster.broker(other).kill_all()
                in_sync.discard(other)
                topics = self._wait_isr(admin, sorted(in_sync))
        self.sole = sole_partitions(topics, self.node)
        sole = self.sole
        self.answers = BrokerWatch(cluster,
                                   lambda node, topics: sightings(topics, sole, node))
        return {"killed": list(self.killed), "isr_at_wipe": [self.node],
                SOLE_PARTITIONS: [s.to_json() for s in self.sole]}

    def _view(self, admin: Admin, what: str) -> ControllerView:
        """The controller's view, asked again until it answers (STAGE_TIMEOUT_S)."""
        view: list[ControllerView] = []

        def answered() -> bool:
            try:
                view[:] = [controller_view(self.nemesis, admin)]
            except (ZlogError, AssertionError):
                return False
            return True

        wait_until(answered, STAGE_TIMEOUT_S, POLL_INTERVAL_S, what)
        return view[0]

    def _wait_isr(self, admin: Admin, wanted: list[int]) -> tuple[TopicMetadata, ...]:
        """Until the controller shows the key's ISR as `wanted`; every topic as it then saw
        them. The order of the kills is what keeps everything acknowledged on the last one,
        so a timeout (SOLE_TIMEOUT_S) breaks the run rather than go on."""
        last: list[tuple[TopicMetadata, ...]] = []
        isr: list[list[int]] = []

        def there() -> bool:
            try:
                _, topics = controller_view(self.nemesis, admin)
            except (ZlogError, AssertionError):
                return False
            found = _partitions(topics).get((self.nemesis.topic, self.key))
            last[:] = [topics]
            isr[:] = [sorted(found.isr)] if found else []
            return isr == [wanted]

        try:
            wait_until(there, SOLE_TIMEOUT_S, POLL_INTERVAL_S,
                       f"key {self.key}'s ISR {wanted}")
        except AssertionError as error:
            raise AssertionError(f"{error}; last seen: {isr or 'no answer'}") from None
        return last[0]

    # -- the end: back step by step, the operator's unclean election ------------------------

    def bring_back(self) -> None:
        """Steps 1-3 of the module's docstring, then the replicas killed first started again
        (step 4 waits for the cluster to be whole, then `restore`)."""
        cluster = self.nemesis.cluster
        *first, last = self.killed
        assert self.answers is not None, "leave_alone started watching"
        with (Admin(cluster.bootstrap, request_timeout_ms=ADMIN_TIMEOUT_MS) as admin,
              self.answers as answers):
            self._watch(admin, answers, WIPED_BACK, None)
            cluster.broker(last).start(wait=False)
            self._watch(admin, answers, LAST_IN_SYNC_BACK,
                        lambda described, topics: registered_again(described.brokers,
                                                                   self.epochs)
                        and decided(topics, self.sole))
            cluster.broker(last).wait_ready()
            cluster.broker(self.node).wait_ready()
            _, topics = self._view(admin, "the controller after the restarts")
            waiting = leaderless(topics, self.sole, self.node)
            if waiting:
                self.unclean_topics = sorted({s.topic for s in waiting})
                alter_configs(cluster.bootstrap, {topic: {UNCLEAN_LEADER_ELECTION: "true"}
                                                  for topic in self.unclean_topics})
                self.record("operator", {
                    "target": self.node, ACTION: UNCLEAN_ELECTION_ON,
                    "topics": self.unclean_topics,
                    "partitions": [f"{s.topic}-{s.partition}" for s in waiting]})
                self._watch(admin, answers, UNCLEAN_ELECTION,
                            lambda _, topics: served(topics, waiting))
        for other in first:
            cluster.broker(other).start()

    def restore(self) -> None:
        """Unclean election off again where the operator turned it on: each topic gets the
        value it was created with, none (deleted, back to the broker's default)."""
        if not self.unclean_topics:
            return
        workload = self.nemesis.topic
        alter_configs(self.nemesis.cluster.bootstrap, {
            topic: restoring((UNCLEAN_LEADER_ELECTION,),
                             TOPIC_CONFIGS if topic == workload else {})
            for topic in self.unclean_topics})
        self.record("operator", {"target": self.node, ACTION: UNCLEAN_ELECTION_OFF,
                                 "topics": self.unclean_topics})

    def _watch(self, admin: Admin, answers: BrokerWatch[Sighting], stage: str,
               until: Callable[[ClusterDescription, tuple[TopicMetadata, ...]], bool] | None
               ) -> None:
        """Until `until` holds for the controller's view (AssertionError at STAGE_TIMEOUT_S),
        then OBSERVE_S more; what every running broker answered about the sole partitions
        meanwhile is recorded as an "observed" event, also when the wait times out."""
        def holds() -> bool:
            if until is None:
                return True
            try:
                described, topics = controller_view(self.nemesis, admin)
            except (ZlogError, AssertionError):
                return False
            return until(described, topics)

        try:
            wait_until(holds, STAGE_TIMEOUT_S, POLL_INTERVAL_S, f"the sole partitions {stage}")
            time.sleep(OBSERVE_S)  # the answers keep coming in on the watch's threads
        finally:
            self.record("observed", {"target": self.node, "stage": stage,
                                     SEEN: [s.to_json() for s in answers.take()]})
