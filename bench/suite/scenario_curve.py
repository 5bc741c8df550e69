"""Scenario 4, the latency curve: p50, p99 and p99.9 against the offered rate.

Each step is one run of scenario 3 (`scenario_latency.run`: open-loop sender, latency from each
record's scheduled time, so a backlog counts against every record it delays) at a rate from
`RATES` (1,000 to 200,000 records/s of 100 B), short (2 s after a 0.5 s warm-up by default), on
a fresh topic, stepping up until the system falls over. A step falls over when

- the sender cannot offer the rate: it ended more than `BEHIND_LIMIT_S` behind its schedule
  (the sender then stops sending; at 2 s steps that is a system sustaining under about 2/3 of
  the rate, and one sustaining 2/3 to all of it shows its backlog in the percentiles instead);
- fewer than `DELIVERED_MIN` of the records reached the receiver within `GRACE_S` after the
  schedule's end (records the sender never sent count as not delivered);
- its p99 is above `P99_LIMIT_US` (1 s);
- or the run failed.

A step that falls over is run once more, and the system falls over only if it does so twice:
on a shared host one stall of a second or two (another process holding both cores) would
otherwise end a short step's curve by itself. The step that fell over is kept (both tries,
marked, with the reasons) and no higher rate is tried.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from bench.suite import scenario_latency

NAME: Final = "curve"
RATES: Final = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000)
P99_LIMIT_US: Final = 1_000_000
DELIVERED_MIN: Final = 0.999
BEHIND_LIMIT_S: Final = 1.0
GRACE_S: Final = 3.0
TRIES: Final = 2

Attempt = Callable[[str, Callable[[], dict[str, Any]]], dict[str, Any]]


def fell_over(step: dict[str, Any]) -> str | None:
    """Why the system fell over at this step, or None when it held the rate."""
    if "error" in step:
        return f"the run failed: {step['error']}"
    behind_us = step.get("sender_late_us_max") or 0.0
    if behind_us > BEHIND_LIMIT_S * 1e6:
        return f"the sender fell {behind_us / 1e6:.1f} s behind the schedule"
    expected = step["expected"]
    delivered = (expected - step["lost"]) / expected if expected else 1.0
    if delivered < DELIVERED_MIN:
        return f"{delivered:.1%} of the records arrived within {GRACE_S:g} s"
    p99 = step.get("p99_us")
    if p99 is None or p99 > P99_LIMIT_US:
        return "no latency measured" if p99 is None else f"p99 {p99 / 1e6:.1f} s > 1 s"
    return None


def run(system: str, server: Any, *, rates: list[int], step_s: float, warmup_s: float,
        value_bytes: int, scratch: Path, attempt: Attempt) -> dict[str, Any]:
    """Every step up to and including the one where `system` falls over."""
    steps: dict[str, Any] = {}
    sustained = None
    for rate in rates:
        tries = []
        for attempt_index in range(TRIES):
            topic = f"curve-{rate}-{attempt_index}"
            server.create(topic, 1)

            def one_step(r: int = rate, t: str = topic) -> dict[str, Any]:
                return scenario_latency.run(
                    system, server, t, rate=r, value_bytes=value_bytes, duration_s=step_s,
                    warmup_s=warmup_s, scratch=scratch,
                    send_limit_s=warmup_s + step_s + BEHIND_LIMIT_S, grace_s=GRACE_S)

            step = attempt(f"{system} curve {rate}/s", one_step)
            server.delete(topic, 1)
            step.pop("histogram", None)
            step.pop("traceback", None)
            step["fell_over"] = fell_over(step)
            tries.append(step)
            if step["fell_over"] is None:
                break
        steps[f"{rate}/s"] = {"rate": rate, **tries[-1], "tries": len(tries)}
        if tries[-1]["fell_over"] is not None:
            steps[f"{rate}/s"]["fell_over"] = "; ".join(t["fell_over"] for t in tries)
            break
        sustained = rate
    return {"steps": steps, "sustained_rate": sustained}


def skipped_steps(rates: list[int], result: dict[str, Any]) -> int:
    """The rates not run because the system fell over below them (progress accounting)."""
    return len(rates) - len(result["steps"])
