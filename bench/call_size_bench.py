"""What one bulk call costs: `send_many` and `poll_batches` with 1,000-row against 10,000-row
calls, at the client's defaults, on one broker and one partition (100 B values, acks=1).

Per call size R: a client process sends `--records` records with `send_many` of R-row arrays
(then `flush`), and another reads them back from the beginning with `poll_batches` (each batch's
values gathered into one array). A call's time is modelled as fixed + R x per-row; the two call
sizes give both terms (`fixed_us_per_call`, `ns_per_row`), and `ratio_small_to_large` is the
1,000-row rate over the 10,000-row rate (the goal: >= 0.8). The caller's own CPU per call is
reported beside the wall time (the rest is the client's I/O thread and the broker).
`--flame-dir` also samples each phase with py-spy (SVG flame graphs) to show where a call's
time goes; `--top` prints the functions py-spy saw most, inclusive.

    python bench/call_size_bench.py --json bench/results/call_size.json [--flame-dir DIR]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import numpy as np

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.hot_path_count import scrub_paths  # noqa: E402

VALUE_BYTES: Final = 100
START_TIMEOUT_S: Final = 60.0
ALL_SAMPLES: Final = "(all samples)"


def phase_produce(args: argparse.Namespace) -> dict[str, Any]:
    from zlog.client import Producer

    rows = np.random.default_rng(1).integers(0, 256, size=(args.rows, VALUE_BYTES),
                                             dtype=np.uint8)
    calls = args.records // args.rows
    with Producer(args.endpoint, acks=1) as producer:
        producer.send_many(args.topic, rows[:10], partition=0).result(30)
        ready_and_wait()
        caller_cpu_ns = 0
        futures = []
        started = time.perf_counter_ns()
        for _ in range(calls):
            before = time.thread_time_ns()
            futures.append(producer.send_many(args.topic, rows, partition=0))
            caller_cpu_ns += time.thread_time_ns() - before
        producer.flush()
        elapsed_ns = time.perf_counter_ns() - started
        toggle_call_count()
        for future in futures:
            future.result(0)
    return {"records": calls * args.rows, "calls": calls, "elapsed_s": elapsed_ns / 1e9,
            "caller_cpu_us_per_call": caller_cpu_ns / calls / 1000,
            "process_cpu_s": time.process_time()}


def phase_consume(args: argparse.Namespace) -> dict[str, Any]:
    from zlog.client import Consumer, TopicPartition

    tp = TopicPartition(args.topic, 0)
    with Consumer(args.endpoint, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        consumer.position(tp)
        ready_and_wait()
        received = calls = batches = 0
        touched = 0
        started = time.perf_counter_ns()
        while received < args.records:
            calls += 1
            for _tp, view in consumer.poll_batches(1000):
                values, _bounds = view.values_concatenated()
                touched ^= int(values[-1]) if values.size else 0
                received += len(view)
                batches += 1
        elapsed_ns = time.perf_counter_ns() - started
        toggle_call_count()
    return {"records": received, "calls": calls, "batches": batches,
            "elapsed_s": elapsed_ns / 1e9, "process_cpu_s": time.process_time()}


PHASES: Final = {"produce": phase_produce, "consume": phase_consume}


def ready_and_wait() -> None:
    """Say ready (imports, connections and metadata done) and wait for the go on stdin, so
    that py-spy samples the calls and not the start; counting calls, start the count."""
    print("ready", flush=True)
    sys.stdin.readline()
    toggle_call_count()


def toggle_call_count() -> None:
    """Under bench/hot_path_hook (ZLOG_HOT_PATH_DIR set), start or stop counting calls."""
    if os.environ.get("ZLOG_HOT_PATH_DIR"):
        os.kill(os.getpid(), signal.SIGUSR2)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_broker(scratch: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    from zlog.client import Admin

    endpoint = f"tcp://127.0.0.1:{free_port()}"
    ring_dir = Path("/dev/shm") if Path("/dev/shm").is_dir() else scratch
    rings = ring_dir / f"zlog-call-size-{scratch.name}"
    with (scratch / "broker.log").open("wb") as log:
        broker = subprocess.Popen(
            [sys.executable, "-m", "zlog", "serve", "--data-dir", str(scratch / "data"),
             "--listen", endpoint, "--workers", "1", "--ring-dir", str(rings)],
            cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            with Admin(endpoint, request_timeout_ms=1000) as admin:
                admin.describe_cluster()
            return broker, endpoint, rings
        except Exception:
            if broker.poll() is not None or time.monotonic() > deadline:
                broker.kill()
                raise
            time.sleep(0.1)


def run_phase(args: argparse.Namespace, phase: str, endpoint: str, topic: str, rows: int, *,
              flame: Path | None) -> tuple[dict[str, Any], dict[str, int]]:
    """One phase in its own process; with `flame`, py-spy samples it (SVG and raw stacks)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--phase", phase, "--endpoint",
               endpoint, "--topic", topic, "--rows", str(rows), "--records", str(args.records)]
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True,
                               env=dict(os.environ) | getattr(args, "env", {}))
    assert process.stdin is not None and process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        process.kill()
        raise RuntimeError(f"{phase} with {rows} rows did not start")
    samplers = []
    if flame is not None:
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        for form, path in (("flamegraph", flame), ("raw", flame.with_suffix(".txt"))):
            samplers.append((path, subprocess.Popen(
                [py_spy, "record", "--pid", str(process.pid), "--rate", "500",
                 "--nonblocking", "--format", form, "--output", str(path)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    process.stdin.write("go\n")
    process.stdin.flush()
    stdout, _ = process.communicate(timeout=600)
    for path, sampler in samplers:
        sampler.wait(60)
        if path.exists() and path.suffix == ".svg":
            scrub_paths(path)
    top: dict[str, int] = {}
    if flame is not None and flame.with_suffix(".txt").exists():
        top = inclusive_counts(flame.with_suffix(".txt").read_text())
    if process.returncode != 0:
        raise RuntimeError(f"{phase} with {rows} rows exited {process.returncode}")
    return json.loads(stdout.strip().splitlines()[-1]), top


def inclusive_counts(collapsed: str) -> dict[str, int]:
    """py-spy's raw (collapsed) stacks -> samples per function, each counted once per stack;
    "(all samples)" holds the total."""
    counts: collections.Counter[str] = collections.Counter()
    for line in collapsed.splitlines():
        stack, _, samples = line.rpartition(" ")
        if not stack or not samples.isdigit():
            continue
        counts[ALL_SAMPLES] += int(samples)
        frames = {frame.split(" (")[0] for frame in stack.split(";")}
        for frame in frames:
            counts[frame] += int(samples)
    return dict(counts.most_common())


def fit(per_call_us: dict[int, float]) -> dict[str, float]:
    """fixed + rows x per-row through the two call sizes."""
    small, large = sorted(per_call_us)
    per_row_us = (per_call_us[large] - per_call_us[small]) / (large - small)
    return {"fixed_us_per_call": round(per_call_us[small] - small * per_row_us, 1),
            "ns_per_row": round(per_row_us * 1000, 1)}


def one_phase(args: argparse.Namespace, phase: str, endpoint: str, topic: str, rows: int, *,
              flame: Path | None) -> dict[str, Any]:
    result, top = run_phase(args, phase, endpoint, topic, rows, flame=flame)
    result["records_per_s"] = result["records"] / result["elapsed_s"]
    result["cpu_ns_per_record"] = result.pop("process_cpu_s") * 1e9 / result["records"]
    if top:
        total = top.pop(ALL_SAMPLES)
        result["samples"] = total
        result["top_inclusive"] = {name: round(count / total, 3)
                                   for name, count in list(top.items())[:args.top]}
    return result


def counted_calls(args: argparse.Namespace, phase: str, endpoint: str, topic: str,
                  rows: int) -> dict[str, float]:
    """Python and C calls per 1,000 records of the phase's process, every thread, counted by
    bench/hot_path_hook (the process turns the count on and off around its calls)."""
    with tempfile.TemporaryDirectory(prefix="zlog-call-size-calls-") as results:
        hook = str(Path(__file__).resolve().parent / "hot_path_hook")
        env = {"ZLOG_HOT_PATH_DIR": results,
               "PYTHONPATH": os.pathsep.join(filter(None, (hook, os.environ.get("PYTHONPATH"))))}
        counted_args = argparse.Namespace(**vars(args))
        counted_args.env = env
        result, _ = run_phase(counted_args, phase, endpoint, topic, rows, flame=None)
        files = list(Path(results).glob("*.json"))
        if not files:
            return {}
        data = json.loads(files[0].read_text())
    per = 1000 / result["records"]
    return {"python_calls_per_1000_records": round(
                sum(t["call"] for t in data["threads"].values()) * per, 1),
            "c_calls_per_1000_records": round(
                sum(t["c_call"] for t in data["threads"].values()) * per, 1),
            "gil_handoffs_per_1000_records": round(data["thread_changes"] * per, 2)}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """`--repeat` rounds, the call sizes interleaved in each, on one broker; then the counts."""
    from zlog.client import Admin, NewTopic

    out: dict[str, Any] = {"records": args.records, "value_bytes": VALUE_BYTES,
                           "repeat": args.repeat, "loadavg_before": os.getloadavg(),
                           "produce": {}, "consume": {}}
    runs: dict[tuple[str, int], list[dict[str, Any]]] = collections.defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="zlog-call-size-") as scratch:
        broker, endpoint, rings = start_broker(Path(scratch))

        def fresh_topic(name: str) -> str:
            with Admin(endpoint, request_timeout_ms=10_000) as admin:
                admin.create_topics([NewTopic(name, 1)])
            return name

        try:
            for repeat in range(args.repeat):
                for rows in args.rows:
                    topic = fresh_topic(f"rows-{rows}-{repeat}")
                    for phase in PHASES:
                        flame = (args.flame_dir / f"call-size-{phase}-{rows}.svg"
                                 if args.flame_dir and repeat == 0 else None)
                        runs[phase, rows].append(
                            one_phase(args, phase, endpoint, topic, rows, flame=flame))
            if args.count_calls:
                for rows in args.rows:
                    topic = fresh_topic(f"rows-{rows}-counted")
                    for phase in PHASES:
                        out[phase].setdefault("counted", {})[str(rows)] = counted_calls(
                            args, phase, endpoint, topic, rows)
        finally:
            broker.send_signal(signal.SIGTERM)
            try:
                broker.wait(30)
            except subprocess.TimeoutExpired:
                broker.kill()
            shutil.rmtree(rings, ignore_errors=True)
    small, large = min(args.rows), max(args.rows)
    for phase in PHASES:
        figures = out[phase]
        for rows in args.rows:
            phase_runs = runs[phase, rows]
            figures[str(rows)] = {
                "records_per_s": statistics.median(r["records_per_s"] for r in phase_runs),
                "records_per_s_runs": [round(r["records_per_s"]) for r in phase_runs],
                "cpu_ns_per_record": statistics.median(r["cpu_ns_per_record"]
                                                       for r in phase_runs),
                "runs": phase_runs}
        # the time of one call of `rows` rows: the consumer's unit is what one call wrote
        per_call_us = {rows: 1e6 * rows / figures[str(rows)]["records_per_s"]
                       for rows in (small, large)}
        figures["model"] = fit(per_call_us)
        figures["ratio_small_to_large"] = round(
            figures[str(small)]["records_per_s"] / figures[str(large)]["records_per_s"], 3)
    out["batches_stored_per_1000_records"] = {
        str(rows): round(1000 * statistics.median(r["batches"] for r in runs["consume", rows])
                         / args.records, 2) for rows in args.rows}
    out["loadavg_after"] = os.getloadavg()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--rows", default="1000,10000", help="two call sizes, rows")
    parser.add_argument("--records", type=int, default=1_000_000, help="records per phase")
    parser.add_argument("--flame-dir", type=Path, default=None, help="py-spy SVGs here")
    parser.add_argument("--top", type=int, default=25, help="functions kept per phase")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; medians are reported")
    parser.add_argument("--no-count-calls", dest="count_calls", action="store_false",
                        help="skip the pass that counts Python calls per 1,000 records")
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.rows = [int(r) for r in args.rows.split(",")]
    if args.phase:
        args.rows = args.rows[0]
        print(json.dumps(PHASES[args.phase](args)), flush=True)
        return 0
    if len(args.rows) != 2:
        parser.error("--rows takes two call sizes")
    if args.flame_dir:
        args.flame_dir.mkdir(parents=True, exist_ok=True)
    out = measure(args)
    for phase in PHASES:
        figures = out[phase]
        sizes = ", ".join(f"{rows} rows {figures[str(rows)]['records_per_s'] / 1e6:.2f} M/s"
                          for rows in args.rows)
        print(f"{phase}: {sizes}; ratio {figures['ratio_small_to_large']}; "
              f"fixed {figures['model']['fixed_us_per_call']} us/call, "
              f"{figures['model']['ns_per_row']} ns/row; counted {figures.get('counted')}")
    print(f"batches stored per 1,000 records: {out['batches_stored_per_1000_records']}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
