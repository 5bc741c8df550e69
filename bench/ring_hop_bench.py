"""Ring hop benchmark: how soon a local consumer has a batch the partition writer committed.

`Consumer(local=True)` takes the socket out of the consumer's half of the path: the writer (a
partition worker) commits a batch into its shared-memory ring, and a reader process on the same
host sees the commit with one state read and decodes the batch in place (zero copy). This bench
measures that hop alone, with the same code (`RingWriter.append`, `LocalRing.read(copy=False)`,
the consumer's spin-then-sleep wait):

- a writer process appends one-record batches of 100-byte values at a steady rate (default
  5,000/s) on an open-loop schedule; just before each append it stamps the value with
  `time.perf_counter_ns()` (CLOCK_MONOTONIC, one clock for the host) and re-seals the CRC, as a
  worker appends a batch it received;
- a reader process waits on the ring (`--spin-us` of busy spin, then sleeps that double) and
  charges each record from its stamp to the moment `LocalRing.read` returned its view, after
  checking that the view is still intact.

The figure is the local consumer's own latency: what a reader on the leader's host adds after a
commit. End to end through a real broker (producer -> worker -> ring -> consumer) is in
broker_bench.py (`zlog_local_latency_*`) and in the side-by-side suite.

Usage: python bench/ring_hop_bench.py [--rate N] [--records N] [--spin-us N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import crc32c
import numpy as np

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from zlog.client.local_ring import Backoff, LocalRing  # noqa: E402
from zlog.record.header import CRC_AT, CRC_COVERS_FROM  # noqa: E402
from zlog.record.records import NewRecord, build_batch  # noqa: E402
from zlog.shm_segments.ring import RingWriter  # noqa: E402

VALUE_BYTES: Final = 100
RING_BYTES: Final = 64 * 1024 * 1024
START_TIMEOUT_S: Final = 30.0
_STAMP: Final = struct.Struct("<q")


def _template() -> tuple[bytearray, int]:
    """A one-record batch and where its value starts (the stamp goes there)."""
    marker = b"\xa5" * VALUE_BYTES
    batch = bytearray(build_batch([NewRecord(value=marker, timestamp_ms=0)]))
    return batch, bytes(batch).index(marker)


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path.name} did not appear")
        time.sleep(0.001)


def run_writer(args: argparse.Namespace) -> dict[str, Any]:
    batch, value_at = _template()
    interval_ns = round(1e9 / args.rate)
    with RingWriter(Path(args.ring), RING_BYTES) as writer:
        Path(args.scratch, "writer-ready").write_text("ready")
        _wait_for(Path(args.scratch, "reader-ready"))
        t0 = time.perf_counter_ns() + 2_000_000
        for offset in range(args.records):
            due = t0 + offset * interval_ns
            remaining = due - time.perf_counter_ns()
            if remaining > 0:
                time.sleep(remaining / 1e9)
            struct.pack_into(">q", batch, 0, offset)  # baseOffset
            _STAMP.pack_into(batch, value_at, time.perf_counter_ns())
            struct.pack_into(">I", batch, CRC_AT, crc32c.crc32c(batch[CRC_COVERS_FROM:]))
            writer.append(batch, offset + 1)
        _wait_for(Path(args.scratch, "reader-done"))
    return {"records": args.records}


def run_reader(args: argparse.Namespace) -> dict[str, Any]:
    _wait_for(Path(args.scratch, "writer-ready"))
    ring = LocalRing(Path(args.ring))
    backoff = Backoff(spin_s=args.spin_us / 1e6)
    latencies_ns = np.zeros(args.records, np.int64)
    offset = received = overruns = 0
    cpu_started = time.process_time()
    Path(args.scratch, "reader-ready").write_text("ready")
    deadline = time.monotonic() + args.records / args.rate + 60
    while received < args.records and time.monotonic() < deadline:
        result = ring.read(offset, 1024 * 1024, copy=False)
        if result is None:
            raise RuntimeError(f"the ring cannot serve offset {offset}")
        views, next_offset = result
        if not views:
            backoff.wait(1.0, lambda at=offset: ring.has_news(at))
            continue
        now = time.perf_counter_ns()
        backoff.reset()
        for view in views:
            start = int(view.value_starts[0])
            stamp = _STAMP.unpack_from(view.records, start)[0]
            latencies_ns[received] = now - stamp
            received += 1
        if not ring.intact(ring.read_from_position):
            overruns += 1
        ring.forget_reads()
        offset = next_offset
    cpu_s = time.process_time() - cpu_started
    Path(args.scratch, "reader-done").write_text("done")
    warmup = min(received // 10, args.rate)  # the first second (or tenth) warms caches
    kept_us = latencies_ns[warmup:received] / 1000
    points = np.percentile(kept_us, [50, 90, 99, 99.9]) if kept_us.size else [np.nan] * 4
    return {
        "records": received, "overruns": overruns, "samples": int(kept_us.size),
        "p50_us": float(points[0]), "p90_us": float(points[1]), "p99_us": float(points[2]),
        "p999_us": float(points[3]), "max_us": float(kept_us.max()) if kept_us.size else None,
        "reader_cpu_us_per_record": cpu_s / max(received, 1) * 1e6,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="zlog-ringhop-", dir=shm) as scratch:
        common = ["--rate", str(args.rate), "--records", str(args.records),
                  "--spin-us", str(args.spin_us), "--scratch", scratch,
                  "--ring", str(Path(scratch) / "ring")]
        this = [sys.executable, str(Path(__file__).resolve())]
        writer = subprocess.Popen([*this, "--role", "writer", *common], cwd=REPO_ROOT,
                                  stdout=subprocess.DEVNULL)
        try:
            reader = subprocess.run([*this, "--role", "reader", *common], cwd=REPO_ROOT,
                                    check=True, capture_output=True, text=True,
                                    timeout=args.records / args.rate + 120)
            writer.wait(timeout=60)
        finally:
            if writer.poll() is None:
                writer.kill()
        result: dict[str, Any] = json.loads(reader.stdout.strip().splitlines()[-1])
    result.update(rate=args.rate, spin_us=args.spin_us, value_bytes=VALUE_BYTES,
                  cpus=os.cpu_count())
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=5000, help="records/s")
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--spin-us", type=int, default=200,
                        help="busy spin on the ring head before sleeping")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--role", choices=("writer", "reader"), default=None,
                        help=argparse.SUPPRESS)
    parser.add_argument("--scratch", default="", help=argparse.SUPPRESS)
    parser.add_argument("--ring", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == "writer":
        print(json.dumps(run_writer(args)))
        return
    if args.role == "reader":
        print(json.dumps(run_reader(args)))
        return
    result = run(args)
    print(f"ring hop at {args.rate:,}/s, spin {args.spin_us} us: p50 {result['p50_us']:.1f} us, "
          f"p90 {result['p90_us']:.1f}, p99 {result['p99_us']:.1f}, p99.9 "
          f"{result['p999_us']:.1f}; reader CPU {result['reader_cpu_us_per_record']:.1f} "
          f"us/record; overruns {result['overruns']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
