"""Processes and threads made to look stuck in I/O, as a stuck disk would leave them (Linux).

`stuck_in_io(pids)`: the processes put in a cgroup v1 freezer and frozen. A frozen task
sleeps uninterruptibly (`D` in ps), exactly as one waiting on a stuck disk: SIGKILL stays
pending until it is thawed, then ends it before it runs another instruction. (The cgroup v2
freezer lets SIGKILL through, so it cannot stand in for a stuck disk.)

`frozen_thread(pid)`: ONE thread of a running process frozen, the others left running (ptrace).
SIGSTOP stops every thread of a process. To stop only a supervisor's loop, as a call that
blocks in uninterruptible I/O would stop it while its Raft thread goes on, the test attaches
to the loop's thread alone (PTRACE_SEIZE) and interrupts it (PTRACE_INTERRUPT): that thread
stays in a ptrace stop until detached; the process's other threads never notice.

A Python thread stopped while it holds the GIL would stop every other Python thread of the
process with it, which is a different fault (the whole process frozen). So the thread is
frozen only where it waits in poll(2) (ZeroMQ's poll, which releases the GIL), read from
/proc/<pid>/task/<tid>/syscall while it is stopped; elsewhere it is let go and tried again.

The tracer is the calling thread: freeze and thaw from the same thread. A test process that
dies detaches its tracees (the kernel lets them run on).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import random
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

from zlog_testbed.waiting import wait_until

_PTRACE_DETACH: Final = 17
_PTRACE_SEIZE: Final = 0x4206
_PTRACE_INTERRUPT: Final = 0x4207
_WALL: Final = 0x40000000
_POLL_SYSCALLS: Final = {"x86_64": {"7", "271"}, "aarch64": {"73"}}  # poll, ppoll
ATTEMPTS_MAX: Final = 200  # the loop sits in poll most of the time: a few tries suffice
FREEZER: Final = Path("/sys/fs/cgroup/freezer")
FREEZE_TIMEOUT_S: Final = 10.0


class FreezeError(AssertionError):
    """The thread could not be frozen where it holds no lock."""


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    libc.ptrace.restype = ctypes.c_long
    return libc


def _ptrace(libc: ctypes.CDLL, request: int, tid: int) -> None:
    if libc.ptrace(request, tid, None, None) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"ptrace({request:#x}, {tid}): {os.strerror(error)}")


def _syscall_of(pid: int, tid: int) -> str:
    with open(f"/proc/{pid}/task/{tid}/syscall") as file:
        return file.read().split()[0]


def _freeze_in_poll(libc: ctypes.CDLL, pid: int, tid: int, rng: random.Random) -> None:
    polls = _POLL_SYSCALLS.get(platform.machine(), set())
    for _ in range(ATTEMPTS_MAX):
        _ptrace(libc, _PTRACE_SEIZE, tid)
        _ptrace(libc, _PTRACE_INTERRUPT, tid)
        os.waitpid(tid, _WALL)  # its ptrace stop, reported to this thread
        if _syscall_of(pid, tid) in polls:
            return
        _ptrace(libc, _PTRACE_DETACH, tid)
        time.sleep(rng.uniform(0.001, 0.02))  # land elsewhere in its loop next time
    raise FreezeError(f"thread {tid} of {pid} never caught waiting in poll")


@contextlib.contextmanager
def frozen_thread(pid: int, tid: int | None = None, *, seed: int = 0) -> Iterator[None]:
    """Thread `tid` of process `pid` (its main thread by default) frozen in poll for the
    block, every other thread running."""
    libc = _libc()
    tid = pid if tid is None else tid
    _freeze_in_poll(libc, pid, tid, random.Random(seed))
    try:
        yield
    finally:
        _ptrace(libc, _PTRACE_DETACH, tid)


def can_freeze_in_io() -> bool:
    """Whether this host has a writable cgroup v1 freezer (root, cgroup v1 or hybrid)."""
    return (FREEZER / "cgroup.procs").exists() and os.access(FREEZER, os.W_OK)


def _write(path: Path, text: str) -> None:
    with path.open("w") as file:
        file.write(text)


@contextlib.contextmanager
def stuck_in_io(pids: Sequence[int]) -> Iterator[None]:
    """The processes `pids` frozen for the block as in uninterruptible I/O (killed ones end
    when thawed), then thawed and moved back."""
    group = FREEZER / f"zlog-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, OSError):
                _write(group / "cgroup.procs", str(pid))
        _write(group / "freezer.state", "FROZEN")
        wait_until(lambda: (group / "freezer.state").read_text().strip() == "FROZEN",
                   FREEZE_TIMEOUT_S, interval_s=0.01, what="the processes frozen")
        yield
    finally:
        _write(group / "freezer.state", "THAWED")
        for member in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError, OSError):
                _write(FREEZER / "cgroup.procs", member)
        wait_until(lambda: not (group / "cgroup.procs").read_text().split(), FREEZE_TIMEOUT_S,
                   interval_s=0.01, what="the frozen group emptied")
        group.rmdir()
