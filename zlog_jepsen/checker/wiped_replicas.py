"""wiped-replica-elected: a replica back on an empty disk led a partition it was the only
in-sync replica of (docs/reliability.md §8.3; docs/replication.md §4.1, §4.2).

A sole-ISR wipe (zlog_jepsen.sole_isr) leaves partitions whose ISR holds only the wiped
broker: the "sole partitions", each named in the fault's start event with the leader epoch it
had when the broker was wiped. Their data is on the replicas that left the ISR before, not on
the wiped disk. zlog must then leave each without a leader until an operator turns unclean
election on, and that election must take a replica that holds its data, never the wiped one
while another is usable. Electing the wiped replica makes its empty log the partition's: the
others truncate to it and every acknowledged record of the partition is gone.

While the fault heals, the harness records what the brokers answered about the sole
partitions ("observed" nemesis events: leader, leader epoch, ISR, which broker answered) and
what the operator did ("operator" events). The rule: per sole partition, with E its leader
epoch at the wipe and F the lowest epoch above E in which another replica was seen leading,
every epoch strictly between E and F in which the wiped broker was seen leading is one
anomaly. Up to E the record is the one from before the wipe: a broker whose metadata is
frozen (the metadata log has no quorum until a killed voter is back) still names the old
leader, which is no election. From F on the wiped broker may lead again legitimately: it
caught up from the replica that led in F before it rejoined the ISR.

The wiped broker may be elected under its registration from before the wipe too: a
controller that takes it for alive without having heard from it, before its new registration
is in, still has its old directory on record. The only process of that broker then runs on the
empty disk, and clients are sent to it: that is reported all the same.

Epochs, not times, order the answers: each came from whichever broker answered, and a broker
whose copy of the metadata lags shows an older record; a partition's leader epoch orders its
records whatever answered. The rule relies on the harness seeing the first leader after E:
it samples until every sole partition has one, and a leader that rejoined can take its
leadership back only after catching up and a preferred election, tens of seconds later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from zlog_jepsen.checker.anomaly import Anomaly, Findings
from zlog_jepsen.history import Event, HistoryFormatError, fault

NO_LEADER: Final = -1
SOLE_PARTITIONS: Final = "sole_partitions"
"""A sole-ISR wipe's start event: the partitions left with only the wiped broker in sync."""
SEEN: Final = "seen"
"""An "observed" event: what the brokers answered about the sole partitions."""
ACTION: Final = "action"
UNCLEAN_ELECTION_ON: Final = "unclean-election-on"
UNCLEAN_ELECTION_OFF: Final = "unclean-election-off"
"""An "operator" event's actions: unclean.leader.election.enable set on the topics named, and
deleted again once the cluster is whole."""


class SolePartition(NamedTuple):
    """A partition whose ISR held only the wiped broker, and its leader epoch then."""

    topic: str
    partition: int
    leader_epoch: int

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


class Sighting(NamedTuple):
    """A sole partition as one broker's Metadata answered it."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    broker: int  # who answered

    def to_json(self) -> dict[str, Any]:
        return {**self._asdict(), "isr": list(self.isr)}


def _field(raw: Mapping[str, Any], name: str, kind: type) -> Any:
    value = raw.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise HistoryFormatError(f"a {name} is {kind.__name__}, not {value!r} (in {raw!r})")
    return value


def _sole(raw: object) -> SolePartition:
    if not isinstance(raw, dict):
        raise HistoryFormatError(f"a sole partition is an object, not {raw!r}")
    return SolePartition(_field(raw, "topic", str), _field(raw, "partition", int),
                         _field(raw, "leader_epoch", int))


def _sighting(raw: object) -> Sighting:
    if not isinstance(raw, dict):
        raise HistoryFormatError(f"a sighting is an object, not {raw!r}")
    isr = _field(raw, "isr", list)
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in isr):
        raise HistoryFormatError(f"an ISR is a list of brokers, not {isr!r}")
    return Sighting(_field(raw, "topic", str), _field(raw, "partition", int),
                    _field(raw, "leader", int), _field(raw, "leader_epoch", int), tuple(isr),
                    _field(raw, "broker", int))


def _list(value: Mapping[str, Any], name: str) -> list[Any]:
    found = value.get(name)
    if not isinstance(found, list):
        raise HistoryFormatError(f"a {name} is a list, not {found!r}")
    return found


@dataclass
class _Wipe:
    """One sole-ISR wipe as the history tells it."""

    node: int
    epochs: dict[tuple[str, int], int]  # each sole partition's leader epoch at the wipe
    unclean: bool = False  # the operator turned unclean election on
    seen: list[tuple[Sighting, str, bool, int]] = field(default_factory=list)


def _sole_wipes(history: Iterable[Event]) -> list[_Wipe]:
    """Every sole-ISR wipe of the history with what was seen and done until its end (one
    fault at a time: what a fault's heal records belongs to the fault in force)."""
    wipes: list[_Wipe] = []
    current: _Wipe | None = None
    for event in history:
        if event.is_client:
            continue
        phase = fault(event).phase
        value = event.value
        if phase == "start":
            current = None
            if SOLE_PARTITIONS in value:
                sole = [_sole(raw) for raw in _list(value, SOLE_PARTITIONS)]
                current = _Wipe(_field(value, "target", int),
                                {(s.topic, s.partition): s.leader_epoch for s in sole})
                wipes.append(current)
        elif current is None:
            continue
        elif phase == "end":
            current = None
        elif phase == "operator" and value.get(ACTION) == UNCLEAN_ELECTION_ON:
            current.unclean = True
        elif phase == "observed":
            stage = str(value.get("stage", ""))
            current.seen += [(_sighting(raw), stage, current.unclean, event.index)
                             for raw in _list(value, SEEN)]
    return wipes


def wiped_leaderships(epochs: Mapping[tuple[str, int], int], node: int,
                      seen: Sequence[Sighting]) -> list[Sighting]:
    """The first sighting of each leader epoch in which `node`, wiped, led a sole partition
    before any other replica had (the rule of the module's docstring)."""
    found: dict[tuple[str, int, int], Sighting] = {}
    for tp, at_wipe in epochs.items():
        mine = [s for s in seen if (s.topic, s.partition) == tp and s.leader_epoch > at_wipe]
        cleanly = min((s.leader_epoch for s in mine if s.leader not in (NO_LEADER, node)),
                      default=None)
        for s in mine:
            if s.leader == node and (cleanly is None or s.leader_epoch < cleanly):
                found.setdefault((s.topic, s.partition, s.leader_epoch), s)
    return list(found.values())


def find_wiped_replica_elected(history: Iterable[Event], findings: Findings) -> None:
    for wipe in _sole_wipes(history):
        where = {s: (stage, unclean, index) for s, stage, unclean, index in reversed(wipe.seen)}
        for s in wiped_leaderships(wipe.epochs, wipe.node, [s for s, *_ in wipe.seen]):
            stage, unclean, index = where[s]
            findings.add(Anomaly.WIPED_REPLICA_ELECTED, {
                "topic": s.topic, "partition": s.partition, "wiped": wipe.node,
                "leader_epoch": s.leader_epoch,
                "epoch_at_wipe": wipe.epochs[(s.topic, s.partition)], "isr": list(s.isr),
                "answered_by": s.broker, "stage": stage, "unclean_election": unclean,
                "index": index,
            })
