"""A simulated disk that holds exactly what the driver persisted, and nothing else.

The driver writes one Ready at a time, atomically (the real storage does it with one fsync).
A crash discards the RawNode object; whatever the driver had not yet written is lost, and
`load()` rebuilds a PersistedState from what is here, as real storage would after reboot.
"""

from __future__ import annotations

from zlog.raft.messages import GENESIS, Block, BlockId, HardState, PersistedState, Ready, Snapshot


class SimDisk:
    """One node's durable Raft state: hard state, head, blocks and the latest snapshot."""

    def __init__(self) -> None:
        self.hard_state: HardState | None = None
        self.head: BlockId | None = None
        self.blocks: dict[BlockId, Block] = {}
        self.snapshot: Snapshot | None = None
        self.writes = 0

    def persist(self, ready: Ready) -> None:
        """Apply one Ready's durable part atomically: deletions, snapshot, blocks, pointers."""
        for block_id in ready.pruned:
            self.blocks.pop(block_id, None)
        if ready.snapshot is not None:
            self.snapshot = ready.snapshot
            base_height = ready.snapshot.last.height
            leftovers = [i for i in self.blocks if i.height <= base_height]
            assert not leftovers, f"snapshot Ready did not prune {leftovers[:3]}"
        for block in ready.new_blocks:
            assert block.id not in self.blocks or self.blocks[block.id] == block
            self.blocks[block.id] = block
        if ready.head is not None:
            self.head = ready.head
        if ready.hard_state is not None:
            self.hard_state = ready.hard_state
        self.writes += 1

    def load(self) -> PersistedState | None:
        """What a restarting node is given; None if nothing was ever written."""
        if self.hard_state is None and self.head is None and self.snapshot is None:
            assert not self.blocks
            return None
        return PersistedState(
            hard_state=self.hard_state or HardState(0, None, GENESIS),
            head=self.head or GENESIS,
            blocks=tuple(self.blocks[i] for i in sorted(self.blocks)),
            snapshot=self.snapshot,
        )
