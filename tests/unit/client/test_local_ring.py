"""zlog.client.local_ring against a RingWriter in this process, and the Metadata ring_path."""

from __future__ import annotations

import json
from pathlib import Path

from zlog.client.local_ring import LocalRing, is_local_endpoint
from zlog.errors import ErrorCode
from zlog.record.arrays import build_batch_from_values
from zlog.shm_segments.ring import RingWriter
from zlog.transport.json_codec import (
    decode_json_body,
    encode_json_body,
)
from zlog.transport.messages.admin import (
    BrokerMetadata,
    MetadataResponseV0,
    PartitionMetadata,
    TopicMetadata,
)
from zlog_testbed.waiting import wait_until

CAPACITY_BYTES = 64 * 1024


def _append(ring: RingWriter, records: int, size_bytes: int = 100) -> None:
    values = [bytes([65 + i % 26]) * size_bytes for i in range(records)]
    batch = build_batch_from_values(values, timestamp_ms=1, base_offset=ring.next_offset)
    ring.append(batch, ring.next_offset + records)


def test_reads_follow_the_ring_and_fall_back_below_its_tail(shm_dir: Path) -> None:
    path = shm_dir / "t-0.ring"
    with RingWriter(path, CAPACITY_BYTES) as writer:
        local = LocalRing(path)
        assert local.read(0, 1 << 20) == ([], 0)  # caught up: nothing yet
        _append(writer, 10)
        _append(writer, 10)
        result = local.read(5, 1 << 20)  # mid-batch: the records below 5 are trimmed
        assert result is not None
        views, next_offset = result
        assert next_offset == 20
        assert [int(o) for view in views for o in view.offsets] == list(range(5, 20))
        assert local.read(20, 1 << 20) == ([], 20)
        for _ in range(60):  # several laps: offset 0 leaves the ring
            _append(writer, 10, size_bytes=200)
            writer.mark_flushed(writer.head_position)
        assert not local.covers(0)
        assert local.read(0, 1 << 20) is None  # only in the segments: the network serves it
        assert local.covers(writer.next_offset)
        local.close()


def test_a_replaced_ring_is_opened_again(shm_dir: Path) -> None:
    path = shm_dir / "t-0.ring"
    local = LocalRing(path)
    with RingWriter(path, CAPACITY_BYTES) as writer:
        _append(writer, 10)
        writer.mark_flushed(writer.head_position)
        result = local.read(0, 1 << 20)
        assert result is not None and result[1] == 10
        writer.unlink()
    with RingWriter(path, CAPACITY_BYTES) as writer:  # a new file: the worker made it anew
        writer.reset(10)
        _append(writer, 5)
        wait_until(lambda: local.read(10, 1 << 20) != ([], 10), what="the new ring")
        result = local.read(10, 1 << 20)
        assert result is not None
        views, next_offset = result
        assert next_offset == 15
        assert [int(o) for view in views for o in view.offsets] == list(range(10, 15))
    local.close()


def test_a_missing_ring_is_not_served(tmp_path: Path) -> None:
    assert LocalRing(tmp_path / "elsewhere.ring").read(0, 1024) is None


def test_local_endpoints() -> None:
    assert is_local_endpoint("tcp://127.0.0.1:7400")
    assert is_local_endpoint("tcp://localhost:7400")
    assert not is_local_endpoint("tcp://192.0.2.7:7400")
    assert not is_local_endpoint("ipc:///tmp/x")


def test_metadata_ring_path_round_trips_and_defaults_to_empty() -> None:
    partition = PartitionMetadata(0, 1, 0, (1,), (1,), "tcp://127.0.0.1:1", 0, "/dev/shm/t-0.ring")
    response = MetadataResponseV0("c", 1, (BrokerMetadata(1, "h", "tcp://h:1"),),
                                  (TopicMetadata("t", 0, "", {}, (partition,)),))
    body = encode_json_body(response)
    decoded = decode_json_body(MetadataResponseV0, memoryview(body), ErrorCode.INVALID_REQUEST)
    assert decoded.topics[0].partitions[0].ring_path == "/dev/shm/t-0.ring"
    older = json.loads(body)
    del older["topics"][0]["partitions"][0]["ring_path"]  # an older broker
    decoded = decode_json_body(MetadataResponseV0, memoryview(json.dumps(older).encode()),
                               ErrorCode.INVALID_REQUEST)
    assert decoded.topics[0].partitions[0].ring_path == ""


def test_has_news_is_a_state_read_that_says_when_to_read(shm_dir: Path) -> None:
    path = shm_dir / "n-0.ring"
    with RingWriter(path, CAPACITY_BYTES) as writer:
        local = LocalRing(path)
        assert local.has_news(0)  # not open yet: go and find out
        assert local.read(0, 1 << 20) == ([], 0)
        assert not local.has_news(0)
        _append(writer, 3)
        assert local.has_news(0)
        _views, next_offset = local.read(0, 1 << 20) or ([], -1)
        assert next_offset == 3
        assert not local.has_news(3)
        assert local.has_news(1)  # a position elsewhere: read tells
        local.close()


def test_zero_copy_views_are_checked_from_the_first_read_since_forget(shm_dir: Path) -> None:
    path = shm_dir / "z-0.ring"
    with RingWriter(path, CAPACITY_BYTES) as writer:
        local = LocalRing(path)
        _append(writer, 2, size_bytes=1000)
        views, offset = local.read(0, 1 << 20, copy=False) or ([], -1)
        first = local.read_from_position
        assert first is not None
        assert [bytes(v) for view in views for v in view.values()] == [b"A" * 1000, b"B" * 1000]
        _append(writer, 1, size_bytes=1000)
        assert local.read(offset, 1 << 20, copy=False) is not None
        assert local.read_from_position == first  # still holding the first read's views
        assert local.intact(first)
        while writer.tail_position <= first:  # the writer laps the ring, reclaiming them
            writer.mark_flushed(writer.head_position)
            _append(writer, 1, size_bytes=1000)
        assert not local.intact(first)
        local.forget_reads()
        assert local.read_from_position is None
        assert local.intact(local.read_from_position)
        local.close()
