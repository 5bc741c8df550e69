"""The ring as files and processes see it (ring.py): create, reopen, lock, corrupt, SIGKILL."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from tests.unit.shm_segments.test_ring_layout import check_batch, make_batch
from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.shm_segments.ring import RingFullError, RingReader, RingWriter
from zlog.shm_segments.ring_header import HEADER_BYTES, file_size_bytes

CAPACITY_BYTES = limits.RING_SIZE_BYTES_MIN


def _append(ring: RingWriter, size_bytes: int, records: int = 1) -> tuple[int, bytes]:
    batch = make_batch(ring.next_offset, size_bytes, records)
    return ring.append(batch, ring.next_offset + records), batch


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view) :]


def test_reopening_keeps_unflushed_data_positions_and_capacity(shm_dir: Path) -> None:
    path = shm_dir / "p.ring"
    with RingWriter(path, CAPACITY_BYTES) as ring:
        batches = [_append(ring, 20_000)[1] for _ in range(3)]
        ring.mark_flushed(40_000)
        batches += [_append(ring, 20_000)[1] for _ in range(2)]  # wraps to the next lap
        assert ring.head_position > CAPACITY_BYTES
        state = ring.state()
    assert path.stat().st_size == file_size_bytes(CAPACITY_BYTES)
    with RingWriter(path, 4 * CAPACITY_BYTES) as ring:  # an existing ring keeps its capacity
        assert ring.capacity_bytes == CAPACITY_BYTES
        assert ring.state() == state
        assert [bytes(view) for _, view in ring.unflushed_batches()] == batches[2:]
        segment_path = shm_dir / "segment"
        fd = os.open(segment_path, os.O_WRONLY | os.O_CREAT)
        try:
            for view in ring.unflushed_views():
                _write_all(fd, view)
        finally:
            os.close(fd)
        assert segment_path.read_bytes() == b"".join(batches[2:])


def test_a_second_writer_is_refused_while_the_first_lives(shm_dir: Path) -> None:
    path = shm_dir / "p.ring"
    with RingWriter(path, CAPACITY_BYTES):
        with pytest.raises(ZlogError) as refused:
            RingWriter(path, CAPACITY_BYTES)
        assert refused.value.code == ErrorCode.KAFKA_STORAGE_ERROR
        assert f"locked by another writer (pid {os.getpid()})" in refused.value.message
    RingWriter(path, CAPACITY_BYTES).close()


@pytest.mark.parametrize(
    ("at", "value"), [(0, b"NOTARING"), (8, b"\x07")], ids=["magic", "layout-version"]
)
def test_a_corrupt_header_is_a_storage_error_for_writers_and_readers(
    shm_dir: Path, at: int, value: bytes
) -> None:
    path = shm_dir / "p.ring"
    with RingWriter(path, CAPACITY_BYTES) as ring:
        _append(ring, 1000)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, value, at)
    finally:
        os.close(fd)
    for open_ring in (RingWriter, RingReader):
        with pytest.raises(ZlogError) as error:
            open_ring(path)
        assert error.value.code == ErrorCode.KAFKA_STORAGE_ERROR
        assert str(path) in error.value.message and "corrupt ring" in error.value.message


def test_a_ring_of_the_wrong_size_is_a_storage_error(shm_dir: Path) -> None:
    path = shm_dir / "p.ring"
    RingWriter(path, CAPACITY_BYTES).close()
    os.truncate(path, file_size_bytes(CAPACITY_BYTES) - 1)
    with pytest.raises(ZlogError, match="header declares"):
        RingWriter(path, CAPACITY_BYTES)


def test_a_ring_whose_creation_never_finished_is_created_again(shm_dir: Path) -> None:
    path = shm_dir / "p.ring"
    path.write_bytes(bytes(HEADER_BYTES + 10))  # no magic yet: nothing can have been appended
    with pytest.raises(ZlogError, match="not created yet"):
        RingReader(path)
    with RingWriter(path, CAPACITY_BYTES) as ring:
        assert (ring.capacity_bytes, ring.head_position) == (CAPACITY_BYTES, 0)
    assert path.stat().st_size == file_size_bytes(CAPACITY_BYTES)


def test_ring_sizes_below_the_minimum_are_a_config_error(shm_dir: Path) -> None:
    with pytest.raises(ZlogError) as error:
        RingWriter(shm_dir / "p.ring", limits.RING_SIZE_BYTES_MIN - 1)
    assert error.value.code == ErrorCode.INVALID_CONFIG


def test_a_reader_needs_an_existing_ring(shm_dir: Path) -> None:
    with pytest.raises(ZlogError, match="cannot open"):
        RingReader(shm_dir / "missing.ring")
    (shm_dir / "empty.ring").touch()
    with pytest.raises(ZlogError, match="not created yet"):
        RingReader(shm_dir / "empty.ring")


def test_a_reader_follows_the_writer_and_sees_it_go(shm_dir: Path) -> None:
    path = shm_dir / "p.ring"
    ring = RingWriter(path, CAPACITY_BYTES)
    ring.reset(next_offset=100)
    with RingReader(path) as reader:
        assert (reader.writer_pid, reader.next_offset) == (os.getpid(), 100)
        assert reader.find(100) == ring.head_position  # the log end: where 100 will start
        first_position, first = _append(ring, 5000, records=3)
        second_position, second = _append(ring, 6000)
        assert reader.snapshot() == ring.state()
        assert reader.find(102) == first_position and reader.find(103) == second_position
        assert reader.read(first_position, 1) == ([first], second_position)
        assert reader.read(second_position, 1 << 20) == ([second], ring.head_position)
        ring.close()
        assert reader.writer_pid == 0
        assert not reader.is_replaced()


def test_unlink_deletes_the_ring_and_readers_can_tell(shm_dir: Path) -> None:
    path = shm_dir / "p.ring"
    ring = RingWriter(path, CAPACITY_BYTES)
    _append(ring, 1000)
    with RingReader(path) as reader:
        ring.unlink()
        assert not path.exists() and reader.is_replaced()
        RingWriter(path, CAPACITY_BYTES).close()
        assert reader.is_replaced()  # a new file under the old name is not this mapping
    assert path.exists()


def test_close_releases_the_lock_even_while_views_are_held(shm_dir: Path) -> None:
    path = shm_dir / "p.ring"
    ring = RingWriter(path, CAPACITY_BYTES)
    _, batch = _append(ring, 1000)
    views = ring.unflushed_views()
    ring.close()
    assert bytes(views[0]) == batch  # the mapping lives on until the last view goes
    RingWriter(path, CAPACITY_BYTES).close()
    del views


# ---------------------------------------------------------------------------------- SIGKILL


def _append_until_killed(ring_path: str, segment_path: str, reports: Connection, seed: int) -> None:
    """Child: append forever, flushing to a segment file when full; report each append that
    returned. The report goes out after the return, so the parent knows a subset of them."""
    rng = random.Random(seed)
    ring = RingWriter(Path(ring_path), CAPACITY_BYTES)
    segment_fd = os.open(segment_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    while True:
        records = rng.randint(1, 5)
        batch = make_batch(ring.next_offset, rng.randint(61, 8000), records)
        try:
            position = ring.append(batch, ring.next_offset + records)
        except RingFullError:
            for view in ring.unflushed_views():
                _write_all(segment_fd, view)
            ring.mark_flushed(ring.head_position)
            position = ring.append(batch, ring.next_offset + records)
        reports.send((position, ring.next_offset - records))


def _whole_batches(raw: bytes) -> list[bytes]:
    """The batches of a segment file, up to a torn one at its end."""
    batches = []
    position = 0
    while position + 12 <= len(raw):
        end = position + 12 + int.from_bytes(raw[position + 8 : position + 12], "big")
        if end > len(raw):
            break
        batches.append(raw[position:end])
        position = end
    return batches


def _run_until_killed(shm_dir: Path, seed: int, appends_before_kill: int) -> list[tuple[int, int]]:
    """Start the child, let it report `appends_before_kill` appends, SIGKILL it mid-stream, and
    return every report it got out before dying."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(
        target=_append_until_killed,
        args=(str(shm_dir / "p.ring"), str(shm_dir / "segment"), sender, seed),
    )
    child.start()
    sender.close()
    reported: list[tuple[int, int]] = []
    try:
        deadline = time.monotonic() + 60
        while len(reported) < appends_before_kill:
            assert receiver.poll(max(0.0, deadline - time.monotonic())), "child stopped reporting"
            reported.append(receiver.recv())
        with pytest.raises(ZlogError, match="locked by another writer"):
            RingWriter(shm_dir / "p.ring", CAPACITY_BYTES)
    finally:
        os.kill(child.pid or 0, signal.SIGKILL)
        child.join(timeout=30)
    assert child.exitcode == -signal.SIGKILL
    while receiver.poll(0):
        try:
            reported.append(receiver.recv())
        except EOFError:
            break
    receiver.close()
    return reported


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "appends_before_kill"), [(1, 40), (2, 400), (3, 1500)])
def test_a_sigkilled_writer_loses_no_append_that_returned(
    shm_dir: Path, seed: int, appends_before_kill: int
) -> None:
    """Every append the child reported (so every append that returned before it) is in the
    segment file or in the ring, in order; at most one more, whose report died with it."""
    reported = _run_until_killed(shm_dir, seed, appends_before_kill)
    recovered = _whole_batches((shm_dir / "segment").read_bytes())
    log_end_offset = check_batch(recovered[-1])[1] if recovered else 0
    with RingWriter(shm_dir / "p.ring", CAPACITY_BYTES) as ring:
        positions = {}
        for position, view in ring.unflushed_batches():
            base_offset, next_offset = check_batch(view)
            positions[base_offset] = position
            if next_offset <= log_end_offset:
                continue  # flushed to the segment just before the kill, not yet marked
            assert base_offset == log_end_offset
            recovered.append(bytes(view))
            log_end_offset = next_offset
        assert ring.next_offset == log_end_offset
    offsets = [check_batch(batch)[0] for batch in recovered]
    assert offsets[: len(reported)] == [base_offset for _, base_offset in reported]
    assert len(offsets) - len(reported) in (0, 1)
    for position, base_offset in reported:
        assert positions.get(base_offset, position) == position
