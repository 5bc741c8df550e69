"""`python -m bench`: zlog side by side with Redis Streams, NATS JetStream and raw ZeroMQ.

Per system: start its server (loopback, free port, temp dir), run the produce cases, the consume
cases on the data the headline produce case left, the latency rates, each `--repeat` times, the
latency curve (scenario_curve.py: short steps of rising offered rate until the system falls
over, once), then stop the server by its PID; `--scenarios` runs a subset. Each scenario writes
its JSON into --out-dir; --json writes one object per system with the headline figures; the
table goes to stdout (and table.md), the plots to --plots-dir.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from bench.suite import (
    machine,
    plot,
    report,
    scenario_consume,
    scenario_curve,
    scenario_latency,
    scenario_produce,
)
from bench.suite.adapters import ALL_SYSTEMS, PEERS, ZLOG_SYSTEMS, server_for
from bench.suite.histogram import curve, encode, merged, spread, summary

HEADLINE_SIZE: Final = 100
HEADLINE_RATE: Final = 5000
SCENARIOS: Final = (scenario_produce.NAME, scenario_consume.NAME, scenario_latency.NAME,
                    scenario_curve.NAME)


class Progress:
    """tqdm when it is installed, else one line per step on stderr."""

    def __init__(self, total: int) -> None:
        self.bar: Any = None
        self.done = 0
        self.total = total
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self.bar = tqdm(total=total, unit="step", dynamic_ncols=True, file=sys.stderr)

    def step(self, label: str) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_description(label[:60])
            self.bar.update(1)
        else:
            print(f"[{self.done}/{self.total}] {label}", file=sys.stderr, flush=True)

    def write(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@contextmanager
def running(system: str) -> Iterator[Any]:
    server = server_for(system)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def attempt(progress: Progress, label: str, function: Callable[[], dict[str, Any]]) -> (
    dict[str, Any]
):
    """One measured run; a failure is recorded as such (never as a number) and the suite goes on."""
    try:
        return function()
    except Exception as error:
        progress.write(f"{label}: FAILED: {error}")
        return {"error": f"{type(error).__name__}: {error}",
                "traceback": traceback.format_exc()[-2000:]}
    finally:
        progress.step(label)


def stats_of(runs: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: spread([run.get(key) for run in runs]) for key in keys}


def plan(args: argparse.Namespace, systems: list[str]) -> tuple[dict[str, Any], int]:
    """Which cases run for which system, and the number of progress steps."""
    cases: dict[str, Any] = {}
    steps = 0
    for system in systems:
        produce = [(c, scenario_produce.skip_reason(system, c))
                   for c in scenario_produce.all_cases(args.value_sizes)
                   if scenario_produce.NAME in args.scenarios]
        consume = [(size, mode, scenario_consume.skip_reason(system, mode))
                   for size in args.value_sizes for mode in scenario_consume.MODES
                   if scenario_consume.NAME in args.scenarios]
        cases[system] = {"produce": produce, "consume": consume}
        steps += args.repeat * (sum(1 for _, why in produce if why is None)
                                + sum(1 for *_, why in consume if why is None)
                                + len(args.latency_rates))
        steps += len(args.curve_rates)
    return cases, steps


def run_system(system: str, plan_for: dict[str, Any], args: argparse.Namespace,
               progress: Progress, results: dict[str, Any]) -> None:
    produce_out: dict[str, Any] = results["produce"].setdefault(system, {})
    consume_out: dict[str, Any] = results["consume"].setdefault(system, {})
    latency_out: dict[str, Any] = results["latency"].setdefault(system, {})
    before = machine.snapshot()
    with running(system) as server, tempfile.TemporaryDirectory(prefix="zlog-suite-") as tmp:
        results["versions"][system] = server.version()
        kept: dict[int, tuple[str, int]] = {}  # value size -> (topic, records stored)
        serial = 0
        for case, why in plan_for["produce"]:
            if why is not None:
                produce_out[case.key] = {"case": vars(case), "skipped": why}
                continue
            runs = []
            for repeat in range(args.repeat):
                serial += 1
                topic = f"produce-{serial}"
                server.create(topic, case.partitions)
                run = attempt(progress, f"{system} produce {case.key} #{repeat + 1}",
                              lambda c=case, t=topic: scenario_produce.run(  # type: ignore[misc]
                                  system, server, c, t, args.produce_s))
                runs.append(run)
                if case.headline and case.value_bytes not in kept and "error" not in run:
                    kept[case.value_bytes] = (topic, run["stored_records"])
                else:
                    server.delete(topic, case.partitions)
            produce_out[case.key] = {"case": vars(case), "runs": runs,
                                     **stats_of(runs, ("records_per_s", "mb_per_s"))}
        for size, mode, reason in plan_for["consume"]:
            key = f"{size}B-{mode}"
            why = reason
            if why is None and size not in kept:
                why = "no data: the headline produce case failed"
            if why is not None:
                consume_out[key] = {"skipped": why}
                continue
            topic, stored = kept[size]
            records = min(stored, args.consume_max_records)
            runs = [attempt(progress, f"{system} consume {key} #{repeat + 1}",
                            lambda t=topic, m=mode, s=size, n=records:  # type: ignore[misc]
                            scenario_consume.run(system, server, t, m, value_bytes=s, records=n))
                    for repeat in range(args.repeat)]
            consume_out[key] = {"runs": runs, **stats_of(runs, ("records_per_s", "mb_per_s"))}
        for topic, _stored in kept.values():
            server.delete(topic, 1)
        for rate in args.latency_rates:
            runs = []
            for repeat in range(args.repeat):
                serial += 1
                topic = f"latency-{serial}"
                server.create(topic, 1)
                runs.append(attempt(
                    progress, f"{system} latency {rate}/s #{repeat + 1}",
                    lambda t=topic, r=rate: scenario_latency.run(  # type: ignore[misc]
                        system, server, t, rate=r, value_bytes=HEADLINE_SIZE,
                        duration_s=args.latency_s, warmup_s=args.warmup_s, scratch=Path(tmp))))
                server.delete(topic, 1)
            histograms = [r.pop("histogram") for r in runs if "histogram" in r]
            total = merged(histograms)
            latency_out[f"{rate}/s"] = {
                "rate": rate, "runs": runs,
                **stats_of(runs, ("p50_us", "p90_us", "p99_us", "p999_us", "max_us", "lost",
                                  "sender_late_us_max")),
                "all_repeats": summary(total), "curve": curve(total),
                "histogram": encode(total)}
        if args.curve_rates:
            curve_out = scenario_curve.run(
                system, server, rates=args.curve_rates, step_s=args.curve_s,
                warmup_s=args.warmup_s, value_bytes=HEADLINE_SIZE, scratch=Path(tmp),
                attempt=lambda label, function: attempt(progress, label, function))
            for _ in range(scenario_curve.skipped_steps(args.curve_rates, curve_out)):
                progress.step(f"{system} curve: fell over below this rate")
            results["curve"][system] = curve_out
    results["machine_per_system"][system] = machine.between(before, machine.snapshot())


def headline(results: dict[str, Any], systems: list[str]) -> dict[str, Any]:
    """One object per system with the keys the issue names (medians over the repeats)."""
    out: dict[str, Any] = {}
    for system in ALL_SYSTEMS:
        if system not in systems:
            continue
        out[system] = report.headline_for(results, system, HEADLINE_SIZE, HEADLINE_RATE)
    return out


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peers", action="store_true",
                        help="also run Redis Streams, NATS JetStream, raw zmq and the zmq relay")
    parser.add_argument("--json", type=Path, default=None,
                        help="write one object per system with the headline figures here")
    parser.add_argument("--systems", default=None,
                        help="comma-separated subset of zlog,zlog_tuned,zlog_local,redis,nats,zmq,"
                             "zmq_relay "
                             "(overrides --peers)")
    parser.add_argument("--out-dir", type=Path, default=Path("bench/results/suite"),
                        help="each scenario's JSON, the full results and table.md")
    parser.add_argument("--plots-dir", type=Path, default=None,
                        help="PNG plots (default: --out-dir); docs use docs/img")
    parser.add_argument("--repeat", type=int, default=3, help="runs of every case")
    parser.add_argument("--produce-s", type=float, default=1.5, help="seconds per produce run")
    parser.add_argument("--latency-s", type=float, default=3.0, help="seconds per latency run")
    parser.add_argument("--warmup-s", type=float, default=0.5, help="latency warm-up, not counted")
    parser.add_argument("--rates", default="1000,5000,50000", help="latency rates, records/s")
    parser.add_argument("--curve-rates", default=",".join(map(str, scenario_curve.RATES)),
                        help="the latency curve's offered rates, records/s, rising")
    parser.add_argument("--curve-s", type=float, default=2.0,
                        help="seconds per curve step (after --warmup-s)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS),
                        help=f"comma-separated subset of {','.join(SCENARIOS)}")
    parser.add_argument("--value-sizes", default="100,1024", help="value bytes")
    parser.add_argument("--consume-max-records", type=int, default=2_000_000)
    args = parser.parse_args(argv)
    args.rates = [int(r) for r in args.rates.split(",")]
    args.curve_rates = sorted(int(r) for r in args.curve_rates.split(","))
    args.scenarios = [s.strip() for s in args.scenarios.split(",")]
    unknown_scenarios = set(args.scenarios) - set(SCENARIOS)
    if unknown_scenarios:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown_scenarios))}")
    args.latency_rates = args.rates if scenario_latency.NAME in args.scenarios else []
    if scenario_curve.NAME not in args.scenarios:
        args.curve_rates = []
    args.value_sizes = [int(s) for s in args.value_sizes.split(",")]
    if HEADLINE_SIZE not in args.value_sizes:
        parser.error(f"--value-sizes must include {HEADLINE_SIZE} (the headline case)")
    if args.systems:
        args.systems = [s.strip() for s in args.systems.split(",")]
        unknown = set(args.systems) - set(ALL_SYSTEMS)
        if unknown:
            parser.error(f"unknown systems: {', '.join(sorted(unknown))}")
    else:
        args.systems = [*ZLOG_SYSTEMS, *(PEERS if args.peers else ())]
    args.plots_dir = args.plots_dir or args.out_dir
    return args


def check_peers(systems: list[str]) -> list[str]:
    """Drop a peer whose server or client is missing, saying why (make bench-peers installs)."""
    usable = []
    for system in systems:
        problem = None
        if system in ("redis", "nats"):
            server: Any = server_for(system)
            if server.binary() is None:
                problem = f"{system}: server binary not found"
            try:
                __import__({"redis": "redis", "nats": "nats"}[system])
            except ImportError:
                problem = f"{system}: Python client not installed"
        if problem:
            print(f"skipping {problem}; run `make bench-peers`", file=sys.stderr)
        else:
            usable.append(system)
    return usable


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    systems = check_peers(args.systems)
    cases, steps = plan(args, systems)
    results: dict[str, Any] = {
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": machine.notes(), "versions": {}, "machine_per_system": {},
        "produce": {}, "consume": {}, "latency": {}, "curve": {}}
    before = machine.snapshot()
    started = time.monotonic()
    progress = Progress(steps)
    try:
        for system in systems:
            try:
                run_system(system, cases[system], args, progress, results)
            except Exception as error:  # the server did not start: say so, go on
                progress.write(f"{system}: FAILED: {error}")
                results.setdefault("failures", {})[system] = str(error)
    finally:
        progress.close()
    results["machine_whole_run"] = machine.between(before, machine.snapshot())
    results["wall_s"] = time.monotonic() - started
    results["headline"] = headline(results, systems)
    out = args.out_dir
    for scenario in SCENARIOS:
        write_json(out / f"{scenario}.json", {"scenario": scenario, "settings":
                                               results["settings"],
                                               "machine": results["machine_whole_run"],
                                               "results": results[scenario]})
    write_json(out / "suite.json", results)
    if args.json is not None:
        write_json(args.json, results["headline"] | {"machine": results["machine"],
                                                     "machine_run": results["machine_whole_run"],
                                                     "versions": results["versions"],
                                                     "cases": {k: results[k] for k in SCENARIOS}})
    table = report.table(results, systems)
    if results["curve"]:
        table += "\n\n" + report.curve_table(results, systems)
    (out / "table.md").write_text(table + "\n")
    print(table)
    for path in plot.plots(results, systems, args.plots_dir):
        print(f"plot: {path}")
    return 0
