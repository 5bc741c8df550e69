"""RaftStorage: what save() returned for survives a crash; a torn tail loads the state before it.

Spec: docs/raft.md §2.3 (persistent state: term, vote, head, commit, blocks, snapshot; head
is durable too) and §5 (persist each Ready atomically with one fsync before sending).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from zlog.raft.messages import (
    GENESIS,
    Block,
    BlockId,
    BlockKind,
    ConfigState,
    HardState,
    PersistedState,
    Ready,
    Snapshot,
)
from zlog.raft.storage import (
    LOG_NAME,
    REWRITE_THRESHOLD_BYTES_DEFAULT,
    TEMP_NAME,
    RaftStorage,
)


def _chain(count: int, term: int = 1, parent: BlockId = GENESIS) -> list[Block]:
    blocks = []
    for _ in range(count):
        block_id = BlockId(term, parent.height + 1)
        blocks.append(Block(block_id, parent, BlockKind.CMD, f"cmd {block_id}".encode()))
        parent = block_id
    return blocks


def _ready_for(blocks: list[Block], term: int = 1, commit: BlockId = GENESIS) -> Ready:
    return Ready(
        hard_state=HardState(term=term, vote=1, commit=commit),
        head=blocks[-1].id,
        new_blocks=tuple(blocks),
    )


def _open(
    directory: Path,
    rewrite_threshold_bytes: int = REWRITE_THRESHOLD_BYTES_DEFAULT,
    preallocate_bytes: int = 64 * 1024,
) -> tuple[RaftStorage, PersistedState | None]:
    storage = RaftStorage(
        directory,
        rewrite_threshold_bytes=rewrite_threshold_bytes,
        preallocate_bytes=preallocate_bytes,
    )
    return storage, storage.load()


def test_new_directory_loads_nothing(tmp_path: Path) -> None:
    storage, state = _open(tmp_path / "node")
    assert state is None
    storage.close()


def test_round_trip_of_every_field(tmp_path: Path) -> None:
    """§2: term, vote, commit, head, blocks and the snapshot all come back after a restart."""
    storage, _ = _open(tmp_path)
    blocks = _chain(5)
    storage.save(_ready_for(blocks[:3], term=2, commit=blocks[0].id))
    storage.save(_ready_for(blocks[3:], term=3, commit=blocks[2].id))
    expected = storage.state()
    storage.close()
    _, state = _open(tmp_path)
    assert state == expected
    assert state is not None
    assert state.hard_state == HardState(term=3, vote=1, commit=blocks[2].id)
    assert state.head == blocks[-1].id
    assert state.blocks == tuple(blocks)
    assert state.snapshot is None


def test_one_fsync_per_ready_and_none_for_an_empty_ready(tmp_path: Path) -> None:
    """§5 group commit: a Ready costs one write and one fsync, however much it carries."""
    storage, _ = _open(tmp_path)
    storage.save(_ready_for(_chain(50)))
    assert storage.statistics.fsyncs == 1
    storage.save(Ready(committed=tuple(_chain(2))))
    assert storage.statistics.fsyncs == 1
    storage.close()


def test_commit_or_prune_alone_is_written_without_fsync(tmp_path: Path) -> None:
    """etcd's MustSync: only term, vote, blocks, head and snapshots are promised to peers.

    A commit-only record is still written (a clean restart keeps it) and the next synced
    record makes it durable too.
    """
    storage, _ = _open(tmp_path)
    blocks = _chain(3)
    storage.save(_ready_for(blocks, term=2))
    assert storage.statistics.fsyncs == 1
    storage.save(Ready(hard_state=HardState(term=2, vote=1, commit=blocks[1].id)))
    storage.save(Ready(pruned=(BlockId(9, 9),)))
    assert storage.statistics.fsyncs == 1
    assert storage.statistics.unsynced_records == 2
    storage.save(Ready(hard_state=HardState(term=3, vote=None, commit=blocks[1].id)))
    assert storage.statistics.fsyncs == 2, "a new term is promised in every later message"
    storage.close()
    _, state = _open(tmp_path)
    assert state is not None
    assert state.hard_state == HardState(term=3, vote=None, commit=blocks[1].id)


def test_pruned_blocks_are_gone_after_restart(tmp_path: Path) -> None:
    """§4 dead-branch GC: ids in Ready.pruned are not handed back to the core."""
    storage, _ = _open(tmp_path)
    live = _chain(3)
    dead = [Block(BlockId(2, 2), live[0].id, BlockKind.CMD, b"dead")]
    storage.save(_ready_for(live + dead))
    storage.save(Ready(pruned=(dead[0].id,)))
    storage.close()
    _, state = _open(tmp_path)
    assert state is not None
    assert state.blocks == tuple(live)


def test_snapshot_keeps_only_blocks_that_extend_it(tmp_path: Path) -> None:
    """§4 Snapshot: blocks at or below `last` and off its branch are obsolete."""
    storage, _ = _open(tmp_path)
    blocks = _chain(6)
    dead = Block(BlockId(2, 5), blocks[3].id, BlockKind.CMD, b"dead")
    storage.save(_ready_for([*blocks, dead], commit=blocks[3].id))
    snapshot = Snapshot(last=blocks[3].id, config=ConfigState(voters=(1, 2, 3)), data=b"fsm")
    storage.save(Ready(snapshot=snapshot))
    storage.close()
    _, state = _open(tmp_path)
    assert state is not None
    assert state.snapshot == snapshot
    assert state.blocks == tuple(sorted([*blocks[4:], dead], key=lambda b: b.id))


def test_snapshot_that_does_not_extend_the_store_wipes_it(tmp_path: Path) -> None:
    """§4: a leader's snapshot of a block this node lacks replaces the whole store."""
    storage, _ = _open(tmp_path)
    storage.save(_ready_for(_chain(4)))
    foreign = Snapshot(last=BlockId(5, 9), config=ConfigState(voters=(1, 2, 3)), data=b"x")
    hard = HardState(term=5, vote=None, commit=foreign.last)
    storage.save(Ready(hard_state=hard, head=foreign.last, snapshot=foreign))
    storage.close()
    _, state = _open(tmp_path)
    assert state == PersistedState(hard_state=hard, head=foreign.last, blocks=(), snapshot=foreign)


