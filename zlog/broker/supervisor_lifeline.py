"""Pipes by which a worker knows, before each write, that its supervisor still runs.

The supervisor makes two pipes and alone holds their write ends (close-on-exec: no process
it starts inherits them); every worker holds the read ends (`--supervisor-fd`, handed on by
Popen's `pass_fds` and, through the fork server, by fork). Nothing is ever written. A read end
reads end-of-file once its write end is closed: by the supervisor before it stops, or by the
kernel as the supervisor's process dies, however it dies (kill -9 included), in the pass that
also closes its listening sockets.

Why a worker needs this: a controller that finds a broker's control port refusing
connections takes its process for gone and elects other leaders for its partitions at once,
without waiting for its lease to run out (docs/replication.md §4.1). A worker that went on
taking writes would be a second leader. So a worker checks the pipes before each append (one
poll(2) that does not wait) and takes nothing once either is cut. The parent-death signal
(PR_SET_PDEATHSIG) that stops an orphaned worker comes later: through the fork server it
waits for that process to die in turn, and a worker took writes sent up to 15 ms after its
supervisor's port refused connections on a busy 2-core host.

Why two: a dying process's descriptors are closed in descriptor order, but the kernel may
release the files behind them in that order or the reverse (Linux defers each release to the
end of the exit and, in recent kernels, runs the last deferred first), and a release can be
preempted for milliseconds on a busy host. One write end below the control port's descriptor
(made before any socket) and one above every descriptor open once the port is bound: whichever
way round, a pipe is cut before the port refuses a connection.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
from collections.abc import Sequence

NO_FDS: tuple[int, ...] = ()


def _highest_open_fd() -> int:
    return max(int(name) for name in os.listdir("/dev/fd"))


class Lifeline:
    """The supervisor's side. Made before any socket; `bracket()` once the control port is
    bound; `read_fds` go to the workers."""

    def __init__(self) -> None:
        self._read_fds: list[int] = []
        self._write_fds: list[int] = []
        self._add(*os.pipe())  # both close-on-exec, as every pipe here

    def bracket(self) -> None:
        """The second pipe, its write end above every descriptor open now (the control
        port's among them)."""
        read_fd, write_fd = os.pipe()
        try:
            above = fcntl.fcntl(write_fd, fcntl.F_DUPFD_CLOEXEC, _highest_open_fd() + 1)
        finally:
            os.close(write_fd)
        self._add(read_fd, above)

    def _add(self, read_fd: int, write_fd: int) -> None:
        self._read_fds.append(read_fd)
        self._write_fds.append(write_fd)

    @property
    def read_fds(self) -> tuple[int, ...]:
        return tuple(self._read_fds)

    def cut(self) -> None:
        """End every worker's leaderships now (before a stop closes the control port)."""
        for fd in self._write_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._write_fds.clear()

    def close(self) -> None:
        self.cut()
        for fd in self._read_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._read_fds.clear()


class LifelineWatch:
    """A worker's side: `cut()` once either pipe reads end-of-file (it stays so)."""

    def __init__(self, fds: Sequence[int]) -> None:
        self.fds = tuple(fds)
        self._poll = select.poll()
        for fd in self.fds:
            self._poll.register(fd, select.POLLIN)  # end-of-file: POLLHUP, always reported
        self._cut = False

    def cut(self) -> bool:
        if not self._cut:
            self._cut = bool(self._poll.poll(0))
        return self._cut
