"""A pair of bounded single-producer single-consumer message queues in one shared-memory file.

A local producer (zlog/client/local_produce.py) and the partition worker that leads its
partitions (zlog/broker/data/local_producers.py) exchange requests and replies through such a
file under /dev/shm instead of a socket: the requests queue is written by the producer and read
by the worker, the replies queue the other way round. Each queue has exactly one writer and one
reader, so no lock is needed: the writer owns `head`, the reader owns `tail`, each is one
aligned 8-byte store that the other side reads (ctypes, never torn), and the writer stores the
message before it moves `head`.

A message is a list of frames (the same frames a request or reply has on a socket), stored as
[u32 payload bytes][u32 frame count][u32 size per frame][frames...], padded to 8 bytes. A
message that does not fit before the end of the data area leaves a padding marker there and
starts again at its beginning. Both queues are bounded: `put` says False when the message does
not fit now, and `fits` whether it ever can.

Sleeping: a reader about to park sets its queue's `reader_sleeping` flag and looks once more
before it sleeps; a writer that finds the flag set after its message clears it and rings the
reader's doorbell (local_channel.py). So a doorbell is rung only for a reader that sleeps. The
flag and `head` are stored and loaded by different processes with no fence between a store
and the next load, so both can miss each other: the reader's bounded wait is the backstop.

The file carries the producer's pid, so a worker can tell a queue whose producer is gone.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import struct
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from zlog.errors import ErrorCode, ZlogError
from zlog.transport.wire import Buffer

MAGIC: Final = b"ZLOGLPQ1"
PAGE_BYTES: Final = 4096
HEADER: Final = struct.Struct("<8sQQQ")  # magic, producer pid, requests bytes, replies bytes
REQUESTS_BYTES_DEFAULT: Final = 8 * 1024 * 1024
REPLIES_BYTES_DEFAULT: Final = 1024 * 1024
QUEUE_NAME_PREFIX: Final = "zlog-lpq-"  # a queue pair's file name starts so
_PAD: Final = 0xFFFF_FFFF  # a message length that means "the rest of the area is padding"
_U32: Final = struct.Struct("<I")
_MESSAGE_HEAD: Final = struct.Struct("<II")  # payload bytes, frame count
_CONTROL_BYTES: Final = 3 * 64  # head, tail, reader_sleeping: a cache line each
# Where each queue's control words start in the header page.
_REQUESTS_CONTROL: Final = 64
_REPLIES_CONTROL: Final = _REQUESTS_CONTROL + _CONTROL_BYTES


def queue_directory() -> Path:
    """Where queue pairs are made: shared memory when the host has it mounted."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() else Path(tempfile.gettempdir())


def _align8(size: int) -> int:
    return (size + 7) & ~7


def message_bytes(frames: Sequence[memoryview]) -> int:
    """The room a message of `frames` takes in a queue (without padding before it)."""
    return _align8(_MESSAGE_HEAD.size + 4 * len(frames) + sum(f.nbytes for f in frames))


@functools.cache
def _sizes_struct(count: int) -> struct.Struct:
    """A message's head for `count` frames: payload bytes, frame count, each frame's size."""
    return struct.Struct(f"<II{count}I")


@functools.cache
def _frame_sizes(count: int) -> struct.Struct:
    return struct.Struct(f"<{count}I")


def as_byte_views(frames: Sequence[Buffer]) -> list[memoryview]:
    """Flat byte views of `frames`, as `put` takes them (a cast only where one is needed)."""
    views = []
    for frame in frames:
        view = memoryview(frame)
        views.append(view if view.format == "B" and view.ndim == 1 else view.cast("B"))
    return views


