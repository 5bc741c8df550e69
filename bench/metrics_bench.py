"""What the workers' metrics cost on the hot path: a worker's data plane with them and without.

One process drives a real `DataPlane` over a real partition (segment files in a temporary
directory, its ring in /dev/shm), as the worker's loop would but with no sockets: the same
encoded Produce and Fetch requests, metrics off and on (a `WorkerMetrics` on a real metrics
file, as `--metrics-file` gives a worker) alternating request by request, so that a machine
whose load drifts charges both alike. Each request is timed alone; the medians of each kind
are compared (a median ignores the requests that a busy host preempted). The whole-broker A/B
is `bench/broker_bench.py --metrics off` against `--metrics on`; this one isolates the hot
path, which that one's run-to-run spread hides.

Usage: python bench/metrics_bench.py [--requests N] [--records N]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Final

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from zlog.broker.data.data_plane import DataPlane  # noqa: E402
from zlog.broker.data.partition_host import PartitionHost  # noqa: E402
from zlog.broker.worker_metrics import MetricsFile, WorkerMetrics  # noqa: E402
from zlog.broker.worker_protocol import Assign  # noqa: E402
from zlog.clock import SystemClock  # noqa: E402
from zlog.record.records import NewRecord, build_batch  # noqa: E402
from zlog.shm_segments.log_config import LogConfig  # noqa: E402
from zlog.transport.codec import encode_request  # noqa: E402
from zlog.transport.messages.data import (  # noqa: E402
    FetchEntry,
    FetchRequestV0,
    ProduceEntry,
    ProduceRequestV0,
)

TOPIC: Final = "bench"


def _median_us(plane: DataPlane, metrics: WorkerMetrics, requests: list[list[bytes]],
               ) -> dict[str, float]:
    """Every other request with metrics on; the median time of each half (microseconds)."""
    clock = SystemClock()
    timings: dict[str, list[int]] = {"off": [], "on": []}
    for index, frames in enumerate(requests):
        state = "on" if index % 2 else "off"
        plane.metrics = metrics if state == "on" else None
        plane.stats.observe = metrics if state == "on" else None
        started_ns = time.perf_counter_ns()
        plane.handle(b"client", frames, clock.monotonic_ms())
        timings[state].append(time.perf_counter_ns() - started_ns)
    return {state: statistics.median(values) / 1000 for state, values in timings.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/metrics_bench.py",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=100_000, help="of each kind")
    parser.add_argument("--records", type=int, default=10, help="100-byte records per batch")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="zlog-metrics-bench-"))
    shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else scratch
    ring_dir = Path(tempfile.mkdtemp(prefix="zlog-metrics-bench-", dir=shm))
    try:
        host = PartitionHost(scratch / "data", ring_dir,
                             base_config=replace(LogConfig()), clock=SystemClock())
        host.assign(Assign(0, TOPIC, 0, {}, leader_epoch=1))
        plane = DataPlane(host.partitions)
        metrics = WorkerMetrics(MetricsFile.create(ring_dir / "metrics"))
        batch = build_batch([NewRecord(b"v" * 100) for _ in range(args.records)])
        produce = ProduceRequestV0(1, 1_000, (ProduceEntry(TOPIC, 0, (batch,)),))
        fetch = FetchRequestV0(-1, 0, 0, 1 << 20, (FetchEntry(TOPIC, 0, 0, len(batch)),))
        correlation = iter(range(1, 1 << 62))
        results = {}
        for kind, request in (("produce", produce), ("fetch", fetch)):
            frames = [[bytes(frame) for frame in encode_request(next(correlation), request)]
                      for _ in range(args.requests)]
            results[kind] = _median_us(plane, metrics, frames)
        host.close_all()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(ring_dir, ignore_errors=True)
    print(f"{args.requests} requests of each kind, metrics off and on alternating; "
          f"{args.records} records of 100 bytes per batch; median time per request")
    for kind, by_state in results.items():
        off, on = by_state["off"], by_state["on"]
        print(f"{kind:8} off {off:6.2f} us  on {on:6.2f} us  cost {on - off:+.2f} us "
              f"({100 * (on - off) / off:+.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
