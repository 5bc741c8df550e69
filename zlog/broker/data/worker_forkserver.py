"""The process that starts a broker's partition workers by forking itself.

A worker started as a new interpreter spends most of its start importing (numpy, pyzmq, the
codecs, the data plane): 0.35 s on an idle core, over a second on a busy host, and while a
killed worker is being replaced its partitions are unavailable and the followers it hosted
hold back `acks=all` writes. This process imports the worker once, when the broker starts,
and forks a ready copy for each start; the copy only parses its arguments and runs
`worker.main`. The supervisor keeps the processes' lifecycle: it asks for starts, signals
the workers directly by pid, and hears each exit from here (only the parent can reap a
process), over one SOCK_SEQPACKET socket pair whose messages are JSON objects:

    supervisor -> here:  {"argv": [...], "env": {...}}          start a worker
    here -> supervisor:  {"started": pid} | {"failed": "why"}   the answer to a start
                         {"exited": pid, "status": status}      a worker ended (status as
                                                                 Popen.returncode: -signal)

Dying with the supervisor: the kernel kills this process when the supervisor dies
(PR_SET_PDEATHSIG), and each worker asks for SIGTERM when its own parent, this process, dies
(`worker.stop_with_parent`), so a supervisor killed with SIGKILL still takes its workers
with it. When the supervisor closes the socket (a clean stop, after its workers stopped),
this process exits.

    python -m zlog.broker.data.worker_forkserver --channel-fd N
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import sys
import traceback
from collections.abc import Sequence
from typing import Any, Final

from zlog import limits
from zlog.broker.data import worker

_PR_SET_PDEATHSIG: Final = 1  # <linux/prctl.h>


def exit_status(wait_status: int) -> int:
    """A waitpid status as Popen.returncode reports it: the exit code, or -signal."""
    if os.WIFSIGNALED(wait_status):
        return -os.WTERMSIG(wait_status)
    return os.waitstatus_to_exitcode(wait_status)


def _die_with_parent() -> None:
    # Elsewhere than Linux there is none: the workers' supervisor-silence check stops them.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def _send(channel: socket.socket, message: dict[str, Any]) -> None:
    # A supervisor that is gone: the socket's end says so at the next receive.
    with contextlib.suppress(OSError):
        channel.send(json.dumps(message).encode())


def _run_worker(channel: socket.socket, wake_fds: tuple[int, int], argv: list[str],
                env: dict[str, str], server_pid: int) -> None:
    """In the forked child: become a worker as `python -m zlog.broker.data.worker` would."""
    code = 1
    try:
        # A worker ends with its fork server (its parent-death signal), which the supervisor
        # sees and answers by starting it again as a new process. A server that died between
        # the fork and the signal's request would leave this worker running as init's child,
        # where neither the supervisor's pool nor the signal reaches it: end now instead.
        worker.stop_with_parent()
        if os.getppid() != server_pid:
            os._exit(1)
        os.setpgid(0, 0)  # its own process group, as the supervisor starts workers
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        channel.close()
        for fd in wake_fds:
            os.close(fd)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = [worker.__file__, *argv]
        code = worker.main(argv)
    except SystemExit as stop:  # argparse refusing the arguments
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:  # a worker must never return into the server's loop
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)


def _reap(channel: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(channel, {"exited": pid, "status": exit_status(status)})


def _start(channel: socket.socket, wake_fds: tuple[int, int], request: dict[str, Any]) -> None:
    argv, env = request.get("argv"), request.get("env")
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)
            and isinstance(env, dict)):
        _send(channel, {"failed": "a start request needs argv (strings) and env"})
        return
    server_pid = os.getpid()
    try:
        pid = os.fork()
    except OSError as error:
        _send(channel, {"failed": f"fork: {error.strerror}"})
        return
    if pid == 0:
        _run_worker(channel, wake_fds, argv, {str(k): str(v) for k, v in env.items()},
                    server_pid)
    _send(channel, {"started": pid})


def serve(channel: socket.socket) -> None:
    """Start workers on request and report their exits, until the supervisor closes."""
    wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)  # wakes the select below
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the supervisor's
    while True:
        readable, _, _ = select.select([channel.fileno(), wake_read], [], [])
        if wake_read in readable:
            while True:
                try:
                    if not os.read(wake_read, 4096):
                        break
                except BlockingIOError:
                    break
        _reap(channel)
        if channel.fileno() in readable:
            try:
                data = channel.recv(limits.FORK_SERVER_MESSAGE_BYTES_MAX)
            except OSError:
                data = b""
            if not data:
                return  # the supervisor closed its end (or died): nothing more to start
            try:
                request = json.loads(data)
            except ValueError:
                _send(channel, {"failed": "a start request is a JSON object"})
                continue
            if isinstance(request, dict):
                _start(channel, (wake_read, wake_write), request)
            else:
                _send(channel, {"failed": "a start request is a JSON object"})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zlog.broker.data.worker_forkserver")
    parser.add_argument("--channel-fd", type=int, required=True)
    args = parser.parse_args(argv)
    _die_with_parent()
    channel = socket.socket(fileno=args.channel_fd)
    serve(channel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
