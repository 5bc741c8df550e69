"""What every scenario and adapter shares: ports, server processes, value bytes, child processes.

Every producer and consumer runs in its own process (`python -m bench.suite.child`). Children
that must start together write a ready file after their warm-up and wait for a go file the parent
creates once all are ready, so their clocks start within about a millisecond of each other.
Clocks are `time.monotonic_ns` (CLOCK_MONOTONIC): one clock for every process on the host.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
STAMP_BYTES: Final = 8
VALUE_SEED: Final = 1
START_TIMEOUT_S: Final = 30.0
CHILD_GRACE_S: Final = 60.0

Spec = dict[str, Any]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def find_binary(name: str) -> str | None:
    """`name` on PATH, or in the sbin directories Debian puts daemons in (nats-server)."""
    found = shutil.which(name)
    if found:
        return found
    for directory in ("/usr/sbin", "/usr/local/sbin", "/sbin"):
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def make_values(value_bytes: int, rows: int) -> npt.NDArray[np.uint8]:
    """The value bytes every system gets: seeded random rows, one value per row."""
    rng = np.random.default_rng(VALUE_SEED)
    return rng.integers(0, 256, size=(rows, value_bytes), dtype=np.uint8)


def stamped(scheduled_ns: int, padding: bytes) -> bytes:
    """A latency value: its scheduled send time (8 bytes, little-endian) and the padding."""
    return scheduled_ns.to_bytes(STAMP_BYTES, "little") + padding


def latency_padding(value_bytes: int) -> bytes:
    """The bytes after the stamp: the same for every system."""
    return make_values(value_bytes, 1)[0, STAMP_BYTES:].tobytes()


class ServerProcess:
    """A server started on loopback with its data in a temp dir, stopped by its PID."""

    def __init__(self, name: str, command_for: Callable[[Path], list[str]]) -> None:
        self.name = name
        self.directory = Path(tempfile.mkdtemp(prefix=f"zlog-suite-{name}-"))
        self.log_path = self.directory / "server.log"
        command = command_for(self.directory)
        with self.log_path.open("wb") as log_file:
            self.process = subprocess.Popen(command, cwd=self.directory, stdout=log_file,
                                            stderr=subprocess.STDOUT)
        self.pid = self.process.pid

    def wait_ready(self, probe: Callable[[], bool], timeout_s: float = START_TIMEOUT_S) -> None:
        """Call `probe` until it returns True; fail with the log if the deadline passes."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited at start:\n{self.log_tail()}")
            with contextlib.suppress(Exception):
                if probe():
                    return
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} not ready within {timeout_s} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        """SIGTERM to our PID, SIGKILL after a deadline; then remove the data directory."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
            try:
                self.process.wait(START_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


def version_of(command: list[str]) -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        output = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
        return (output.stdout or output.stderr).strip().splitlines()[0]
    return "unknown"


# ------------------------------------------------------------------------- child processes


def child_command(system: str, role: str, spec: Spec) -> list[str]:
    return [sys.executable, "-m", "bench.suite.child", system, role, json.dumps(spec)]


@dataclass
class Children:
    """Child processes started together and released together by a go file."""

    scratch: Path
    processes: list[subprocess.Popen[str]] = field(default_factory=list)
    ready_files: list[Path] = field(default_factory=list)

    @property
    def go_file(self) -> Path:
        return self.scratch / "go"

    def start(self, system: str, role: str, spec: Spec, *, barrier: bool = True) -> None:
        spec = dict(spec)
        if barrier:
            ready = self.scratch / f"ready-{len(self.processes)}"
            spec["ready_file"] = str(ready)
            spec["go_file"] = str(self.go_file)
            self.ready_files.append(ready)
        self.processes.append(subprocess.Popen(
            child_command(system, role, spec), cwd=REPO_ROOT, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True))

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not all(path.exists() for path in self.ready_files):
            for process in self.processes:
                if process.poll() is not None and process.returncode != 0:
                    _, error = process.communicate()
                    raise RuntimeError(f"a child failed before it was ready:\n{error[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("children not ready in time")
            time.sleep(0.002)

    def go(self) -> None:
        self.go_file.write_text("go")

    def results(self, timeout_s: float) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        try:
            for process in self.processes:
                stdout, stderr = process.communicate(timeout=timeout_s)
                if process.returncode != 0:
                    raise RuntimeError(f"a child exited {process.returncode}:\n{stderr[-3000:]}")
                out.append(json.loads(stdout.strip().splitlines()[-1]))
        finally:
            self.kill()
        return out

    def kill(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def run_children(specs: list[tuple[str, str, Spec]], timeout_s: float) -> list[dict[str, Any]]:
    """Start every child, release them together, return their JSON results in order."""
    with tempfile.TemporaryDirectory(prefix="zlog-suite-") as scratch:
        children = Children(Path(scratch))
        try:
            for system, role, spec in specs:
                children.start(system, role, spec)
            children.wait_ready()
            children.go()
            return children.results(timeout_s)
        finally:
            children.kill()


def child_ready_and_wait(spec: Spec) -> int:
    """In a child: say ready, wait for the go file; returns the monotonic ns of the go."""
    ready_file = spec.get("ready_file")
    if ready_file:
        Path(ready_file).write_text("ready")
        go_file = Path(spec["go_file"])
        deadline = time.monotonic() + START_TIMEOUT_S
        while not go_file.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("no go from the parent")
            time.sleep(0.0005)
    return time.monotonic_ns()


PR_SET_TIMERSLACK: Final = 29  # linux/prctl.h
TIMER_SLACK_NS: Final = 1


def precise_sleeps() -> bool:
    """Make this process's timed sleeps end on time (Linux): timer slack 50 us -> 1 ns.

    Linux lets a sleeping thread's timer fire up to its timer slack late (50 us by default) to
    batch wake-ups. A latency sender that sleeps until each record's scheduled time would charge
    that slack to whatever system it measures (about 48 us of every p50 here); every child of
    every system calls this, so the harness adds as little as it can to all of them alike.
    Threads started afterwards inherit the setting. Returns whether it took effect.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def sleep_until_ns(target_ns: int) -> None:
    """Sleep (never spin: a spinning sender holds the GIL and a core) until `target_ns`."""
    remaining = target_ns - time.monotonic_ns()
    if remaining > 0:
        time.sleep(remaining / 1e9)


