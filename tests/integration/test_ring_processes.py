"""A reader process follows a writer through many wraps of a small ring (ring.py).

The reader checks what the publishing protocol promises: every batch it gets is whole (CRC and
contents), offsets only grow, and it either gets every committed batch or is told it fell
behind (RingOverrunError), never a silent gap.
"""

from __future__ import annotations

import mmap
import multiprocessing
import os
import random
import struct
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path

import pytest

from tests.unit.shm_segments.test_ring_layout import check_batch, make_batch
from zlog.shm_segments.ring import RingFullError, RingOverrunError, RingReader, RingWriter
from zlog_testbed.waiting import wait_until

CAPACITY_BYTES = 256 * 1024
BATCH_COUNT = 3000
DEADLINE_S = 120.0
_POSITION = struct.Struct("@q")


@dataclass(frozen=True)
class _Planned:
    base_offset: int
    records: int
    size_bytes: int


@dataclass(frozen=True)
class _Followed:
    batches_seen: int
    overruns: int
    batches_missed: int


def _plan(seed: int) -> list[_Planned]:
    """The writer's batches; the reader derives the same list to know what to expect."""
    rng = random.Random(seed)
    planned, offset = [], 0
    for _ in range(BATCH_COUNT):
        records = rng.randint(1, 10)
        planned.append(_Planned(offset, records, rng.randint(61, 24_000)))
        offset += records
    return planned


class _Progress:
    """The reader's position, published for the writer in a shared 8-byte file."""

    def __init__(self, path: Path) -> None:
        fd = os.open(path, os.O_RDWR)
        try:
            self._mapping = mmap.mmap(fd, _POSITION.size)
        finally:
            os.close(fd)

    def publish(self, position: int) -> None:
        _POSITION.pack_into(self._mapping, 0, position)

    def position(self) -> int:
        return int(_POSITION.unpack_from(self._mapping, 0)[0])

    def close(self) -> None:
        self._mapping.close()


def _follow(
    reader: RingReader, planned: list[_Planned], progress: _Progress, seed: int
) -> _Followed:
    by_base_offset = {batch.base_offset: batch for batch in planned}
    final_offset = planned[-1].base_offset + planned[-1].records
    rng = random.Random(seed)
    expected_offset, seen, overruns, missed = 0, 0, 0, 0
    gap_allowed = False
    position = reader.find(0)
    assert position is not None, "the writer starts only once the reader is ready"
    progress.publish(position)
    deadline = time.monotonic() + DEADLINE_S
    while expected_offset < final_offset:
        assert time.monotonic() < deadline, f"stuck at offset {expected_offset}"
        try:
            batches, next_position = reader.read(position, rng.choice([0, 4096, 65536, 1 << 20]))
        except RingOverrunError as overrun:
            overruns += 1
            found = reader.find(expected_offset)
            gap_allowed = found is None
            position = overrun.tail_position if found is None else found
            continue
        for batch in batches:
            base_offset, next_offset = check_batch(batch)  # whole, and the right contents
            wanted = by_base_offset[base_offset]
            assert (len(batch), next_offset) == (wanted.size_bytes, base_offset + wanted.records)
            if base_offset != expected_offset:
                assert gap_allowed and base_offset > expected_offset, (
                    f"batch {base_offset} came after {expected_offset} without an overrun"
                )
                missed += sum(expected_offset <= b < base_offset for b in by_base_offset)
            gap_allowed = False
            expected_offset = next_offset
            seen += 1
        position = next_position
        progress.publish(position)
        if not batches and expected_offset < final_offset:
            _wait_for_append(reader, position, expected_offset)
    return _Followed(seen, overruns, missed)


def _wait_for_append(reader: RingReader, head_position: int, expected_offset: int) -> None:
    try:
        wait_until(lambda: reader.head_position > head_position, timeout_s=DEADLINE_S,
                   interval_s=0.0002, what="the writer to append")
    except AssertionError as stuck:  # say where both sides stood, to tell a hang from a stall
        raise AssertionError(f"{stuck}: reader at position {head_position}, offset "
                             f"{expected_offset}; ring {reader.snapshot()}") from None


def _reader_main(
    ring_path: str, progress_path: str, seed: int, results: Connection
) -> None:
    """Child: follow the ring to the last planned batch and send back what it saw."""
    try:
        with RingReader(Path(ring_path)) as reader:
            outcome: _Followed | str = _follow(
                reader, _plan(seed), _Progress(Path(progress_path)), seed
            )
    except BaseException:
        outcome = traceback.format_exc()
    results.send(outcome)


class _ReaderStopped(Exception):
    """The reader process ended early; its outcome (a traceback) says why."""


