"""What the workers' metrics cost on the hot path: a worker's data plane with them and without.

One process drives a real `DataPlane` over a real partition (segment files in a temporary
directory, its ring in /dev/shm), as the worker's loop would but with no sockets: the same
encoded Produce and Fetch requests, in rounds that alternate metrics off and on (a
`WorkerMetrics` on a real metrics file, as `--metrics-file` gives a worker), so a machine whose
load drifts charges both alike. Reports the median CPU time per request of each, and the
difference. The whole-broker A/B is `bench/broker_bench.py --metrics off` against `--metrics
on`; this one isolates the hot path, which that one's run-to-run spread hides.

Usage: python bench/metrics_bench.py [--rounds N] [--requests N] [--records N]
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


def _cpu_us_per_request(plane: DataPlane, frames: list[list[bytes]]) -> float:
    clock = SystemClock()
    started = time.process_time()
    for request in frames:
        plane.handle(b"client", request, clock.monotonic_ms())
    return (time.process_time() - started) / len(frames) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/metrics_bench.py",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="rounds of each, alternated")
    parser.add_argument("--requests", type=int, default=5_000, help="requests per round")
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
        results: dict[str, dict[str, list[float]]] = {
            kind: {"off": [], "on": []} for kind in ("produce", "fetch")}
        correlation = iter(range(1, 1 << 62))
        for _ in range(args.rounds):
            for state in ("off", "on"):
                plane.metrics = metrics if state == "on" else None
                plane.stats.observe = metrics if state == "on" else None
                for kind, request in (("produce", produce), ("fetch", fetch)):
                    frames = [[bytes(frame) for frame in encode_request(next(correlation),
                                                                         request)]
                              for _ in range(args.requests)]
                    results[kind][state].append(_cpu_us_per_request(plane, frames))
        host.close_all()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(ring_dir, ignore_errors=True)
    print(f"{args.rounds} rounds of {args.requests} requests each, metrics off and on "
          f"alternated; {args.records} records of 100 bytes per batch; CPU us per request "
          "(median, min-max of the rounds)")
    for kind, by_state in results.items():
        off, on = statistics.median(by_state["off"]), statistics.median(by_state["on"])
        print(f"{kind:8} off {off:6.2f} ({min(by_state['off']):.2f}-{max(by_state['off']):.2f})"
              f"  on {on:6.2f} ({min(by_state['on']):.2f}-{max(by_state['on']):.2f})"
              f"  cost {on - off:+.2f} us ({100 * (on - off) / off:+.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
