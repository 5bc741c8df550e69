"""The leader-epoch checkpoint read back at open (epoch_checkpoint.py, docs/replication.md
§2.4), on real files: what open trims from it stays trimmed on disk.

The replication simulator found it (seed 529, with leader workers restarted): a leader of
epoch 1 that took no batch leaves (1, 11) in its checkpoint at its log end 11; reopened as a
follower it drops that entry in memory only, copies the new leader's epoch-0 batches at 11..13,
and, reopened once more, read (1, 11) back as if epoch 1 started at 11. Its next fetch named
epoch 1, the leader answered where epoch 0 ends, and the follower cut its log at 11, under
batches that were acknowledged.
"""

from __future__ import annotations

from pathlib import Path

from tests.storage_helpers import make_batch
from zlog.broker.data.epoch_cache import EpochEntry, LeaderEpochCache
from zlog.broker.data.epoch_checkpoint import load_epoch_cache, save_epoch_cache
from zlog.shm_segments.log import PartitionLog
from zlog.shm_segments.log_config import LogConfig

CONFIG = LogConfig(ring_bytes=64 * 1024)


def _entries(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in cache.entries]


def test_an_entry_trimmed_at_open_does_not_come_back_once_the_log_grows_past_it(
        tmp_path: Path, shm_dir: Path) -> None:
    with PartitionLog(tmp_path, "t", 0, CONFIG, ring_dir=shm_dir) as log:
        for tag in range(11):
            log.append(make_batch(tag, 1), leader_epoch=0)
        save_epoch_cache(log.directory, LeaderEpochCache([EpochEntry(0, 0), EpochEntry(1, 11)]))
    with PartitionLog(tmp_path, "t", 0, CONFIG, ring_dir=shm_dir) as log:
        assert _entries(load_epoch_cache(log)) == [(0, 0)]
        for tag in range(11, 14):  # the new leader's batches, of epoch 0
            log.append(make_batch(tag, 1), leader_epoch=0)
    with PartitionLog(tmp_path, "t", 0, CONFIG, ring_dir=shm_dir) as log:
        assert _entries(load_epoch_cache(log)) == [(0, 0)]
