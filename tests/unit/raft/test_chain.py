"""Unit tests of zlog.raft.chain: the block tree, the path, fork choice mechanics and GC.

Each test names the rule of docs/raft.md it checks.
"""

from __future__ import annotations

import pytest

from zlog.raft.chain import Chain, genesis_chain
from zlog.raft.messages import GENESIS, Block, BlockId, BlockKind, ConfigState

BOOT = ConfigState.of([1, 2, 3])


def block(term: int, height: int, parent: BlockId, payload: bytes = b"") -> Block:
    return Block(BlockId(term, height), parent, BlockKind.CMD, payload)


def config_block(term: int, height: int, parent: BlockId, config: ConfigState) -> Block:
    return Block(BlockId(term, height), parent, BlockKind.CONFIG, config.encode())


def grow(chain: Chain, *blocks: Block) -> None:
    for b in blocks:
        chain.insert(b)
    chain.set_head(blocks[-1].id)


def linear(chain: Chain, term: int, count: int) -> list[BlockId]:
    """Append `count` blocks of `term` on head and return their ids."""
    ids = []
    for _ in range(count):
        head = chain.head
        b = block(term, head.height + 1, head)
        grow(chain, b)
        ids.append(b.id)
    return ids


def test_genesis_chain_is_only_its_base() -> None:
    """Section 2: a new node holds only the genesis block (0, 0), as its base."""
    chain = genesis_chain(BOOT)
    assert chain.head == GENESIS
    assert chain.base == GENESIS
    assert chain.path_at(0) == GENESIS
    assert chain.path_at(1) is None
    assert chain.contains(GENESIS)
    assert chain.config == BOOT
    assert len(chain) == 0


def test_linear_growth_indexes_path_by_height() -> None:
    chain = genesis_chain(BOOT)
    ids = linear(chain, 1, 5)
    assert chain.head == ids[-1]
    assert [chain.path_at(h) for h in range(1, 6)] == ids
    assert [b.id for b in chain.path_blocks(2, 4)] == ids[1:4]
    assert chain.on_path(ids[2])
    assert chain.extends(ids[4], ids[1])
    assert not chain.extends(ids[1], ids[4])


def test_insert_is_idempotent_for_identical_blocks() -> None:
    """Section 4 rule 2: a block already present must be byte-identical; re-insert is a no-op."""
    chain = genesis_chain(BOOT)
    b = block(1, 1, GENESIS, b"x")
    assert chain.insert(b) is True
    assert chain.insert(block(1, 1, GENESIS, b"x")) is False
    with pytest.raises(AssertionError):
        chain.insert(block(1, 1, GENESIS, b"different"))


def test_insert_requires_stored_parent_and_height_plus_one() -> None:
    """Section 2 invariants: height = parent.height + 1, term >= parent.term, parent stored."""
    chain = genesis_chain(BOOT)
    with pytest.raises(AssertionError):
        chain.insert(block(1, 2, BlockId(1, 1)))  # parent missing
    chain.insert(block(2, 1, GENESIS))
    with pytest.raises(AssertionError):
        chain.insert(block(1, 2, BlockId(2, 1)))  # term below parent's
    with pytest.raises(AssertionError):
        chain.insert(Block(BlockId(2, 3), BlockId(2, 1), BlockKind.CMD, b""))  # height gap


def test_fork_switch_keeps_old_branch_as_dead_branch() -> None:
    """Section 4 rule 3: moving head never overwrites; the old branch stays stored."""
    chain = genesis_chain(BOOT)
    a, b = linear(chain, 1, 2)
    old = [block(2, 3, b), block(2, 4, BlockId(2, 3))]
    grow(chain, *old)
    new = block(3, 3, b)
    grow(chain, new)
    assert chain.head == new.id
    assert chain.path_at(3) == new.id
    assert chain.path_at(4) is None
    assert chain.contains(BlockId(2, 4))
    assert not chain.on_path(BlockId(2, 3))
    assert chain.extends(BlockId(2, 4), b)
    assert not chain.extends(BlockId(2, 4), new.id)
    assert chain.on_path(a)


def test_config_follows_the_path_and_reverts_with_it() -> None:
    """Section 2: config is the latest CONFIG on base->head; leaving a branch reverts it."""
    chain = genesis_chain(BOOT)
    (a,) = linear(chain, 1, 1)
    grown = ConfigState.of([1, 2, 3], [4])
    grow(chain, config_block(1, 2, a, grown))
    assert chain.config == grown
    assert chain.last_config_height == 2
    assert chain.config_at(1) == BOOT
    assert chain.config_at(2) == grown
    grow(chain, block(2, 2, a))  # another leader's branch without the CONFIG block
    assert chain.config == BOOT
    assert chain.last_config_height == 0
    chain.set_head(BlockId(1, 2))
    assert chain.config == grown


