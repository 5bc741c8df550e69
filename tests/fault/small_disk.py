"""A real, small file system for disk-full tests: a tmpfs of a few MB, mounted for one test.

tmpfs enforces its size like any disk: writes past it fail with ENOSPC, and deleting a file
gives the space back. A ballast file fills most of it, so a test reaches "full" after a few
appends, and deleting the ballast is "an operator freed space".
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


class SmallDisk:
    def __init__(self, mount_point: Path, size_bytes: int) -> None:
        self.path = mount_point
        self.size_bytes = size_bytes
        self.ballast = mount_point / "ballast"

    def free_bytes(self) -> int:
        stat = os.statvfs(self.path)
        return stat.f_bavail * stat.f_frsize

    def fill_leaving(self, free_bytes: int) -> None:
        """Write ballast until about `free_bytes` are left."""
        size = max(self.free_bytes() - free_bytes, 0)
        with self.ballast.open("ab") as ballast:
            chunk = b"\0" * (1 << 20)
            while size > 0:
                written = ballast.write(chunk[:size])
                size -= written

    def free_ballast(self) -> None:
        self.ballast.unlink(missing_ok=True)


@contextlib.contextmanager
def small_disk(size_bytes: int) -> Iterator[SmallDisk]:
    """A tmpfs of `size_bytes` at a fresh directory, unmounted (with its files) afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (CI and `make test` run as root)")
    mount_point = Path(tempfile.mkdtemp(prefix="zlog-small-disk-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs",
                    str(mount_point)], check=True)
    try:
        yield SmallDisk(mount_point, size_bytes)
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)
        with contextlib.suppress(OSError):
            mount_point.rmdir()
