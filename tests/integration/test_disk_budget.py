"""retention.disk.percent is one budget per topic on a broker: growing the topic divides it.

Spec: docs/storage.md, "Disk budget". A real broker on a real tmpfs of a known size (mounted
for the test, as the disk-full tests do), a real producer, and the segment files as they are
on that disk.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from tests.fault.small_disk import small_disk
from zlog.client import Admin, NewTopic, Producer
from zlog_testbed.broker_process import broker_process
from zlog_testbed.waiting import wait_until

DISK_BYTES = 32 << 20
BUDGET_BYTES = 512 << 10  # the topic's 1.5625% of the 32 MiB disk
SEGMENT_BYTES = 32 << 10
VALUE_BYTES = 4 << 10
RETENTION_WAIT_S = 20.0  # a retention pass runs every 5 s in each worker; a shared machine
TOPIC = "budgeted"


def _log_bytes(data_dir: Path, partition: int) -> int:
    """What retention counts of one partition: its segment files' bytes (a file retention
    deletes between the listing and its stat counts as gone)."""
    total = 0
    for path in (data_dir / f"{TOPIC}-{partition}").glob("*.log"):
        with contextlib.suppress(FileNotFoundError):
            total += path.stat().st_size
    return total


def _produce(endpoint: str, partitions: range, bytes_each: int) -> None:
    """Uncompressed, so the bytes sent are the bytes stored; a new producer sees every
    partition the topic has now."""
    with Producer(endpoint, compression=None, linger_ms=0, acks="all") as producer:
        for partition in partitions:
            for index in range(bytes_each // VALUE_BYTES):
                value = b"%08d" % index + b"v" * (VALUE_BYTES - 8)
                producer.send(TOPIC, value, partition=partition)
        producer.flush(30_000)


@pytest.mark.slow
def test_growing_a_topic_from_one_to_four_partitions_keeps_it_within_its_budget(
    tmp_path: Path,
) -> None:
    with small_disk(DISK_BYTES) as disk, broker_process(
        tmp_path, workers=2, data_dir=disk.path / "data",
    ) as broker, Admin(broker.endpoint, request_timeout_ms=15_000) as admin:
        data_dir = disk.path / "data"
        percent = 100 * BUDGET_BYTES / DISK_BYTES
        admin.create_topics([NewTopic(TOPIC, 1, configs={
            "retention.disk.percent": f"{percent:g}", "segment.bytes": str(SEGMENT_BYTES)})])

        # Alone, the partition has the whole budget: twice the budget produced, the oldest go.
        _produce(broker.endpoint, range(1), 2 * BUDGET_BYTES)
        wait_until(lambda: _log_bytes(data_dir, 0) <= BUDGET_BYTES, RETENTION_WAIT_S,
                   what="retention to bring the one partition within the budget")
        assert _log_bytes(data_dir, 0) > BUDGET_BYTES - 2 * SEGMENT_BYTES, "kept up to it"

        # Four partitions, on two workers: the same budget, a quarter each, broker-wide.
        admin.create_partitions({TOPIC: 4})
        share_bytes = BUDGET_BYTES // 4
        _produce(broker.endpoint, range(4), 2 * share_bytes)  # twice its share each

        def within_shares() -> bool:
            return all(_log_bytes(data_dir, p) <= share_bytes for p in range(4))

        wait_until(within_shares, RETENTION_WAIT_S,
                   what="retention to bring every partition within its quarter")
        sizes = [_log_bytes(data_dir, p) for p in range(4)]
        assert sum(sizes) <= BUDGET_BYTES, sizes
        assert all(size > share_bytes - 2 * SEGMENT_BYTES for size in sizes), sizes
        assert "disk share 131072 bytes (was 524288)" in broker.log_text()
