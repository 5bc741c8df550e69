"""Freeze one thread of a running process, the others going on: a loop stuck in a call.

SIGSTOP stops a whole process; a hung main loop (a disk stuck under a call it makes) leaves
its other threads running, which is what a watchdog or a stall detector must tell apart. Linux
lets a tracer stop a single thread: PTRACE_SEIZE attaches without stopping anything, and
PTRACE_INTERRUPT stops just the thread named, until PTRACE_DETACH lets it go on. A process may
trace its own children (even under Yama's ptrace_scope=1), so a test freezes the main thread
(its id is the process id) of a broker it started.

The thread is frozen inside a system call (caught elsewhere, it is let go and caught again), as
a loop stuck on a disk is: a Python thread blocked in the kernel has let go of the interpreter
lock, so the process's other threads run on. Caught between two calls, it could hold that lock
and stop them all, which no stuck call does.

    with frozen_thread(broker.supervisor_pid):
        ...  # the supervisor's loop does not turn; its other threads run
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

_PTRACE_DETACH: Final = 17
_PTRACE_SEIZE: Final = 0x4206
_PTRACE_INTERRUPT: Final = 0x4207
_WALL: Final = 0x40000000  # waitpid: any child, thread or not
_ATTEMPTS_MAX: Final = 200
_RETRY_S: Final = 0.005


class ThreadFreezeError(OSError):
    """The kernel refused to trace the thread (no permission, or no ptrace here)."""


def _ptrace(libc: ctypes.CDLL, request: int, tid: int) -> None:
    if libc.ptrace(request, tid, None, None) != 0:
        error = ctypes.get_errno()
        raise ThreadFreezeError(error, f"ptrace({request:#x}, {tid}): {os.strerror(error)}")


def _in_system_call(tid: int) -> bool:
    """/proc/TID/syscall starts with the call's number; -1 outside one, "running" if running."""
    try:
        first = Path(f"/proc/{tid}/syscall").read_text().split(maxsplit=1)[0]
    except (OSError, IndexError):
        return False
    return first.isdigit()


@contextlib.contextmanager
def frozen_thread(tid: int) -> Iterator[None]:
    """Thread `tid` (a process's main thread: its pid) stopped in a system call for the `with`
    body."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    for _ in range(_ATTEMPTS_MAX):
        _ptrace(libc, _PTRACE_SEIZE, tid)
        try:
            _ptrace(libc, _PTRACE_INTERRUPT, tid)
            os.waitpid(tid, _WALL)  # returns once the thread is in its ptrace stop
            if _in_system_call(tid):
                yield
                return
        finally:
            with contextlib.suppress(ThreadFreezeError):  # gone already: nothing to let go
                _ptrace(libc, _PTRACE_DETACH, tid)
        time.sleep(_RETRY_S)
    raise ThreadFreezeError(0, f"thread {tid} was never caught inside a system call")
