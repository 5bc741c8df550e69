"""Chained-Raft wire and storage types (docs/raft.md §2 and §3).

Blocks are named by (term, height): only the leader of a term mints blocks of that term and
only on its own head, so the pair names exactly one block in the whole cluster. Everything
here is a frozen value; `codec.py` turns these into the bytes the runner sends over ZeroMQ
and storage writes to disk.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from zlog import limits


class BlockId(NamedTuple):
    """A block's name: the term of the leader that minted it and its height on the chain."""

    term: int
    height: int


GENESIS = BlockId(0, 0)


class BlockKind(IntEnum):
    NOOP = 0  # appended by every new leader so that it can commit in its own term
    CONFIG = 1  # payload is an encoded ConfigState
    CMD = 2  # payload is a batch of state-machine commands


@dataclass(frozen=True, slots=True)
class Block:
    id: BlockId
    parent: BlockId | None  # None only for the genesis block
    kind: BlockKind
    payload: bytes


_CONFIG_VERSION = 1
_CONFIG_HEADER = struct.Struct(">BHH")  # version, voter count, learner count
_NODE_ID = struct.Struct(">Q")  # one node id, unsigned 64-bit


@dataclass(frozen=True, slots=True)
class ConfigState:
    """Who votes and who only listens; the payload of every CONFIG block.

    `encode()` is the CONFIG block payload; `decode()` rejects anything that is not exactly
    what `encode()` produces (unsorted, duplicated or overlapping ids), so two nodes can never
    read different configurations out of the same bytes.
    """

    voters: tuple[int, ...]  # sorted node ids that vote and count toward quorums
    learners: tuple[int, ...] = ()  # sorted node ids that receive blocks but never vote

    @classmethod
    def of(cls, voters: tuple[int, ...] | list[int], learners: tuple[int, ...] | list[int] = ()
           ) -> ConfigState:
        """A config from ids in any order; duplicates collapse. Validates like `decode`."""
        config = cls(tuple(sorted(set(voters))), tuple(sorted(set(learners))))
        config.check()
        return config

    @property
    def members(self) -> tuple[int, ...]:
        """Voters and learners together, sorted: every node the leader replicates to."""
        return tuple(sorted(self.voters + self.learners))

    def check(self) -> None:
        """Raise ValueError unless ids are sorted, unique, non-negative and roles disjoint."""
        for ids in (self.voters, self.learners):
            if list(ids) != sorted(set(ids)):
                raise ValueError(f"config ids must be sorted and unique: {ids}")
            if ids and ids[0] < 0:
                raise ValueError(f"config ids must be non-negative: {ids}")
        if set(self.voters) & set(self.learners):
            raise ValueError(f"a node cannot be both voter and learner: {self}")
        if len(self.voters) + len(self.learners) > limits.RAFT_CONFIG_MEMBERS_MAX:
            raise ValueError(f"config has more than {limits.RAFT_CONFIG_MEMBERS_MAX} members")

    def encode(self) -> bytes:
        """The CONFIG block payload: version byte, two counts, then big-endian u64 ids."""
        self.check()
        parts = [_CONFIG_HEADER.pack(_CONFIG_VERSION, len(self.voters), len(self.learners))]
        parts.extend(_NODE_ID.pack(node) for node in self.voters + self.learners)
        encoded = b"".join(parts)
        assert len(encoded) == _CONFIG_HEADER.size + _NODE_ID.size * len(self.members)
        return encoded

    @classmethod
    def decode(cls, payload: bytes) -> ConfigState:
        """Inverse of `encode`; raises ValueError on anything malformed."""
        if len(payload) < _CONFIG_HEADER.size:
            raise ValueError("config payload shorter than its header")
        version, voters_count, learners_count = _CONFIG_HEADER.unpack_from(payload, 0)
        if version != _CONFIG_VERSION:
            raise ValueError(f"unknown config version {version}")
        count = voters_count + learners_count
        if len(payload) != _CONFIG_HEADER.size + _NODE_ID.size * count:
            raise ValueError("config payload length does not match its counts")
        ids = [
            _NODE_ID.unpack_from(payload, _CONFIG_HEADER.size + _NODE_ID.size * index)[0]
            for index in range(count)
        ]
        config = cls(tuple(ids[:voters_count]), tuple(ids[voters_count:]))
        config.check()
        return config


EMPTY_CONFIG = ConfigState(voters=())  # a joining node's view before it learns its cluster


@dataclass(frozen=True, slots=True)
class HardState:
    term: int
    vote: int | None
    commit: BlockId


@dataclass(frozen=True, slots=True)
class Snapshot:
    last: BlockId  # the committed block the state-machine data reflects
    config: ConfigState
    data: bytes


@dataclass(frozen=True, slots=True)
class Vote:
    term: int
    from_: int
    to: int
    head: BlockId
    pre: bool = False
    transfer: bool = False


@dataclass(frozen=True, slots=True)
class VoteResp:
    term: int
    from_: int
    to: int
    granted: bool
    pre: bool = False


@dataclass(frozen=True, slots=True)
class Append:
    """Blocks to extend `prev`, contiguous; empty blocks make it a heartbeat."""

    term: int
    from_: int
    to: int
    prev: BlockId
    blocks: tuple[Block, ...]
    commit: BlockId
    seq: int  # echoed in the reply: ReadIndex counts a quorum of echoes


@dataclass(frozen=True, slots=True)
class AppendResp:
    """The answer to Append and to InstallSnapshot."""

    term: int
    from_: int
    to: int
    success: bool
    match: BlockId  # success: the block now stored up to (never head); failure: the missing prev
    hint_head: BlockId  # the follower's head, so the leader can jump back to it in one step
    hint_commit: BlockId  # the follower's commit: always on the leader's path
    seq: int  # the request's seq, echoed


@dataclass(frozen=True, slots=True)
class InstallSnapshot:
    term: int
    from_: int
    to: int
    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class TimeoutNow:
    """Leader transfer: the target campaigns at once, skipping pre-vote and stickiness."""

    term: int
    from_: int
    to: int


Message = Vote | VoteResp | Append | AppendResp | InstallSnapshot | TimeoutNow


@dataclass(frozen=True, slots=True)
class SoftState:
    role: str  # "follower" | "precandidate" | "candidate" | "leader"
    leader: int | None


@dataclass(frozen=True, slots=True)
class ReadState:
    """A ReadIndex answer: once applied reaches `index`, reads for `ctx` are linearizable."""

    ctx: bytes
    index: BlockId


@dataclass(frozen=True, slots=True)
class PersistedState:
    """Everything a node needs to restart: what storage loaded after a crash."""

    hard_state: HardState
    head: BlockId
    blocks: tuple[Block, ...]  # every stored block above the snapshot base, any order
    snapshot: Snapshot | None


@dataclass(frozen=True, slots=True)
class Ready:
    """One batch of work for the driver: persist, then send, then apply, then advance()."""

    hard_state: HardState | None = None
    head: BlockId | None = None
    new_blocks: tuple[Block, ...] = ()
    snapshot: Snapshot | None = None
    pruned: tuple[BlockId, ...] = ()
    messages: tuple[Message, ...] = ()
    committed: tuple[Block, ...] = ()
    read_states: tuple[ReadState, ...] = ()
    soft_state: SoftState | None = None
    # True when `snapshot` came from a leader (InstallSnapshot): the driver must reset its
    # state machine to `snapshot.data`. False when `snapshot` is this node's own compaction
    # or the genesis snapshot of a new cluster: the state machine already holds that state.
    # A Ready that restores never carries `committed` blocks, so the order is unambiguous.
    restore: bool = False
