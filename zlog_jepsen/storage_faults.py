"""What a power loss or a damaged disk leaves of a stopped broker's files (F2b, F5).

Both run on a broker already killed with kill -9, before it starts again; both only change
files, so they are tested on real files with a seeded `random.Random`.

Power loss (F2b) rolls every partition data file back to its last fsync and drops the
shared-memory rings. zlog fsyncs partition data only when a topic sets `flush.messages` or
`flush.ms` (docs/reliability.md §2.3), and the harness's topic sets neither, so the last
fsynced length of every segment is zero and neither its name nor its indexes need have
reached the disk: they all go. What zlog does fsync stays: the metadata log (`__raft/`),
the leader-epoch checkpoints, the broker's identity file. That is the model without any hook
in the broker; a topic with `flush.*` would need the fsynced lengths recorded, which the
harness does not do.

A damaged tail (F5) hurts one partition's newest segment in one of three ways: cut at a
random byte (inside a batch or on a batch boundary), one byte of its last batch flipped, or
its sparse and time indexes deleted.

A rotted segment (F5, a corrupted minority follower) has one bit flipped in the middle of one
of a partition's sealed segments, not at its tail: in a byte of its batches, between a
quarter and three quarters of the way through, or in its offset index. A partition with no
sealed segment yet gets the flip in the middle of its active segment instead.

A wiped disk (a host whose disk was replaced, started again under the same node id) loses
everything: every file of the data directory, `meta.json` with the directory's id included
(so the broker makes a new one and registers as a new, empty disk), the metadata log, and the
rings. The directories themselves stay, since either may be a mount point (a small disk's
tmpfs, zlog_jepsen.small_disks).
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Final

from zlog.broker.control.cluster_node import META_FILE
from zlog.record.header import LOG_OVERHEAD_BYTES, size_bytes_at

SEGMENT_SUFFIX: Final = ".log"
INDEX_SUFFIXES: Final = (".index", ".timeindex")
METADATA_DIR: Final = "__raft"
TRUNCATE: Final = "truncate"
BIT_FLIP: Final = "bit-flip"
DROP_INDEXES: Final = "drop-indexes"
DAMAGES: Final = (TRUNCATE, BIT_FLIP, DROP_INDEXES)


def partition_dirs(data_dir: Path) -> list[Path]:
    """Every partition directory under `data_dir` (those holding a segment), sorted."""
    return sorted(path.parent for path in data_dir.glob(f"*/*{SEGMENT_SUFFIX}")
                  if path.parent.name != METADATA_DIR and path.parent.parent == data_dir)


def lose_power(data_dir: Path, ring_dir: Path) -> dict[str, int]:
    """Roll `data_dir` back to its last fsyncs and empty `ring_dir`; what went, counted."""
    segments = indexes = 0
    for directory in partition_dirs(data_dir):
        for path in directory.iterdir():
            if path.name.endswith(SEGMENT_SUFFIX):
                path.unlink()
                segments += 1
            elif path.name.endswith(INDEX_SUFFIXES):
                path.unlink()
                indexes += 1
    return {"segments_lost": segments, "indexes_lost": indexes, "rings_lost": _empty(ring_dir)}


def _empty(directory: Path) -> int:
    """Delete everything inside `directory`, which stays; how many entries went."""
    if not directory.is_dir():
        return 0
    entries = 0
    for path in directory.iterdir():
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
        entries += 1
    return entries


def dir_id(data_dir: Path) -> str | None:
    """The id the broker gave its data directory (in `meta.json`), None before it has one."""
    try:
        return str(json.loads((data_dir / META_FILE).read_text(encoding="utf-8"))["dir_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def wipe_disk(data_dir: Path, ring_dir: Path) -> dict[str, object]:
    """Delete everything in a stopped broker's `data_dir` and `ring_dir`; what was there."""
    old_dir_id = dir_id(data_dir)
    return {"old_dir_id": old_dir_id, "entries_wiped": _empty(data_dir),
            "rings_lost": _empty(ring_dir)}