def _saved_states(directory: Path, ready_count: int) -> tuple[list[PersistedState | None], int]:
    """Save `ready_count` Readies; return the state after each and the last record's offset."""
    storage, state = _open(directory)
    states = [state]
    parent = GENESIS
    last_record_offset = 0
    for index in range(ready_count):
        last_record_offset = storage.logical_bytes
        blocks = _chain(2, term=index + 1, parent=parent)
        parent = blocks[-1].id
        storage.save(_ready_for(blocks, term=index + 1, commit=blocks[0].id))
        states.append(storage.state())
    storage.close()
    return states, last_record_offset


def test_torn_tail_at_every_byte_loads_the_previous_state(tmp_path: Path) -> None:
    """A crash mid-write leaves a prefix of the last record: load() must ignore all of it."""
    states, last_offset = _saved_states(tmp_path / "source", 3)
    whole = (tmp_path / "source" / LOG_NAME).read_bytes().rstrip(b"\0")
    for cut in range(last_offset, len(whole)):
        directory = tmp_path / f"cut{cut}"
        directory.mkdir()
        (directory / LOG_NAME).write_bytes(whole[:cut])
        storage, state = _open(directory)
        assert state == states[-2], f"cut at byte {cut}"
        # The next record lands right after the last whole one.
        assert storage.logical_bytes == last_offset
        storage.close()


def test_torn_bytes_inside_preallocated_space_never_come_back(tmp_path: Path) -> None:
    """A torn record in the zeroed space is zeroed at load, so a shorter record written over
    it cannot leave a tail of the old one for the next load to misread."""
    states, last_offset = _saved_states(tmp_path, 3)
    path = tmp_path / LOG_NAME
    data = bytearray(path.read_bytes())
    record_end = len(data.rstrip(b"\0"))
    torn_end = (last_offset + record_end) // 2
    data[torn_end:record_end] = bytes(record_end - torn_end)  # only a prefix reached the disk
    path.write_bytes(bytes(data))
    storage, state = _open(tmp_path)
    assert state == states[-2]
    assert storage.statistics.torn_bytes_cut > 0
    commit_only = Ready(hard_state=HardState(term=2, vote=None, commit=GENESIS))
    storage.save(commit_only)
    expected = storage.state()
    storage.close()
    assert path.read_bytes()[storage.logical_bytes :].strip(b"\0") == b""
    _, state = _open(tmp_path)
    assert state == expected


