"""What a consumer does with fetched bytes: whole batches in, records at or past a position out.

A fetch answers with whole batches as stored, so the first batch usually starts before the
offset that was asked for: records below the consumer's position are skipped here, never
returned twice. Control batches (transaction markers) are never returned. Each buffered batch
is a `BatchView` (one array per record field), so `poll_batches` hands out values without one
Python object per record, and `poll` makes ConsumerRecords only for what it returns.

Pure: no sockets, no clocks.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass
from itertools import repeat

import numpy as np

from zlog.client.records import ConsumerRecord
from zlog.errors import ErrorCode, ZlogError
from zlog.record.arrays import BatchView, parse_batch
from zlog.record.header import Buffer, as_byte_view, scan_batches
from zlog.types import TopicPartition


def batches_from_chunk(chunk: Buffer, position: int, *, check_crc: bool = True) -> list[BatchView]:
    """Decode a fetched frame of whole batches; keeps those with records at >= position.

    Raises CORRUPT_MESSAGE if the frame is not made of whole valid batches.
    """
    view = as_byte_view(chunk)
    found, end = scan_batches(view, check_crc=check_crc)
    if end != view.nbytes:
        raise ZlogError(ErrorCode.CORRUPT_MESSAGE,
                        f"a fetched frame holds {view.nbytes - end} bytes that are not a batch")
    batches: list[BatchView] = []
    for start, header in found:
        if header.next_offset <= position or header.is_control:
            continue
        data = view[start:start + header.size_bytes]
        parsed = parse_batch(data, check_crc=False, header=header)
        trimmed = trim_view(parsed, position)
        if trimmed is not None:
            batches.append(trimmed)
    return batches


def trim_view(view: BatchView, first_offset: int) -> BatchView | None:
    """The records of `view` at or after `first_offset` (array slices, no copies)."""
    if view.header.base_offset >= first_offset:
        return view  # the common case, decided without numpy
    skip = int(np.searchsorted(view.offsets, first_offset, side="left"))
    if skip == 0:
        return view
    if skip >= len(view):
        return None
    headers = {index - skip: h for index, h in view.record_headers.items() if index >= skip}
    return dataclasses.replace(
        view,
        offsets=view.offsets[skip:],
        timestamps_ms=view.timestamps_ms[skip:],
        key_starts=view.key_starts[skip:],
        key_lengths=view.key_lengths[skip:],
        value_starts=view.value_starts[skip:],
        value_lengths=view.value_lengths[skip:],
        header_counts=view.header_counts[skip:],
        record_headers=headers,
    )


def records_of(tp: TopicPartition, view: BatchView) -> list[ConsumerRecord]:
    """One ConsumerRecord per record, made straight from the view's columns (no Record first)."""
    topic, partition = tp
    count = len(view)
    found = view.record_headers
    headers = (
        [found.get(index, ()) for index in range(count)] if found else repeat((), count)
    )
    return list(map(
        ConsumerRecord, repeat(topic, count), repeat(partition, count), view.offsets.tolist(),
        view.timestamps_ms.tolist(), view.keys(), view.values(), headers,
    ))


@dataclass(slots=True)
class PartitionBuffer:
    """Decoded batches of one partition, waiting to be returned, oldest first."""

    batches: deque[BatchView] = dataclasses.field(default_factory=deque)

    def __bool__(self) -> bool:
        return bool(self.batches)

    def add(self, views: list[BatchView]) -> None:
        self.batches.extend(views)

    def clear(self) -> None:
        self.batches.clear()

    def take_records(self, tp: TopicPartition, max_records: int) -> tuple[list[ConsumerRecord],
                                                                          int | None]:
        """Up to max_records records and the position after them (None if none were taken)."""
        assert max_records > 0
        taken: list[ConsumerRecord] = []
        next_position: int | None = None
        while self.batches and len(taken) < max_records:
            view = self.batches[0]
            room = max_records - len(taken)
            if len(view) <= room:
                taken.extend(records_of(tp, view))
                self.batches.popleft()
                next_position = view.header.next_offset  # past compaction gaps at the end
            else:
                head = _head(view, room)
                taken.extend(records_of(tp, head))
                next_position = int(head.offsets[-1]) + 1
                rest = trim_view(view, next_position)
                assert rest is not None
                self.batches[0] = rest
        return taken, next_position

    def take_batches(self) -> tuple[list[BatchView], int | None]:
        """Every buffered batch and the position after them."""
        if not self.batches:
            return [], None
        views = list(self.batches)
        self.batches.clear()
        return views, views[-1].header.next_offset


def _head(view: BatchView, count: int) -> BatchView:
    """The first `count` records of `view`."""
    assert 0 < count < len(view)
    headers = {index: h for index, h in view.record_headers.items() if index < count}
    return dataclasses.replace(
        view,
        offsets=view.offsets[:count],
        timestamps_ms=view.timestamps_ms[:count],
        key_starts=view.key_starts[:count],
        key_lengths=view.key_lengths[:count],
        value_starts=view.value_starts[:count],
        value_lengths=view.value_lengths[:count],
        header_counts=view.header_counts[:count],
        record_headers=headers,
    )
