"""A reopened follower's high watermark (docs/replication.md §2.3 item 4, §5.1 S8), as the
replication simulator found it (tests/sim/replication, seed 43 before the fix).
"""

from __future__ import annotations

from tests.memory_log import MemoryLog
from tests.storage_helpers import make_batch
from zlog.broker.data.isr import ReplicaSet
from zlog.broker.data.partition import Partition


def test_a_reopened_follower_does_not_make_up_a_high_watermark() -> None:
    """A follower's HW is what its leader says. Reopened as the only ISR member of a
    partition that has no leader yet, it used to compute one on its own, over its whole
    log, uncommitted tail included."""
    log = MemoryLog()
    for tag in range(3):
        log.append(make_batch(tag), leader_epoch=0)
    alone = ReplicaSet(3, frozenset({1, 2, 3}), frozenset({3}), 2)
    partition = Partition("t", 0, log, leader_epoch=1, is_leader=False, replicas=alone)
    assert partition.high_watermark == 0
    partition.become(leader_epoch=2, is_leader=True, replicas=alone, now_ms=0)
    assert partition.high_watermark == 0, "an ISR below min.insync.replicas: it stays"
    partition.set_replicas(ReplicaSet(3, frozenset({1, 2, 3}), frozenset({3}), 1))
    assert partition.high_watermark == log.log_end_offset  # leading alone: all of it
