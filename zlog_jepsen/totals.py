"""The figures of several runs of one configuration, as one set: what the soak reports.

Counts add up, the longest unavailabilities are the longest of any run, and the set is
valid only if every run was. The per-run figures stay alongside, so a failure can be traced
to its run's directory.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Final

SUMMED: Final = ("operations", "ok", "fail", "info", "acked_writes", "acked_lost", "duplicates",
                 "inconsistent_offsets", "aborted_reads", "faults_injected")
SUMMED_BY_NAME: Final = ("anomalies", "allowed", "faults_by_kind", "operator_actions")
LONGEST_BY_NAME: Final = ("unavailability_after_fault_ms",)
SAMPLES: Final = "unavailability_after_fault_samples_ms"


def totals(runs: list[dict[str, Any]], minutes: float) -> dict[str, Any]:
    """One configuration's figures over `runs` (each a run's figures) lasting `minutes`."""
    complete = [r for r in runs if "operations" in r]  # a run that broke has no figures
    out: dict[str, Any] = {name: sum(r[name] for r in complete) for name in SUMMED}
    for name in SUMMED_BY_NAME:
        summed: Counter[str] = Counter()
        for r in complete:
            summed.update(r.get(name, {}))
        out[name] = dict(sorted(summed.items()))
    for name in LONGEST_BY_NAME:
        longest: dict[str, float] = {}
        for r in complete:
            for kind, ms in r[name].items():
                longest[kind] = max(longest.get(kind, 0.0), ms)
        out[name] = dict(sorted(longest.items()))
    pooled: dict[str, list[float]] = {}
    for r in complete:
        for kind, waits in r.get(SAMPLES, {}).items():
            pooled.setdefault(kind, []).extend(waits)
    out["unavailability_after_fault_percentiles_ms"] = {
        kind: percentiles_ms(waits) for kind, waits in sorted(pooled.items())}
    out["max_unavailability_ms"] = max((r["max_unavailability_ms"] for r in complete),
                                       default=0.0)
    out["valid"] = bool(runs) and all(r.get("valid") for r in runs)
    out["failed_by"] = sorted({a for r in runs for a in r.get("failed_by", ["the run broke"])})
    out["runs"] = len(runs)
    out["minutes"] = round(minutes, 2)
    out["per_run"] = runs
    return out


def percentiles_ms(waits: list[float]) -> dict[str, float]:
    """p50, p99 and the count of the waits (nearest rank: a p99 is a wait that happened)."""
    ordered = sorted(waits)

    def rank(q: float) -> float:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    return {"count": len(ordered), "p50": rank(0.50), "p99": rank(0.99), "max": ordered[-1]}
