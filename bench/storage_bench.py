"""Storage engine benchmark: append vs a plain file.write, read, codec rates, open time.

One run measures, for 100-byte values in batches of 1,000 records:
- append records/s and MB/s through PartitionLog (ring + segment), and in the same run a plain
  unbuffered `file.write` of the same bytes to the same disk; trials alternate between the
  two so that a change in the machine's speed hits both, and the ratio of medians is reported;
- read MB/s: PartitionLog.read over the whole log, with a CRC-32C check of every batch
  returned (the least a consumer does with the bytes; a read that never touches the pages
  would measure nothing);
- build and parse records/s of the numpy fast paths, on one core;
- the time to open a log of 1 segment and of 1,000 segments.

Usage: python bench/storage_bench.py [--json PATH] [--total-mb N] [--trials N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import crc32c
import numpy as np

from zlog.record.arrays import build_batch_from_values, parse_batch
from zlog.record.header import (
    CRC_COVERS_FROM,
    LAST_OFFSET_DELTA_AT,
    LOG_OVERHEAD,
    LOG_OVERHEAD_BYTES,
)
from zlog.shm_segments.log import PartitionLog
from zlog.shm_segments.log_config import LogConfig

RECORDS_PER_BATCH = 1000
VALUE_BYTES = 100
DISTINCT_BATCHES = 256  # ~28 MB of source batches: far more than the CPU caches hold
_LAST_DELTA = struct.Struct(">i")


def make_batches(count: int, seed: int = 7) -> list[bytes]:
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(count):
        values = rng.integers(0, 256, size=(RECORDS_PER_BATCH, VALUE_BYTES), dtype=np.uint8)
        batches.append(build_batch_from_values(values, timestamp_ms=1_700_000_000_000))
    return batches


def plain_write(directory: Path, batches: list[bytes], batch_count: int) -> float:
    path = directory / "plain.bin"
    os.sync()  # start from a clean page cache: earlier trials' writeback must not land here
    started = time.perf_counter()
    with open(path, "wb", buffering=0) as file:
        for i in range(batch_count):
            file.write(batches[i % len(batches)])
    elapsed = time.perf_counter() - started
    path.unlink()
    return elapsed


def log_append(
    directory: Path, ring_dir: Path, batches: list[bytes], batch_count: int,
    config: LogConfig | None = None,
) -> float:
    log = PartitionLog(directory / "data", "bench", 0, config or LogConfig(), ring_dir=ring_dir)
    os.sync()
    started = time.perf_counter()
    for i in range(batch_count):
        log.append(batches[i % len(batches)])
    log.flush()
    elapsed = time.perf_counter() - started
    log.delete()
    return elapsed


def log_read(directory: Path, ring_dir: Path, batches: list[bytes], batch_count: int) -> float:
    log = PartitionLog(directory / "data", "bench", 0, LogConfig(), ring_dir=ring_dir)
    for i in range(batch_count):
        log.append(batches[i % len(batches)])
    log.flush()
    started = time.perf_counter()
    offset, end, total_bytes = 0, log.log_end_offset, 0
    while offset < end:
        views = log.read(offset, 1 << 20)
        for view in views:
            position = 0
            while position < len(view):
                base, length = LOG_OVERHEAD.unpack_from(view, position)
                (last_delta,) = _LAST_DELTA.unpack_from(view, position + LAST_OFFSET_DELTA_AT)
                end = position + LOG_OVERHEAD_BYTES + length
                crc32c.crc32c(view[position + CRC_COVERS_FROM : end])
                position = end
                offset = base + last_delta + 1
            total_bytes += len(view)
        del views
    elapsed = time.perf_counter() - started
    log.delete()
    return total_bytes / elapsed / 1e6


def rate(fn: Callable[[], object], items: int, min_seconds: float = 1.0) -> float:
    """Items per second of `fn`, repeated for at least `min_seconds`, best of 3 rounds."""
    best = 0.0
    for _ in range(3):
        count = 0
        started = time.perf_counter()
        while (elapsed := time.perf_counter() - started) < min_seconds / 3 or count == 0:
            fn()
            count += 1
        best = max(best, count * items / elapsed)
    return best


def codec_rates() -> tuple[float, float]:
    rng = np.random.default_rng(3)
    value_rows = rng.integers(0, 256, size=(RECORDS_PER_BATCH, VALUE_BYTES), dtype=np.uint8)
    values = [bytes(row) for row in value_rows]
    built = build_batch_from_values(values, timestamp_ms=1_700_000_000_000)
    build = rate(lambda: build_batch_from_values(values, timestamp_ms=1_700_000_000_000),
                 RECORDS_PER_BATCH)

    def parse() -> None:
        view = parse_batch(built)
        view.values_concatenated()

    return build, rate(parse, RECORDS_PER_BATCH)


def open_ms(directory: Path, ring_dir: Path, segments: int) -> float:
    """Median time to open (and close) a log of `segments` sealed-and-active segments."""
    batch = make_batches(1)[0]
    config = LogConfig(segment_bytes=len(batch))
    data = directory / f"open-{segments}"
    with PartitionLog(data, "bench", 0, config, ring_dir=ring_dir) as log:
        for _ in range(segments):
            log.append(batch)
        assert log.segment_count == segments
    samples = []
    for _ in range(15):
        started = time.perf_counter()
        log = PartitionLog(data, "bench", 0, config, ring_dir=ring_dir)
        samples.append((time.perf_counter() - started) * 1000)
        log.close()
    shutil.rmtree(data)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures here as one JSON object")
    parser.add_argument("--total-mb", type=int, default=512, help="MB written per trial")
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--dir", type=Path, default=None, help="where files go (default: ./)")
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="zlog-bench-", dir=args.dir or Path.cwd()))
    ring_dir = Path(tempfile.mkdtemp(prefix="zlog-bench-", dir="/dev/shm"))
    try:
        batches = make_batches(DISTINCT_BATCHES)
        batch_bytes = len(batches[0])
        batch_count = max(args.total_mb * 1_000_000 // batch_bytes, 1)
        total_bytes = batch_count * batch_bytes
        plain_s, append_s, lazy_s = [], [], []
        lazy = LogConfig(ring_flush_bytes=1 << 20)
        for trial in range(args.trials):
            plain_s.append(plain_write(base, batches, batch_count))
            append_s.append(log_append(base, ring_dir, batches, batch_count))
            lazy_s.append(log_append(base, ring_dir, batches, batch_count, lazy))
            print(f"trial {trial}: plain {total_bytes / plain_s[-1] / 1e6:7.0f} MB/s   "
                  f"append {total_bytes / append_s[-1] / 1e6:7.0f} MB/s   "
                  f"append, 1 MiB ring flushes {total_bytes / lazy_s[-1] / 1e6:7.0f} MB/s",
                  file=sys.stderr)
        plain_median, append_median = statistics.median(plain_s), statistics.median(append_s)
        pair_ratio = statistics.median(p / a for p, a in zip(plain_s, append_s, strict=True))
        read_mb = statistics.median(
            log_read(base, ring_dir, batches, batch_count) for _ in range(3)
        )
        build, parse = codec_rates()
        figures = {
            "append_vs_write_ratio": round(plain_median / append_median, 3),
            "append_vs_write_ratio_paired": round(pair_ratio, 3),
            "append_1mib_flushes_vs_write_ratio": round(
                plain_median / statistics.median(lazy_s), 3
            ),
            "append_records_per_s": round(batch_count * RECORDS_PER_BATCH / append_median),
            "append_mb_per_s": round(total_bytes / append_median / 1e6, 1),
            "plain_write_mb_per_s": round(total_bytes / plain_median / 1e6, 1),
            "read_mb_per_s": round(read_mb, 1),
            "build_records_per_s": round(build),
            "parse_records_per_s": round(parse),
            "open_ms_1_segment": round(open_ms(base, ring_dir, 1), 2),
            "open_ms_1000_segments": round(open_ms(base, ring_dir, 1000), 2),
            "batch_bytes": batch_bytes,
            "bytes_per_trial": total_bytes,
            "trials": args.trials,
            "cpu_count": os.cpu_count(),
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(ring_dir, ignore_errors=True)
    for key, value in figures.items():
        print(f"{key:28s} {value}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
