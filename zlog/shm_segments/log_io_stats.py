"""How long a log's writes into its segments and its fsyncs took, summed since it opened.

The worker copies these into its metrics (zlog/broker/worker_metrics.py) a few times a
second; here they are plain integers, so counting costs the write path two clock reads.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class LogIoStats:
    flushes: int = 0  # ring -> segment writes (one per append when write-through)
    flush_ns: int = 0
    fsyncs: int = 0
    fsync_ns: int = 0

    def flushed(self, elapsed_ns: int) -> None:
        self.flushes += 1
        self.flush_ns += elapsed_ns

    def synced(self, elapsed_ns: int) -> None:
        self.fsyncs += 1
        self.fsync_ns += elapsed_ns
