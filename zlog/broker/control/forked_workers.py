"""The supervisor's side of the worker fork server (zlog.broker.data.worker_forkserver).

`WorkerForkServer` starts the server, asks it for worker starts and collects the exits it
reports; `ForkedWorker` is one started worker, with the few calls of `subprocess.Popen` the
worker pool makes (pid, poll, wait, send_signal, kill, returncode), so the pool treats a
forked worker and a worker started as a new interpreter alike. A fork server that cannot be
started, or has died, makes the pool start workers as new interpreters: a slower start, never
none.
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
from collections.abc import Mapping, Sequence
from typing import Any, Final

log = logging.getLogger(__name__)

FORKSERVER_MODULE: Final = "zlog.broker.data.worker_forkserver"
START_ANSWER_TIMEOUT_S: Final = 10.0
"""How long a start waits for the server's answer (a fork takes milliseconds; a starved host
may take longer) before the server is judged broken and the start is made without it."""
MESSAGE_BYTES_MAX: Final = 1 << 20
"""The largest message on the channel, both ways: a start request carries an environment."""


class ForkServerError(Exception):
    """The fork server cannot start a worker (gone, or refused): start it another way."""


class ForkedWorker:
    """A worker started by the fork server: what the pool needs of a Popen."""

    def __init__(self, server: WorkerForkServer, pid: int) -> None:
        self._server = server
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._server.collect(0.0)
            self.returncode = self._server.exit_status_of(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise subprocess.TimeoutExpired(f"worker pid {self.pid}", timeout or 0.0)
            self._server.collect(0.1 if remaining is None else min(remaining, 0.1))
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


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
        self._answers: list[dict[str, Any]] = []
        self._gone = False

    @property
    def alive(self) -> bool:
        return not self._gone and self.process.poll() is None

    def fileno(self) -> int:
        """Readable when the server reported something (an exit): poll it to wake at once."""
        return self._channel.fileno()

    def start(self, argv: Sequence[str], environ: Mapping[str, str]) -> ForkedWorker:
        if not self.alive:
            raise ForkServerError("the worker fork server is not running")
        try:
            self._channel.send(json.dumps({"argv": list(argv), "env": dict(environ)}).encode())
        except OSError as error:
            self._lost(f"cannot reach it: {error}")
            raise ForkServerError(f"the worker fork server is gone: {error}") from error
        deadline = time.monotonic() + START_ANSWER_TIMEOUT_S
        while not self._answers:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._gone:
                self._lost("no answer to a start")
                raise ForkServerError("the worker fork server did not answer a start")
            self.collect(remaining)
        answer = self._answers.pop(0)
        if "started" in answer:
            return ForkedWorker(self, int(answer["started"]))
        raise ForkServerError(str(answer.get("failed", "refused")))

    def collect(self, timeout_s: float) -> None:
        """Take what the server sent (waiting up to `timeout_s` for the first message)."""
        wait_s = timeout_s
        while not self._gone:
            readable, _, _ = select.select([self._channel], [], [], wait_s)
            if not readable:
                return
            wait_s = 0.0
            try:
                data = self._channel.recv(MESSAGE_BYTES_MAX)
            except OSError:
                data = b""
            if not data:
                self._lost("its channel closed")
                return
            try:
                message = json.loads(data)
            except ValueError:
                log.warning("the worker fork server sent %r", data[:64])
                continue
            if "exited" in message:
                self._exits[int(message["exited"])] = int(message["status"])
            else:
                self._answers.append(message)

    def exit_status_of(self, pid: int) -> int | None:
        """The exit status of a worker it started, once ended. A worker of a server that died
        is counted as ended: nothing reaps it or reports it any more, and it stops itself
        (its parent-death signal)."""
        if pid in self._exits:
            return self._exits.pop(pid)
        if self._gone:
            return -signal.SIGKILL
        return None

    def _lost(self, why: str) -> None:
        if not self._gone:
            log.warning("worker fork server (pid %d) lost: %s; workers start as new "
                        "processes until it is replaced", self.process.pid, why)
        self._gone = True

    def close(self, timeout_s: float = 5.0) -> None:
        """Close the channel; the server exits (its workers are stopped already)."""
        self._gone = True
        self._channel.close()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
