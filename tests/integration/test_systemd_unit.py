"""systemd/'s units as systemd reads them: `systemd-analyze verify` finds nothing to say.

systemd/zlog.service runs the one broker of a host; the template beside it, zlog@.service,
the brokers of a staging host (zlog@NAME). Both are checked the same way, and the template
may differ from the single unit only where an instance must: its name, config file, data dir.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from zlog_testbed.broker_process import REPO_ROOT

UNITS_DIR = REPO_ROOT / "systemd"
SINGLE_UNIT = UNITS_DIR / "zlog.service"
TEMPLATE_UNIT = UNITS_DIR / "zlog@.service"
INSTALLED_ZLOG = "/opt/zlog/bin/zlog"  # the virtualenv the units' headers install zlog into
# The settings an instance has of its own (key -> its value in the template).
INSTANCE_SETTINGS = {
    "Description": "zlog distributed log broker %i",
    "ExecStart": f"{INSTALLED_ZLOG} serve --config /etc/zlog/%i.toml",
    "StateDirectory": "zlog/%i",
    "Environment": "ZLOG_DATA_DIR=/var/lib/zlog/%i",
    "ReadWritePaths": "/var/lib/zlog/%i",
}


def _units() -> list[Path]:
    return sorted(UNITS_DIR.glob("*.service"))


def _settings(unit: Path) -> list[tuple[str, str, str]]:
    """(section, key, value) of each setting line, in order (comments and blanks dropped)."""
    section, settings = "", []
    for raw_line in unit.read_text().splitlines():
        line = raw_line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line
            continue
        key, _, value = line.partition("=")
        settings.append((section, key, value))
    return settings


def test_every_unit_is_checked() -> None:
    assert _units() == [SINGLE_UNIT, TEMPLATE_UNIT]


@pytest.mark.parametrize("unit", _units(), ids=lambda path: path.name)
def test_the_unit_passes_systemd_analyze_verify(unit: Path, tmp_path: Path) -> None:
    """Verify a copy of the unit whose only difference is the program ExecStart= runs.

    verify checks that this program exists and is executable, and a test machine has no
    /opt/zlog, so the copy names the zlog script of the virtualenv running these tests: the same
    console script that `pip install` puts into /opt/zlog/bin. The copy keeps the unit's name,
    which verify derives from the file name; a template is verified as itself and as an
    instance of it (zlog@b1), where its specifiers are filled in. verify exits 0 after an
    unknown key or a value it cannot parse (it ignores the line and says so), so any line about
    the unit fails too.
    """
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd; "
                    "`make test` installs it when root)")
    zlog_script = Path(sys.prefix) / "bin" / "zlog"
    assert zlog_script.is_file(), f"{sys.prefix} has no zlog script: pip install -e ."
    text = unit.read_text()
    exec_start = f"ExecStart={INSTALLED_ZLOG} "
    assert text.count(exec_start) == 1, f"the unit should run {INSTALLED_ZLOG} once"
    names = [unit.name] + ([unit.name.replace("@.", "@b1.")] if "@." in unit.name else [])
    for name in names:
        copy = tmp_path / name
        copy.write_text(text.replace(exec_start, f"ExecStart={zlog_script} "))
        completed = subprocess.run([analyze, "verify", str(copy)], capture_output=True,
                                   text=True, timeout=60, check=False)
        output = completed.stdout + completed.stderr
        assert completed.returncode == 0, output
        about_the_unit = [line for line in output.splitlines() if name in line]
        assert about_the_unit == [], output


def test_the_template_differs_from_the_single_unit_only_per_instance() -> None:
    """A setting changed in one unit and forgotten in the other fails here."""
    single, template = _settings(SINGLE_UNIT), _settings(TEMPLATE_UNIT)
    assert [(section, key) for section, key, _ in single] == [
        (section, key) for section, key, _ in template]
    differing = {key: template_value
                 for (_, key, single_value), (_, _, template_value) in zip(single, template,
                                                                           strict=True)
                 if single_value != template_value}
    assert differing == INSTANCE_SETTINGS
