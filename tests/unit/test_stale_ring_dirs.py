"""The ring dirs a killed test or harness process left in shared memory are removed by the
next broker a test starts; those of live processes, and any other directory, stay."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from zlog_testbed.broker_process import RING_DIR_PREFIX, _remove_stale_ring_dirs


def test_only_the_ring_dirs_of_dead_processes_are_removed(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"{RING_DIR_PREFIX}{dead.pid}-abc"
    live = tmp_path / f"{RING_DIR_PREFIX}{os.getpid()}-def"
    unnamed = tmp_path / f"{RING_DIR_PREFIX}xyz"
    for directory in (stale, live, unnamed):
        directory.mkdir()
        (directory / "t-0.ring").write_bytes(b"ring")
    _remove_stale_ring_dirs(tmp_path)
    assert not stale.exists()
    assert live.is_dir() and unnamed.is_dir()
