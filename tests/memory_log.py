"""PartitionLog's contract in memory: the simulated twin of zlog.shm_segments.log.PartitionLog.

Offsets are assigned on append (the leader epoch stamped as the real log stamps it), a
follower's batches are kept as sent, reads return whole batches, truncation cuts whole
batches. Each batch is read back as its own view, as if each lay in a segment of its own, so
the segment count is the batch count. Used by the partition rules' unit tests and by the
replication simulator, which needs thousands of logs per second.
"""

from __future__ import annotations

from zlog.errors import ErrorCode, ZlogError
from zlog.record.arrays import parse_batch
from zlog.record.header import BatchHeader, stamp, validate_batch


class MemoryLog:
    def __init__(self) -> None:
        self.batches: list[bytearray] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.published_high_watermark = -1  # what the partition told local readers last

    @property
    def segment_count(self) -> int:
        return len(self.batches)

    def append(self, batch: bytes | memoryview | bytearray, *, leader_epoch: int = -1,
               header: BatchHeader | None = None) -> int:
        del header  # the partition's checked header: the twin checks each batch whole anyway
        header = validate_batch(batch, strict=True, check_crc=True)
        stored = bytearray(batch)
        base = self.log_end_offset
        stamp(stored, base, leader_epoch)
        self.batches.append(stored)
        self.log_end_offset += header.record_count
        return base

    def append_replicated(
        self, batch: bytes | memoryview | bytearray, *, defer_flush: bool = False
    ) -> int:
        header = validate_batch(batch, strict=False, check_crc=True)
        if header.base_offset != self.log_end_offset:
            raise ZlogError(ErrorCode.INVALID_REQUEST,
                            f"replicated batch at {header.base_offset}, log end "
                            f"{self.log_end_offset}")
        self.batches.append(bytearray(batch))
        self.log_end_offset = header.next_offset
        return header.base_offset

    def tick(self) -> None:
        """Nothing waits to be moved: every batch is stored when appended."""

    def read(
        self, offset: int, max_bytes: int, upto_offset: int | None = None
    ) -> list[memoryview]:
        if not self.log_start_offset <= offset <= self.log_end_offset:
            raise ZlogError(ErrorCode.OFFSET_OUT_OF_RANGE, f"offset {offset} is out of range")
        limit = self.log_end_offset if upto_offset is None else upto_offset
        views: list[memoryview] = []
        used = 0
        for stored in self.batches:
            header = validate_batch(stored, check_crc=False)
            if header.next_offset <= offset:
                continue
            if header.base_offset >= limit or (views and used + len(stored) > max_bytes):
                break
            views.append(memoryview(stored))
            used += len(stored)
        return views

    def publish_high_watermark(self, offset: int) -> None:
        self.published_high_watermark = offset

    def truncate_to(self, offset: int) -> None:
        kept = [b for b in self.batches
                if validate_batch(b, check_crc=False).next_offset <= offset]
        self.batches = kept
        self.log_end_offset = (validate_batch(kept[-1], check_crc=False).next_offset if kept
                               else min(self.log_start_offset, offset))

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.batches = []
        self.log_start_offset = self.log_end_offset = offset

    def delete_records_before(self, offset: int) -> int:
        """The log start moves to `offset`, never past the published HW; the batches wholly
        below it go."""
        bound = min(self.log_end_offset, self.published_high_watermark)
        if not 0 <= offset <= bound:
            raise ZlogError(ErrorCode.OFFSET_OUT_OF_RANGE,
                            f"cannot delete records before {offset}: the bound is {bound}")
        if offset > self.log_start_offset:
            self._drop_below(offset)
            self.log_start_offset = offset
        return self.log_start_offset

    def _drop_below(self, offset: int) -> None:
        self.batches = [b for b in self.batches
                        if validate_batch(b, check_crc=False).next_offset > offset]

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        for stored in self.batches:
            parsed = parse_batch(stored)
            for offset, stamp_ms in zip(parsed.offsets, parsed.timestamps_ms, strict=True):
                if stamp_ms >= timestamp_ms:
                    return int(offset)
        return None

    def max_timestamp_record(self, upto_offset: int) -> tuple[int, int] | None:
        best: tuple[int, int] | None = None
        for stored in self.batches:
            parsed = parse_batch(stored)
            for offset, stamp_ms in zip(parsed.offsets, parsed.timestamps_ms, strict=True):
                if (self.log_start_offset <= offset < upto_offset
                        and (best is None or stamp_ms > best[1])):
                    best = int(offset), int(stamp_ms)
        return best

    def batch_bytes(self) -> list[bytes]:
        """Every stored batch's bytes, in log order (for comparing replicas)."""
        return [bytes(b) for b in self.batches]
