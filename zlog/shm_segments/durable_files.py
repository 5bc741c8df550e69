"""Small state files replaced whole: a crash leaves the old file or the new one, never a torn
one (write a temporary file, rename it over the old one).

`replace_durably` is Kafka's CheckpointFile: the temporary file is fsynced before the rename and
the directory after it, so the new file survives a power loss too. `replace_atomically` skips
both fsyncs, for state that only has to outlive a killed process (the page cache keeps it) and
whose loss in a power cut is safe (it is rebuilt, or an older copy errs on the safe side).
"""

from __future__ import annotations

import os
from pathlib import Path


def replace_durably(path: Path, data: bytes) -> None:
    replace_atomically(path, data, durable=True)


def replace_atomically(path: Path, data: bytes, *, durable: bool = False) -> None:
    """OSError (a full disk, say) leaves the old file as it was, and no temporary behind."""
    temporary = path.with_name(path.name + ".tmp")
    try:
        with temporary.open("wb") as file:
            file.write(data)
            if durable:
                file.flush()
                os.fsync(file.fileno())
    except OSError:
        temporary.unlink(missing_ok=True)  # a partial file only takes space
        raise
    os.replace(temporary, path)
    if durable:
        fsync_directory(path.parent)


def fsync_directory(directory: Path) -> None:
    """Make a file created or renamed into `directory` durable (the rename is not, by
    itself)."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
