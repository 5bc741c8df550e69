"""Chained-Raft wire and storage types (docs/raft.md §2 and §3).

Blocks are named by (term, height): only the leader of a term mints blocks of that term and
only on its own head, so the pair names exactly one block in the whole cluster. Everything
here is a frozen value; `codec.py` turns these into the bytes the runner sends over ZeroMQ
and storage writes to disk.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
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


_CONFIG_VERSION = 1  # ids only
_CONFIG_VERSION_MEMBERS = 2  # ids, then each member's directory id and Raft endpoint
_CONFIG_HEADER = struct.Struct(">BHH")  # version, voter count, learner count
_NODE_ID = struct.Struct(">Q")  # one node id, unsigned 64-bit
_ENDPOINT_LENGTH = struct.Struct(">H")
DIR_ID_BYTES = 16  # a data directory's id: a uuid4, made once when the directory is formatted
NO_DIR_ID = bytes(DIR_ID_BYTES)  # "not known": a node without one, or a config before it learns
ENDPOINT_BYTES_MAX = 255  # a member's Raft endpoint, UTF-8


@dataclass(frozen=True, slots=True)
class ConfigState:
    """Who votes and who only listens; the payload of every CONFIG block.

    `dirs` records, once the leader has learned it, which data directory each member runs on
    (docs/raft.md §4.15): a voter is the pair (node id, directory id), and a node answering
    from another directory (its disk was wiped) does not count as that voter. `endpoints`
    holds each member's Raft endpoint, so a node that joins later, or restarts, reaches the
    members the chain names without being told them. Both are optional: a config without
    them encodes exactly as before (version 1).

    `encode()` is the CONFIG block payload; `decode()` rejects anything that is not exactly
    what `encode()` produces (unsorted, duplicated or overlapping ids), so two nodes can never
    read different configurations out of the same bytes.
    """

    voters: tuple[int, ...]  # sorted node ids that vote and count toward quorums
    learners: tuple[int, ...] = ()  # sorted node ids that receive blocks but never vote
    dirs: tuple[tuple[int, bytes], ...] = ()  # (member, directory id), sorted; known ones only
    endpoints: tuple[tuple[int, str], ...] = ()  # (member, Raft endpoint), sorted; known ones

    @classmethod
    def of(
        cls,
        voters: tuple[int, ...] | list[int],
        learners: tuple[int, ...] | list[int] = (),
        dirs: Mapping[int, bytes] | None = None,
        endpoints: Mapping[int, str] | None = None,
    ) -> ConfigState:
        """A config from ids in any order; duplicates collapse; what `dirs` and `endpoints`
        say of non-members is dropped. Validates like `decode`."""
        members = set(voters) | set(learners)
        config = cls(
            tuple(sorted(set(voters))),
            tuple(sorted(set(learners))),
            tuple(sorted((n, d) for n, d in (dirs or {}).items()
                         if n in members and d != NO_DIR_ID)),
            tuple(sorted((n, e) for n, e in (endpoints or {}).items() if n in members)),
        )
        config.check()
        return config

    @property
    def members(self) -> tuple[int, ...]:
        """Voters and learners together, sorted: every node the leader replicates to."""
        return tuple(sorted(self.voters + self.learners))

    def dir_of(self, node: int) -> bytes:
        """The directory recorded for `node`, or NO_DIR_ID while none is."""
        for member, dir_id in self.dirs:
            if member == node:
                return dir_id
        return NO_DIR_ID

    def counts(self, node: int, dir_id: bytes) -> bool:
        """Whether `node`, answering from directory `dir_id`, is the member this config
        names: always while no directory is recorded for it (the unprotected bootstrap)."""
        recorded = self.dir_of(node)
        return recorded in (NO_DIR_ID, dir_id)

    def changed(
        self,
        voters: tuple[int, ...] | list[int] | None = None,
        learners: tuple[int, ...] | list[int] | None = None,
        dirs: Mapping[int, bytes] | None = None,
        endpoints: Mapping[int, str] | None = None,
    ) -> ConfigState:
        """This config with the given parts replaced or updated; the rest carried over."""
        return ConfigState.of(
            self.voters if voters is None else voters,
            self.learners if learners is None else learners,
            {**dict(self.dirs), **(dirs or {})},
            {**dict(self.endpoints), **(endpoints or {})},
        )

    def check(self) -> None:
        """Raise ValueError unless ids are sorted, unique, non-negative and roles disjoint,
        and directories and endpoints name members only."""
        for ids in (self.voters, self.learners):
            if list(ids) != sorted(set(ids)):
                raise ValueError(f"config ids must be sorted and unique: {ids}")
            if ids and ids[0] < 0:
                raise ValueError(f"config ids must be non-negative: {ids}")
        if set(self.voters) & set(self.learners):
            raise ValueError(f"a node cannot be both voter and learner: {self}")
        if len(self.voters) + len(self.learners) > limits.RAFT_CONFIG_MEMBERS_MAX:
            raise ValueError(f"config has more than {limits.RAFT_CONFIG_MEMBERS_MAX} members")
        members = set(self.members)
        for pairs in (self.dirs, self.endpoints):
            nodes = [node for node, _ in pairs]
            if nodes != sorted(set(nodes)) or not set(nodes) <= members:
                raise ValueError(f"config details must name members once, sorted: {pairs}")
        if any(len(d) != DIR_ID_BYTES or d == NO_DIR_ID for _, d in self.dirs):
            raise ValueError(f"a directory id is {DIR_ID_BYTES} bytes, not all zero")
        if any(not e or len(e.encode()) > ENDPOINT_BYTES_MAX for _, e in self.endpoints):
            raise ValueError(f"an endpoint is 1 to {ENDPOINT_BYTES_MAX} bytes")

    def encode(self) -> bytes:
        """The CONFIG block payload: version byte, two counts, big-endian u64 ids; version 2
        then gives each member (in that order) its 16-byte directory id (zeros: not known)
        and its endpoint (u16 length, UTF-8; empty: not known)."""
        self.check()
        detailed = bool(self.dirs or self.endpoints)
        version = _CONFIG_VERSION_MEMBERS if detailed else _CONFIG_VERSION
        ids = self.voters + self.learners
        parts = [_CONFIG_HEADER.pack(version, len(self.voters), len(self.learners))]
        parts.extend(_NODE_ID.pack(node) for node in ids)
        if detailed:
            endpoints = dict(self.endpoints)
            for node in ids:
                endpoint = endpoints.get(node, "").encode()
                parts += [self.dir_of(node), _ENDPOINT_LENGTH.pack(len(endpoint)), endpoint]
        encoded = b"".join(parts)
        assert detailed or len(encoded) == _CONFIG_HEADER.size + _NODE_ID.size * len(ids)
        return encoded

    @classmethod
    def decode(cls, payload: bytes) -> ConfigState:
        """Inverse of `encode`; raises ValueError on anything malformed."""
        if len(payload) < _CONFIG_HEADER.size:
            raise ValueError("config payload shorter than its header")
        version, voters_count, learners_count = _CONFIG_HEADER.unpack_from(payload, 0)
        if version not in (_CONFIG_VERSION, _CONFIG_VERSION_MEMBERS):
            raise ValueError(f"unknown config version {version}")
        count = voters_count + learners_count
        ids_end = _CONFIG_HEADER.size + _NODE_ID.size * count
        if len(payload) < ids_end or (version == _CONFIG_VERSION and len(payload) != ids_end):
            raise ValueError("config payload length does not match its counts")
        ids = [
            _NODE_ID.unpack_from(payload, _CONFIG_HEADER.size + _NODE_ID.size * index)[0]
            for index in range(count)
        ]
        dirs: list[tuple[int, bytes]] = []
        endpoints: list[tuple[int, str]] = []
        offset = ids_end
        for node in ids if version == _CONFIG_VERSION_MEMBERS else ():
            if len(payload) < offset + DIR_ID_BYTES + _ENDPOINT_LENGTH.size:
                raise ValueError("config payload ends inside a member's details")
            dir_id = payload[offset : offset + DIR_ID_BYTES]
            (length,) = _ENDPOINT_LENGTH.unpack_from(payload, offset + DIR_ID_BYTES)
            offset += DIR_ID_BYTES + _ENDPOINT_LENGTH.size
            if length > ENDPOINT_BYTES_MAX or len(payload) < offset + length:
                raise ValueError("config endpoint longer than its bound or its payload")
            try:
                endpoint = payload[offset : offset + length].decode()
            except UnicodeDecodeError:
                raise ValueError("config endpoint is not UTF-8") from None
            offset += length
            if dir_id != NO_DIR_ID:
                dirs.append((node, bytes(dir_id)))
            if endpoint:
                endpoints.append((node, endpoint))
        if offset != len(payload):
            raise ValueError("config payload has trailing bytes")
        config = cls(tuple(ids[:voters_count]), tuple(ids[voters_count:]),
                     tuple(sorted(dirs)), tuple(sorted(endpoints)))
        config.check()
        if version == _CONFIG_VERSION_MEMBERS and not (dirs or endpoints):
            raise ValueError("a version 2 config must carry details")
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
    dir_id: bytes = NO_DIR_ID  # the voter's data directory: a wiped disk's vote does not count


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
    dir_id: bytes = NO_DIR_ID  # the follower's data directory: acks of a wiped disk do not count


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
