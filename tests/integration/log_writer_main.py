"""A partition writer for the SIGKILL test: appends forever, reporting each returned offset.

Usage: log_writer_main.py DATA_DIR RING_DIR RING_FLUSH_BYTES FIRST_TAG
Prints "<tag> <base offset>" after each append returns, flushed at once.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.storage_helpers import make_batch
from zlog.shm_segments.log import PartitionLog
from zlog.shm_segments.log_config import LogConfig


def main() -> None:
    data_dir, ring_dir = Path(sys.argv[1]), Path(sys.argv[2])
    config = LogConfig(
        segment_bytes=64 * 1024, index_interval_bytes=1024, ring_bytes=256 * 1024,
        ring_flush_bytes=int(sys.argv[3]),
    )
    tag = int(sys.argv[4])
    log = PartitionLog(data_dir, "kill", 0, config, ring_dir=ring_dir)
    print("ready", flush=True)
    while True:
        base = log.append(make_batch(tag, record_count=1 + tag % 7, value_bytes=50 + tag % 300))
        print(f"{tag} {base}", flush=True)
        tag += 1


if __name__ == "__main__":
    main()
