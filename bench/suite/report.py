"""The headline object per system, and the Markdown table printed at the end of a run."""

from __future__ import annotations

from typing import Any, Final

HEADLINE_KEYS: Final = ("produce_records_per_s", "consume_records_per_s", "latency_p50_us",
                        "latency_p99_us", "latency_p999_us")
HEADLINE_PRODUCE: Final = "100B-1p-acks1-1proc"


def _median(entry: dict[str, Any] | None, key: str) -> float | None:
    if not entry or key not in entry:
        return None
    value = entry[key].get("median")
    return float(value) if value is not None else None


def headline_for(results: dict[str, Any], system: str, size: int, rate: int) -> dict[str, Any]:
    """The issue's five keys for the 100-byte, 1-partition, acks=1, 5,000 records/s cases."""
    produce = results["produce"].get(system, {}).get(f"{size}B-1p-acks1-1proc")
    consume = results["consume"].get(system, {})
    batches = consume.get(f"{size}B-batches")
    records = consume.get(f"{size}B-records")
    latency = results["latency"].get(system, {}).get(f"{rate}/s")
    consume_batches = _median(batches, "records_per_s")
    consume_records = _median(records, "records_per_s")
    out: dict[str, Any] = {
        "produce_records_per_s": _median(produce, "records_per_s"),
        # The fastest read path each system has: zlog's batch level, the peers' record level.
        "consume_records_per_s": consume_batches if consume_batches is not None
        else consume_records,
        "latency_p50_us": _median(latency, "p50_us"),
        "latency_p99_us": _median(latency, "p99_us"),
        "latency_p999_us": _median(latency, "p999_us"),
        "consume_path": "batches" if consume_batches is not None else (
            "records" if consume_records is not None else None),
        "consume_records_objects_per_s": consume_records,
        "consume_batches_records_per_s": consume_batches,
        "latency_p90_us": _median(latency, "p90_us"),
        "latency_max_us": _median(latency, "max_us"),
    }
    notes = [why for entry in (produce, records, latency) if entry and (why := entry.get(
        "skipped"))]
    if records and records.get("skipped") and not batches:
        notes.append(records["skipped"])
    if notes:
        out["note"] = "; ".join(dict.fromkeys(notes))
    out["spread"] = {
        "produce_records_per_s": produce.get("records_per_s") if produce else None,
        "latency_p99_us": latency.get("p99_us") if latency else None,
    }
    return out


def _rate(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1e6:
        return f"{value / 1e6:.2f} M"
    if value >= 1e3:
        return f"{value / 1e3:.0f} k"
    return f"{value:.0f}"


def _us(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 10_000:
        return f"{value / 1000:,.0f} ms"
    if value >= 1000:
        return f"{value / 1000:.1f} ms"
    return f"{value:.0f} us"


def _cell(entry: dict[str, Any] | None, key: str, form: Any) -> str:
    if entry is None:
        return "not run"
    if "skipped" in entry:
        return "n/a"
    stats = entry.get(key) or {}
    if stats.get("median") is None:
        return "failed"
    if stats["min"] == stats["max"]:
        return form(stats["median"])
    return f"{form(stats['median'])} ({form(stats['min'])}-{form(stats['max'])})"


def table(results: dict[str, Any], systems: list[str]) -> str:
    """Median (min-max over the repeats) per figure and system; n/a where a case has no meaning."""
    columns = list(systems)
    lines = ["| figure | " + " | ".join(columns) + " |",
             "|---|" + "---|" * len(columns)]

    def row(label: str, scenario: str, case: str, key: str, form: Any) -> None:
        cells = []
        for system in columns:
            cells.append(_cell(results[scenario].get(system, {}).get(case), key, form))
        if any(c not in ("n/a", "not run") for c in cells):
            lines.append(f"| {label} | " + " | ".join(cells) + " |")

    produce_cases = next((list(v) for v in results["produce"].values()), [])
    produce_cases.sort(key=lambda k: (k != HEADLINE_PRODUCE, k))
    for case in produce_cases:
        row(f"produce {case} records/s", "produce", case, "records_per_s", _rate)
    consume_cases = next((list(v) for v in results["consume"].values() if v), [])
    for case in consume_cases:
        row(f"consume {case} records/s", "consume", case, "records_per_s", _rate)
    for rate in next((list(v) for v in results["latency"].values()), []):
        for name, label in (("p50_us", "p50"), ("p90_us", "p90"), ("p99_us", "p99"),
                            ("p999_us", "p99.9"), ("max_us", "max")):
            row(f"latency {rate} {label}", "latency", rate, name, _us)
        row(f"latency {rate} records lost", "latency", rate, "lost",
            lambda v: f"{v:.0f}")
    notes = ["zlog: the client at its defaults, as a user gets it; zlog_tuned: the same broker "
             "with 1 MiB batches and fetches (the settings a bulk user would tune)",
             "zlog_local: zlog read by the local zero-copy consumer (the leader's shared-memory "
             "ring, no socket); its producer is zlog's",
             "n/a: the case has no meaning for that system (see the JSON's `skipped`)",
             "cells: median (min-max) over the repeats"]
    whole = results.get("machine_whole_run", {})
    if whole.get("cpu_steal") is not None:
        notes.append(f"CPU steal during the run {whole['cpu_steal']:.1%}, all CPUs busy "
                     f"{whole['cpu_busy']:.0%}, load average {whole['loadavg_before'][0]:.1f} "
                     f"before and {whole['loadavg_after'][0]:.1f} after")
    return "\n".join(lines) + "\n\n" + "\n".join(f"- {n}" for n in notes)


def curve_table(results: dict[str, Any], systems: list[str]) -> str:
    """p50 / p99 / p99.9 per system (rows) and offered rate (columns); where a system fell over,
    why; and the highest rate it held."""
    curves = {system: results["curve"][system] for system in systems
              if system in results.get("curve", {})}
    rates = sorted({step["rate"] for curve in curves.values() for step in curve["steps"].values()})
    lines = ["| p50 / p99 / p99.9 at offered rate | " + " | ".join(
                 f"{_rate(rate)}/s" for rate in rates) + " | held up to |",
             "|---|" + "---|" * (len(rates) + 1)]
    for system, curve in curves.items():
        cells = []
        for rate in rates:
            step = curve["steps"].get(f"{rate}/s")
            if step is None:
                cells.append("")
            elif step["fell_over"] is not None:
                cells.append(f"fell over: {step['fell_over']}")
            else:
                cells.append(" / ".join(_us(step.get(key)) for key in
                                        ("p50_us", "p99_us", "p999_us")))
        held = curve["sustained_rate"]
        lines.append(f"| {system} | " + " | ".join(cells)
                     + f" | {_rate(held) + '/s' if held else 'none'} |")
    return "\n".join(lines)
