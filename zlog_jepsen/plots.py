"""Latency and throughput over a run, with the fault windows shaded (PNG files).

A table says how many writes were lost; these say when the cluster stalled and for how long,
next to the fault that stalled it. matplotlib is optional (the dev extra has it): without it
a run says no plots were drawn and goes on, since the verdict does not depend on them.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path
from typing import Final

from zlog_jepsen.history import Event, fault

NS_PER_S: Final = 1_000_000_000
THROUGHPUT_BUCKET_S: Final = 1.0
COLOURS: Final = {"ok": "tab:green", "fail": "tab:red", "info": "tab:orange"}


def plots_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def fault_windows(history: list[Event]) -> list[tuple[float, float, str]]:
    """(start s, end s, kind) of each fault, in seconds from the history's first event; a
    fault never ended lasts to the end."""
    if not history:
        return []
    origin = history[0].time_ns
    end = (history[-1].time_ns - origin) / NS_PER_S
    windows: list[tuple[float, float, str]] = []
    open_since: dict[str, float] = {}
    for event in history:
        if event.is_client:
            continue
        kind, phase = fault(event)
        at = (event.time_ns - origin) / NS_PER_S
        if phase == "start":
            open_since[kind] = at
        elif phase == "end" and kind in open_since:
            windows.append((open_since.pop(kind), at, kind))
    windows += [(start, end, kind) for kind, start in open_since.items()]
    return sorted(windows)


def completions(history: list[Event]) -> list[tuple[float, float, str, str]]:
    """(completion s, latency ms, type, f) of each client operation, by pairing each
    completion with its process's pending invocation."""
    if not history:
        return []
    origin = history[0].time_ns
    pending: dict[object, Event] = {}
    done: list[tuple[float, float, str, str]] = []
    for event in history:
        if not event.is_client:
            continue
        if event.type == "invoke":
            pending[event.process] = event
            continue
        invoke = pending.pop(event.process, None)
        if invoke is not None:
            done.append(((event.time_ns - origin) / NS_PER_S,
                         (event.time_ns - invoke.time_ns) / 1e6, event.type, event.f))
    return done


def draw(history: list[Event], directory: Path) -> list[Path]:
    """latency.png and throughput.png in `directory`; the files written."""
    import matplotlib  # noqa: PLC0415  (optional: only when plots are drawn)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    points = completions(history)
    windows = fault_windows(history)
    written = []
    for name, title, ylabel in (("latency", "Operation latency", "latency (ms)"),
                                ("throughput", "Completions per second", "operations / s")):
        figure, axes = plt.subplots(figsize=(12, 5))
        for start, end, kind in windows:
            axes.axvspan(start, end, color="grey", alpha=0.2)
            axes.text(start, 1.0, kind, rotation=90, va="top", fontsize=7,
                      transform=axes.get_xaxis_transform())
        for type_, colour in COLOURS.items():
            mine = [(t, ms) for t, ms, ty, _ in points if ty == type_]
            if not mine:
                continue
            if name == "latency":
                axes.scatter([t for t, _ in mine], [ms for _, ms in mine], s=3,
                             color=colour, label=type_)
            else:
                buckets = Counter(int(t // THROUGHPUT_BUCKET_S) for t, _ in mine)
                xs = range(max(buckets) + 1)
                axes.plot([x * THROUGHPUT_BUCKET_S for x in xs], [buckets[x] for x in xs],
                          color=colour, label=type_)
        if name == "latency":
            axes.set_yscale("log")
        axes.set_xlabel("seconds since the run started (faults shaded)")
        axes.set_ylabel(ylabel)
        axes.set_title(title)
        axes.legend(loc="upper right")
        path = directory / f"{name}.png"
        figure.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(figure)
        written.append(path)
    return written
