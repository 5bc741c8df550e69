"""The in-memory block tree of one node: stored blocks, the path base->head, fork choice, GC.

Chained Raft (docs/raft.md §2) never overwrites a block. A follower that
follows a new leader moves `head` to the leader's branch and the blocks of the old branch
stay stored as a dead branch until commit passes their fork point; then `prune_forks` drops
them. This module owns that tree and nothing else: it does no I/O, knows no terms of office
and never decides *whether* to move head, only *how*. Everything it deletes it returns, so
the caller can report the deletions to storage in `Ready.pruned`.

Heights index the path: `path_at(h)` is the block at height h on base->head. The base is the
latest snapshot point (the genesis block (0, 0) before any snapshot); blocks at or below it
are gone, only its id and the configuration in force there are kept.
"""

from __future__ import annotations

from zlog.raft.messages import GENESIS, Block, BlockId, BlockKind, ConfigState


class Chain:
    """Blocks above the base, the children index and the path from base to head."""

    def __init__(self, base: BlockId, base_config: ConfigState) -> None:
        assert base.height >= 0
        assert base.term >= 0
        self._base = base
        self._base_config = base_config
        self._blocks: dict[BlockId, Block] = {}
        self._children: dict[BlockId, set[BlockId]] = {}
        self._head = base
        self._path: list[BlockId] = [base]  # _path[i] is the block at height base.height + i
        self._configs: list[tuple[int, ConfigState]] = []  # CONFIG blocks on the path, by height

    # -- reading ------------------------------------------------------------------------------

    @property
    def base(self) -> BlockId:
        return self._base

    @property
    def base_config(self) -> ConfigState:
        return self._base_config

    @property
    def head(self) -> BlockId:
        return self._head

    def __len__(self) -> int:
        return len(self._blocks)

    def ids(self) -> list[BlockId]:
        """Every stored block id, sorted (the base is not stored, only named)."""
        return sorted(self._blocks)

    def get(self, block_id: BlockId) -> Block | None:
        return self._blocks.get(block_id)

    def contains(self, block_id: BlockId) -> bool:
        """Whether `block_id` is stored or is the base (whose ancestors are all committed)."""
        return block_id == self._base or block_id in self._blocks

    def path_at(self, height: int) -> BlockId | None:
        """The block at `height` on base->head, or None outside [base.height, head.height]."""
        index = height - self._base.height
        if index < 0 or index >= len(self._path):
            return None
        block_id = self._path[index]
        assert block_id.height == height, "the path is indexed by height"
        return block_id

    def on_path(self, block_id: BlockId) -> bool:
        """Whether head equals or extends `block_id` (O(1) through the path index)."""
        return self.path_at(block_id.height) == block_id

    def path_blocks(self, low: int, high: int) -> list[Block]:
        """The stored blocks at heights low..high (inclusive) on the path, in height order."""
        assert low > self._base.height, "blocks at or below the base are compacted away"
        assert high <= self._head.height
        start = low - self._base.height
        stop = high - self._base.height + 1
        blocks = [self._blocks[block_id] for block_id in self._path[start:stop]]
        assert all(b.id.height == low + i for i, b in enumerate(blocks))
        return blocks

    def extends(self, descendant: BlockId, ancestor: BlockId) -> bool:
        """Whether `descendant` equals `ancestor` or has it among its stored ancestors."""
        if descendant.height < ancestor.height:
            return False
        if self.on_path(descendant) and ancestor.height >= self._base.height:
            return self.on_path(ancestor)
        current: BlockId | None = descendant
        while current is not None and current.height > ancestor.height:
            block = self._blocks.get(current)
            if block is None:
                return False
            assert block.parent is not None
            assert block.parent.height == current.height - 1, "one height per step: bounded"
            current = block.parent
        return current == ancestor

    def config_at(self, height: int) -> ConfigState:
        """The configuration in force at `height` on the path: the latest CONFIG at or below."""
        assert height >= self._base.height, "configs below the base are not kept"
        assert height <= self._head.height, "configs above head are not on the path"
        config = self._base_config
        for config_height, candidate in self._configs:
            if config_height > height:
                break
            config = candidate
        return config

    @property
    def config(self) -> ConfigState:
        """The configuration at head: it applies as soon as it is on the path (dissertation 4)."""
        return self._configs[-1][1] if self._configs else self._base_config

    @property
    def last_config_height(self) -> int:
        """Height of the latest CONFIG block on the path, or the base height if none."""
        return self._configs[-1][0] if self._configs else self._base.height

    # -- writing ------------------------------------------------------------------------------

    def insert(self, block: Block) -> bool:
        """Store `block` under its parent; False if it was already stored (identical)."""
        existing = self._blocks.get(block.id)
        if existing is not None:
            assert existing == block, f"two different blocks named {block.id}"
            return False
        parent = block.parent
        assert parent is not None, "only the genesis block has no parent"
        assert self.contains(parent), f"parent {parent} of {block.id} is not stored"
        assert block.id.height == parent.height + 1
        assert block.id.term >= parent.term
        self._blocks[block.id] = block
        self._children.setdefault(parent, set()).add(block.id)
        return True

    def set_head(self, new_head: BlockId) -> None:
        """Make `new_head` the head and rebuild the path from the fork point (fork choice)."""
        assert self.contains(new_head), f"head {new_head} is not stored"
        branch: list[BlockId] = []
        current = new_head
        while not self.on_path(current):
            branch.append(current)
            parent = self._blocks[current].parent
            assert parent is not None
            current = parent
        fork_height = current.height
        del self._path[fork_height - self._base.height + 1 :]
        while self._configs and self._configs[-1][0] > fork_height:
            self._configs.pop()
        for block_id in reversed(branch):
            self._path.append(block_id)
            block = self._blocks[block_id]
            if block.kind == BlockKind.CONFIG:
                self._configs.append((block_id.height, ConfigState.decode(block.payload)))
        self._head = new_head
        assert self._path[-1] == new_head
        assert len(self._path) == new_head.height - self._base.height + 1

    def prune_forks(self, low: int, high: int) -> list[BlockId]:
        """Drop every branch leaving the path at heights in (low, high]: the dead branches.

        Called when commit moves from height `low` to `high`. Nothing stored can ever extend
        those branches into a future leader's path (Leader Completeness), and nothing on the
        path or above `high` is touched.
        """
        assert self._base.height <= low <= high <= self._head.height
        pruned: list[BlockId] = []
        for height in range(low + 1, high + 1):
            parent = self._path[height - 1 - self._base.height]
            keep = self._path[height - self._base.height]
            for child in sorted(self._children.get(parent, ())):
                if child != keep:
                    pruned.extend(self._delete_subtree(child))
        assert all(not self.on_path(block_id) for block_id in pruned)
        return sorted(pruned)

    def compact(self, new_base: BlockId, base_config: ConfigState) -> list[BlockId]:
        """Make `new_base` (on the path) the base: drop it, everything below it and off it."""
        assert self.on_path(new_base), "compaction point must be on the path"
        assert new_base.height > self._base.height
        pruned = self._rebase(new_base, base_config)
        assert self._path[0] == new_base
        return pruned

    def install(self, snapshot_last: BlockId, config: ConfigState) -> list[BlockId]:
        """Rebase onto a leader's snapshot; keep what extends it, wipe the rest (section 4)."""
        assert snapshot_last.height > self._base.height, "snapshot older than our base"
        if snapshot_last not in self._blocks:
            pruned = sorted(self._blocks)
            self._blocks.clear()
            self._children.clear()
            self._base = snapshot_last
            self._base_config = config
            self._head = snapshot_last
            self._path = [snapshot_last]
            self._configs = []
            return pruned
        if not self.on_path(snapshot_last):
            self.set_head(snapshot_last)
        pruned = self._rebase(snapshot_last, config)
        assert self._base == snapshot_last
        return pruned

    # -- internals ----------------------------------------------------------------------------

    def _rebase(self, new_base: BlockId, base_config: ConfigState) -> list[BlockId]:
        """Keep only the blocks strictly extending `new_base` (which is on the path)."""
        keep: set[BlockId] = set()
        frontier = [new_base]
        while frontier:
            for child in self._children.get(frontier.pop(), ()):
                keep.add(child)
                frontier.append(child)
        pruned = sorted(block_id for block_id in self._blocks if block_id not in keep)
        for block_id in pruned:
            del self._blocks[block_id]
        self._children = {
            parent: children for parent, children in self._children.items()
            if parent in keep or parent == new_base
        }
        del self._path[: new_base.height - self._base.height]
        self._configs = [(h, c) for h, c in self._configs if h > new_base.height]
        self._base = new_base
        self._base_config = base_config
        assert self._path[0] == new_base
        assert all(block_id.height > new_base.height for block_id in self._blocks)
        return pruned

    def _delete_subtree(self, root: BlockId) -> list[BlockId]:
        """Delete `root` and all its descendants; they must all be off the path."""
        assert not self.on_path(root), f"refusing to delete {root}: it is on the path"
        deleted: list[BlockId] = []
        frontier = [root]
        while frontier:
            block_id = frontier.pop()
            block = self._blocks.pop(block_id)
            deleted.append(block_id)
            assert block.parent is not None
            siblings = self._children.get(block.parent)
            if siblings is not None:
                siblings.discard(block_id)
                if not siblings:
                    del self._children[block.parent]
            frontier.extend(sorted(self._children.pop(block_id, ())))
        return deleted


def genesis_chain(config: ConfigState) -> Chain:
    """The chain of a brand-new node: only the genesis block, as the base."""
    chain = Chain(GENESIS, config)
    assert chain.head == GENESIS
    assert len(chain) == 0
    return chain
