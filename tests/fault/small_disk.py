"""A small tmpfs (zlog_testbed.small_disk) for one test, unmounted after it; a test run
without the root that mounting needs is skipped."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from zlog_testbed.small_disk import SmallDisk, mount_tmpfs, unmount


@contextlib.contextmanager
def small_disk(size_bytes: int) -> Iterator[SmallDisk]:
    """A tmpfs of `size_bytes` at a fresh directory, unmounted (with its files) afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (CI and `make test` run as root)")
    disk = mount_tmpfs(Path(tempfile.mkdtemp(prefix="zlog-small-disk-")), size_bytes)
    try:
        yield disk
    finally:
        unmount(disk)
        with contextlib.suppress(OSError):
            disk.path.rmdir()
