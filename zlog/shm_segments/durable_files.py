"""Small state files replaced whole and durably: a crash leaves the old file or the new one.

Kafka's CheckpointFile does it this way: write a temporary file, fsync it, rename it over the
old one, fsync the directory (so the rename itself survives a power loss).
"""

from __future__ import annotations

import os
from pathlib import Path


def replace_durably(path: Path, data: bytes) -> None:
    temporary = path.with_suffix(".tmp")
    with temporary.open("wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    fsync_directory(path.parent)


def fsync_directory(directory: Path) -> None:
    """Make a file created or renamed into `directory` durable (the rename is not, by
    itself)."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
