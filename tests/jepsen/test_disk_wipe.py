"""The wipe-disk fault's own choices, on seeded inputs and real files: when a wipe may start,
what it deletes, and how the sole-ISR shape is killed, watched and brought back."""

from __future__ import annotations

import json
import random
import socket
from dataclasses import replace
from pathlib import Path

import pytest

from tests.jepsen.histories import partition
from zlog.client.records import BrokerDescription
from zlog.transport.messages.admin import TopicMetadata
from zlog_jepsen.__main__ import first_config, parser
from zlog_jepsen.checker.wiped_replicas import Sighting, SolePartition
from zlog_jepsen.cluster_view import wipe_blockers
from zlog_jepsen.disk_wipe import SHAPES, SOLE_ISR, sole_isr_candidates
from zlog_jepsen.membership_faults import needs_spare
from zlog_jepsen.nemesis import Schedule
from zlog_jepsen.sole_isr import (
    decided,
    kill_order,
    leaderless,
    registered_again,
    served,
    sightings,
    sole_partitions,
)
from zlog_jepsen.storage_faults import dir_id, wipe_disk

VOTERS = (1, 2, 3)
COUNTED = {1: 0, 2: 3, 3: 0}


def test_a_wipe_may_start_only_with_every_replica_in_sync_and_every_voter_counted() -> None:
    whole = [("jepsen", partition(0, (1, 2, 3))), ("jepsen", partition(1, (3, 1, 2))),
             ("__consumer_offsets", partition(7, (2, 4, 3), replicas=(2, 3, 4)))]
    assert wipe_blockers(whole, COUNTED, VOTERS) == []
    # a spare broker (4) is no voter: its progress is not asked for
    assert wipe_blockers(whole, {**COUNTED, 4: -1}, VOTERS) == []


def test_what_blocks_a_wipe_is_named() -> None:
    lagging = [("jepsen", partition(0, (1, 2))), ("__consumer_offsets", partition(7, (1, 2, 3)))]
    assert wipe_blockers(lagging, COUNTED, VOTERS) == ["jepsen-0: ISR [1, 2] of replicas [1, 2, 3]"]
    leaderless = [("jepsen", partition(0, (1, 2, 3), leader=-1, endpoint=""))]
    assert wipe_blockers(leaderless, COUNTED, VOTERS) == [
        "jepsen-0: ISR [1, 2, 3] of replicas [1, 2, 3], no serving leader"]
    whole = [("jepsen", partition(0, (1, 2, 3)))]
    assert wipe_blockers(whole, {1: 0, 2: -1, 3: 0}, VOTERS) == ["voter 2 not counted"]
    assert wipe_blockers(whole, {1: 0, 3: 0}, VOTERS) == ["voter 2 not counted"]
    assert wipe_blockers(whole, None, VOTERS) == [
        "the voters' progress unknown (no metadata-log leader answered)"]


def test_a_second_wipe_is_blocked_until_the_first_broker_is_whole_again() -> None:
    """The sequence one wipe leaves (seeded: which broker, and how far its catch-up got):
    out of the ISRs and not counted, then in some ISRs, then counted too."""
    for seed in range(20):
        rng = random.Random(seed)
        wiped = rng.choice(VOTERS)
        others = tuple(n for n in VOTERS if n != wiped)
        keys = range(rng.randint(1, 6))
        back = set(rng.sample(list(keys), rng.randint(0, len(keys) - 1))) if keys else set()
        during = [("jepsen", partition(k, (*others, wiped) if k in back else others))
                  for k in keys]
        lags = {**COUNTED, wiped: -1}
        assert wipe_blockers(during, lags, VOTERS), seed
        caught_up = [("jepsen", partition(k, VOTERS)) for k in keys]
        assert wipe_blockers(caught_up, lags, VOTERS) == [f"voter {wiped} not counted"], seed
        assert wipe_blockers(caught_up, {**COUNTED, wiped: 0}, VOTERS) == [], seed


def test_a_sole_isr_wipe_takes_a_voter_led_partition_the_spare_holds() -> None:
    """Killing the other replicas (the spare and one voter) leaves two voters of three up."""
    partitions = [partition(0, (1, 2, 4), replicas=(1, 2, 4), leader=1),
                  partition(1, (1, 2, 3), replicas=(1, 2, 3), leader=2),  # no spare there
                  partition(2, (3, 4, 1), replicas=(3, 4, 1), leader=4),  # the spare leads
                  partition(3, (2, 4, 3), replicas=(2, 4, 3), leader=3),
                  partition(4, (), replicas=(1, 3, 4), leader=-1, endpoint="")]
    assert sole_isr_candidates(partitions, spares=(4,)) == [(0, 1, (2, 4)), (3, 3, (2, 4))]
    assert sole_isr_candidates(partitions, spares=()) == []
    # a wipe asks for the spare that shape needs
    assert needs_spare(("wipe-disk",)) == 1 and needs_spare(("kill-broker",)) == 0


