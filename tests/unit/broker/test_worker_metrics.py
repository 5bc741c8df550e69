"""A worker's metrics file (zlog/broker/worker_metrics.py): what the worker writes is what the
supervisor reads, through a real file mapped twice, as the two processes map it."""

from __future__ import annotations

from array import array
from pathlib import Path

import pytest

from zlog.broker.worker_metrics import (
    GAUGES,
    PARTITION_SLOTS,
    REQUEST_LATENCY_BUCKETS_S,
    GroupField,
    MetricsFile,
    PartitionField,
    SlotKind,
    SlotSample,
    WorkerMetrics,
    read_sample,
)
from zlog.transport.api import ApiKey


def _partitions(metrics_file: MetricsFile) -> dict[tuple[str, int], SlotSample]:
    return {(slot.name, slot.number): slot
            for slot in read_sample(metrics_file).of_kind(SlotKind.PARTITION)}


def _offsets(log_end: int) -> array[int]:
    """A partition's gauges, as a worker publishes them: its log end, two in-sync replicas."""
    fields = GAUGES[SlotKind.PARTITION]
    gauges = array("q", [0] * len(fields))
    gauges[fields.index(PartitionField.LOG_END_OFFSET)] = log_end
    gauges[fields.index(PartitionField.ISR)] = 2
    return gauges


def test_requests_are_counted_per_api_into_their_latency_bucket(tmp_path: Path) -> None:
    path = tmp_path / "worker-0"
    writer = WorkerMetrics(MetricsFile.create(path))
    writer.request(ApiKey.PRODUCE, False, 50_000)  # 50 us: the first bucket (<= 100 us)
    writer.request(ApiKey.PRODUCE, True, 3_000_000)  # 3 ms: the <= 5 ms bucket
    writer.request(ApiKey.PRODUCE, False, 60 * 10**9)  # a minute: +Inf
    writer.request(12_345, False, 1)  # no such API: ignored
    sample = read_sample(MetricsFile(path, writable=False))
    (produce,) = sample.apis
    assert produce.api_key == ApiKey.PRODUCE
    assert (produce.requests, produce.errors) == (3, 1)
    assert produce.seconds_total == pytest.approx(60.00305)
    expected = [0] * (len(REQUEST_LATENCY_BUCKETS_S) + 1)
    expected[0] = 1
    expected[REQUEST_LATENCY_BUCKETS_S.index(0.005)] = 1
    expected[-1] = 1
    assert list(produce.bucket_counts) == expected


def test_records_in_count_the_log_ends_advances_from_the_first_publish(tmp_path: Path) -> None:
    metrics_file = MetricsFile.create(tmp_path / "worker-0")
    writer = WorkerMetrics(metrics_file)
    writer.publish(SlotKind.PARTITION, [("orders", 0, _offsets(100))])  # held 100 before
    writer.add("orders", 0, PartitionField.BYTES_IN, 500)
    writer.publish(SlotKind.PARTITION, [("orders", 0, _offsets(130))])
    writer.publish(SlotKind.PARTITION, [("orders", 0, _offsets(125))])  # truncated: no count
    writer.publish(SlotKind.PARTITION, [("orders", 0, _offsets(140))])
    values = _partitions(metrics_file)[("orders", 0)].values
    assert values[PartitionField.RECORDS_IN] == 30 + 15
    assert values[PartitionField.BYTES_IN] == 500
    assert values[PartitionField.LOG_END_OFFSET] == 140
    assert values[PartitionField.ISR] == 2


def test_a_partition_no_longer_held_is_no_longer_reported(tmp_path: Path) -> None:
    metrics_file = MetricsFile.create(tmp_path / "worker-0")
    writer = WorkerMetrics(metrics_file)
    writer.publish(SlotKind.PARTITION, [("a", 0, _offsets(1)), ("a", 1, _offsets(2))])
    writer.publish(SlotKind.GROUP, [("readers", -1, array("q", [3]))])
    writer.publish(SlotKind.PARTITION, [("a", 1, _offsets(2))])
    assert set(_partitions(metrics_file)) == {("a", 1)}
    (group,) = read_sample(metrics_file).of_kind(SlotKind.GROUP)  # another kind: untouched
    assert (group.name, group.values[GroupField.MEMBERS]) == ("readers", 3)


def test_a_restarted_worker_counts_on_from_where_its_predecessor_stopped(
        tmp_path: Path) -> None:
    path = tmp_path / "worker-0"
    first = WorkerMetrics(MetricsFile.create(path))
    first.publish(SlotKind.PARTITION, [("a", 0, _offsets(10)), ("b", 0, _offsets(5))])
    first.add("a", 0, PartitionField.BYTES_IN, 700)
    # SIGKILL: nothing is closed; the supervisor's file stays, and a new process maps it.
    second = WorkerMetrics(MetricsFile.create(path))
    assert _partitions(MetricsFile(path, writable=False)) == {}  # hidden until held again
    second.publish(SlotKind.PARTITION, [])  # its first heartbeat, before any assign
    second.add("a", 0, PartitionField.BYTES_IN, 1)
    second.publish(SlotKind.PARTITION, [("a", 0, _offsets(12))])
    values = _partitions(MetricsFile(path, writable=False))[("a", 0)].values
    assert values[PartitionField.BYTES_IN] == 701
    assert values[PartitionField.RECORDS_IN] == 2  # 10 -> 12, nothing counted twice


def test_a_full_table_reuses_what_a_predecessor_left_then_says_it_is_full(
        tmp_path: Path) -> None:
    path = tmp_path / "worker-0"
    WorkerMetrics(MetricsFile.create(path)).publish(SlotKind.PARTITION,
                                                    [("old", 0, _offsets(0))])
    writer = WorkerMetrics(MetricsFile.create(path))
    many = [(f"t{index}", 0, _offsets(index)) for index in range(PARTITION_SLOTS)]
    writer.publish(SlotKind.PARTITION, many)
    sample = read_sample(MetricsFile(path, writable=False))
    assert len(list(sample.of_kind(SlotKind.PARTITION))) == PARTITION_SLOTS
    assert not sample.slots_exhausted
    writer.publish(SlotKind.PARTITION, [*many, ("one-more", 0, _offsets(1))])
    sample = read_sample(MetricsFile(path, writable=False))
    assert sample.slots_exhausted
    assert ("one-more", 0) not in _partitions(MetricsFile(path, writable=False))


def test_a_file_of_another_layout_is_refused_and_made_anew(tmp_path: Path) -> None:
    path = tmp_path / "worker-0"
    path.write_bytes(b"\0" * 4096)
    with pytest.raises(OSError, match="not a metrics file"):
        MetricsFile(path, writable=True)
    writer = WorkerMetrics(MetricsFile.create(path))
    writer.request(ApiKey.FETCH, False, 1)
    assert read_sample(MetricsFile(path, writable=False)).apis[0].requests == 1
