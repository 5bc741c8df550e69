"""`python -m zlog_jepsen`: run the harness once or several times; exit 1 on a failed run.

    python -m zlog_jepsen --short --json figures.json      # what `make jepsen` runs
    python -m zlog_jepsen --duration-s 600 --runs 5        # one soak configuration

Runs stop at the first failure, as Jepsen's --test-count does, and every run's directory
(under --out-dir) keeps its history, final read, check, figures, summary and plots; a failed
one keeps the brokers' data, rings and logs too.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Final

from zlog.broker.data.planted_bug import PLANTED_BUGS
from zlog_jepsen.disk_wipe import SHAPES, SOLE_ISR
from zlog_jepsen.nemesis import FAULT_KINDS, ISOLATE_LEADER, KILL_BROKER, KILL_WORKER, Schedule
from zlog_jepsen.netns_cluster import NETWORKS, choose_network
from zlog_jepsen.report import summary_table
from zlog_jepsen.runner import RunConfig, run
from zlog_jepsen.totals import totals
from zlog_jepsen.workload import MODES, WorkloadConfig

SHORT_FAULTS: Final = (KILL_WORKER, KILL_BROKER, ISOLATE_LEADER)
SHORT_SEED: Final = 15
SHORT_DURATION_S: Final = 60.0


def _span(text: str) -> tuple[float, float]:
    low, _, high = text.partition(",")
    span = (float(low), float(high or low))
    if not 0 <= span[0] <= span[1]:
        raise argparse.ArgumentTypeError(f"a span is LOW,HIGH seconds, 0 <= LOW <= HIGH: {text}")
    return span


def _kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(k for k in text.split(",") if k)
    try:
        Schedule(kinds=kinds)  # the one place that knows which kinds exist
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return kinds


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m zlog_jepsen", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--short", action="store_true",
                   help=f"the short schedule: seed {SHORT_SEED}, {SHORT_DURATION_S:.0f} s of "
                        f"faults ({', '.join(SHORT_FAULTS)}), short holds and rests")
    p.add_argument("--duration-s", type=float, default=None,
                   help="seconds of faults after the warm-up (default 600, or the short one)")
    p.add_argument("--seed", type=int, default=None, help="the first run's seed")
    p.add_argument("--runs", type=int, default=1, help="runs, stopping at the first failure")
    p.add_argument("--keys", type=int, default=4, help="keys (partitions of the topic)")
    p.add_argument("--concurrency", type=int, default=4, help="client processes")
    p.add_argument("--mode", choices=MODES, default="assign")
    p.add_argument("--faults", type=_kinds, default=None,
                   help=f"comma-separated fault kinds (default all: {','.join(FAULT_KINDS)})")
    p.add_argument("--hold-s", type=_span, default=None, help="LOW,HIGH each fault is held")
    p.add_argument("--rest-s", type=_span, default=None, help="LOW,HIGH between faults")
    p.add_argument("--wipe-shape", choices=SHAPES, default=None,
                   help="the shape every wipe-disk takes (default: drawn at each wipe, "
                        f"{SOLE_ISR} half the time)")
    p.add_argument("--warmup-s", type=float, default=10.0)
    p.add_argument("--out-dir", type=Path, default=None,
                   help="where the runs' directories go (default jepsen-runs/<time>)")
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    p.add_argument("--keep-data", action="store_true",
                   help="keep every broker's data, rings and logs of a valid run too (a failed "
                        "run always keeps them)")
    p.add_argument("--network", choices=NETWORKS, default="auto",
                   help="what carries the partitions: brokers in network namespaces cut with "
                        "nftables, or the in-tree TCP fault proxy; auto takes namespaces where "
                        "they work (root, ip and nft) and says why not otherwise")
    p.add_argument("--planted-bug", choices=PLANTED_BUGS, default=None,
                   help="break every broker on purpose (a test-only switch): the run must "
                        "then fail")
    return p


def first_config(args: argparse.Namespace) -> RunConfig:
    """The first run's configuration from the arguments (later runs change seed and dir)."""
    short = args.short
    schedule = Schedule(
        kinds=args.faults or (SHORT_FAULTS if short else FAULT_KINDS),
        hold_s=args.hold_s or ((3.0, 8.0) if short else (5.0, 20.0)),
        rest_s=args.rest_s or ((3.0, 6.0) if short else (5.0, 15.0)),
        wipe_shapes=(args.wipe_shape,) if args.wipe_shape else SHAPES)
    seed = args.seed if args.seed is not None else (SHORT_SEED if short else time.time_ns())
    workload = WorkloadConfig(keys=args.keys, concurrency=args.concurrency, mode=args.mode,
                              seed=seed % 2**31)
    duration_s = args.duration_s or (SHORT_DURATION_S if short else 600.0)
    out_dir = args.out_dir or Path("jepsen-runs") / time.strftime("%Y%m%d-%H%M%S")
    return RunConfig(out_dir, workload, schedule, duration_s=duration_s,
                     warmup_s=args.warmup_s, planted_bug=args.planted_bug,
                     network=args.network, keep_data=args.keep_data)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.runs < 1 or args.keys < 1 or args.concurrency < 1:
        print("--runs, --keys and --concurrency are at least 1", file=sys.stderr)
        return 2
    try:
        network, fallback = choose_network(args.network)
    except RuntimeError as error:
        print(error, file=sys.stderr)
        return 2
    first = replace(first_config(args), network=network)
    print(f"network faults through {network}" + (f": {fallback}" if fallback else ""),
          flush=True)
    started = time.monotonic()
    figures = []
    for number in range(args.runs):
        config = replace(first, run_dir=first.run_dir / f"run-{number + 1}",
                         workload=replace(first.workload, seed=first.workload.seed + number))
        print(f"run {number + 1}/{args.runs}: seed {config.workload.seed}, "
              f"{config.duration_s:.0f} s of faults, in {config.run_dir}", flush=True)
        outcome = run(config)
        figures.append(outcome.numbers)
        print((outcome.run_dir / "summary.txt").read_text(encoding="utf-8"), flush=True)
        if not outcome.valid:
            print(f"run {number + 1} FAILED; its data, rings and logs are in {outcome.run_dir}",
                  flush=True)
            break
    numbers = totals(figures, (time.monotonic() - started) / 60)
    if args.runs > 1:
        print(f"all {numbers['runs']} runs:\n{summary_table(numbers)}", flush=True)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(numbers, indent=1) + "\n", encoding="utf-8")
    return 0 if numbers["valid"] else 1


if __name__ == "__main__":
    sys.exit(main())
