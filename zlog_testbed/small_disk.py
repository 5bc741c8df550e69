"""A real, small file system to fill: a tmpfs of a few MB.

tmpfs enforces its size like any disk: writes past it fail with ENOSPC, and deleting a file
gives the space back. A ballast file fills most of it, so a broker reaches "full" after a few
appends, and deleting the ballast is "an operator freed space". The disk-full tests mount one
per test (tests/fault/small_disk.py); the fault harness mounts its brokers' data dirs on them
(zlog_jepsen/small_disks.py).
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

BALLAST = "ballast"


class SmallDisk:
    def __init__(self, mount_point: Path, size_bytes: int) -> None:
        self.path = mount_point
        self.size_bytes = size_bytes
        self.ballast = mount_point / BALLAST

    def free_bytes(self) -> int:
        stat = os.statvfs(self.path)
        return stat.f_bavail * stat.f_frsize

    def fill_leaving(self, free_bytes: int) -> int:
        """Write ballast until about `free_bytes` are left (all of it: as far as it goes);
        the ballast bytes written."""
        size = max(self.free_bytes() - free_bytes, 0)
        written = 0
        with self.ballast.open("ab", buffering=0) as ballast:  # nothing left to flush
            chunk = b"\0" * (1 << 20)
            while size > written:
                try:
                    written += ballast.write(chunk[:size - written]) or 0
                except OSError as error:  # full before the estimate: as full as it gets
                    if error.errno != errno.ENOSPC:
                        raise
                    break
        return written

    def free_ballast(self) -> None:
        self.ballast.unlink(missing_ok=True)


def mount_tmpfs(mount_point: Path, size_bytes: int, source: str = "tmpfs") -> SmallDisk:
    """A tmpfs of `size_bytes` at `mount_point` (made if missing); needs root. `source` is
    the name /proc/mounts shows for it (free text for a tmpfs)."""
    mount_point.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", source,
                    str(mount_point)], check=True)
    return SmallDisk(mount_point, size_bytes)


def unmount(disk: SmallDisk) -> None:
    """Unmount `disk` (lazily, should a process still hold a file): its files are gone."""
    subprocess.run(["umount", "-l", str(disk.path)], check=False)