def test_a_wiped_disk_keeps_nothing_but_its_directories(tmp_path: Path) -> None:
    data, rings = tmp_path / "data", tmp_path / "rings"
    (data / "__raft").mkdir(parents=True)
    (data / "__raft" / "00000000000000000000.log").write_bytes(b"raft")
    (data / "jepsen-0").mkdir()
    (data / "jepsen-0" / "00000000000000000000.log").write_bytes(b"batches")
    (data / "jepsen-0" / "leader-epoch-checkpoint").write_text("0\n")
    (data / "meta.json").write_text(json.dumps({"node_id": 2, "dir_id": "ab" * 16}))
    (data / "link").symlink_to(data / "jepsen-0")
    supervisor = socket.socket(socket.AF_UNIX)  # the supervisor's ipc socket lives there too
    supervisor.bind(str(data / "s.sock"))
    supervisor.close()
    (rings / "jepsen-0").mkdir(parents=True)
    (rings / "jepsen-0" / "ring").write_bytes(b"r")
    assert dir_id(data) == "ab" * 16
    done = wipe_disk(data, rings)
    assert done == {"old_dir_id": "ab" * 16, "entries_wiped": 5, "rings_lost": 1}
    assert data.is_dir() and list(data.iterdir()) == []
    assert rings.is_dir() and list(rings.iterdir()) == []
    assert dir_id(data) is None
    assert wipe_disk(data, tmp_path / "none") == {"old_dir_id": None, "entries_wiped": 0,
                                                  "rings_lost": 0}




def test_the_spare_is_killed_first_and_the_voter_last() -> None:
    """The voter is the last in sync besides the wiped leader: it holds everything
    acknowledged, and the metadata log needs it back first."""
    assert kill_order((2, 4), spares=(4,)) == (4, 2)
    assert kill_order((4, 3), spares=(4,)) == (4, 3)
    assert kill_order((1, 5, 4), spares=(4, 5)) == (4, 5, 1)


def _topics(leader_epoch: int = 4, leader: int = 1, **partitions: tuple[tuple[int, ...], ...]
            ) -> tuple[TopicMetadata, ...]:
    """Topic name -> the ISRs of its partitions 0, 1, ...; every partition on brokers 1, 2, 4,
    led by `leader` (-1: none) in `leader_epoch`."""
    return tuple(
        TopicMetadata(name, 0, "", partitions=tuple(
            replace(partition(number, isr, replicas=(1, 2, 4), leader=leader,
                              endpoint="" if leader < 0 else "x"), leader_epoch=leader_epoch)
            for number, isr in enumerate(isrs)))
        for name, isrs in partitions.items())


def test_the_sole_partitions_are_those_the_wiped_broker_alone_holds_in_sync() -> None:
    topics = _topics(jepsen=((1,), (1, 2), (2,)), __consumer_offsets=((1,),))
    sole = sole_partitions(topics, 1)
    assert sole == [SolePartition("jepsen", 0, 4), SolePartition("__consumer_offsets", 0, 4)]
    assert sightings(topics, sole, broker=3) == [
        Sighting("jepsen", 0, 1, 4, (1,), 3), Sighting("__consumer_offsets", 0, 1, 4, (1,), 3)]


def test_the_controller_decides_again_then_the_operator_has_the_leaderless_ones() -> None:
    sole = [SolePartition("jepsen", 0, 4), SolePartition("__consumer_offsets", 0, 4)]
    frozen = _topics(jepsen=((1,),), __consumer_offsets=((1,),))
    assert not decided(frozen, sole)
    waiting = _topics(leader_epoch=5, leader=-1, jepsen=((1,),), __consumer_offsets=((1,),))
    assert decided(waiting, sole) and not decided(waiting[:1], sole)
    assert leaderless(waiting, sole, 1) == sole
    assert leaderless(_topics(leader_epoch=6, leader=2, jepsen=((2,),)), sole, 1) == []
    assert not served(waiting, sole)
    back = _topics(leader_epoch=6, leader=2, jepsen=((2,),), __consumer_offsets=((2,),))
    assert served(back, sole) and not served(back[:1], sole)


def test_a_restart_counts_once_the_controller_has_a_newer_registration_live() -> None:
    def brokers(*states: tuple[int, str, int]) -> list[BrokerDescription]:
        return [BrokerDescription(node, "h", "tcp://h:1", state, epoch)
                for node, state, epoch in states]

    before = {1: 7, 2: 5}
    assert not registered_again(brokers((1, "live", 7), (2, "fenced", 5)), before)
    assert not registered_again(brokers((1, "live", 9), (2, "fenced", 5)), before)
    assert not registered_again(brokers((1, "live", 9)), before)
    assert registered_again(brokers((1, "live", 9), (2, "live", 10), (3, "live", 2)), before)


def test_a_wipe_shape_may_be_forced() -> None:
    assert Schedule().wipe_shapes == SHAPES
    assert first_config(parser().parse_args(["--wipe-shape", SOLE_ISR])).schedule.wipe_shapes \
        == (SOLE_ISR,)
    with pytest.raises(ValueError, match="not lonely"):
        Schedule(wipe_shapes=("lonely",))
