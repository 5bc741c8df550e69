"""wiped-replica-elected (docs/reliability.md §8.3): a sole-ISR wipe's partitions must not be
led by the wiped broker before another replica led them. Each history has a twin that differs
only in who was elected."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from tests.jepsen.histories import History
from zlog_jepsen.checker import Anomaly, check
from zlog_jepsen.checker.anomaly import Findings
from zlog_jepsen.checker.wiped_replicas import (
    ACTION,
    SEEN,
    SOLE_PARTITIONS,
    UNCLEAN_ELECTION_OFF,
    UNCLEAN_ELECTION_ON,
    Sighting,
    SolePartition,
    find_wiped_replica_elected,
)
from zlog_jepsen.history import HistoryFormatError, nemesis_value

WIPE = "wipe-disk"
WIPED = 1
OTHERS = (2, 3)  # the replica that left the ISR last, and the spare
TOPIC = "jepsen"


def _seen(partition: int, leader: int, epoch: int, *, broker: int = 3,
          isr: Sequence[int] = (WIPED,), topic: str = TOPIC) -> Sighting:
    return Sighting(topic, partition, leader, epoch, tuple(isr), broker)


def _wipe(sole: Sequence[SolePartition], stages: Sequence[Sequence[Sighting]],
          unclean_before: int | None = None) -> History:
    """A sole-ISR wipe of broker WIPED: its start naming `sole`, one "observed" event per
    stage, the operator's unclean election turned on before stage `unclean_before`, the
    end."""
    h = History()
    h.event("nemesis", "info", "nemesis", nemesis_value(
        WIPE, "start", target=WIPED, shape="sole-isr",
        **{SOLE_PARTITIONS: [s.to_json() for s in sole]}))
    for number, seen in enumerate(stages):
        if number == unclean_before:
            h.event("nemesis", "info", "nemesis", nemesis_value(
                WIPE, "operator", target=WIPED, topics=[TOPIC], **{ACTION: UNCLEAN_ELECTION_ON}))
        h.event("nemesis", "info", "nemesis", nemesis_value(
            WIPE, "observed", target=WIPED, stage=f"stage-{number}",
            **{SEEN: [s.to_json() for s in seen]}))
    h.event("nemesis", "info", "nemesis", nemesis_value(
        WIPE, "operator", target=WIPED, topics=[TOPIC], **{ACTION: UNCLEAN_ELECTION_OFF}))
    h.event("nemesis", "info", "nemesis", nemesis_value(WIPE, "end", target=WIPED))
    return h


def _found(h: History) -> Findings:
    findings = Findings()
    find_wiped_replica_elected(h.events, findings)
    return findings


SOLE = [SolePartition(TOPIC, 0, 4)]


def test_the_record_from_before_the_wipe_is_no_election() -> None:
    """A broker whose metadata is frozen (no quorum) still names the wiped leader, in the
    epoch it had at the wipe; then the controller leaves the partition without a leader."""
    frozen = [_seen(0, WIPED, 4)]
    decided = [_seen(0, -1, 5), _seen(0, -1, 5, broker=2)]
    h = _wipe(SOLE, [frozen, decided])
    assert _found(h).counts[Anomaly.WIPED_REPLICA_ELECTED] == 0
    result = check(h.events, {})
    assert result.valid, result.failed_by


def test_the_wiped_broker_elected_without_unclean_election_fails_the_run() -> None:
    """The twin: the controller elects the wiped replica in the next epoch (zlog before it
    kept directories), and the others would truncate to its empty log."""
    frozen = [_seen(0, WIPED, 4)]
    elected = [_seen(0, -1, 5), _seen(0, WIPED, 6), _seen(0, WIPED, 6, broker=2)]
    h = _wipe(SOLE, [frozen, elected])
    findings = _found(h)
    assert findings.counts[Anomaly.WIPED_REPLICA_ELECTED] == 1
    (example,) = findings.examples[Anomaly.WIPED_REPLICA_ELECTED]
    assert example["leader_epoch"] == 6 and example["epoch_at_wipe"] == 4
    assert example["stage"] == "stage-1" and not example["unclean_election"]
    result = check(h.events, {})
    assert not result.valid and Anomaly.WIPED_REPLICA_ELECTED in result.failed_by


def test_an_unclean_election_must_take_a_replica_that_holds_its_data() -> None:
    """With unclean election on, the replica that left the ISR last leads first; the wiped
    one may lead later, once it copied the partition back and rejoined (ISR of both)."""
    waiting = [_seen(0, -1, 5)]
    clean = [_seen(0, -1, 5), _seen(0, OTHERS[0], 6, isr=(OTHERS[0],)),
             _seen(0, WIPED, 7, isr=(OTHERS[0], WIPED))]
    assert _found(_wipe(SOLE, [waiting, clean], unclean_before=1)).counts[
        Anomaly.WIPED_REPLICA_ELECTED] == 0
    wiped_first = [_seen(0, -1, 5), _seen(0, WIPED, 6), _seen(0, OTHERS[0], 7, isr=OTHERS)]
    findings = _found(_wipe(SOLE, [waiting, wiped_first], unclean_before=1))
    assert findings.counts[Anomaly.WIPED_REPLICA_ELECTED] == 1
    assert findings.examples[Anomaly.WIPED_REPLICA_ELECTED][0]["unclean_election"]


def test_only_the_sole_partitions_of_the_wipe_in_force_are_judged() -> None:
    """Another partition led by the wiped broker (it rejoined that one's ISR) is no concern,
    nor is what is seen outside the fault."""
    h = _wipe(SOLE, [[_seen(0, -1, 5), _seen(1, WIPED, 9, isr=(WIPED, 2))]])
    h.event("nemesis", "info", "nemesis", nemesis_value(
        WIPE, "observed", target=WIPED, **{SEEN: [_seen(0, WIPED, 8).to_json()]}))
    assert _found(h).counts[Anomaly.WIPED_REPLICA_ELECTED] == 0


def _stage_sightings(rng: random.Random, at_wipe: int, elected: int) -> list[list[Sighting]]:
    """What the brokers answer about one sole partition through the three stages of a heal:
    frozen at the wipe's epoch, then leaderless for a few epochs, then `elected` leads; every
    broker answers each state at most once, in any order, a lagging one older states too."""
    states = [(WIPED, at_wipe)]
    epoch = at_wipe
    for _ in range(rng.randint(1, 3)):
        epoch += 1
        states.append((-1, epoch))
    states.append((elected, epoch + 1))
    stages: list[list[Sighting]] = [[], [], []]
    for leader, state_epoch in states:
        for broker in rng.sample([WIPED, *OTHERS], rng.randint(1, 3)):
            stage = 0 if state_epoch == at_wipe else rng.randint(1, 2)
            stages[stage].append(_seen(0, leader, state_epoch, broker=broker))
    for seen in stages:
        rng.shuffle(seen)
    return stages


@pytest.mark.parametrize("seed", range(40))
def test_a_heal_seen_in_any_order_is_judged_by_its_first_leader(seed: int) -> None:
    """Twins from one seed: the same answers, the first leader after the wipe a replica that
    kept its data or the wiped one. Which broker answered what, and in which order, does not
    change the verdict: the leader epoch orders the records."""
    at_wipe = random.Random(seed).randint(0, 20)
    sole = [SolePartition(TOPIC, 0, at_wipe)]
    kept = _stage_sightings(random.Random(seed), at_wipe, OTHERS[0])
    wiped = _stage_sightings(random.Random(seed), at_wipe, WIPED)
    assert _found(_wipe(sole, kept, unclean_before=2)).counts[
        Anomaly.WIPED_REPLICA_ELECTED] == 0, kept
    assert _found(_wipe(sole, wiped, unclean_before=2)).counts[
        Anomaly.WIPED_REPLICA_ELECTED] == 1, wiped


@pytest.mark.parametrize(("value", "reason"), [
    ({SOLE_PARTITIONS: "jepsen-0"}, "a sole_partitions is a list"),
    ({SOLE_PARTITIONS: [{"topic": TOPIC, "partition": "0", "leader_epoch": 1}]},
     "a partition is int"),
    ({SOLE_PARTITIONS: [{"topic": TOPIC, "partition": 0}]}, "a leader_epoch is int"),
])
def test_a_sole_isr_start_that_cannot_be_read_is_refused(value: dict[str, object],
                                                        reason: str) -> None:
    h = History()
    h.event("nemesis", "info", "nemesis", nemesis_value(WIPE, "start", target=WIPED, **value))
    with pytest.raises(HistoryFormatError, match=reason):
        _found(h)


def test_a_sighting_that_cannot_be_read_is_refused() -> None:
    bad = {**_seen(0, WIPED, 5).to_json(), "isr": ["1"]}
    h = _wipe(SOLE, [])
    h.events.clear()
    h.event("nemesis", "info", "nemesis", nemesis_value(
        WIPE, "start", target=WIPED, **{SOLE_PARTITIONS: [s.to_json() for s in SOLE]}))
    h.event("nemesis", "info", "nemesis", nemesis_value(
        WIPE, "observed", target=WIPED, **{SEEN: [bad]}))
    with pytest.raises(HistoryFormatError, match="an ISR is a list of brokers"):
        _found(h)
