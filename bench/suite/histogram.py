"""Latency percentiles from HDR histograms, and the spread of repeated measurements.

Latencies are recorded in microseconds (1 us to 60 s, 3 significant digits). A receiver encodes
its histogram (HdrHistogram's base64 form) into its JSON, so the parent can merge the repeats of
a case for the percentile curves without shipping every sample.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from hdrh.histogram import HdrHistogram

LOWEST_US: Final = 1
HIGHEST_US: Final = 60_000_000
DIGITS: Final = 3
PERCENTILES: Final = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}
CURVE_POINTS: Final = (0.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.999)


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, DIGITS)


def record_ns(histogram: HdrHistogram, latencies_ns: npt.NDArray[np.int64]) -> None:
    """Record latencies given in ns (clamped to the histogram's range, in us)."""
    values_us = np.clip(latencies_ns // 1000, LOWEST_US, HIGHEST_US)
    unique, counts = np.unique(values_us, return_counts=True)
    for value, count in zip(unique.tolist(), counts.tolist(), strict=True):
        histogram.record_value(value, count)


def summary(histogram: HdrHistogram) -> dict[str, Any]:
    """p50, p90, p99, p99.9 and max in us, and the sample count."""
    count = int(histogram.get_total_count())
    if count == 0:
        return {"samples": 0, **{f"{name}_us": None for name in PERCENTILES}, "max_us": None}
    out: dict[str, Any] = {"samples": count}
    for name, percentile in PERCENTILES.items():
        out[f"{name}_us"] = float(histogram.get_value_at_percentile(percentile))
    out["max_us"] = float(histogram.get_max_value())
    return out


def encode(histogram: HdrHistogram) -> str:
    encoded = histogram.encode()
    return encoded.decode() if isinstance(encoded, bytes) else str(encoded)


def merged(encoded: Iterable[str]) -> HdrHistogram:
    total = new_histogram()
    for item in encoded:
        total.add(HdrHistogram.decode(item))
    return total


def curve(histogram: HdrHistogram) -> list[tuple[float, float]]:
    """(percentile, latency us) points for a percentile plot."""
    if histogram.get_total_count() == 0:
        return []
    return [(p, float(histogram.get_value_at_percentile(p))) for p in CURVE_POINTS]


def spread(values: Sequence[float | None]) -> dict[str, Any]:
    """Median, min, max and the list of repeats; None values (failed repeats) are counted."""
    numbers = [float(v) for v in values if v is not None]
    if not numbers:
        return {"median": None, "min": None, "max": None, "runs": list(values)}
    return {"median": statistics.median(numbers), "min": min(numbers), "max": max(numbers),
            "runs": list(values)}


def relative_spread(stats: dict[str, Any]) -> float | None:
    """(max - min) / median, the figure the table prints as +-."""
    median = stats.get("median")
    if not median:
        return None
    return float((stats["max"] - stats["min"]) / median)