def due_count(now_ns: int, t0_ns: int, interval_ns: int, total: int) -> int:
    """How many sends of the open-loop schedule t0 + i * interval are due at `now_ns`."""
    if now_ns < t0_ns:
        return 0
    return min(total, (now_ns - t0_ns) // interval_ns + 1)


def send_stop_ns(spec: Spec, t0_ns: int) -> int | None:
    """When a latency sender stops sending, if spec["send_limit_s"] says (None: never)."""
    limit_s = spec.get("send_limit_s")
    return None if limit_s is None else t0_ns + int(limit_s * 1e9)


@dataclass
class Schedule:
    """A latency sender's open-loop schedule: record i is due at t0 + i * interval.

    `due()` hands out the records due each time some are, all at once when the sender woke
    late, and sleeps until the next one in between; the latest any send left is kept, for the
    report (`sender_late_us_max`). With `stop_ns` (spec["send_limit_s"] after t0) it hands out
    nothing more once that time passed: a sender that cannot keep the rate stops there instead
    of sending its backlog for as long as that takes (the latency curve's steps).
    """

    t0_ns: int
    interval_ns: int
    total: int
    late_ns_max: int = 0
    stop_ns: int | None = None

    @classmethod
    def after_go(cls, spec: Spec) -> Schedule:
        """`spec`'s schedule, starting 2 ms after the parent's go (after `child_ready_and_wait`)."""
        t0_ns = child_ready_and_wait(spec) + 2_000_000
        return cls(t0_ns, round(1e9 / spec["rate"]), spec["total"],
                   stop_ns=send_stop_ns(spec, t0_ns))

    def scheduled_ns(self, index: int) -> int:
        return self.t0_ns + index * self.interval_ns

    def due(self) -> Iterator[range]:
        sent = 0
        while sent < self.total:
            now = time.monotonic_ns()
            if self.stop_ns is not None and now > self.stop_ns:
                self.late_ns_max = max(self.late_ns_max, now - self.scheduled_ns(sent))
                return
            due = due_count(now, self.t0_ns, self.interval_ns, self.total)
            if due > sent:
                self.late_ns_max = max(self.late_ns_max, now - self.scheduled_ns(sent))
                yield range(sent, due)
                sent = due
            sleep_until_ns(self.scheduled_ns(sent))

    @property
    def late_us_max(self) -> float:
        return self.late_ns_max / 1000

