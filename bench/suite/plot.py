"""PNG plots: latency percentile curves (one line per system, one panel per rate), throughput
bars per scenario (median, with the min-max of the repeats as the error bar), and the latency
curve against offered rate (suite-curve.png)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Final

COLORS: Final = {"zlog": "#1f77b4", "redis": "#d62728", "nats": "#2ca02c", "zmq": "#7f7f7f",
                  "zlog_local": "#17becf", "zlog_tuned": "#9467bd", "zmq_relay": "#bcbd22"}


def plots(results: dict[str, Any], systems: list[str], directory: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError:
        print("matplotlib is not installed: no plots (make bench-peers)", file=sys.stderr)
        return []
    directory.mkdir(parents=True, exist_ok=True)
    return [path for path in (_latency(results, systems, directory),
                              _bars(results, systems, directory, "produce"),
                              _bars(results, systems, directory, "consume"),
                              _curve(results, systems, directory)) if path]


def _latency(results: dict[str, Any], systems: list[str], directory: Path) -> Path | None:
    import matplotlib.pyplot as plt

    rates = sorted({key for s in systems for key in results["latency"].get(s, {})},
                   key=lambda k: int(k.split("/")[0]))
    if not rates:
        return None
    figure, axes = plt.subplots(1, len(rates), figsize=(5 * len(rates), 4), squeeze=False)
    for axis, rate in zip(axes[0], rates, strict=True):
        for system in systems:
            points = results["latency"].get(system, {}).get(rate, {}).get("curve") or []
            if not points:
                continue
            # x: 1 / (1 - p), so that p50, p99, p99.9 and p99.99 are evenly spaced
            xs = [1 / (1 - p / 100) for p, _ in points]
            axis.plot(xs, [v / 1000 for _, v in points], marker="o", markersize=3,
                      label=system, color=COLORS.get(system))
        axis.set_xscale("log")
        axis.set_yscale("log")
        ticks = [1, 2, 10, 100, 1000, 10_000, 100_000]
        axis.set_xticks(ticks, ["p0", "p50", "p90", "p99", "p99.9", "p99.99", "p99.999"])
        axis.set_title(f"end-to-end latency at {rate} (100 B)")
        axis.set_ylabel("ms (log)")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend()
    figure.tight_layout()
    path = directory / "suite-latency.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _bars(results: dict[str, Any], systems: list[str], directory: Path, scenario: str) -> (
    Path | None
):
    import matplotlib.pyplot as plt

    cases = sorted({case for s in systems for case, entry in results[scenario].get(s, {}).items()
                    if "skipped" not in entry})
    if not cases:
        return None
    figure, axis = plt.subplots(figsize=(max(8, 0.9 * len(cases) * max(len(systems), 1)), 4.5))
    width = 0.8 / max(len(systems), 1)
    for index, system in enumerate(systems):
        medians, low, high, xs = [], [], [], []
        for position, case in enumerate(cases):
            stats = results[scenario].get(system, {}).get(case, {}).get("records_per_s")
            if not stats or stats.get("median") is None:
                continue
            xs.append(position + (index - (len(systems) - 1) / 2) * width)
            medians.append(stats["median"])
            low.append(stats["median"] - stats["min"])
            high.append(stats["max"] - stats["median"])
        if xs:
            axis.bar(xs, medians, width, yerr=[low, high], capsize=2, label=system,
                     color=COLORS.get(system))
    axis.set_xticks(range(len(cases)), cases, rotation=35, ha="right", fontsize=8)
    axis.set_yscale("log")
    axis.set_ylabel("records/s (log)")
    axis.set_title(f"{scenario} throughput: median, min-max over the repeats")
    axis.grid(True, axis="y", which="both", alpha=0.3)
    axis.legend()
    figure.tight_layout()
    path = directory / f"suite-{scenario}.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


PERCENTILE_STYLES: Final = (("p50_us", "p50", "-"), ("p99_us", "p99", "--"),
                            ("p999_us", "p99.9", ":"))


def _curve(results: dict[str, Any], systems: list[str], directory: Path) -> Path | None:
    """Latency against offered rate: a colour per system, a line style per percentile; a cross
    at the step where a system fell over (its percentiles when it has them)."""
    import matplotlib.pyplot as plt

    curves = {s: results["curve"][s] for s in systems if s in results.get("curve", {})}
    if not curves:
        return None
    figure, axis = plt.subplots(figsize=(9, 5.5))
    for system, curve in curves.items():
        steps = sorted(curve["steps"].values(), key=lambda step: step["rate"])
        held = [step for step in steps if step["fell_over"] is None]
        for key, label, style in PERCENTILE_STYLES:
            points = [(step["rate"], step[key] / 1000) for step in held if step.get(key)]
            if points:
                axis.plot(*zip(*points, strict=True), linestyle=style, marker="o",
                          markersize=3, color=COLORS.get(system), label=f"{system} {label}")
        for step in steps:
            if step["fell_over"] is not None:
                y = (step.get("p99_us") or 0) / 1000 or None
                axis.plot([step["rate"]], [y or 1000], marker="x", markersize=10,
                          color=COLORS.get(system), linestyle="none")
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("offered rate, records/s (log); x: fell over (p99, or 1 s when none)")
    axis.set_ylabel("end-to-end latency, ms (log)")
    axis.set_title("latency against offered rate (100 B, acks=1, one partition)")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=7, ncol=len(curves))
    figure.tight_layout()
    path = directory / "suite-curve.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
