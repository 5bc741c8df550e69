"""A leader's ISR change in flight on disk (isr_change_file.py): it reads back as written,
and a file that does not read back is never resumed."""

from __future__ import annotations

from pathlib import Path

from zlog.broker.data.isr import IsrChange
from zlog.broker.data.isr_change_file import (
    CHANGE_FILE,
    IsrChangeFiles,
    load_isr_change,
    remove_isr_change,
    save_isr_change,
)
from zlog.types import TopicPartition

CHANGE = IsrChange(4, 7, (1, 2, 3), ((2, 20), (3, 30)))


def test_a_change_reads_back_as_written_and_is_removed(tmp_path: Path) -> None:
    save_isr_change(tmp_path, CHANGE)
    assert load_isr_change(tmp_path) == CHANGE
    remove_isr_change(tmp_path)
    assert load_isr_change(tmp_path) is None
    remove_isr_change(tmp_path)  # nothing to remove: fine


def test_a_damaged_file_is_not_resumed(tmp_path: Path) -> None:
    for damaged in (b"", b"{", b'{"leader_epoch": 4}', b"[1, 2]", b"\xff"):
        (tmp_path / CHANGE_FILE).write_bytes(damaged)
        assert load_isr_change(tmp_path) is None


def test_the_store_knows_only_open_partitions(tmp_path: Path) -> None:
    open_here = TopicPartition("t", 0)
    store = IsrChangeFiles(lambda tp: tmp_path if tp == open_here else None)
    store.save(open_here, CHANGE)
    assert store.load(open_here) == CHANGE
    assert store.load(TopicPartition("t", 1)) is None
    store.remove(open_here)
    assert store.load(open_here) is None
