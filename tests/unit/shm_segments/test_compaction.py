"""Compaction keeps the latest record per key, keeps offsets, and never blocks appends."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.clock import ManualClock
from tests.storage_helpers import split_batches
from zlog.record.records import NewRecord, build_batch, read_records
from zlog.shm_segments.compaction import compact
from zlog.shm_segments.log import PartitionLog
from zlog.shm_segments.log_config import LogConfig

DAY_MS = 24 * 3600 * 1000


def _keyed(pairs: list[tuple[str, str | None]], timestamp_ms: int) -> bytes:
    return build_batch(
        [NewRecord(None if v is None else v.encode(), k.encode()) for k, v in pairs],
        base_timestamp_ms=timestamp_ms,
    )


def _records(log: PartitionLog) -> list[tuple[int, str, str | None]]:
    out = []
    for batch in split_batches(log.read(log.log_start_offset, 1 << 30)):
        for r in read_records(batch):
            assert r.key is not None
            out.append((r.offset, r.key.decode(), None if r.value is None else r.value.decode()))
    return out


def _open(tmp: Path, shm: Path, clock: ManualClock, **config: object) -> PartitionLog:
    settings = LogConfig(cleanup_policy="compact", segment_bytes=300, **config)  # type: ignore[arg-type]
    return PartitionLog(tmp, "__consumer_offsets", 0, settings, ring_dir=shm, clock=clock)


def test_only_the_latest_record_per_key_survives_with_its_offset(
    tmp_path: Path, shm_dir: Path
) -> None:
    clock = ManualClock()
    with _open(tmp_path, shm_dir, clock) as log:
        now = clock.wall_ms()
        log.append(_keyed([("a", "1"), ("b", "1")], now))  # 0, 1
        log.append(_keyed([("a", "2"), ("c", "1")], now))  # 2, 3
        log.append(_keyed([("b", "2"), ("a", "3")], now))  # 4, 5
        log.append(_keyed([("d", "1")], now))  # 6
        log.roll()
        log.append(_keyed([("a", "4")], now))  # 7: in the active segment, not compacted
        stats = compact(log)
        assert stats.records_after < stats.records_before
        assert _records(log) == [(3, "c", "1"), (4, "b", "2"), (5, "a", "3"), (6, "d", "1"),
                                 (7, "a", "4")]
        assert log.log_end_offset == 8
        assert log.append(_keyed([("e", "1")], now)) == 8
        before = _records(log)
    with _open(tmp_path, shm_dir, clock) as log:
        assert _records(log) == before


def test_tombstones_outlive_their_key_by_delete_retention_ms(tmp_path: Path, shm_dir: Path) -> None:
    clock = ManualClock()
    with _open(tmp_path, shm_dir, clock, delete_retention_ms=DAY_MS) as log:
        now = clock.wall_ms()
        log.append(_keyed([("a", "1"), ("b", "1")], now))
        log.append(_keyed([("a", None)], now))  # tombstone for a at offset 2
        log.roll()
        compact(log)
        assert _records(log) == [(1, "b", "1"), (2, "a", None)]
        clock.advance(DAY_MS + 1)
        compact(log)
        assert _records(log) == [(1, "b", "1")]


def test_recent_batches_wait_for_min_compaction_lag(tmp_path: Path, shm_dir: Path) -> None:
    clock = ManualClock()
    with _open(tmp_path, shm_dir, clock, min_compaction_lag_ms=60_000) as log:
        now = clock.wall_ms()
        log.append(_keyed([("a", "1")], now))
        log.append(_keyed([("a", "2")], now))
        log.roll()
        compact(log)
        assert [r[0] for r in _records(log)] == [0, 1]
        clock.advance(60_001)
        compact(log)
        assert [r[0] for r in _records(log)] == [1]


def test_appends_go_on_while_compaction_runs_on_another_thread(
    tmp_path: Path, shm_dir: Path
) -> None:
    clock = ManualClock()
    with _open(tmp_path, shm_dir, clock) as log:
        now = clock.wall_ms()
        for round_ in range(200):
            log.append(_keyed([(f"k{round_ % 10}", f"v{round_}")], now))
        done = threading.Event()

        def run() -> None:
            compact(log)
            done.set()

        worker = threading.Thread(target=run)
        worker.start()
        appended = 0
        while not done.is_set() or appended < 50:
            log.append(_keyed([(f"n{appended}", "x")], now))
            appended += 1
        worker.join(timeout=30)
        assert not worker.is_alive()
        records = _records(log)
        offsets = [r[0] for r in records]
        assert offsets == sorted(set(offsets))
        new_keys = [r[1] for r in records if r[1].startswith("n")]
        assert new_keys == [f"n{i}" for i in range(appended)]  # every append is there, in order
        assert log.log_end_offset == 200 + appended
        latest_k = {r[1]: r[2] for r in records if r[1].startswith("k")}
        assert latest_k == {f"k{i}": f"v{190 + i}" for i in range(10)}
