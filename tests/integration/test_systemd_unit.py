"""systemd/zlog.service as systemd reads it: `systemd-analyze verify` finds nothing to say."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from zlog_testbed.broker_process import REPO_ROOT

UNIT = REPO_ROOT / "systemd" / "zlog.service"
INSTALLED_ZLOG = "/opt/zlog/bin/zlog"  # the virtualenv the unit's header installs zlog into


def test_the_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    """Verify a copy of the unit whose only difference is the program ExecStart= runs.

    verify checks that this program exists and is executable, and a test machine has no
    /opt/zlog, so the copy names the zlog script of the virtualenv running these tests: the same
    console script that `pip install` puts into /opt/zlog/bin. The copy keeps the unit's name,
    which verify derives from the file name. verify exits 0 after an unknown key or a value it
    cannot parse (it ignores the line and says so), so any line about the unit fails too.
    """
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    zlog_script = Path(sys.prefix) / "bin" / "zlog"
    assert zlog_script.is_file(), f"{sys.prefix} has no zlog script: pip install -e ."
    text = UNIT.read_text()
    exec_start = f"ExecStart={INSTALLED_ZLOG} "
    assert text.count(exec_start) == 1, f"the unit should run {INSTALLED_ZLOG} once"
    copy = tmp_path / UNIT.name
    copy.write_text(text.replace(exec_start, f"ExecStart={zlog_script} "))

    completed = subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True,
                               timeout=60, check=False)
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output
    about_the_unit = [line for line in output.splitlines() if UNIT.name in line]
    assert about_the_unit == [], output
