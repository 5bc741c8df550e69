"""Disk full (F8): each broker's data dir on a small tmpfs of its own, which a fault fills.

A run whose schedule has `disk-full` mounts a tmpfs of `DISK_BYTES` at every broker's data
dir before the brokers start (tmpfs takes memory only for what is stored in it, so the cap
costs nothing until it is used). The fault writes a ballast file into the target broker's
tmpfs until nothing is left, holds, and deletes it: the broker meets ENOSPC on its next
segment write, roll or index write, and on whatever else it writes there (docs/reliability.md
§9.3 says what that includes). The tests' `SmallDisk` does the filling, so the tests and the
harness fill a disk the same way.

Mounting needs root; a run asked for the fault without it stops at once and says so. At the
end each tmpfs is unmounted; a run that keeps its data copies what the tmpfs held (less the
ballast) back into the same directory first. Each tmpfs is mounted under the name
`zlj-disk-<pid>` of the harness process, so the tmpfs of a harness killed before its end are
found in /proc/mounts and unmounted when the next run mounts its own (`remove_stale_disks`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

import psutil

from zlog_testbed.small_disk import BALLAST, SmallDisk, mount_tmpfs, unmount

DISK_BYTES: Final = 256 << 20  # per broker: far above what a run stores
SOURCE_PREFIX: Final = "zlj-disk-"
_SOURCE = re.compile(r"^zlj-disk-(\d+)$")


def stale_disk_mounts(mounts: str, alive: Callable[[int], bool]) -> list[str]:
    """The mount points of /proc/mounts text whose tmpfs a harness process that is not
    `alive` any more mounted."""
    stale = []
    for line in mounts.splitlines():
        fields = line.split()
        found = _SOURCE.match(fields[0]) if len(fields) >= 3 and fields[2] == "tmpfs" else None
        if found is not None and not alive(int(found.group(1))):
            stale.append(fields[1].replace("\\040", " "))
    return stale


def remove_stale_disks() -> list[str]:
    """Unmount the small disks a harness killed before its end left behind."""
    stale = stale_disk_mounts(Path("/proc/mounts").read_text(encoding="utf-8"),
                              psutil.pid_exists)
    for mount_point in stale:
        subprocess.run(["umount", "-l", mount_point], check=False)
    return stale


class SmallDisks:
    """A tmpfs at each of `data_dirs` (node -> directory), mounted on construction."""

    def __init__(self, data_dirs: Mapping[int, Path], size_bytes: int = DISK_BYTES) -> None:
        if os.geteuid() != 0:
            raise PermissionError("the disk-full fault puts each broker's data dir on a tmpfs "
                                  "of its own, and mounting one needs root")
        self.disks: dict[int, SmallDisk] = {}
        remove_stale_disks()
        try:
            for node, directory in data_dirs.items():
                self.disks[node] = mount_tmpfs(directory, size_bytes,
                                               f"{SOURCE_PREFIX}{os.getpid()}")
        except BaseException:
            self.close(keep=False)
            raise

    def fill(self, node: int) -> dict[str, int]:
        """Fill broker `node`'s disk to the last byte; what was written and what is left."""
        disk = self.disks[node]
        written = disk.fill_leaving(0)
        return {"ballast_bytes": written, "free_bytes": disk.free_bytes()}

    def free(self, node: int) -> None:
        self.disks[node].free_ballast()

    def close(self, keep: bool) -> None:
        """Unmount every disk (the brokers are stopped); with `keep`, what each held stays in
        its directory, on the disk below."""
        for disk in self.disks.values():
            kept = disk.path.with_name(disk.path.name + ".kept")
            try:
                if keep:  # the supervisor's socket is a file no copy can open
                    shutil.copytree(disk.path, kept, symlinks=True,
                                    ignore=shutil.ignore_patterns(BALLAST, "*.sock"))
            finally:
                unmount(disk)
            if keep:
                shutil.copytree(kept, disk.path, symlinks=True, dirs_exist_ok=True)
                shutil.rmtree(kept)
        self.disks.clear()
