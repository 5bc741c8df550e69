"""Machine notes: cores, CPU model, versions, load, and CPU steal and busy time from /proc/stat.

The machine may be shared: a snapshot of /proc/stat before and after a stretch of the run gives
the share of CPU time the hypervisor stole and the share every process on the host was busy.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Final

CPU_FIELDS: Final = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_times() -> dict[str, int]:
    """The aggregate `cpu` line of /proc/stat in clock ticks (empty where it does not exist)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("cpu "):
                numbers = [int(v) for v in line.split()[1:1 + len(CPU_FIELDS)]]
                return dict(zip(CPU_FIELDS, numbers, strict=False))
    return {}


def cpu_share(before: dict[str, int], after: dict[str, int]) -> dict[str, float | None]:
    """Steal and busy as fractions of all CPU time between two snapshots."""
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in CPU_FIELDS}
    total = sum(delta.values())
    if total <= 0:
        return {"steal": None, "busy": None}
    idle = delta["idle"] + delta["iowait"]
    return {"steal": delta["steal"] / total, "busy": (total - idle - delta["steal"]) / total}


def pressure() -> float | None:
    """CPU pressure (PSI "some", 10 s average, %): how often runnable threads waited."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        some = Path("/proc/pressure/cpu").read_text().splitlines()[0].split()
        return float(some[1].split("=")[1])
    return None


def snapshot() -> dict[str, Any]:
    return {"time": time.time(), "cpu": cpu_times(), "loadavg": list(os.getloadavg()),
            "cpu_pressure_some_avg10": pressure()}


def between(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    share = cpu_share(before["cpu"], after["cpu"])
    return {"seconds": after["time"] - before["time"], "cpu_steal": share["steal"],
            "cpu_busy": share["busy"], "loadavg_before": before["loadavg"],
            "loadavg_after": after["loadavg"],
            "cpu_pressure_before": before["cpu_pressure_some_avg10"],
            "cpu_pressure_after": after["cpu_pressure_some_avg10"]}


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def notes() -> dict[str, Any]:
    import numpy
    import zmq

    return {"cores": os.cpu_count(), "cpu_model": cpu_model(), "kernel": platform.release(),
            "python": sys.version.split()[0], "numpy": numpy.__version__,
            "pyzmq": zmq.__version__, "libzmq": zmq.zmq_version(),
            "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9)}
