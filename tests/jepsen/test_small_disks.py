"""The disk-full fault's disks: real tmpfs mounts that fill to ENOSPC and come back.

Spec: docs/reliability.md §9.3 (disk-full). Needs root to mount, as the fault does.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from zlog_jepsen.small_disks import SOURCE_PREFIX, SmallDisks, stale_disk_mounts
from zlog_testbed.small_disk import mount_tmpfs

SIZE_BYTES = 4 << 20

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


def _write(path: Path, size: int) -> OSError | None:
    try:
        with path.open("wb") as file:
            file.write(b"x" * size)
    except OSError as error:
        return error
    return None


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory whose data dirs are short enough for a unix socket's path (108 bytes),
    as the supervisor's `ipc://` socket in its data dir is; pytest's own tmp_path under
    pytest-xdist is not."""
    path = Path(tempfile.mkdtemp(prefix="zsd-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_a_filled_disk_refuses_writes_until_freed_and_the_other_stays_writable(
        short_dir: Path) -> None:
    """Kept at the end: what the disk held, less the ballast and the socket."""
    dirs = {1: short_dir / "broker-1" / "data", 2: short_dir / "broker-2" / "data"}
    disks = SmallDisks(dirs, SIZE_BYTES)
    listening = socket.socket(socket.AF_UNIX)  # as the supervisor's, which no copy opens
    try:
        listening.bind(str(dirs[1] / ".zlog-supervisor.sock"))
        (dirs[1] / "stored.log").write_bytes(b"kept")
        filled = disks.fill(1)
        assert filled["free_bytes"] == 0 and filled["ballast_bytes"] > SIZE_BYTES // 2
        refused = _write(dirs[1] / "next.log", 1 << 16)
        assert refused is not None and refused.errno == errno.ENOSPC
        assert (dirs[1] / "stored.log").read_bytes() == b"kept"
        assert _write(dirs[2] / "next.log", 1 << 16) is None  # another broker's disk
        disks.free(1)
        assert _write(dirs[1] / "next.log", 1 << 16) is None
    finally:
        disks.close(keep=True)
        listening.close()
    assert not os.path.ismount(dirs[1]) and not os.path.ismount(dirs[2])
    assert sorted(p.name for p in dirs[1].iterdir()) == ["next.log", "stored.log"]
    assert (dirs[1] / "stored.log").read_bytes() == b"kept"


def test_a_run_that_keeps_nothing_leaves_empty_mount_points(tmp_path: Path) -> None:
    data = tmp_path / "broker-1" / "data"
    disks = SmallDisks({1: data}, SIZE_BYTES)
    assert os.path.ismount(data)
    (data / "stored.log").write_bytes(b"gone")
    disks.fill(1)
    disks.close(keep=False)
    assert not os.path.ismount(data) and list(data.iterdir()) == []


def test_stale_disk_mounts_are_the_tmpfs_of_dead_harness_processes() -> None:
    mounts = ("zlj-disk-41 /runs/a\\040b/broker-1/data tmpfs rw,size=262144k 0 0\n"
              "zlj-disk-77 /runs/c/broker-1/data tmpfs rw 0 0\n"
              "tmpfs /dev/shm tmpfs rw 0 0\n"
              "zlj-disk-41 /elsewhere ext4 rw 0 0\n")
    assert stale_disk_mounts(mounts, lambda pid: pid == 77) == ["/runs/a b/broker-1/data"]


def test_the_disks_of_a_killed_harness_are_unmounted_by_the_next_run(tmp_path: Path) -> None:
    """A harness killed with SIGKILL leaves its tmpfs mounted over its run's data dirs."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    leftover = tmp_path / "old-run" / "broker-1" / "data"
    mount_tmpfs(leftover, SIZE_BYTES, f"{SOURCE_PREFIX}{dead.pid}")
    try:
        assert os.path.ismount(leftover)
        disks = SmallDisks({1: tmp_path / "new-run" / "broker-1" / "data"}, SIZE_BYTES)
        disks.close(keep=False)
        assert not os.path.ismount(leftover)
    finally:
        if os.path.ismount(leftover):
            subprocess.run(["umount", "-l", str(leftover)], check=False)