class ShmQueue:
    """One direction: a control block (head, tail, reader_sleeping) and a data area."""

    def __init__(self, buffer: mmap.mmap, control: int, data_start: int, capacity: int) -> None:
        assert capacity % 8 == 0 and capacity > 0, capacity
        self._head = ctypes.c_uint64.from_buffer(buffer, control)
        self._tail = ctypes.c_uint64.from_buffer(buffer, control + 64)
        self._sleeping = ctypes.c_uint64.from_buffer(buffer, control + 128)
        self._data = memoryview(buffer)[data_start:data_start + capacity]
        self.capacity = capacity

    def release(self) -> None:
        """Drop every view of the mapping, so that it can be closed."""
        del self._head, self._tail, self._sleeping
        self._data.release()

    # -- either side ----------------------------------------------------------------------

    def is_empty(self) -> bool:
        return self._head.value == self._tail.value

    @property
    def used_bytes(self) -> int:
        return self._head.value - self._tail.value

    def fits(self, frames: Sequence[memoryview]) -> bool:
        """Whether a message of `frames` can ever be put (with room for padding before it)."""
        return 2 * message_bytes(frames) <= self.capacity

    # -- the writer -----------------------------------------------------------------------

    def put(self, frames: Sequence[memoryview]) -> bool:
        """Append one message of byte frames (format "B"); False (nothing written) when it
        does not fit now. Then `wake_needed` says whether to ring the reader's doorbell."""
        sizes = [frame.nbytes for frame in frames]
        count = len(sizes)
        size = _align8(_MESSAGE_HEAD.size + 4 * count + sum(sizes))
        head = self._head.value
        free = self.capacity - (head - self._tail.value)
        position = head % self.capacity
        contiguous = self.capacity - position
        padding = contiguous if size > contiguous else 0
        if size + padding > free:
            return False
        data = self._data
        if padding:
            _U32.pack_into(data, position, _PAD)
            head += padding
            position = 0
        # The length word counts what follows it, padding included.
        _sizes_struct(count).pack_into(data, position, size - 4, count, *sizes)
        at = position + _MESSAGE_HEAD.size + 4 * count
        for frame, frame_bytes in zip(frames, sizes, strict=True):
            end = at + frame_bytes
            data[at:end] = frame
            at = end
        self._head.value = head + size
        return True

    def wake_needed(self) -> bool:
        """After a put: whether the reader had gone to sleep (the flag is then cleared, so
        that one doorbell answers it)."""
        if self._sleeping.value:
            self._sleeping.value = 0
            return True
        return False

    # -- the reader -----------------------------------------------------------------------

    def take(self) -> list[memoryview] | None:
        """The oldest message as frames (views of a private copy), or None when empty.

        A message whose framing is impossible (a writer that scribbled over the area) raises
        ZlogError(CORRUPT_MESSAGE): the caller drops the queue.
        """
        tail = self._tail.value
        head = self._head.value
        if tail == head:
            return None
        position = tail % self.capacity
        (length,) = _U32.unpack_from(self._data, position)
        if length == _PAD:
            tail += self.capacity - position
            position = 0
            if tail == head:
                raise _corrupt("padding with no message after it")
            (length,) = _U32.unpack_from(self._data, position)
        size = 4 + length
        if size % 8 or size > head - tail or position + size > self.capacity:
            raise _corrupt(f"a message of {length} bytes at {position}")
        payload = bytes(self._data[position + 4:position + size])
        self._tail.value = tail + size
        return _frames_of(payload)

    def sleep_if_empty(self) -> bool:
        """The reader is about to park: set the flag, then look again. True: it may sleep
        (nothing came); False: a message came meanwhile (the flag is cleared again)."""
        self._sleeping.value = 1
        if self._head.value == self._tail.value:
            return True
        self._sleeping.value = 0
        return False

    def awake(self) -> None:
        """The reader is running again: writers need not ring."""
        self._sleeping.value = 0

    @property
    def reader_sleeping(self) -> bool:
        """Whether the flag is set: a flag set a while ago is seen by every writer, one just
        set may not be yet (see the module docstring)."""
        return bool(self._sleeping.value)


def _corrupt(what: str) -> ZlogError:
    return ZlogError(ErrorCode.CORRUPT_MESSAGE, f"shared-memory queue: {what}")


def _frames_of(payload: bytes) -> list[memoryview]:
    view = memoryview(payload)
    count = _U32.unpack_from(view, 0)[0]
    at = 4 + 4 * count
    if at > len(view):
        raise _corrupt(f"{count} frames in a message of {len(view)} bytes")
    frames: list[memoryview] = []
    for size in _frame_sizes(count).unpack_from(view, 4):
        end = at + size
        if end > len(view):
            raise _corrupt(f"a frame of {size} bytes past its message's end")
        frames.append(view[at:end])
        at = end
    return frames


class QueuePair:
    """The mapped file: the producer's pid, its requests queue and its replies queue."""

    def __init__(self, path: Path, file_descriptor: int, *, create: bool,
                 requests_bytes: int = REQUESTS_BYTES_DEFAULT,
                 replies_bytes: int = REPLIES_BYTES_DEFAULT) -> None:
        self.path = path
        if create:
            total = PAGE_BYTES + requests_bytes + replies_bytes
            os.ftruncate(file_descriptor, total)
        else:
            total = os.fstat(file_descriptor).st_size
        if total < PAGE_BYTES:
            raise _corrupt(f"{path} holds {total} bytes, less than its header")
        self._map = mmap.mmap(file_descriptor, total)
        if create:
            HEADER.pack_into(self._map, 0, MAGIC, os.getpid(), requests_bytes, replies_bytes)
        magic, pid, requests_bytes, replies_bytes = HEADER.unpack_from(self._map, 0)
        if (magic != MAGIC or requests_bytes % 8 or replies_bytes % 8
                or PAGE_BYTES + requests_bytes + replies_bytes != total):
            self._map.close()
            raise _corrupt(f"{path} is not a queue pair")
        self.producer_pid = int(pid)
        self.requests = ShmQueue(self._map, _REQUESTS_CONTROL, PAGE_BYTES, requests_bytes)
        self.replies = ShmQueue(self._map, _REPLIES_CONTROL, PAGE_BYTES + requests_bytes,
                                replies_bytes)

    @classmethod
    def create(cls, directory: Path, name: str) -> QueuePair:
        """A new file in `directory` (its creator is the producer); the worker unlinks it."""
        path = directory / name
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            return cls(path, fd, create=True)
        except BaseException:
            os.unlink(path)
            raise
        finally:
            os.close(fd)

    @classmethod
    def open(cls, path: Path) -> QueuePair:
        fd = os.open(path, os.O_RDWR)
        try:
            return cls(path, fd, create=False)
        finally:
            os.close(fd)

    def close(self) -> None:
        self.requests.release()
        self.replies.release()
        self._map.close()