def batch_ends(segment: bytes) -> list[int]:
    """The end position of each whole batch from the start, up to the first that is not
    (a preallocated file's zeros, or a cut)."""
    ends: list[int] = []
    position = 0
    while position + LOG_OVERHEAD_BYTES <= len(segment):
        end = position + size_bytes_at(segment, position)
        if end <= position + LOG_OVERHEAD_BYTES or end > len(segment):
            break
        ends.append(end)
        position = end
    return ends


def damage_tail(partition_dir: Path, rng: random.Random, damage: str | None = None
                ) -> dict[str, object]:
    """Damage the newest segment of `partition_dir` (`damage`, or one picked by `rng`);
    what was done, for the history. A segment with no whole batch is cut or left as is."""
    damage = damage or rng.choice(DAMAGES)
    if damage not in DAMAGES:
        raise ValueError(f"damage is one of {', '.join(DAMAGES)}, not {damage!r}")
    segment = max(partition_dir.glob(f"*{SEGMENT_SUFFIX}"), key=lambda path: path.name)
    done: dict[str, object] = {"damage": damage, "segment": f"{partition_dir.name}/{segment.name}"}
    if damage == DROP_INDEXES:
        dropped = [path for suffix in INDEX_SUFFIXES
                   for path in partition_dir.glob(f"*{suffix}")]
        for path in dropped:
            path.unlink()
        done["indexes_dropped"] = len(dropped)
        return done
    data = bytearray(segment.read_bytes())
    ends = batch_ends(bytes(data))
    logical_bytes = ends[-1] if ends else 0
    if damage == TRUNCATE or not ends:
        at = rng.randrange(logical_bytes + 1)
        with segment.open("r+b") as file:
            file.truncate(at)
        done.update(damage=TRUNCATE, at_byte=at, of_bytes=logical_bytes)
        return done
    start = ends[-2] if len(ends) > 1 else 0
    at = rng.randrange(start, ends[-1])
    data[at] ^= 1 << rng.randrange(8)
    segment.write_bytes(bytes(data))
    done.update(at_byte=at, last_batch=[start, ends[-1]])
    return done


SEGMENT_BYTE: Final = "segment-byte"
INDEX_BYTE: Final = "index-byte"


def _flip_bit(path: Path, at: int, rng: random.Random) -> None:
    with path.open("r+b") as file:
        file.seek(at)
        (byte,) = file.read(1)
        file.seek(at)
        file.write(bytes([byte ^ (1 << rng.randrange(8))]))


def rot_segment(partition_dir: Path, rng: random.Random) -> dict[str, object]:
    """Flip one bit in the middle of one of `partition_dir`'s sealed segments or in its
    offset index (the newest segment when none is sealed); what was done, for the history."""
    segments = sorted(partition_dir.glob(f"*{SEGMENT_SUFFIX}"), key=lambda path: path.name)
    if not segments:  # a replica placed here moments ago (a move, a drain's return): no file
        return {"segment": None, "sealed": False, "rot": "none", "reason": "no segment yet"}
    sealed = segments[:-1]
    segment = rng.choice(sealed) if sealed else segments[-1]
    index = segment.with_suffix(INDEX_SUFFIXES[0])
    done: dict[str, object] = {"segment": f"{partition_dir.name}/{segment.name}",
                               "sealed": bool(sealed)}
    if sealed and rng.random() < 0.5 and index.is_file() and index.stat().st_size > 0:
        at = rng.randrange(index.stat().st_size)
        _flip_bit(index, at, rng)
        done.update(rot=INDEX_BYTE, at_byte=at)
        return done
    ends = batch_ends(segment.read_bytes())
    logical_bytes = ends[-1] if ends else 0
    if logical_bytes == 0:
        done.update(rot="none", reason="no whole batch to flip")
        return done
    at = rng.randrange(logical_bytes // 4, max(3 * logical_bytes // 4, logical_bytes // 4 + 1))
    _flip_bit(segment, at, rng)
    done.update(rot=SEGMENT_BYTE, at_byte=at, of_bytes=logical_bytes)
    return done
