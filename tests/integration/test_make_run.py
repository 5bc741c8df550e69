"""`make run` as the README promises it: the runtime install only, and Ctrl-C exits 0.

The install test runs the real Makefile against a stand-in virtualenv whose pip and `zlog` only
record how they were called, so it checks what make decides to install without a network or a
real pip. The Ctrl-C test runs the real Makefile, the real broker and a real terminal.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from zlog_testbed.broker_process import REPO_ROOT, START_TIMEOUT_S
from zlog_testbed.free_ports import free_port
from zlog_testbed.waiting import wait_until

BANNER = b" serving: control "  # printed by the supervisor once every worker said hello
STOP_TIMEOUT_S = 20.0
CTRL_C = b"\x03"  # the terminal's VINTR character: the line discipline turns it into SIGINT
CTRL_Z = b"\x1a"  # VSUSP: SIGTSTP
READ_CHUNK_BYTES = 65_536
RECORD = 'echo "$(basename "$0") $*" >> "$(dirname "$0")/../calls"'
# `python -m pip ...` is recorded; any other use of python is the real one.
STAND_IN_PYTHON = (f'#!/bin/sh\nif [ "$1" = -m ]; then {RECORD}; exit 0; fi\n'
                   f'exec {sys.executable} "$@"\n')
STAND_IN_ZLOG = f"#!/bin/sh\n{RECORD}\n"
# Make the pseudo-terminal (our stdin) the controlling terminal of a new session, as a login
# does, then become make: make then leads the terminal's foreground process group, as it does
# when a shell starts it, and Ctrl-C signals that group.
LOGIN_THEN_EXEC = "import os, sys; os.login_tty(0); os.execv(sys.argv[1], sys.argv[1:])"


def _make() -> str:
    make = shutil.which("make")
    if make is None:
        pytest.skip("GNU make is not installed")
    return make


def _environment(**variables: str) -> dict[str, str]:
    """Ours, with `variables`, minus what an outer make (`make test`) passes to a sub-make."""
    inherited = {name: value for name, value in os.environ.items()
                 if name not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}}
    return {**inherited, **variables}


@pytest.fixture
def stand_in_venv(tmp_path: Path) -> Path:
    """A directory make takes for the virtualenv: pip and `zlog` append their argv to `calls`."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name, text in (("python", STAND_IN_PYTHON), ("zlog", STAND_IN_ZLOG)):
        script = venv / "bin" / name
        script.write_text(text)
        script.chmod(0o755)
    return venv


def _make_target(venv: Path, target: str) -> list[str]:
    """Run `make <target>` with the stand-in; the calls it made, in order (consumed)."""
    completed = subprocess.run(  # in a session of its own: no terminal to take
        [_make(), "--no-print-directory", "-C", str(REPO_ROOT), f"VENV={venv}", target],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False,
        env=_environment(), start_new_session=True)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    calls_file = venv / "calls"
    calls = calls_file.read_text().splitlines() if calls_file.exists() else []
    calls_file.unlink(missing_ok=True)
    return calls


def test_make_run_installs_only_what_running_needs_and_reuses_the_dev_install(
    stand_in_venv: Path,
) -> None:
    pip_upgrade = "python -m pip install --quiet --upgrade pip"
    assert _make_target(stand_in_venv, "run") == [
        pip_upgrade, "python -m pip install --quiet -e .", "zlog serve"]
    compile_all = "python -m compileall -q -j 0 zlog zlog_testbed zlog_jepsen tests bench"
    # Then the tests' setup adds the dev extra (and byte-compiles) ...
    assert _make_target(stand_in_venv, "setup") == [
        pip_upgrade, "python -m pip install --quiet -e .[dev]", compile_all]
    # ... after which running installs nothing, and neither does setting up again (it only
    # byte-compiles, which skips every module whose bytecode is current).
    assert _make_target(stand_in_venv, "run") == ["zlog serve"]
    assert _make_target(stand_in_venv, "setup") == [compile_all]


class Terminal:
    """The master side of a pseudo-terminal: what was written to it so far, and typing."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        self.output = bytearray()

    def drain(self) -> None:
        """Read what is there without blocking (a full pty buffer would block the writers)."""
        while select.select([self.master], [], [], 0)[0]:
            try:
                chunk = os.read(self.master, READ_CHUNK_BYTES)
            except OSError:  # EIO: no process has the slave open any more
                return
            if not chunk:
                return
            self.output += chunk

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    def close(self) -> None:
        for fd in (self.master, self.slave):
            with contextlib.suppress(OSError):
                os.close(fd)


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    terminal = Terminal()
    try:
        yield terminal
    finally:
        terminal.close()


def _stop_all(family: list[psutil.Process]) -> None:
    """Kill what is left of a failed run: make, the broker, its workers."""
    for member in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()
    psutil.wait_procs(family, timeout=STOP_TIMEOUT_S)


def test_ctrl_c_in_a_terminal_stops_make_run_with_status_0(
    terminal: Terminal, shm_dir: Path,
) -> None:
    """Unless the broker has the terminal to itself, make dies of the SIGINT too: status 130.

    A terminal's Ctrl-C signals its whole foreground process group, and GNU make, once its
    children are done, re-raises a SIGINT it received on itself, however cleanly the broker
    stopped. Ctrl-Z first: the Makefile has it ignored, else the stopped broker would hold the
    SIGINT and make would wait forever. The run uses the virtualenv running these tests (VENV=),
    with make told that the install stamp is current (-o), so nothing is installed; the broker
    gets a private data dir, ring dir and port through ZLOG_* variables.
    """
    venv = Path(sys.prefix)
    assert (venv / "bin" / "zlog").is_file(), f"{venv} has no zlog script: pip install -e ."
    data_dir = Path(tempfile.mkdtemp(prefix="zm-", dir="/tmp"))  # short: an ipc socket lives here
    environment = _environment(ZLOG_DATA_DIR=str(data_dir), ZLOG_RING_DIR=str(shm_dir),
                               ZLOG_LISTEN=f"tcp://127.0.0.1:{free_port()}", ZLOG_WORKERS="1")
    command = [sys.executable, "-c", LOGIN_THEN_EXEC, _make(), "--no-print-directory",
               "-C", str(REPO_ROOT), f"VENV={venv}", "-o", f"{venv}/.installed-run", "run"]
    make = subprocess.Popen(command, stdin=terminal.slave, stdout=terminal.slave,
                            stderr=terminal.slave, env=environment)
    family = [psutil.Process(make.pid)]  # make, then the broker and its workers
    try:
        def banner_shown() -> bool:
            terminal.drain()
            return BANNER in terminal.output or make.poll() is not None

        wait_until(banner_shown, START_TIMEOUT_S, interval_s=0.02, what="the serving banner")
        assert make.poll() is None, terminal.output.decode(errors="replace")
        family += family[0].children(recursive=True)
        terminal.type(CTRL_Z + CTRL_C)

        def make_exited() -> bool:
            terminal.drain()
            return make.poll() is not None

        wait_until(make_exited, STOP_TIMEOUT_S, interval_s=0.02, what="make run to exit")
        terminal.drain()
        output = terminal.output.decode(errors="replace")
        assert make.returncode == 0, output
        assert "make: ***" not in output, output
        assert "SIGINT: stopping" in output, output  # the broker's graceful stop, not a kill
        _, alive = psutil.wait_procs(family[1:], timeout=STOP_TIMEOUT_S)
        assert alive == [], f"left running: {alive}"
    finally:
        _stop_all(family)
        make.wait(timeout=STOP_TIMEOUT_S)
        shutil.rmtree(data_dir, ignore_errors=True)