def test_blog_pruning_example() -> None:
    """[B] GC example: fork D vs E->F; once commit passes E, D is pruned, E and F kept."""
    chain = genesis_chain(BOOT)
    a, b, c = linear(chain, 1, 3)
    d = block(2, 4, c, b"D")
    grow(chain, d)
    e = block(3, 4, c, b"E")
    f = block(3, 5, e.id, b"F")
    grow(chain, e, f)
    assert chain.contains(d.id)
    assert chain.prune_forks(3, 3) == []  # commit at C: both children of C live on
    assert chain.contains(d.id)
    pruned = chain.prune_forks(3, 4)  # commit moves to E
    assert pruned == [d.id]
    assert not chain.contains(d.id)
    assert chain.contains(e.id)
    assert chain.contains(f.id)
    assert [chain.path_at(h) for h in range(1, 6)] == [a, b, c, e.id, f.id]


def test_prune_removes_whole_subtrees_and_keeps_blocks_extending_commit() -> None:
    """Section 4 GC: delete the subtree of every off-path child at (c0, c1]; never the path,
    never a block extending commit (even on another branch above it)."""
    chain = genesis_chain(BOOT)
    a, b = linear(chain, 1, 2)
    dead = [block(2, 2, a), block(2, 3, BlockId(2, 2)), block(2, 4, BlockId(2, 3))]
    for x in dead:
        chain.insert(x)
    side = block(4, 3, b)  # extends b, which is about to be committed
    chain.insert(side)
    grow(chain, block(3, 3, b))
    pruned = chain.prune_forks(0, 2)
    assert pruned == sorted(x.id for x in dead)
    assert chain.contains(side.id)
    assert chain.on_path(BlockId(3, 3))
    assert chain.prune_forks(2, 3) == [side.id]


def test_compact_rebases_and_drops_everything_below() -> None:
    """Section 4 compaction: delete every block with height <= X; X becomes the base."""
    chain = genesis_chain(BOOT)
    ids = linear(chain, 1, 3)
    grown = ConfigState.of([1, 2, 3, 4])
    grow(chain, config_block(1, 4, ids[-1], grown))
    more = linear(chain, 1, 2)
    pruned = chain.compact(BlockId(1, 4), chain.config_at(4))
    assert pruned == [*ids, BlockId(1, 4)]
    assert chain.base == BlockId(1, 4)
    assert chain.base_config == grown
    assert chain.config == grown
    assert chain.path_at(4) == BlockId(1, 4)
    assert chain.path_at(3) is None
    assert [chain.path_at(h) for h in (5, 6)] == more
    assert chain.contains(BlockId(1, 4))
    assert chain.get(BlockId(1, 4)) is None  # header kept as base, payload dropped
    assert chain.extends(more[-1], BlockId(1, 4))


def test_install_snapshot_on_unknown_block_wipes_the_store() -> None:
    """Section 4 install: last not stored -> wipe; base = head = last."""
    chain = genesis_chain(BOOT)
    linear(chain, 1, 3)
    last = BlockId(5, 9)
    config = ConfigState.of([1, 2])
    pruned = chain.install(last, config)
    assert len(pruned) == 3
    assert chain.base == chain.head == last
    assert len(chain) == 0
    assert chain.config == config


def test_install_snapshot_on_stored_block_keeps_what_extends_it() -> None:
    """Section 4 install: last stored -> keep the blocks extending it and rebase."""
    chain = genesis_chain(BOOT)
    a, b, c, d = linear(chain, 1, 4)
    pruned = chain.install(b, BOOT)
    assert pruned == [a, b]
    assert chain.base == b
    assert chain.head == d
    assert [chain.path_at(h) for h in (2, 3, 4)] == [b, c, d]


def test_install_snapshot_moves_head_off_a_dead_branch() -> None:
    """Section 4 install: head on a dead branch that does not extend last moves to last."""
    chain = genesis_chain(BOOT)
    a, b = linear(chain, 1, 2)
    c = block(1, 3, b)
    chain.insert(c)
    dead = [block(2, 3, b), block(2, 4, BlockId(2, 3))]
    grow(chain, *dead)
    pruned = chain.install(c.id, BOOT)
    assert chain.head == c.id
    assert chain.base == c.id
    assert sorted(pruned) == sorted([a, b, c.id, *(x.id for x in dead)])
    assert len(chain) == 0


def test_delete_refuses_path_blocks() -> None:
    """GC never touches the path (section 6 invariant 7)."""
    chain = genesis_chain(BOOT)
    ids = linear(chain, 1, 2)
    with pytest.raises(AssertionError):
        chain._delete_subtree(ids[0])
