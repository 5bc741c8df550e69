"""A run's figures: what was done, what went wrong, what faults were injected, how long writes
stopped. The same numbers feed the summary table and the `--json` output, so the two never
disagree.

Unavailability is the longest span with no ok send: between two consecutive ok send
completions, or from the history's first event to the first one, or from the last one to the
end. After a fault it is measured per key, since a fault stops only some partitions while the
others go on: the wait from the fault's start until the slowest key has an ok send again (a
key with none before the end waits until the end). Per fault kind the figures keep every
wait, so a soak can give percentiles across runs, and the longest. An operator's actions
during a fault's heal (unclean election turned on and off after a sole-ISR wipe) are counted
by action.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from itertools import pairwise
from typing import Any

from zlog_jepsen.checker import Anomaly, CheckResult
from zlog_jepsen.checker.wiped_replicas import ACTION
from zlog_jepsen.history import EVENT_TYPES, NS_PER_MS, Event, fault, sends


def figures(history: list[Event], result: CheckResult, *, final_read: bool) -> dict[str, Any]:
    """The run's figures as a JSON-ready dict (the `--json` output's keys)."""
    completions = [e for e in history if e.is_client and e.type != "invoke"]
    by_type = Counter(e.type for e in completions)
    acked = [e for e in completions if e.f == "send" and e.type == "ok"]
    starts = [(e.time_ns, fault(e).kind) for e in history
              if not e.is_client and e.type != "invoke" and fault(e).phase == "start"]
    operator = Counter(str(e.value.get(ACTION)) for e in history
                       if not e.is_client and fault(e).phase == "operator")
    lost = Anomaly.LOST_ACKED_FINAL if final_read else Anomaly.LOST_WRITE
    waits = waits_after_faults_ms(history, starts)
    return {
        "operations": len(completions),
        "ok": by_type["ok"],
        "fail": by_type["fail"],
        "info": by_type["info"],
        "acked_writes": sum(len(sends(e)) for e in acked),
        "acked_lost": result.counts[lost],
        "duplicates": result.counts[Anomaly.DUPLICATE],
        "inconsistent_offsets": result.counts[Anomaly.INCONSISTENT_OFFSET],
        "aborted_reads": result.counts[Anomaly.ABORTED_READ],
        "anomalies": {str(a): n for a, n in result.counts.items()},
        "allowed": {str(a): n for a, n in result.allowed.items() if n},
        "valid": result.valid,
        "failed_by": [str(a) for a in result.failed_by],
        "faults_injected": len(starts),
        "faults_by_kind": dict(sorted(Counter(kind for _, kind in starts).items())),
        "operator_actions": dict(sorted(operator.items())),
        "max_unavailability_ms": _longest_gap_ms(history, [e.time_ns for e in acked]),
        "unavailability_after_fault_ms": {kind: max(waits) for kind, waits in waits.items()},
        "unavailability_after_fault_samples_ms": waits,
    }


def summary_table(numbers: dict[str, Any]) -> str:
    """The figures as a plain-text table for the run's directory and the terminal."""
    rows: list[tuple[str, object]] = [
        ("operations", numbers["operations"]),
        *((f"  {t}", numbers[t]) for t in EVENT_TYPES if t != "invoke"),
        ("acknowledged writes", numbers["acked_writes"]),
        ("verdict", "valid" if numbers["valid"] else "INVALID: " + ", ".join(numbers["failed_by"])),
        ("anomalies", ""),
        *((f"  {name}", count) for name, count in numbers["anomalies"].items()),
        ("allowed (excused by the rules)", "" if numbers.get("allowed") else "none"),
        *((f"  {name}", count) for name, count in numbers.get("allowed", {}).items()),
        ("faults injected", numbers["faults_injected"]),
        *((f"  {kind}", n) for kind, n in numbers["faults_by_kind"].items()),
        ("operator actions", "" if numbers.get("operator_actions") else "none"),
        *((f"  {action}", n) for action, n in numbers.get("operator_actions", {}).items()),
        ("max unavailability (ms)", numbers["max_unavailability_ms"]),
        *((f"  after {kind} (ms)", ms)
          for kind, ms in numbers["unavailability_after_fault_ms"].items()),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}".rstrip() for name, value in rows) + "\n"


def _longest_gap_ms(history: list[Event], oks_ns: list[int]) -> float:
    """The longest time without an ok send while the workload was sending: from its first
    send to its last send event. The history goes on after the workload stops (the heal of
    the last fault, the final read), which no client waited through."""
    times = [e.time_ns for e in history if e.f == "send"]
    if not times:
        return 0.0
    marks = [min(times), *sorted(oks_ns), max(times)]
    return max((b - a for a, b in pairwise(marks)), default=0) / NS_PER_MS


def waits_after_faults_ms(history: list[Event],
                          starts: list[tuple[int, str]]) -> dict[str, list[float]]:
    """Each fault's wait: the slowest key's, from a client wanting to write it to an ok send.

    A key is wanted from the fault's start if a send to it was in flight then, else from the
    first send to it invoked after the start; a key nobody writes after the start does not
    count (the workload's own pace is not unavailability)."""
    end = max((e.time_ns for e in history), default=0)
    ops_by_key: dict[int, list[tuple[int, int | None, bool]]] = defaultdict(list)
    invoked: dict[object, Event] = {}
    for e in history:
        if e.f != "send":
            continue
        if e.type == "invoke":
            invoked[e.process] = e
            continue
        begun = invoked.pop(e.process, None)
        if begun is not None:
            for key in {record.key for record in sends(begun)}:
                ops_by_key[key].append((begun.time_ns, e.time_ns, e.type == "ok"))
    for begun in invoked.values():  # never completed: in flight until the end
        for key in {record.key for record in sends(begun)}:
            ops_by_key[key].append((begun.time_ns, None, False))
    waits: dict[str, list[float]] = defaultdict(list)
    for start, kind in starts:
        slowest_ns = 0
        for ops in ops_by_key.values():
            wanted = [start if invoke < start else invoke for invoke, done, _ in ops
                      if done is None or done > start]
            if not wanted:
                continue
            oks = [done for _, done, ok in ops if ok and done is not None and done > start]
            slowest_ns = max(slowest_ns, min(oks, default=end) - min(wanted))
        waits[kind].append(round(slowest_ns / NS_PER_MS, 1))
    return dict(sorted(waits.items()))
