"""`make run` as the README promises it: the runtime install only.

The install test runs the real Makefile against a stand-in virtualenv whose pip and `zlog` only
record how they were called, so it checks what make decides to install without a network or a
real pip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.broker_fixtures import REPO_ROOT

RECORD = 'echo "$(basename "$0") $*" >> "$(dirname "$0")/../calls"'
# `python -m pip ...` is recorded; any other use of python is the real one.
STAND_IN_PYTHON = (f'#!/bin/sh\nif [ "$1" = -m ]; then {RECORD}; exit 0; fi\n'
                   f'exec {sys.executable} "$@"\n')
STAND_IN_ZLOG = f"#!/bin/sh\n{RECORD}\n"


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
    # Then the tests' setup adds the dev extra ...
    assert _make_target(stand_in_venv, "setup") == [
        pip_upgrade, "python -m pip install --quiet -e .[dev]"]
    # ... after which running installs nothing, and neither does setting up again.
    assert _make_target(stand_in_venv, "run") == ["zlog serve"]
    assert _make_target(stand_in_venv, "setup") == []
