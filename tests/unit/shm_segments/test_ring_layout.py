"""The ring's wrap, reclaim and publishing rules, on a bytearray (ring_layout.py, ring_header.py).

Also home of `make_batch`/`check_batch`, the ring tests' own minimal RecordBatch v2 lookalikes:
the ring must not depend on the batch codec, and neither do its tests.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from zlog.errors import ErrorCode, ZlogError
from zlog.shm_segments.ring_header import HEADER_BYTES, file_size_bytes, format_header, read_state
from zlog.shm_segments.ring_layout import (
    PAD_BASE_OFFSET,
    LayoutReader,
    LayoutWriter,
    RingFullError,
    RingOverrunError,
)

_FRAMING = struct.Struct(">qi")  # baseOffset, batchLength
_CRC = struct.Struct(">I")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_CRC_AT = 17
_CRC_FROM = 21
_LAST_OFFSET_DELTA_AT = 23
_PAYLOAD_AT = 27
BATCH_BYTES_MIN = _PAYLOAD_AT


def _payload(base_offset: int, size_bytes: int) -> bytes:
    """Bytes that name their batch, so a copy mixing two batches cannot pass for either."""
    pattern = base_offset.to_bytes(8, "big")
    return (pattern * (size_bytes // 8 + 1))[:size_bytes]


def make_batch(base_offset: int, size_bytes: int, record_count: int = 1) -> bytes:
    """A batch that looks like RecordBatch v2 to the ring: framing, magic 2, lastOffsetDelta,
    contents derived from the base offset, and a CRC-32C over bytes 21.. at bytes 17..20."""
    assert size_bytes >= BATCH_BYTES_MIN and record_count >= 1
    batch = bytearray(size_bytes)
    _FRAMING.pack_into(batch, 0, base_offset, size_bytes - 12)
    batch[16] = 2
    _LAST_OFFSET_DELTA.pack_into(batch, _LAST_OFFSET_DELTA_AT, record_count - 1)
    batch[_PAYLOAD_AT:] = _payload(base_offset, size_bytes - _PAYLOAD_AT)
    _CRC.pack_into(batch, _CRC_AT, crc32c.crc32c(memoryview(batch)[_CRC_FROM:]))
    return bytes(batch)


def check_batch(batch: bytes | memoryview) -> tuple[int, int]:
    """(base offset, next offset) of a whole batch from make_batch; AssertionError if torn."""
    base_offset, batch_length = _FRAMING.unpack_from(batch)
    assert batch_length + 12 == len(batch), "framing"
    (crc,) = _CRC.unpack_from(batch, _CRC_AT)
    assert crc == crc32c.crc32c(memoryview(batch)[_CRC_FROM:]), f"CRC of batch {base_offset}"
    assert bytes(batch[_PAYLOAD_AT:]) == _payload(base_offset, len(batch) - _PAYLOAD_AT)
    (last_offset_delta,) = _LAST_OFFSET_DELTA.unpack_from(batch, _LAST_OFFSET_DELTA_AT)
    return base_offset, base_offset + last_offset_delta + 1


def new_ring(capacity_bytes: int) -> tuple[memoryview, LayoutWriter, LayoutReader]:
    buffer = memoryview(bytearray(file_size_bytes(capacity_bytes)))
    format_header(buffer, capacity_bytes)
    return buffer, LayoutWriter(buffer), LayoutReader(buffer)


def append(writer: LayoutWriter, base_offset: int, size_bytes: int, records: int = 1) -> int:
    return writer.append(make_batch(base_offset, size_bytes, records), base_offset + records)


def data_of(buffer: memoryview) -> memoryview:
    return buffer[HEADER_BYTES:]


# ---------------------------------------------------------------------------------- wrap rules


def test_a_fresh_ring_is_empty_at_offset_zero() -> None:
    _, writer, reader = new_ring(256)
    assert writer.state() == reader.snapshot()
    assert (writer.head_position, writer.next_offset, writer.max_batch_bytes) == (0, 0, 128)
    assert writer.unflushed_views() == [] and writer.unflushed_bytes() == 0
    assert reader.read(0, 1000) == ([], 0)
    assert reader.find(0) == 0  # the log end maps to where the next batch will start


def test_readers_see_up_to_the_published_high_watermark_never_past_the_commit() -> None:
    """No high watermark published (a writer without replication): the committed next_offset
    bounds readers. Published: the lower of the two, so a replicated partition's local readers
    never see records the ISR does not all hold, nor past what is committed in the ring."""
    _, writer, reader = new_ring(1024)
    for base in range(3):
        append(writer, base, 40)
    assert reader.visible_end_offset == 3
    writer.publish_high_watermark(1)
    assert reader.visible_end_offset == 1
    writer.publish_high_watermark(0)
    assert reader.visible_end_offset == 0
    writer.publish_high_watermark(10)  # a high watermark cannot make uncommitted bytes visible
    assert reader.visible_end_offset == 3


def test_a_read_bounded_by_an_end_offset_stops_before_the_batch_that_reaches_past_it() -> None:
    """A reader bounded by the high watermark resumes exactly where it stopped."""
    _, writer, reader = new_ring(1024)
    positions = [append(writer, base * 2, 40, records=2) for base in range(3)]  # 0-1, 2-3, 4-5
    batches, next_position = reader.read(0, 1000, end_offset=4)
    assert [check_batch(b) for b in batches] == [(0, 2), (2, 4)]
    assert next_position == positions[2]
    assert reader.read(next_position, 1000, end_offset=5) == ([], positions[2])
    batches, _ = reader.read(next_position, 1000, end_offset=6)
    assert [check_batch(b) for b in batches] == [(4, 6)]


def test_a_batch_that_does_not_fit_before_the_end_leaves_a_pad_and_wraps() -> None:
    buffer, writer, reader = new_ring(256)
    first, second, third = make_batch(0, 100), make_batch(1, 100), make_batch(2, 100)
    assert writer.append(first, 1) == 0
    assert writer.append(second, 2) == 100
    writer.mark_flushed(100)
    assert writer.append(third, 3) == 256  # 56 bytes left: PAD at 200, batch at the next lap
    assert _FRAMING.unpack_from(data_of(buffer), 200) == (PAD_BASE_OFFSET, 56 - 12)
    assert (writer.tail_position, writer.tail_offset) == (100, 1)  # just enough reclaimed
    assert [bytes(view) for view in writer.unflushed_views()] == [second, third]
    assert [(p, bytes(v)) for p, v in writer.unflushed_batches()] == [(100, second), (256, third)]
    assert writer.unflushed_bytes() == 200
    assert reader.read(100, 10_000) == ([second, third], 356)
    assert reader.read(200, 10_000) == ([third], 356)  # a reader may stand on the PAD


def test_fewer_than_twelve_bytes_left_are_skipped_without_a_marker() -> None:
    buffer, writer, reader = new_ring(256)
    append(writer, 0, 120)
    second = make_batch(1, 125)
    writer.append(second, 2)
    writer.mark_flushed(245)
    data_of(buffer)[245:256] = b"\xee" * 11  # whatever lies there must never be read
    third = make_batch(2, 50)
    assert writer.append(third, 3) == 256
    assert bytes(data_of(buffer)[245:256]) == b"\xee" * 11
    assert [bytes(view) for view in writer.unflushed_views()] == [third]
    assert writer.tail_position == 120
    assert reader.read(120, 10_000) == ([second, third], 306)
    assert reader.read(245, 10_000) == ([third], 306)


def test_an_exact_fit_ends_the_lap_without_a_filler() -> None:
    _, writer, reader = new_ring(256)
    append(writer, 0, 128)
    second, third = make_batch(1, 128), make_batch(2, 100)
    writer.append(second, 2)
    assert writer.head_position == 256
    writer.mark_flushed(128)
    assert writer.append(third, 3) == 256
    views = writer.unflushed_views()
    assert [bytes(view) for view in views] == [second, third]  # two spans, one per lap
    assert reader.read(128, 10_000) == ([second, third], 356)


def test_reclaim_is_lazy_and_stops_at_the_flushed_position() -> None:
    _, writer, reader = new_ring(256)
    assert writer.reclaim_bytes_min == 8  # 1/32 of the ring
    for base_offset in range(6):
        append(writer, base_offset, 40)  # positions 0, 40, ..., 200
    writer.mark_flushed(160)
    assert append(writer, 6, 60) == 256  # PAD at 240 (16 bytes); needs 0..60 back, plus 8
    assert (writer.tail_position, writer.tail_offset) == (80, 2)
    with pytest.raises(RingOverrunError):
        reader.read(40, 10_000)
    assert [check_batch(b)[0] for b in reader.read(80, 10_000)[0]] == [2, 3, 4, 5, 6]
    assert append(writer, 7, 60) == 316  # needs up to 120 + 8: stops at flushed 160
    assert writer.tail_position == 160 == writer.flushed_position
    head = writer.head_position
    with pytest.raises(RingFullError):
        append(writer, 8, 60)  # would overwrite 160..180, which is not flushed
    assert (writer.head_position, writer.tail_position) == (head, 160)


def test_a_full_ring_changes_nothing() -> None:
    buffer, writer, _ = new_ring(256)
    for base_offset in range(4):
        append(writer, base_offset, 60)
    before = bytes(buffer)
    with pytest.raises(RingFullError):
        append(writer, 4, 60)
    assert bytes(buffer) == before
    writer.mark_flushed(writer.head_position)
    append(writer, 4, 60)


def test_a_batch_over_half_the_capacity_is_refused() -> None:
    _, writer, _ = new_ring(256)
    with pytest.raises(ValueError, match="segment directly"):
        writer.append(make_batch(0, 129), 1)
    with pytest.raises(ValueError):
        writer.append(b"\x00" * 11, 1)


@pytest.mark.parametrize("head_position", [0, 27, 100, 127, 128, 129, 200, 244, 245, 255])
def test_the_largest_batch_always_fits_once_everything_is_flushed(head_position: int) -> None:
    _, writer, reader = new_ring(256)
    while writer.head_position < head_position:
        left_bytes = head_position - writer.head_position
        size_bytes = left_bytes if left_bytes <= 128 else min(128, left_bytes - BATCH_BYTES_MIN)
        append(writer, writer.next_offset, size_bytes)
    assert writer.head_position == head_position
    writer.mark_flushed(writer.head_position)
    biggest = make_batch(writer.next_offset, writer.max_batch_bytes)
    position = writer.append(biggest, writer.next_offset + 1)
    assert reader.read(position, 0) == ([biggest], position + len(biggest))


def test_stamping_writes_base_offset_and_leader_epoch_into_the_ring_copy() -> None:
    _, writer, reader = new_ring(256)
    original = make_batch(0, 64)
    writer.append(original, 8, base_offset=7, partition_leader_epoch=3)
    (stamped,), _ = reader.read(0, 1000)
    assert _FRAMING.unpack_from(stamped)[0] == 7
    assert struct.unpack_from(">i", stamped, 12)[0] == 3
    assert stamped[16:] == original[16:]
    assert (writer.tail_offset, reader.find(7)) == (7, 0)


# ---------------------------------------------------------------------------------- readers


def test_read_stops_before_max_bytes_but_returns_at_least_one_batch() -> None:
    _, writer, reader = new_ring(1024)
    batches = [make_batch(i, 100) for i in range(5)]
    for i, batch in enumerate(batches):
        writer.append(batch, i + 1)
    assert reader.read(0, 0) == (batches[:1], 100)
    assert reader.read(0, 250) == (batches[:2], 200)
    assert reader.read(200, 10_000) == (batches[2:], 500)
    assert reader.read(500, 10_000) == ([], 500)
    with pytest.raises(ValueError):
        reader.read(501, 10_000)


def test_find_maps_offsets_to_the_batch_holding_them() -> None:
    _, writer, reader = new_ring(1024)
    append(writer, 10, 100, records=3)  # offsets 10..12 at 0
    append(writer, 13, 100, records=1)  # 13 at 100
    append(writer, 20, 100, records=2)  # a gap (compacted upstream): 20..21 at 200
    assert [reader.find(offset) for offset in (10, 12, 13, 14, 19, 20, 21)] == [
        0, 0, 100, 100, 100, 200, 200,
    ]
    assert (reader.find(22), reader.find(23), reader.find(9)) == (300, None, None)


def test_reset_drops_everything_and_overruns_old_positions() -> None:
    _, writer, reader = new_ring(256)
    append(writer, 0, 100)
    writer.reset(next_offset=50)
    assert writer.state() == reader.snapshot()
    assert (writer.head_position, writer.tail_position, writer.flushed_position) == (256,) * 3
    assert (writer.next_offset, writer.tail_offset, writer.generation) == (50, 50, 1)
    assert writer.unflushed_views() == []
    for position in (0, 100):  # 100 was the head, where a caught-up reader stood
        with pytest.raises(RingOverrunError):
            reader.read(position, 1000)
    assert reader.find(0) is None
    assert append(writer, 50, 100) == 256
    assert check_batch(reader.read(256, 1000)[0][0]) == (50, 51)


class _InterruptedReader(LayoutReader):
    """A reader whose copy is overtaken by the writer between copying and re-reading the tail."""

    def __init__(self, buffer: memoryview, writer: LayoutWriter) -> None:
        super().__init__(buffer)
        self.writer = writer

    def _batch_views(
        self, position: int, head_position: int, max_bytes: int, end_offset: int | None
    ) -> tuple[list[memoryview], int]:
        copied = super()._batch_views(position, head_position, max_bytes, end_offset)
        if self.writer.generation == 0:  # once
            self.writer.mark_flushed(self.writer.head_position)
            append(self.writer, self.writer.next_offset, 120)
            self.writer.reset(self.writer.next_offset)
        return copied


def test_a_copy_the_writer_overwrote_meanwhile_is_discarded() -> None:
    buffer, writer, _ = new_ring(256)
    append(writer, 0, 120)
    append(writer, 1, 120)
    reader = _InterruptedReader(buffer, writer)
    with pytest.raises(RingOverrunError) as overrun:
        reader.read(0, 10_000)
    assert overrun.value.tail_position == 512  # reclaimed to 120, then reset to lap 2
    assert reader.read(512, 10_000) == ([], 512)


def test_views_are_the_committed_batches_until_the_writer_reclaims_them() -> None:
    buffer, writer, _ = new_ring(256)
    first = make_batch(0, 100)
    writer.append(first, 1)
    reader = LayoutReader(buffer)
    views, next_position = reader.read_views(0, 10_000)
    assert [bytes(view) for view in views] == [first]
    assert next_position == 100
    assert reader.intact(0)
    writer.mark_flushed(writer.head_position)
    append(writer, 1, 120)
    assert reader.intact(0)  # the second batch fit beside the first
    writer.mark_flushed(writer.head_position)
    append(writer, 2, 120)  # this one needs the first one's space
    assert not reader.intact(0)
    with pytest.raises(RingOverrunError):
        reader.read_views(0, 10_000)


def test_an_overtaken_view_read_raises_like_a_copy() -> None:
    buffer, writer, _ = new_ring(256)
    append(writer, 0, 120)
    reader = _InterruptedReader(buffer, writer)
    with pytest.raises(RingOverrunError):
        reader.read_views(0, 10_000)


# ---------------------------------------------------------------------------------- reopening


def test_reopening_keeps_state_and_data() -> None:
    buffer, writer, _ = new_ring(256)
    append(writer, 0, 100)
    writer.mark_flushed(100)
    second = make_batch(1, 100)
    writer.append(second, 2)
    again = LayoutWriter(buffer)
    assert again.state() == writer.state()
    assert [bytes(view) for view in again.unflushed_views()] == [second]


def _corrupt_errors(buffer: memoryview) -> list[ZlogError]:
    errors = []
    for make in (LayoutWriter, LayoutReader):
        with pytest.raises(ZlogError) as error:
            make(buffer)
        errors.append(error.value)
    return errors


@pytest.mark.parametrize(
    ("at", "value"),
    [(0, b"ZLOGRINX"), (8, b"\x02"), (12, b"\x00\x01"), (16, b"\x00\x00\x01")],
    ids=["magic", "layout-version", "header-bytes", "capacity"],
)
def test_a_corrupt_header_is_a_storage_error(at: int, value: bytes) -> None:
    buffer, writer, _ = new_ring(256)
    append(writer, 0, 100)
    buffer[at : at + len(value)] = value
    for error in _corrupt_errors(buffer):
        assert error.code == ErrorCode.KAFKA_STORAGE_ERROR


def test_an_impossible_state_is_a_storage_error() -> None:
    buffer, writer, _ = new_ring(256)
    append(writer, 0, 100)
    sequence = struct.unpack_from("@q", buffer, 32)[0]
    slot_at = (64, 128)[sequence & 1]
    struct.pack_into("@q", buffer, slot_at + 16, 101)  # tail past flushed
    with pytest.raises(ZlogError, match="positions out of order"):
        LayoutWriter(buffer)


def test_garbage_in_unflushed_bytes_is_caught_on_open_and_by_readers() -> None:
    buffer, writer, reader = new_ring(256)
    append(writer, 0, 100)
    _FRAMING.pack_into(data_of(buffer), 0, 0, 500)  # a batchLength running past head
    with pytest.raises(ZlogError, match="corrupt ring"):
        LayoutWriter(buffer)
    with pytest.raises(ZlogError, match="corrupt ring"):  # not an overrun: the tail did not move
        reader.read(0, 1000)


# ---------------------------------------------------------------------------------- model


@dataclass(frozen=True)
class _ModelBatch:
    position: int
    data: bytes
    base_offset: int
    next_offset: int

    @property
    def end(self) -> int:
        return self.position + len(self.data)


class _OrderCheckingWriter(LayoutWriter):
    """A writer that fails the moment it changes a byte a reader may be copying.

    Between two commits the writer may touch only bytes outside [tail, head) of the last
    commit: that is the whole publishing protocol (tail committed before reclaimed bytes are
    overwritten, head committed after the batch is in place), checked at every commit.
    """

    def __init__(self, buffer: memoryview) -> None:
        super().__init__(buffer)
        self._remember_commit()

    def _remember_commit(self) -> None:
        self.committed = read_state(self._buffer)
        self.committed_data = bytes(self._data)

    def _commit(self) -> None:
        tail, head = self.committed.tail_position, self.committed.head_position
        readable = {position % self.capacity_bytes for position in range(tail, head)}
        changed = {
            at for at, (old, new) in enumerate(zip(self.committed_data, self._data, strict=True))
            if old != new
        }
        assert not changed & readable, f"overwrote committed bytes {sorted(changed & readable)}"
        super()._commit()
        self._remember_commit()


class RingModel(RuleBasedStateMachine):
    """The ring against a list of batches: the unflushed batches are always the model's, in
    order, and a reader from the tail always gets exactly the batches the model says remain."""

    @initialize(capacity_bytes=st.integers(min_value=64, max_value=700))
    def create(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self.buffer, _, self.reader = new_ring(capacity_bytes)
        self.writer: LayoutWriter = _OrderCheckingWriter(self.buffer)
        self.batches: list[_ModelBatch] = []  # appended since the last reset, oldest first
        self.head = self.flushed = self.tail = self.lap_start = 0
        self.next_offset = 0

    def _unflushed(self) -> list[_ModelBatch]:
        return [batch for batch in self.batches if batch.position >= self.flushed]

    @rule(data=st.data(), records=st.integers(min_value=1, max_value=4))
    def append(self, data: st.DataObject, records: int) -> None:
        left_in_lap = self.capacity_bytes - self.head % self.capacity_bytes
        # Sizes that end the lap exactly or leave less than a batch header are drawn often:
        # those are the wrap rules a uniform size would rarely reach.
        sizes = st.integers(BATCH_BYTES_MIN, self.capacity_bytes // 2 + 2)
        ends = [left_in_lap - gap for gap in range(12)] + [left_in_lap // 2 - gap for gap in (0, 5)]
        edges = [size for size in ends if BATCH_BYTES_MIN <= size <= self.capacity_bytes // 2]
        if edges:
            sizes = st.one_of(sizes, st.sampled_from(edges))
        size_bytes = data.draw(sizes)
        batch = make_batch(self.next_offset, size_bytes, records)
        if size_bytes > self.capacity_bytes // 2:
            with pytest.raises(ValueError):
                self.writer.append(batch, self.next_offset + records)
            return
        start = self.head if size_bytes <= left_in_lap else self.head + left_in_lap
        if start + size_bytes - self.flushed > self.capacity_bytes:
            with pytest.raises(RingFullError):
                self.writer.append(batch, self.next_offset + records)
            return
        assert self.writer.append(batch, self.next_offset + records) == start
        if start + size_bytes - self.tail > self.capacity_bytes:
            # Lazy reclaim: the tail moves to the first entry boundary that makes room, plus a
            # little more (reclaim_bytes_min), but never past the flushed position.
            boundaries = {self.lap_start} | {b.position for b in self.batches}
            boundaries |= {b.end for b in self.batches}
            needed = start + size_bytes - self.capacity_bytes + self.writer.reclaim_bytes_min
            wanted = min(needed, self.flushed)
            self.tail = min(boundary for boundary in boundaries if boundary >= wanted)
        self.batches.append(_ModelBatch(start, batch, self.next_offset, self.next_offset + records))
        self.head = start + size_bytes
        self.next_offset += records

    @rule(data=st.data())
    def flush(self, data: st.DataObject) -> None:
        ends = [self.flushed] + [batch.end for batch in self._unflushed()]
        self.flushed = data.draw(st.sampled_from(ends))
        self.writer.mark_flushed(self.flushed)

    @rule(skip=st.integers(min_value=0, max_value=3))
    def reset(self, skip: int) -> None:
        self.next_offset += skip
        self.writer.reset(self.next_offset)
        self.lap_start = (self.head // self.capacity_bytes + 1) * self.capacity_bytes
        self.head = self.flushed = self.tail = self.lap_start
        self.batches = []

    @rule()
    def reopen(self) -> None:
        before = self.writer.state()
        self.writer = _OrderCheckingWriter(self.buffer)
        assert self.writer.state() == before

    @rule(data=st.data())
    def find(self, data: st.DataObject) -> None:
        retained = [b for b in self.batches if b.position >= self.writer.tail_position]
        first = retained[0].base_offset if retained else self.next_offset
        offset = data.draw(st.integers(first - 2, self.next_offset + 2))
        expected = [b.position for b in retained if b.base_offset <= offset < b.next_offset]
        if offset == self.next_offset:
            expected = [self.head]
        assert self.reader.find(offset) == (expected[0] if expected else None)

    @invariant()
    def unflushed_batches_are_the_models(self) -> None:
        unflushed = self._unflushed()
        assert [(p, bytes(v)) for p, v in self.writer.unflushed_batches()] == [
            (batch.position, batch.data) for batch in unflushed
        ]
        joined = b"".join(batch.data for batch in unflushed)
        assert b"".join(bytes(view) for view in self.writer.unflushed_views()) == joined
        assert self.writer.unflushed_bytes() == len(joined)
        assert len(self.writer.unflushed_views()) <= 2

    @invariant()
    def readers_see_what_remains(self) -> None:
        state = self.writer.state()
        assert self.reader.snapshot() == state
        assert (state.head_position, state.flushed_position) == (self.head, self.flushed)
        assert state.tail_position == self.tail <= state.flushed_position
        assert state.head_position - state.tail_position <= self.capacity_bytes
        retained = [b for b in self.batches if b.position >= state.tail_position]
        assert state.tail_offset == (retained[0].base_offset if retained else self.next_offset)
        copies, next_position = self.reader.read(state.tail_position, 1 << 20)
        assert copies == [batch.data for batch in retained]
        assert next_position == state.head_position


RingModel.TestCase.settings = settings(max_examples=150, stateful_step_count=50, deadline=None)


@pytest.mark.slow  # a few seconds: hundreds of random histories
class TestRingModel(RingModel.TestCase):  # type: ignore[misc,valid-type]
    pass
