"""Power loss and a damaged tail change exactly the files they say, on real files."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from zlog_jepsen import storage_faults as faults


def _batch(base_offset: int, body_bytes: int) -> bytes:
    """A batch as far as the walk reads it: base offset, length, then that many bytes."""
    return struct.pack(">qi", base_offset, body_bytes) + bytes(range(body_bytes))


def _broker(tmp_path: Path) -> tuple[Path, Path, Path]:
    data, rings = tmp_path / "data", tmp_path / "rings"
    partition = data / "jepsen-0"
    partition.mkdir(parents=True)
    (partition / "00000000000000000000.log").write_bytes(
        _batch(0, 70) + _batch(1, 80) + bytes(100))  # preallocated zeros after the batches
    (partition / "00000000000000000000.index").write_bytes(b"i" * 8)
    (partition / "00000000000000000000.timeindex").write_bytes(b"t" * 12)
    (partition / "leader-epoch-checkpoint").write_text("0\n")
    (data / "__raft").mkdir()
    (data / "__raft" / "00000000000000000000.log").write_bytes(b"raft")
    (rings / "jepsen-0").mkdir(parents=True)
    (rings / "jepsen-0" / "ring").write_bytes(b"r")
    return data, rings, partition


def test_batch_ends_stop_at_the_zeros_and_at_a_cut() -> None:
    whole = _batch(0, 70) + _batch(1, 80)
    assert faults.batch_ends(whole + bytes(40)) == [82, 174]
    assert faults.batch_ends(whole[:150]) == [82]


def test_power_loss_drops_segments_indexes_and_rings_and_keeps_what_is_fsynced(
        tmp_path: Path) -> None:
    data, rings, partition = _broker(tmp_path)
    lost = faults.lose_power(data, rings)
    assert lost == {"segments_lost": 1, "indexes_lost": 2, "rings_lost": 1}
    assert sorted(p.name for p in partition.iterdir()) == ["leader-epoch-checkpoint"]
    assert (data / "__raft" / "00000000000000000000.log").read_bytes() == b"raft"
    assert list(rings.iterdir()) == []


def test_a_cut_lands_within_the_batches(tmp_path: Path) -> None:
    _, _, partition = _broker(tmp_path)
    done = faults.damage_tail(partition, random.Random(1), faults.TRUNCATE)
    size = (partition / "00000000000000000000.log").stat().st_size
    assert done["at_byte"] == size and 0 <= size <= 174 and done["of_bytes"] == 174


def test_a_bit_flip_changes_one_bit_of_the_last_batch_only(tmp_path: Path) -> None:
    _, _, partition = _broker(tmp_path)
    segment = partition / "00000000000000000000.log"
    before = segment.read_bytes()
    done = faults.damage_tail(partition, random.Random(2), faults.BIT_FLIP)
    after = segment.read_bytes()
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert changed == [done["at_byte"]] and 82 <= changed[0] < 174
    assert bin(before[changed[0]] ^ after[changed[0]]).count("1") == 1


def test_dropping_the_indexes_leaves_the_segment(tmp_path: Path) -> None:
    _, _, partition = _broker(tmp_path)
    done = faults.damage_tail(partition, random.Random(3), faults.DROP_INDEXES)
    assert done["indexes_dropped"] == 2
    assert sorted(p.name for p in partition.iterdir()) == [
        "00000000000000000000.log", "leader-epoch-checkpoint"]


def test_an_unknown_damage_is_refused(tmp_path: Path) -> None:
    _, _, partition = _broker(tmp_path)
    with pytest.raises(ValueError, match="damage is one of truncate, bit-flip, drop-indexes"):
        faults.damage_tail(partition, random.Random(4), "shred")


def _sealed_partition(tmp_path: Path) -> Path:
    partition = tmp_path / "jepsen-0"
    partition.mkdir()
    for base in (0, 2, 4):
        (partition / f"{base:020d}.log").write_bytes(_batch(base, 70) + _batch(base + 1, 80))
        (partition / f"{base:020d}.index").write_bytes(bytes(16))
    return partition


def test_a_rot_flips_one_bit_in_the_middle_of_a_sealed_segment_or_its_index(
        tmp_path: Path) -> None:
    partition = _sealed_partition(tmp_path)
    before = {path.name: path.read_bytes() for path in partition.iterdir()}
    seen = set()
    for seed in range(12):
        done = faults.rot_segment(partition, random.Random(seed))
        changed = [name for name, data in before.items()
                   if (partition / name).read_bytes() != data]
        assert len(changed) == 1, changed
        (name,) = changed
        assert not name.startswith(f"{4:020d}")  # never the newest, active segment
        old, new = before[name], (partition / name).read_bytes()
        diff = [i for i in range(len(old)) if old[i] != new[i]]
        assert len(diff) == 1 and bin(old[diff[0]] ^ new[diff[0]]).count("1") == 1
        if done["rot"] == faults.SEGMENT_BYTE:
            assert 174 // 4 <= diff[0] < 3 * 174 // 4  # the middle of its batches
        seen.add(done["rot"])
        (partition / name).write_bytes(old)
    assert seen == {faults.SEGMENT_BYTE, faults.INDEX_BYTE}


def test_a_partition_without_a_sealed_segment_rots_in_its_active_one(tmp_path: Path) -> None:
    _, _, partition = _broker(tmp_path)
    done = faults.rot_segment(partition, random.Random(1))
    assert done["sealed"] is False and done["rot"] == faults.SEGMENT_BYTE


def test_a_partition_without_a_segment_is_left_as_it_is(tmp_path: Path) -> None:
    """A replica placed moments ago has no file yet: nothing to rot, and the run goes on."""
    (tmp_path / "t-0").mkdir()
    done = faults.rot_segment(tmp_path / "t-0", random.Random(1))
    assert done["rot"] == "none" and done["segment"] is None
    assert list((tmp_path / "t-0").iterdir()) == []
