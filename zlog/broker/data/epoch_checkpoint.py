"""The leader-epoch cache on disk: `<partition dir>/leader-epoch-checkpoint`, fsynced.

Written whenever an entry is added or the log is cut (rare events), as Kafka's
LeaderEpochCheckpointFile: to a temporary file, fsynced, renamed over the old one, and the
directory fsynced, so a crash leaves the old file or the new one, never a torn one. Kafka writes
truncations lazily; zlog writes them at once (they are rare, and a stale entry below the log end
after a crash would be a wrong answer to a follower).

On open, entries that start at or past the log end are dropped (the log was cut after the last
write, or a leader recorded its epoch and took no batch in it), and the file is rewritten
without them: otherwise, once the log grows past such an entry with batches of an older
epoch, the next open would take it for where that epoch starts. A missing or unreadable
checkpoint (a log from before replication, or a damaged file) is rebuilt from the epochs
stamped in the batch headers, which are the truth the cache is a cache of.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Final

from zlog.broker.data.epoch_cache import CheckpointError, LeaderEpochCache
from zlog.record.header import read_header
from zlog.shm_segments.durable_files import replace_durably
from zlog.shm_segments.log import PartitionLog

log = logging.getLogger(__name__)

CHECKPOINT_FILE: Final = "leader-epoch-checkpoint"


def save_epoch_cache(directory: Path, cache: LeaderEpochCache) -> None:
    replace_durably(directory / CHECKPOINT_FILE, cache.encode())


def load_epoch_cache(partition_log: PartitionLog) -> LeaderEpochCache:
    """The checkpoint, trimmed to the log; or, without a good one, the log's own epochs."""
    path = partition_log.directory / CHECKPOINT_FILE
    end = partition_log.log_end_offset
    try:
        cache = LeaderEpochCache.decode(path.read_bytes())
    except FileNotFoundError:
        cache = rebuilt_from_log(partition_log) if end > partition_log.log_start_offset \
            else LeaderEpochCache()
    except (CheckpointError, OSError) as error:
        log.warning("%s unreadable (%s): rebuilding it from the log", path, error)
        cache = rebuilt_from_log(partition_log)
    if cache.truncate_from_end(end):
        try:
            save_epoch_cache(partition_log.directory, cache)
        except OSError as error:  # a full disk: the next open trims it again
            log.warning("%s not rewritten without the entries past the log end: %s", path,
                        error)
    return cache


def rebuilt_from_log(partition_log: PartitionLog) -> LeaderEpochCache:
    """Every epoch's first batch, read from the batch headers of the whole log."""
    cache = LeaderEpochCache()
    start = partition_log.log_start_offset
    for segment in partition_log.segments_snapshot():
        for view in segment.batch_views():
            header = read_header(view)
            epoch = header.partition_leader_epoch
            if epoch > cache.latest_epoch and header.next_offset > start:
                cache.assign(epoch, max(header.base_offset, start))
    return cache
