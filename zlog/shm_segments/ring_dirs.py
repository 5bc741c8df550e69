"""The ring directories of a host: whose each is, what it holds, which can go (`zlog rings`).

Rings are memory (tmpfs), and a directory of them outlives its broker on purpose: a killed
worker's acknowledged batches wait there until the next writer flushes them into the segment
files. So nothing removes them by itself, and a host where brokers came and went (tests,
benchmarks, a moved data dir) keeps rings nobody will open again. Each ring directory names
its data dir in a small file (OWNER_FILE, written when a partition opens there), which is how
`zlog rings list` tells whose it is.

A ring directory can go when no process writes to any of its rings (the writer's lock, which a
killed process loses) and removing it loses nothing: every batch of every ring is in its
segment files already. A ring with batches not flushed yet is kept while its data dir exists
(start the broker: it flushes them); when that data dir is gone, or the directory has no owner
file, those batches have nowhere to go and only `discard_unflushed` removes them.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from zlog.errors import ZlogError
from zlog.shm_segments.ring import RingLockedError, RingWriter
from zlog.shm_segments.ring_header import (
    HEADER_BYTES,
    header_is_blank,
    read_state,
    read_writer_pid,
)

OWNER_FILE: Final = ".zlog-data-dir"
RING_SUFFIX: Final = ".ring"


def claim(ring_dir: Path, data_dir: Path) -> None:
    """Name `data_dir` as the owner of `ring_dir` (best effort: a ring opens without it)."""
    owner = str(data_dir.resolve())
    path = ring_dir / OWNER_FILE
    with contextlib.suppress(OSError):
        if path.read_text(encoding="utf-8") == owner:
            return
    temporary = path.with_name(f"{OWNER_FILE}.{os.getpid()}")
    with contextlib.suppress(OSError):
        temporary.write_text(owner, encoding="utf-8")
        os.replace(temporary, path)


def owner_of(ring_dir: Path) -> Path | None:
    try:
        text = (ring_dir / OWNER_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return Path(text) if text else None


@dataclass(frozen=True, slots=True)
class RingFile:
    path: Path
    allocated_bytes: int  # memory it takes (a ring's file is sparse until written)
    unflushed_bytes: int  # batches not in the segment files yet
    writer_pid: int  # a live process holding it for writing, 0 if none


@dataclass(frozen=True, slots=True)
class RingDir:
    path: Path
    data_dir: Path | None  # None: no owner file
    rings: tuple[RingFile, ...]

    @property
    def allocated_bytes(self) -> int:
        return sum(ring.allocated_bytes for ring in self.rings)

    @property
    def unflushed_bytes(self) -> int:
        return sum(ring.unflushed_bytes for ring in self.rings)

    @property
    def writer_pids(self) -> tuple[int, ...]:
        return tuple(sorted({ring.writer_pid for ring in self.rings if ring.writer_pid}))

    @property
    def data_dir_exists(self) -> bool:
        return self.data_dir is not None and self.data_dir.is_dir()

    def verdict(self, *, discard_unflushed: bool = False) -> tuple[bool, str]:
        """(removable, why): the rule of this module's docstring, in a sentence."""
        if self.writer_pids:
            return False, f"in use by pid {', '.join(map(str, self.writer_pids))}"
        owner = "its data dir" if self.data_dir is not None else "no owner file"
        if self.data_dir is not None and not self.data_dir_exists:
            owner = f"its data dir {self.data_dir} is gone"
        if not self.unflushed_bytes:
            return True, f"not in use, nothing unflushed ({owner})"
        if self.data_dir_exists:
            return False, (f"{self.unflushed_bytes} bytes not flushed yet: start the broker "
                           f"of {self.data_dir}, which flushes them")
        if discard_unflushed:
            return True, f"{owner}: discarding {self.unflushed_bytes} unflushed bytes"
        return False, (f"{owner}, and {self.unflushed_bytes} bytes were never flushed: "
                       "removed only when discarding unflushed batches")


def _ring_file(path: Path) -> RingFile:
    """What the header says, read without the writer's lock (listing never gets in its way)."""
    status = path.stat()
    unflushed_bytes = writer_pid = 0
    with contextlib.suppress(OSError, ZlogError), path.open("rb", buffering=0) as file:
        header = memoryview(file.read(HEADER_BYTES))
        if len(header) == HEADER_BYTES and not header_is_blank(header):
            state = read_state(header)
            unflushed_bytes = max(0, state.head_position - state.flushed_position)
            writer_pid = read_writer_pid(header)
    if writer_pid and not Path(f"/proc/{writer_pid}").exists():
        writer_pid = 0  # killed: its lock went with it
    return RingFile(path, status.st_blocks * 512, unflushed_bytes, writer_pid)


def read_ring_dir(path: Path) -> RingDir:
    rings = []
    for ring in sorted(path.glob(f"*{RING_SUFFIX}")):
        with contextlib.suppress(FileNotFoundError):  # removed while we looked
            rings.append(_ring_file(ring))
    return RingDir(path, owner_of(path), tuple(rings))


def find_ring_dirs(base: Path) -> list[RingDir]:
    """The directories under `base` (e.g. /dev/shm) holding an owner file or rings."""
    found = []
    try:
        children = sorted(base.iterdir())
    except OSError:
        return []
    for child in children:
        with contextlib.suppress(OSError):
            if not child.is_dir() or child.is_symlink():
                continue
            if (child / OWNER_FILE).is_file() or any(child.glob(f"*{RING_SUFFIX}")):
                found.append(read_ring_dir(child))
    return found


def remove_ring_dir(ring_dir: RingDir, *, discard_unflushed: bool = False) -> int:
    """Remove the rings of a removable directory, each under its writer's lock (a broker
    starting meanwhile keeps the ones it opened), then the directory if nothing else is left;
    the bytes freed."""
    freed = 0
    for ring in ring_dir.rings:
        try:
            with RingWriter.locked(ring.path):
                now = _ring_file(ring.path)
                if now.unflushed_bytes and not discard_unflushed:
                    continue  # written to since the listing
                ring.path.unlink()
                freed += now.allocated_bytes
        except (FileNotFoundError, RingLockedError):
            continue  # gone already, or a writer has it now
        except ZlogError:
            continue  # unreadable: left for the operator to look at
    remaining = [child for child in ring_dir.path.iterdir() if child.name != OWNER_FILE]
    if not remaining:
        with contextlib.suppress(OSError):
            (ring_dir.path / OWNER_FILE).unlink()
            ring_dir.path.rmdir()
    return freed
