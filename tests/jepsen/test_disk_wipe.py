"""The wipe-disk fault's own choices, on seeded inputs and real files: when a wipe may start,
and what it deletes."""

from __future__ import annotations

import json
import random
import socket
from pathlib import Path

from tests.jepsen.histories import partition
from zlog_jepsen.disk_wipe import sole_isr_candidates, wipe_blockers
from zlog_jepsen.membership_faults import needs_spare
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


