"""`zlog rings list` / `zlog rings clean` on real ring directories: one a live process writes,
some whose writer closed them, some a SIGKILLed writer left with batches never flushed, with
their data dirs there or gone (zlog/shm_segments/ring_dirs.py has the rule)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.storage_helpers import make_batch
from zlog.shm_segments.log import PartitionLog
from zlog.shm_segments.log_config import LogConfig
from zlog.shm_segments.ring_dirs import OWNER_FILE

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG = LogConfig(ring_bytes=256 * 1024)
UNFLUSHED_APPENDS = 5


def _closed_log(data_dir: Path, ring_dir: Path) -> None:
    """A writer that appended and closed: everything is in the segment files."""
    with PartitionLog(data_dir, "t", 0, CONFIG, ring_dir=ring_dir) as log:
        log.append(make_batch(0))


def _killed_writer(data_dir: Path, ring_dir: Path) -> None:
    """A writer killed with batches still in its ring (it flushes at 200 kB only)."""
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.log_writer_main", str(data_dir),
         str(ring_dir), str(200 * 1024), "0"], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == "ready"
    for _ in range(UNFLUSHED_APPENDS):
        assert writer.stdout.readline().strip(), "the writer stopped appending"
    writer.send_signal(signal.SIGKILL)
    writer.wait(30)
    writer.stdout.close()


def _zlog_rings(shm: Path, *arguments: str) -> dict[str, str]:
    """Run the command; ring dir name -> what it printed about it."""
    completed = subprocess.run([sys.executable, "-m", "zlog.cli", "rings", *arguments,
                                "--shm-dir", str(shm)], capture_output=True, text=True,
                               cwd=REPO_ROOT, timeout=60, check=False)
    assert completed.returncode == 0, completed.stderr
    said: dict[str, str] = {}
    for line in completed.stdout.splitlines():
        for name in ("live", "closed-here", "closed-gone", "killed-here", "killed-gone"):
            if str(shm / name) in line:
                said[name] = line
    return said


def test_list_and_clean_keep_what_a_broker_still_needs(tmp_path: Path, shm_dir: Path) -> None:
    live = PartitionLog(tmp_path / "live", "t", 0, CONFIG, ring_dir=shm_dir / "live")
    try:
        live.append(make_batch(0))
        _closed_log(tmp_path / "closed-here", shm_dir / "closed-here")
        _closed_log(tmp_path / "closed-gone", shm_dir / "closed-gone")
        _killed_writer(tmp_path / "killed-here", shm_dir / "killed-here")
        _killed_writer(tmp_path / "killed-gone", shm_dir / "killed-gone")
        shutil.rmtree(tmp_path / "closed-gone")
        shutil.rmtree(tmp_path / "killed-gone")
        assert (shm_dir / "live" / OWNER_FILE).read_text() == str((tmp_path / "live").resolve())

        listed = _zlog_rings(shm_dir, "list")
        assert set(listed) == {"live", "closed-here", "closed-gone", "killed-here",
                               "killed-gone"}
        assert "kept: in use by pid" in listed["live"]
        assert "removable: not in use, nothing unflushed" in listed["closed-here"]
        assert "removable:" in listed["closed-gone"] and "is gone" in listed["closed-gone"]
        assert "kept:" in listed["killed-here"] and "start the broker" in listed["killed-here"]
        assert "kept:" in listed["killed-gone"] and "never flushed" in listed["killed-gone"]

        cleaned = _zlog_rings(shm_dir, "clean")
        assert cleaned["closed-here"].startswith("removed ")
        assert cleaned["closed-gone"].startswith("removed ")
        for kept in ("live", "killed-here", "killed-gone"):
            assert cleaned[kept].startswith("kept "), cleaned[kept]
        assert sorted(path.name for path in shm_dir.iterdir()) == [
            "killed-gone", "killed-here", "live"]

        discarded = _zlog_rings(shm_dir, "clean", "--discard-unflushed")
        assert discarded["killed-gone"].startswith("removed ")
        assert discarded["killed-here"].startswith("kept ")  # its data dir still wants them
        assert discarded["live"].startswith("kept ")
        assert sorted(path.name for path in shm_dir.iterdir()) == ["killed-here", "live"]
        live.append(make_batch(1))  # the live writer never noticed
    finally:
        live.close()

    # What the kept ring held reaches the segment files when its writer comes back.
    with PartitionLog(tmp_path / "killed-here", "kill", 0, CONFIG,
                      ring_dir=shm_dir / "killed-here") as reopened:
        assert reopened.log_end_offset >= UNFLUSHED_APPENDS
