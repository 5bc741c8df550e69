"""A random sequence of log operations agrees with a plain in-memory model (hypothesis)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tests.storage_helpers import base_offset_of, batch_tags, make_batch, split_batches
from zlog.errors import ErrorCode, ZlogError
from zlog.shm_segments.log import PartitionLog
from zlog.shm_segments.log_config import LogConfig

_BATCH_BYTES = len(make_batch(0, record_count=1))


class LogModel(RuleBasedStateMachine):
    """Model: an ordered list of (base offset, record count, tag) plus the log start offset,
    and the high watermark last published (retention and DeleteRecords stay below it)."""

    def __init__(self) -> None:
        super().__init__()
        self.data_dir = Path(tempfile.mkdtemp(prefix="zlog-model-"))
        self.shm_dir = Path(tempfile.mkdtemp(prefix="zlog-model-", dir="/dev/shm"))
        self.config = LogConfig(
            segment_bytes=_BATCH_BYTES * 4,
            index_interval_bytes=_BATCH_BYTES,
            ring_bytes=64 * 1024,
            ring_flush_bytes=_BATCH_BYTES * 3,
        )
        self.log = self._open()
        self.batches: list[tuple[int, int, int]] = []
        self.log_start = 0
        self.next_offset = 0
        self.next_tag = 0
        self.high_watermark = 0

    def _open(self) -> PartitionLog:
        return PartitionLog(self.data_dir, "model", 0, self.config, ring_dir=self.shm_dir)

    @rule(record_count=st.integers(min_value=1, max_value=4))
    def append(self, record_count: int) -> None:
        tag = self.next_tag
        self.next_tag += 1
        base = self.log.append(make_batch(tag, record_count=record_count, value_bytes=12))
        assert base == self.next_offset
        self.batches.append((base, record_count, tag))
        self.next_offset += record_count

    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start, self.next_offset), label="offset")
        max_bytes = data.draw(st.integers(1, _BATCH_BYTES * 6), label="max_bytes")
        got = split_batches(self.log.read(offset, max_bytes))
        expected = [b for b in self.batches if b[0] + b[1] > offset]
        assert len(got) >= min(1, len(expected))
        assert sum(len(b) for b in got) <= max(max_bytes, len(got[0]) if got else 0)
        for batch, (base, count, tag) in zip(got, expected, strict=False):
            assert base_offset_of(batch) == base
            assert batch_tags(batch) == [tag] * count

    @precondition(lambda self: self.next_offset > self.log_start)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start + 1, self.next_offset), label="truncate")
        self.log.truncate_to(offset)
        cut = [b for b in self.batches if b[0] + b[1] > offset]
        self.batches = [b for b in self.batches if b[0] + b[1] <= offset]
        if cut:
            self.next_offset = cut[0][0]
            self.log_start = min(self.log_start, self.next_offset)
        assert self.log.log_end_offset == self.next_offset
        self._publish(min(self.high_watermark, self.next_offset))  # as the partition does

    @rule(data=st.data())
    def publish_high_watermark(self, data: st.DataObject) -> None:
        self._publish(data.draw(st.integers(self.log_start, self.next_offset), label="hw"))

    def _publish(self, offset: int) -> None:
        self.high_watermark = offset
        self.log.publish_high_watermark(offset)

    @rule()
    def roll(self) -> None:
        if self.log.segments_snapshot()[-1].size_bytes:
            self.log.roll()

    @precondition(lambda self: self.next_offset > self.log_start)
    @rule(data=st.data())
    def delete_records_before(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start, self.next_offset), label="delete_before")
        if offset > self.high_watermark:
            with pytest.raises(ZlogError) as refused:
                self.log.delete_records_before(offset)
            assert refused.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
            return
        self.log.delete_records_before(offset)
        self.log_start = max(self.log_start, offset)
        self.batches = [b for b in self.batches if b[0] + b[1] > self.log_start]

    @rule(keep_bytes=st.integers(min_value=0, max_value=_BATCH_BYTES * 8))
    def retention_by_bytes(self, keep_bytes: int) -> None:
        self.log.config = LogConfig(**{**_fields(self.config), "retention_bytes": keep_bytes})
        self.log.enforce_retention()
        self.log.config = self.config
        assert self.log.log_start_offset <= max(self.log_start, self.high_watermark)
        self.log_start = self.log.log_start_offset
        self.batches = [b for b in self.batches if b[0] + b[1] > self.log_start]

    @rule()
    def reopen(self) -> None:
        self.log.close()
        self.log = self._open()
        self.high_watermark = self.log_start  # a new log knows nothing committed until told

    @invariant()
    def offsets_agree(self) -> None:
        assert self.log.log_end_offset == self.next_offset
        assert self.log.log_start_offset == self.log_start
        got = split_batches(self.log.read(self.log_start, 1 << 30))
        assert [(base_offset_of(b), batch_tags(b)[0]) for b in got] == [
            (base, tag) for base, _, tag in self.batches
        ]

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.data_dir, ignore_errors=True)
        shutil.rmtree(self.shm_dir, ignore_errors=True)


def _fields(config: LogConfig) -> dict[str, object]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}


LogModel.TestCase.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLogModel = LogModel.TestCase