def _wait_for_reader(predicate: Callable[[], bool], reader: BaseProcess, what: str) -> None:
    wait_until(
        lambda: predicate() or not reader.is_alive(), timeout_s=DEADLINE_S, interval_s=0.0002,
        what=what,
    )
    if not predicate():
        raise _ReaderStopped


def _append_waiting_for(
    ring: RingWriter, batch: bytes, next_offset: int, progress: _Progress, reader: BaseProcess
) -> None:
    """Append; when full, flush only as far as the reader has read, waiting for it if needed."""
    for _ in range(BATCH_COUNT):
        try:
            ring.append(batch, next_offset)
            return
        except RingFullError:
            _wait_for_reader(
                lambda: progress.position() > ring.flushed_position, reader,
                "the reader to move on",
            )
            ring.mark_flushed(progress.position())
    raise AssertionError("the reader never made room")


def _append_flushing_at_random(
    ring: RingWriter,
    batch: bytes,
    next_offset: int,
    *,
    rng: random.Random,
    progress: _Progress,
    reader: BaseProcess,
) -> None:
    """Append, reclaiming whatever is flushed when full; flush, and now and then reset, at
    random points.

    The writer stays within a couple of rings of the reader so that the reader sees many
    batches as well as overruns, rather than being lapped over and over.
    """
    if ring.head_position - progress.position() > 2 * CAPACITY_BYTES:
        _wait_for_reader(
            lambda: ring.head_position - progress.position() <= CAPACITY_BYTES, reader,
            "the reader to come closer",
        )
    try:
        ring.append(batch, next_offset)
    except RingFullError:
        ring.mark_flushed(ring.head_position)
        ring.append(batch, next_offset)
    chance = rng.random()
    if chance < 0.3:
        ends = [position + len(view) for position, view in ring.unflushed_batches()]
        if ends:
            ring.mark_flushed(rng.choice(ends))
    elif chance < 0.302:  # as the log does after writing a batch straight to the segment
        ring.mark_flushed(ring.head_position)
        ring.reset(ring.next_offset)


def _write_all_batches(
    ring: RingWriter, seed: int, progress: _Progress, reader: BaseProcess, *,
    wait_for_reader: bool,
) -> None:
    rng = random.Random(seed)
    try:
        _wait_for_reader(lambda: progress.position() >= 0, reader, "the reader to start")
        for planned in _plan(seed):
            batch = make_batch(planned.base_offset, planned.size_bytes, planned.records)
            next_offset = planned.base_offset + planned.records
            if wait_for_reader:
                _append_waiting_for(ring, batch, next_offset, progress, reader)
            else:
                _append_flushing_at_random(
                    ring, batch, next_offset, rng=rng, progress=progress, reader=reader
                )
    except _ReaderStopped:  # the reader's outcome tells what went wrong; this, where we were
        print(f"writer: {ring.state()}, reader's published position {progress.position()}")
        return
    assert ring.head_position > 100 * CAPACITY_BYTES  # many wraps


def _run(shm_dir: Path, seed: int, *, wait_for_reader: bool) -> _Followed:
    ring_path, progress_path = shm_dir / "p.ring", shm_dir / "progress"
    progress_path.write_bytes(_POSITION.pack(-1))  # -1 until the reader is ready
    progress = _Progress(progress_path)
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    with RingWriter(ring_path, CAPACITY_BYTES) as ring:
        child = context.Process(
            target=_reader_main, args=(str(ring_path), str(progress_path), seed, sender)
        )
        child.start()
        sender.close()
        try:
            _write_all_batches(ring, seed, progress, child, wait_for_reader=wait_for_reader)
            assert receiver.poll(DEADLINE_S), "the reader did not finish"
            outcome = receiver.recv()
        finally:
            child.join(timeout=DEADLINE_S)
            if child.exitcode is None:
                child.kill()
                child.join()
            progress.close()
    assert isinstance(outcome, _Followed), outcome
    return outcome


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12])
def test_a_reader_sees_every_batch_or_knows_it_fell_behind(shm_dir: Path, seed: int) -> None:
    """The writer flushes and resets at random points and reclaims as soon as it needs room, so
    the reader may be overrun; everything it does get is whole, in order, and accounted for."""
    followed = _run(shm_dir, seed, wait_for_reader=False)
    assert followed.batches_seen + followed.batches_missed == BATCH_COUNT
    assert followed.overruns > 0 or followed.batches_missed == 0


@pytest.mark.slow
def test_a_reader_the_writer_waits_for_sees_every_batch(shm_dir: Path) -> None:
    """The writer flushes only when the ring is full, and only up to where the reader has read,
    so the tail never passes the reader: it must see every batch, with no overrun."""
    followed = _run(shm_dir, 13, wait_for_reader=True)
    assert followed == _Followed(batches_seen=BATCH_COUNT, overruns=0, batches_missed=0)
