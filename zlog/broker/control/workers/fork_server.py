"""The supervisor's side of the worker fork server (zlog.broker.data.worker_forkserver).

`WorkerForkServer` starts the server, asks it for worker starts and collects the exits it
reports; `ForkedWorker` is one started worker, with the few calls of `subprocess.Popen` the
worker pool makes (pid, poll, wait, send_signal, kill, returncode), so the pool treats a
forked worker and a worker started as a new interpreter alike. A fork server that cannot be
started, or has died, makes the pool start workers as new interpreters: a slower start, never
none.

Nothing here waits for the server: the supervisor's loop must turn even when the server is
frozen (SIGSTOP, a disk stuck in I/O). A start is asked for and its answer collected later
(`PendingStart`); each worker's end is seen through a pidfd as well as in the server's report,
so a server that leaves an exit unreported, or a start unanswered, for `ANSWER_TIMEOUT_MS` is
judged stuck (`stuck`; a new one's first answer waits for its imports, so it gets
FIRST_ANSWER_TIMEOUT_MS), and the pool kills and replaces it. Its workers stop with it (their
parent-death signal); one that cannot stop (frozen) is killed by the pool's stall check.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from zlog import limits
from zlog.clock import monotonic_ms

log = logging.getLogger(__name__)

FORKSERVER_MODULE: Final = "zlog.broker.data.worker_forkserver"
ANSWER_TIMEOUT_MS: Final = 5_000
"""How long the server may leave a start unanswered, or a worker's exit unreported, before it
is judged stuck and replaced (a fork and a reap take milliseconds; a starved host may take
longer). Replacing it stops its workers too, so it is not judged on less."""
FIRST_ANSWER_TIMEOUT_MS: Final = 60_000
"""The same for a new server's first answer, which waits for its imports (an interpreter's
start: seconds on a starved host)."""


class ForkServerError(Exception):
    """The fork server cannot start a worker (gone, or refused): start it another way."""


def _pidfd(pid: int) -> int | None:
    """A descriptor readable once `pid` ended (reaped or not); None where there is none."""
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):  # gone already (its exit is reported), or no pidfd
        return None


def _pidfd_ended(pidfd: int) -> bool:
    readable, _, _ = select.select([pidfd], [], [], 0.0)
    return bool(readable)


class ForkedWorker:
    """A worker started by the fork server: what the pool needs of a Popen."""

    def __init__(self, server: WorkerForkServer, pid: int) -> None:
        self._server = server
        self.pid = pid
        self.returncode: int | None = None
        self._pidfd = _pidfd(pid)
        self._signalled = False  # sent a signal: its end is now looked for through the pidfd

    def poll(self) -> int | None:
        if self.returncode is None:
            self._server.collect(0.0)
            self.returncode = self._server.exit_status_of(self.pid, self._ended())
            if self.returncode is not None and self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
        return self.returncode

    def _ended(self) -> bool | None:
        """What its pidfd says (None without one), looked at only where the server's report
        may not come: once it was signalled, or with the server gone. A worker that ends by
        itself beside a frozen server falls silent, and is signalled then."""
        if self._pidfd is None:
            return None
        if not self._signalled and not self._server.gone:
            return False
        return _pidfd_ended(self._pidfd)

    def lives(self) -> bool:
        """Whether the process runs still (its end may be seen before its server reports it)."""
        return self.poll() is None and (self._pidfd is None or not _pidfd_ended(self._pidfd))

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise subprocess.TimeoutExpired(f"worker pid {self.pid}", timeout or 0.0)
            step_s = 0.1 if remaining is None else min(remaining, 0.1)
            if self._server.alive:
                self._server.collect(step_s)
            else:  # nothing reports its end now: its pidfd does
                select.select([] if self._pidfd is None else [self._pidfd], [], [], step_s)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        self._signalled = True
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


@dataclass(slots=True)
class PendingStart:
    """A start asked of the server: the worker once it answered, or why it refused."""

    asked_ms: int
    worker: ForkedWorker | None = None
    failure: str = ""

    @property
    def answered(self) -> bool:
        return self.worker is not None or bool(self.failure)


class WorkerForkServer:
    """One fork server process and the channel to it."""

    def __init__(self, environ: Mapping[str, str], inherited_fds: Sequence[int] = ()) -> None:
        """`inherited_fds`: descriptors every worker it forks gets, at the same numbers."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-P", "-m", FORKSERVER_MODULE, "--channel-fd",
                 str(theirs.fileno())],
                env={**environ, "OPENBLAS_NUM_THREADS": "1"}, stdin=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(), *inherited_fds), process_group=0)
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        self._channel = ours
        self._exits: dict[int, int] = {}
        self._starts: deque[PendingStart] = deque()  # asked, in order; answered in order
        self._unreported: dict[int, int] = {}  # pid -> when its end was first seen (ms)
        self._heard = False  # it answered once: its imports are done
        self._gone = False

    @property
    def alive(self) -> bool:
        return not self._gone and self.process.poll() is None

    @property
    def gone(self) -> bool:
        """Lost, killed or closed (a cheaper, later word than `alive`)."""
        return self._gone

    def fileno(self) -> int:
        """Readable when the server reported something (an exit): poll it to wake at once."""
        return self._channel.fileno()

    def start(self, argv: Sequence[str], environ: Mapping[str, str],
              now_ms: int) -> PendingStart:
        """Ask for a worker; the answer comes with a later `collect`. Never waits."""
        if not self.alive:
            raise ForkServerError("the worker fork server is not running")
        try:
            self._channel.send(json.dumps({"argv": list(argv), "env": dict(environ)}).encode(),
                               socket.MSG_DONTWAIT)
        except OSError as error:  # gone, or so far behind that its channel is full
            self.kill(f"cannot reach it: {error}")
            raise ForkServerError(f"the worker fork server is gone: {error}") from error
        pending = PendingStart(now_ms)
        self._starts.append(pending)
        return pending

    def stuck(self, now_ms: int) -> str | None:
        """Why the server must be judged stuck: a start it has not answered, or a worker's
        end it has not reported, for ANSWER_TIMEOUT_MS; None while it keeps up."""
        timeout_ms = ANSWER_TIMEOUT_MS if self._heard else FIRST_ANSWER_TIMEOUT_MS
        if self._starts and now_ms - self._starts[0].asked_ms > timeout_ms:
            return f"no answer to a start in {now_ms - self._starts[0].asked_ms} ms"
        for pid, seen_ms in self._unreported.items():
            if now_ms - seen_ms > ANSWER_TIMEOUT_MS:
                return f"the end of worker pid {pid} unreported for {now_ms - seen_ms} ms"
        return None

    def collect(self, timeout_s: float) -> None:
        """Take what the server sent (waiting up to `timeout_s` for the first message)."""
        wait_s = timeout_s
        while not self._gone:
            readable, _, _ = select.select([self._channel], [], [], wait_s)
            if not readable:
                return
            wait_s = 0.0
            try:
                data = self._channel.recv(limits.FORK_SERVER_MESSAGE_BYTES_MAX)
            except OSError:
                data = b""
            if not data:
                self._lost("its channel closed")
                return
            self._heard = True
            try:
                message = json.loads(data)
            except ValueError:
                log.warning("the worker fork server sent %r", data[:64])
                continue
            if "exited" in message:
                self._exits[int(message["exited"])] = int(message["status"])
            elif self._starts:
                self._answered(self._starts.popleft(), message)
            else:
                log.warning("the worker fork server answered a start nobody asked for")

    def _answered(self, pending: PendingStart, message: dict[str, Any]) -> None:
        if "started" in message:
            pending.worker = ForkedWorker(self, int(message["started"]))
        else:
            pending.failure = str(message.get("failed", "refused"))

    def exit_status_of(self, pid: int, ended: bool | None) -> int | None:
        """The exit status of a worker it started, once ended (`ended`: what its pidfd says,
        None without one). A worker of a server that is gone is ended when its pidfd says so
        (without one: at once): nothing reaps or reports it any more, and it stops itself
        (its parent-death signal); its status is then unknown, reported as SIGKILL's."""
        if pid in self._exits:
            self._unreported.pop(pid, None)
            return self._exits.pop(pid)
        if self._gone:
            return None if ended is False else -signal.SIGKILL
        if ended:
            self._unreported.setdefault(pid, monotonic_ms())
        return None

    def _lost(self, why: str) -> None:
        if not self._gone:
            log.warning("worker fork server (pid %d) lost: %s; workers start as new "
                        "processes until it is replaced", self.process.pid, why)
        self._end(why)

    def _end(self, why: str) -> None:
        self._gone = True
        while self._starts:
            self._starts.popleft().failure = f"the worker fork server is gone ({why})"

    def kill(self, why: str) -> None:
        """Judged stuck or broken: SIGKILL it (it stops even when frozen) and answer every
        start still waiting with a failure, so they are made another way. Never waits."""
        self._lost(why)
        with contextlib.suppress(OSError):
            self.process.kill()

    def close(self, timeout_s: float = 5.0) -> None:
        """Close the channel; the server exits (its workers are stopped already). One that
        does not exit in `timeout_s` is killed, and not waited for any longer: a process
        stuck in uninterruptible I/O dies only when that I/O ends (Popen reaps it later)."""
        self._end("closed")
        self._channel.close()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout_s)
