"""Where a reopened replica's high watermark starts: the ring header's, else its checkpoint.

A replica publishes its HW in its ring's header at every change (for local readers); the
header lives in shared memory and outlives a killed worker or broker, not a reboot. So the HW
is also written every `replica_high_watermark_checkpoint_interval_ms`, and when the partition
is closed, to `<partition dir>/high-watermark-checkpoint` (Kafka's
replication-offset-checkpoint, kept per partition: a broker's workers are separate processes
sharing one data directory, and each partition has one writer). A reopened replica starts at
the header's HW, else the checkpoint's, capped by its log end (partition.py), instead of at its
log start: a restarted leader then answers ListOffsets as before, and a follower's local readers
do not see its HW go back.

Nothing safe depends on it (KIP-101): a value that is missing, older, or unreadable only starts
the HW lower, which the leader's next answer or the followers' next fetches correct. So the
file is replaced atomically (a crash leaves the old one or the new one) but not fsynced: a
power loss may keep an older value, never a torn one that parses.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Final

from zlog.shm_segments.durable_files import replace_atomically
from zlog.shm_segments.log import PartitionLog

log = logging.getLogger(__name__)

CHECKPOINT_FILE: Final = "high-watermark-checkpoint"
CHECKPOINT_VERSION: Final = 0
NO_HIGH_WATERMARK: Final = -1


def save_high_watermark(directory: Path, high_watermark: int) -> None:
    """Replace the checkpoint with `high_watermark` (OSError: the caller tries again later)."""
    assert high_watermark >= 0, high_watermark
    replace_atomically(directory / CHECKPOINT_FILE,
                       f"{CHECKPOINT_VERSION}\n{high_watermark}\n".encode())


def load_high_watermark(directory: Path) -> int:
    """The checkpointed HW, or NO_HIGH_WATERMARK when there is no readable one."""
    path = directory / CHECKPOINT_FILE
    try:
        lines = path.read_text(encoding="ascii").split()
    except FileNotFoundError:
        return NO_HIGH_WATERMARK
    except (OSError, UnicodeDecodeError) as error:
        log.warning("%s unreadable (%s): the high watermark starts at the log start", path,
                    error)
        return NO_HIGH_WATERMARK
    if len(lines) != 2 or lines[0] != str(CHECKPOINT_VERSION) or not lines[1].isdigit():
        log.warning("%s is not a high-watermark checkpoint: ignored", path)
        return NO_HIGH_WATERMARK
    return int(lines[1])


def recovered_high_watermark(partition_log: PartitionLog) -> int:
    """The HW an earlier process of this replica left: the ring header's (newest), else the
    checkpoint's; NO_HIGH_WATERMARK when neither is there."""
    published = partition_log.published_high_watermark
    if published is not None:
        return published
    return load_high_watermark(partition_log.directory)
