"""One partition's shared-memory ring: a file under /dev/shm (DESIGN.md sections 1 and 5).

The partition worker appends each accepted batch here, then the log flushes ring -> active
segment file when it chooses. An append that returned lives in shared memory, so it survives a
SIGKILL of the worker: the next writer to open the ring finds it, and the log flushes it. Local
readers map the same file read-only and read committed batches without a syscall or a lock.
The bytes and the rules are in `ring_header.py` (the header page and the state it publishes)
and `ring_layout.py` (the data area, the writer and the readers); this module adds the file,
the mapping and the lock.

Ownership. One writer per ring, enforced by an exclusive flock on the file, which the kernel
drops when the writer dies however it dies. Readers take no lock; the writer never waits.

Publishing order. Every change of state is a commit: the writer fills the state slot readers
are not using (head, flushed, tail, next offset, ...) and then stores `commit_sequence`, one
aligned 8-byte store, to name it. An append runs:

  1. If the batch needs bytes that still hold flushed data, move `tail_position` past them and
     commit, before any of those bytes is touched.
  2. Write the PAD marker (if the batch wraps to the next lap) and the batch bytes, and stamp
     its base offset and leader epoch.
  3. Commit the new `head_position` and `next_offset`.

A reader reads the state (sequence, slot, sequence again), copies bytes below the head it
read, and then re-reads the tail. It never looks at or past that head, and the head moves only
after the bytes are in place (3 after 2), so it never sees a batch being written. Bytes the
writer has begun to overwrite always lie below a tail that was committed first (1 before 2),
so if the re-read tail is still at or behind where the copy started, the copy is whole;
otherwise the reader drops it and raises RingOverrunError.

A writer killed at any instant leaves the last commit intact: a batch whose append returned
was committed in step 3, and a half-written one lies past the head, where nobody reads.

Memory ordering. zlog runs on x86-64, whose TSO model makes one core's stores visible to the
others in program order and never reorders a load with an earlier load; the protocol above
needs nothing more, so there are no fences. CPython performs each `struct.pack_into` and each
slice assignment as plain stores in program order; glibc's memcpy ends its non-temporal stores
with an sfence, and the stores of one `rep movs` are ordered before those of later
instructions. A port to a weakly ordered CPU (ARM, POWER) would need a release fence before
each commit store and an acquire fence after each load of the sequence.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Final

from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.shm_segments.ring_header import (
    CAPACITY_BYTES_MAX,
    CAPACITY_BYTES_MIN,
    HEADER_BYTES,
    RingState,
    file_size_bytes,
    format_header,
    header_is_blank,
    read_writer_pid,
)
from zlog.shm_segments.ring_layout import (
    LayoutReader,
    LayoutWriter,
    RingFullError,
    RingOverrunError,
)

__all__ = [
    "RingFullError", "RingLockedError", "RingOverrunError", "RingReader", "RingState",
    "RingWriter",
]

RING_DIRECTORY_DEFAULT: Final = Path("/dev/shm")
FILE_MODE: Final = 0o640  # the worker's user writes; its group may run local readers
# Opening retries only when the file is deleted or replaced between open() and flock().
_OPEN_ATTEMPTS_MAX: Final = 8
# Fault every page in at open, not on the first lap of appends.
_MAP_POPULATE: Final = getattr(mmap, "MAP_POPULATE", 0)
# The layout holds every ring size a broker may be configured with.
assert CAPACITY_BYTES_MIN <= limits.RING_SIZE_BYTES_MIN
assert limits.RING_SIZE_BYTES_DEFAULT <= CAPACITY_BYTES_MAX


def _storage_error(path: Path, problem: str) -> ZlogError:
    return ZlogError(ErrorCode.KAFKA_STORAGE_ERROR, f"ring {path}: {problem}")


class RingLockedError(ZlogError):
    """Another live process writes this ring: the caller must not take it over or remove it."""


def _same_file(fd: int, path: Path) -> bool:
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


def _writer_pid_in(fd: int) -> int:
    """The pid the live writer recorded, for the refusal message; 0 if unreadable."""
    try:
        header = os.pread(fd, HEADER_BYTES, 0)
    except OSError:
        return 0
    return read_writer_pid(memoryview(header))


def _open_locked(path: Path, *, create: bool = True) -> int:
    """Open (creating if needed) and lock the ring file; refuse if a live writer holds it.

    Without `create`, a missing file raises FileNotFoundError.
    """
    for _ in range(_OPEN_ATTEMPTS_MAX):
        try:
            fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), FILE_MODE)
        except FileNotFoundError:
            if not create:
                raise  # the caller asked for an existing ring only
            raise _storage_error(path, "cannot open: its directory is gone") from None
        except OSError as error:
            raise _storage_error(path, f"cannot open: {error.strerror}") from error
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _writer_pid_in(fd)
            os.close(fd)
            raise RingLockedError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"ring {path}: locked by another writer (pid {pid})"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        if _same_file(fd, path):
            return fd
        os.close(fd)  # deleted or replaced between open and lock: open what the path names now
    raise _storage_error(path, f"replaced {_OPEN_ATTEMPTS_MAX} times while being opened")


def _map_for_writing(fd: int, path: Path, capacity_bytes: int) -> mmap.mmap:
    """Map the ring, creating it first if its header was never finished.

    A blank header means the previous creator died before writing the magic, so nothing was
    ever appended; the ring is made again with the requested capacity. The whole file is
    reserved up front: a full tmpfs must fail here, not SIGBUS on some later append.
    """
    size_bytes = os.fstat(fd).st_size
    blank = size_bytes < HEADER_BYTES or header_is_blank(memoryview(os.pread(fd, 8, 0)))
    if blank:
        size_bytes = file_size_bytes(capacity_bytes)
        try:
            os.ftruncate(fd, 0)
            os.posix_fallocate(fd, 0, size_bytes)
        except OSError as error:
            raise _storage_error(
                path, f"cannot reserve {size_bytes} bytes: {error.strerror}"
            ) from error
    mapping = mmap.mmap(
        fd, size_bytes, flags=mmap.MAP_SHARED | _MAP_POPULATE,
        prot=mmap.PROT_READ | mmap.PROT_WRITE,
    )
    if blank:
        with memoryview(mapping) as view:
            format_header(view, capacity_bytes)
    return mapping


class RingWriter(LayoutWriter):
    """The partition worker's handle on its ring: the only process that changes it.

    Opening an existing ring keeps its own capacity and everything in it (the log then flushes
    what is unflushed). A fresh ring starts at offset 0: the log calls `reset(log end offset)`.
    A second live writer, or a header that cannot be trusted, raises
    ZlogError(KAFKA_STORAGE_ERROR); in the second case the log deletes the file and starts over.
    """

    def __init__(self, path: Path, capacity_bytes: int = limits.RING_SIZE_BYTES_DEFAULT) -> None:
        if not limits.RING_SIZE_BYTES_MIN <= capacity_bytes <= CAPACITY_BYTES_MAX:
            raise ZlogError(
                ErrorCode.INVALID_CONFIG,
                f"ring size of {capacity_bytes} bytes is outside "
                f"[{limits.RING_SIZE_BYTES_MIN}, {CAPACITY_BYTES_MAX}]",
            )
        self.path = Path(path)
        self._closed = False
        self._fd = _open_locked(self.path)
        try:
            self._mmap = _map_for_writing(self._fd, self.path, capacity_bytes)
        except BaseException:
            os.close(self._fd)
            raise
        view = memoryview(self._mmap)
        try:
            super().__init__(view, writer_pid=os.getpid())
        except BaseException as error:
            view.release()
            with contextlib.suppress(BufferError):
                self._mmap.close()
            os.close(self._fd)
            if isinstance(error, ZlogError):
                raise _storage_error(self.path, error.message) from error
            raise

    @staticmethod
    @contextlib.contextmanager
    def locked(path: Path) -> Iterator[None]:
        """Hold the writer's lock on an existing ring without mapping it (to remove it safely).

        FileNotFoundError when there is no ring; RingLockedError when a live writer has it.
        """
        fd = _open_locked(path, create=False)
        try:
            yield
        finally:
            os.close(fd)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Unmap and release the lock; the file and everything in it stay for the next writer."""
        if self._closed:
            return
        self._closed = True
        self.release(writer_pid_after=0)
        # A view from unflushed_views() still held somewhere keeps the mapping (and the
        # descriptor mmap keeps for itself, which shares our lock) alive until it is dropped.
        # The ring is consistent at every commit, so the lock is released regardless.
        with contextlib.suppress(BufferError):
            self._mmap.close()
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)

    def unlink(self) -> None:
        """Delete the ring for good (topic deletion), then close it.

        Deleting while still holding the lock means no other writer can have replaced the file.
        A closed writer no longer owns the path, so it leaves the file alone.
        """
        if self._closed:
            return
        if _same_file(self._fd, self.path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        self.close()

    def __enter__(self) -> RingWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class RingReader(LayoutReader):
    """A read-only mapping of a ring, for any process on the host; it never blocks the writer.

    Positions come from `find` and from the second value `read` returns; follow them. On
    RingOverrunError the reader has fallen a ring behind (or the log was truncated): read those
    offsets from the segment files, or continue at `tail_position`.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError as error:
            raise _storage_error(self.path, f"cannot open: {error.strerror}") from error
        try:
            stat = os.fstat(fd)
            if stat.st_size < HEADER_BYTES:
                raise _storage_error(self.path, "not created yet")
            self._mmap = mmap.mmap(fd, stat.st_size, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        self._identity = (stat.st_dev, stat.st_ino)
        self._closed = False
        view = memoryview(self._mmap)
        try:
            if header_is_blank(view):
                raise ZlogError(ErrorCode.KAFKA_STORAGE_ERROR, "not created yet")
            super().__init__(view)
        except ZlogError as error:
            view.release()
            self._mmap.close()
            raise _storage_error(self.path, error.message) from error

    @property
    def writer_pid(self) -> int:
        """The process that has the ring open for writing, 0 if none (advisory)."""
        return read_writer_pid(self._buffer)

    def is_replaced(self) -> bool:
        """Whether the path now names another file (the ring was deleted or made anew): this
        mapping will never see another batch, and the caller should open the path again."""
        try:
            named = os.stat(self.path)
        except FileNotFoundError:
            return True
        return (named.st_dev, named.st_ino) != self._identity

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.release()
        # Views from read_views may still be held somewhere: then the mapping goes with them.
        with contextlib.suppress(BufferError):
            self._mmap.close()

    def __enter__(self) -> RingReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