def test_corrupt_last_record_loads_the_previous_state(tmp_path: Path) -> None:
    states, last_offset = _saved_states(tmp_path, 3)
    path = tmp_path / LOG_NAME
    data = bytearray(path.read_bytes())
    data[last_offset + 20] ^= 0x40
    path.write_bytes(bytes(data))
    storage, state = _open(tmp_path)
    assert state == states[-2]
    assert storage.statistics.torn_bytes_cut == len(data.rstrip(b"\0")) - last_offset
    storage.close()


def test_rewrite_keeps_state_and_shrinks_the_file(tmp_path: Path) -> None:
    """Past the threshold the file is rewritten as one checkpoint; the state is unchanged."""
    storage, _ = _open(tmp_path, rewrite_threshold_bytes=4096, preallocate_bytes=1024)
    parent = GENESIS
    for index in range(200):
        blocks = _chain(1, term=1, parent=parent)
        parent = blocks[0].id
        snapshot = None
        if index % 20 == 19:
            snapshot = Snapshot(parent, ConfigState(voters=(1,)), data=b"s" * 10)
        storage.save(Ready(head=parent, new_blocks=tuple(blocks), snapshot=snapshot))
    assert storage.statistics.rewrites > 0
    assert storage.logical_bytes < 4096 * 2
    expected = storage.state()
    storage.close()
    assert not (tmp_path / TEMP_NAME).exists()
    _, state = _open(tmp_path)
    assert state == expected


def test_leftover_temp_file_is_ignored(tmp_path: Path) -> None:
    """A crash before the rename leaves raft.log.tmp: the old file is still the truth."""
    states, _ = _saved_states(tmp_path, 2)
    (tmp_path / TEMP_NAME).write_bytes(b"half a checkpoint")
    storage, state = _open(tmp_path)
    assert state == states[-1]
    assert not (tmp_path / TEMP_NAME).exists()
    storage.close()


_CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from zlog.raft.messages import (
        Block, BlockId, BlockKind, ConfigState, HardState, Ready, Snapshot, GENESIS,
    )
    from zlog.raft.storage import RaftStorage

    storage = RaftStorage(
        Path(sys.argv[1]), rewrite_threshold_bytes=20_000, preallocate_bytes=8192
    )
    state = storage.load()
    term = 0 if state is None else state.hard_state.term
    parent = GENESIS if state is None else state.head
    while True:
        term += 1
        block = Block(BlockId(term, parent.height + 1), parent, BlockKind.CMD, b"p" * 300)
        # Every 25th save also compacts, so the live state stays small and rewrites happen.
        snapshot = None
        if term % 25 == 0:
            snapshot = Snapshot(parent, ConfigState(voters=(1,)), b"s" * 100)
        storage.save(Ready(HardState(term, 1, parent), block.id, (block,), snapshot))
        parent = block.id
        sys.stdout.write(f"{term}\\n")
        sys.stdout.flush()
    """
)


def _check_chain(state: PersistedState | None, acked_term: int) -> int:
    """The loaded state holds every acknowledged save, as one unbroken chain from genesis."""
    assert state is not None
    assert state.hard_state.term >= acked_term
    by_id = {block.id: block for block in state.blocks}
    base = GENESIS if state.snapshot is None else state.snapshot.last
    cursor = state.head
    assert cursor.term == state.hard_state.term
    while cursor != base:
        block = by_id[cursor]
        assert block.parent is not None
        cursor = block.parent
    assert len(by_id) == state.head.height - base.height
    return state.hard_state.term


@pytest.mark.slow
def test_kill_9_while_saving_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """A SIGKILL at a random moment (mid-write, mid-fsync, mid-rewrite) loses no acked save."""
    rng = random.Random(20240611)
    repo_root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(repo_root)}
    acked_term = 0
    rewrites = 0
    for _ in range(8):
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(tmp_path)],
            stdout=subprocess.PIPE, env=env, text=True,
        )
        assert child.stdout is not None
        target = acked_term + rng.randint(20, 400)
        while acked_term < target:
            line = child.stdout.readline()
            assert line, "the child stopped writing"
            acked_term = int(line)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        # Lines still buffered in the pipe were acknowledged too.
        for line in child.stdout.read().split():
            acked_term = int(line)
        child.stdout.close()
        storage = RaftStorage(tmp_path)
        acked_term = max(acked_term, _check_chain(storage.load(), acked_term))
        rewrites += acked_term > 100 and storage.logical_bytes < 20_000
        storage.close()
    assert acked_term > 100
    assert rewrites > 0, "no kill landed after a rewrite"
