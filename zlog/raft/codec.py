"""Binary codec for Chained-Raft: peer messages, blocks, snapshots, configs and hard state.

Everything a node sends to a peer or writes to disk goes through here, so the format is
defined once. Each top-level value starts with a version byte (`VERSION`) and a
tag byte; integers are big-endian and fixed width, so a field's offset is the sum of the
fields before it. Layouts (one line per field):

    header      u8 version | u8 tag | u64 term | u64 from | u64 to
    Vote        header | BlockId head | u8 flags (1 = pre, 2 = transfer)
    VoteResp    header | u8 flags (1 = granted, 2 = pre) | DirId voter
    Append      header | BlockId prev | BlockId commit | u64 seq | u32 count | Block * count
    AppendResp  header | u8 flags (1 = success) | BlockId match | BlockId hint_head
                | BlockId hint_commit | u64 seq | DirId follower
    InstallSnap header | Snapshot
    TimeoutNow  header
    BlockId     u64 term | u64 height
    DirId       16 bytes: the sender's data directory id (zeros: it has none)
    Block       BlockId id | u8 has_parent | BlockId parent (zeros when absent) | u8 kind
                | u32 payload_len | u32 crc32c(payload) | payload
    Snapshot    BlockId last | Config | u32 data_len | u32 crc32c(data) | data
    Config      u32 len | ConfigState.encode() (messages.py: the CONFIG block payload too)
    HardState   u64 term | u8 has_vote | u64 vote | BlockId commit

Decoding never trusts a length: each is checked against a bound below and against the bytes
that remain, and any failure (short input, unknown tag, bad CRC, trailing bytes) raises
`CodecError`, never IndexError or struct.error. The runner treats CodecError from a peer as
a dropped message; storage treats it as a torn or corrupt record.

The command batch that makes up a CMD block's payload lives here too: it is part of the same
wire and needs the same care.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Final

import crc32c

from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.raft.messages import (
    DIR_ID_BYTES,
    Append,
    AppendResp,
    Block,
    BlockId,
    BlockKind,
    ConfigState,
    HardState,
    InstallSnapshot,
    Message,
    Snapshot,
    TimeoutNow,
    Vote,
    VoteResp,
)

VERSION: Final = 1
NODE_ID_MAX: Final = 2**64 - 1  # node ids are unsigned 64-bit on the wire

_HEADER = struct.Struct(">BBQQQ")
_BLOCK_ID = struct.Struct(">QQ")
_BLOCK_HEAD = struct.Struct(">QQBQQBII")
BLOCK_HEADER_BYTES: Final = _BLOCK_HEAD.size  # an encoded block is this plus its payload
_VOTE = struct.Struct(">QQB")
_APPEND_HEAD = struct.Struct(">QQQQQI")
_APPEND_RESP = struct.Struct(">BQQQQQQQ")
_HARD_STATE = struct.Struct(">QBQQQ")
_SNAP_DATA = struct.Struct(">II")
_U8 = struct.Struct(">B")
_U32 = struct.Struct(">I")


class CodecError(ZlogError):
    """Bytes that do not decode: truncated, corrupt, from an unknown version, or oversized."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.CORRUPT_MESSAGE, message)


class Tag(IntEnum):
    """The second byte of every top-level value: what follows."""

    VOTE = 1
    VOTE_RESP = 2
    APPEND = 3
    APPEND_RESP = 4
    INSTALL_SNAPSHOT = 5
    TIMEOUT_NOW = 6
    # 16-19: the client frames of a standalone node (bench/raft_client.py), never a peer's.
    CLIENT_PROPOSE = 16
    CLIENT_READ = 17
    CLIENT_REPLY = 18
    CLIENT_STATUS = 19
    BLOCK = 32
    SNAPSHOT = 33
    CONFIG = 34
    HARD_STATE = 35


class Reader:
    """A cursor over bytes that raises CodecError instead of reading past the end."""

    __slots__ = ("_data", "_offset")

    def __init__(self, data: bytes | memoryview, offset: int = 0) -> None:
        self._data = memoryview(data)
        self._offset = offset

    @property
    def offset(self) -> int:
        return self._offset

    def remaining(self) -> int:
        return len(self._data) - self._offset

    def unpack(self, fmt: struct.Struct) -> tuple[int, ...]:
        if self.remaining() < fmt.size:
            raise CodecError(f"truncated: need {fmt.size} bytes, have {self.remaining()}")
        values = fmt.unpack_from(self._data, self._offset)
        self._offset += fmt.size
        return values

    def take(self, size_bytes: int, size_bytes_max: int, what: str) -> bytes:
        if size_bytes > size_bytes_max:
            raise CodecError(f"{what} of {size_bytes} bytes exceeds {size_bytes_max}")
        if self.remaining() < size_bytes:
            raise CodecError(f"truncated {what}: need {size_bytes}, have {self.remaining()}")
        start = self._offset
        self._offset += size_bytes
        return bytes(self._data[start : self._offset])

    def expect_end(self) -> None:
        if self.remaining() != 0:
            raise CodecError(f"{self.remaining()} trailing bytes")


def _flag_bits(flags: int, allowed: int, what: str) -> int:
    if flags & ~allowed:
        raise CodecError(f"unknown {what} flags {flags:#x}")
    return flags


# --- building blocks, shared with storage ------------------------------------------------


def write_block_id(out: bytearray, block_id: BlockId) -> None:
    out += _BLOCK_ID.pack(block_id.term, block_id.height)


def read_block_id(reader: Reader) -> BlockId:
    term, height = reader.unpack(_BLOCK_ID)
    return BlockId(term, height)


def write_block(out: bytearray, block: Block) -> None:
    """Append one block; the CRC lets a reader on the far side check the payload it got."""
    assert len(block.payload) <= limits.RAFT_BLOCK_PAYLOAD_BYTES_MAX, "block payload over its bound"
    parent = block.parent if block.parent is not None else BlockId(0, 0)
    out += _BLOCK_HEAD.pack(
        block.id.term,
        block.id.height,
        int(block.parent is not None),
        parent.term,
        parent.height,
        int(block.kind),
        len(block.payload),
        crc32c.crc32c(block.payload),
    )
    out += block.payload


def read_block(reader: Reader) -> Block:
    term, height, has_parent, p_term, p_height, kind, size, crc = reader.unpack(_BLOCK_HEAD)
    if has_parent > 1:
        raise CodecError(f"bad has_parent byte {has_parent}")
    if not has_parent and (p_term or p_height):
        raise CodecError("absent parent with a nonzero id")
    try:
        block_kind = BlockKind(kind)
    except ValueError:
        raise CodecError(f"unknown block kind {kind}") from None
    payload = reader.take(size, limits.RAFT_BLOCK_PAYLOAD_BYTES_MAX, "block payload")
    if crc32c.crc32c(payload) != crc:
        raise CodecError(f"block ({term}, {height}) payload fails its CRC")
    parent = BlockId(p_term, p_height) if has_parent else None
    return Block(BlockId(term, height), parent, block_kind, payload)


def write_config(out: bytearray, config: ConfigState) -> None:
    encoded = config.encode()
    assert len(encoded) <= limits.RAFT_CONFIG_BYTES_MAX, "config over its bound"
    out += _U32.pack(len(encoded))
    out += encoded


def read_config(reader: Reader) -> ConfigState:
    (size,) = reader.unpack(_U32)
    encoded = reader.take(size, limits.RAFT_CONFIG_BYTES_MAX, "config")
    try:
        return ConfigState.decode(encoded)
    except ValueError as error:
        raise CodecError(f"bad config: {error}") from None


def write_snapshot(out: bytearray, snapshot: Snapshot) -> None:
    assert len(snapshot.data) <= limits.RAFT_SNAPSHOT_BYTES_MAX, "snapshot over its bound"
    write_block_id(out, snapshot.last)
    write_config(out, snapshot.config)
    out += _SNAP_DATA.pack(len(snapshot.data), crc32c.crc32c(snapshot.data))
    out += snapshot.data


def read_snapshot(reader: Reader) -> Snapshot:
    last = read_block_id(reader)
    config = read_config(reader)
    size, crc = reader.unpack(_SNAP_DATA)
    data = reader.take(size, limits.RAFT_SNAPSHOT_BYTES_MAX, "snapshot data")
    if crc32c.crc32c(data) != crc:
        raise CodecError(f"snapshot at {tuple(last)} fails its CRC")
    return Snapshot(last=last, config=config, data=data)


def write_hard_state(out: bytearray, hard_state: HardState) -> None:
    vote = hard_state.vote
    assert vote is None or 0 <= vote <= NODE_ID_MAX, "vote is not a node id"
    out += _HARD_STATE.pack(
        hard_state.term,
        int(vote is not None),
        vote or 0,
        hard_state.commit.term,
        hard_state.commit.height,
    )


def read_hard_state(reader: Reader) -> HardState:
    term, has_vote, vote, c_term, c_height = reader.unpack(_HARD_STATE)
    if has_vote > 1 or (not has_vote and vote):
        raise CodecError(f"bad vote fields ({has_vote}, {vote})")
    return HardState(term=term, vote=vote if has_vote else None, commit=BlockId(c_term, c_height))


# --- peer messages -------------------------------------------------------------------------


def _dir_id(dir_id: bytes) -> bytes:
    assert len(dir_id) == DIR_ID_BYTES, "a directory id is 16 bytes"
    return dir_id


def encode_message(message: Message) -> bytes:
    """One peer message as the single frame the runner sends."""
    assert 0 <= message.from_ <= NODE_ID_MAX and 0 <= message.to <= NODE_ID_MAX, "bad node id"
    out = bytearray()
    if isinstance(message, Vote):
        out += _HEADER.pack(VERSION, Tag.VOTE, message.term, message.from_, message.to)
        flags = int(message.pre) | int(message.transfer) << 1
        out += _VOTE.pack(message.head.term, message.head.height, flags)
    elif isinstance(message, VoteResp):
        out += _HEADER.pack(VERSION, Tag.VOTE_RESP, message.term, message.from_, message.to)
        out += _U8.pack(int(message.granted) | int(message.pre) << 1)
        out += _dir_id(message.dir_id)
    elif isinstance(message, Append):
        assert len(message.blocks) <= limits.RAFT_APPEND_BLOCKS_MAX, "append over its block bound"
        out += _HEADER.pack(VERSION, Tag.APPEND, message.term, message.from_, message.to)
        prev, commit = message.prev, message.commit
        out += _APPEND_HEAD.pack(
            prev.term, prev.height, commit.term, commit.height, message.seq, len(message.blocks)
        )
        for block in message.blocks:
            write_block(out, block)
    elif isinstance(message, AppendResp):
        out += _HEADER.pack(VERSION, Tag.APPEND_RESP, message.term, message.from_, message.to)
        match, head, commit = message.match, message.hint_head, message.hint_commit
        out += _APPEND_RESP.pack(
            int(message.success),
            match.term,
            match.height,
            head.term,
            head.height,
            commit.term,
            commit.height,
            message.seq,
        )
        out += _dir_id(message.dir_id)
    elif isinstance(message, InstallSnapshot):
        out += _HEADER.pack(
            VERSION, Tag.INSTALL_SNAPSHOT, message.term, message.from_, message.to
        )
        write_snapshot(out, message.snapshot)
    else:
        assert isinstance(message, TimeoutNow), f"not a message: {message!r}"
        out += _HEADER.pack(VERSION, Tag.TIMEOUT_NOW, message.term, message.from_, message.to)
    return bytes(out)


def decode_message(data: bytes | memoryview) -> Message:
    """The inverse of encode_message; raises CodecError for anything it did not produce."""
    reader = Reader(data)
    version, tag, term, from_, to = reader.unpack(_HEADER)
    if version != VERSION:
        raise CodecError(f"unknown codec version {version}")
    message: Message
    if tag == Tag.VOTE:
        h_term, h_height, flags = reader.unpack(_VOTE)
        _flag_bits(flags, 0b11, "vote")
        message = Vote(term, from_, to, BlockId(h_term, h_height), bool(flags & 1), bool(flags & 2))
    elif tag == Tag.VOTE_RESP:
        (flags,) = reader.unpack(_U8)
        _flag_bits(flags, 0b11, "vote response")
        message = VoteResp(term, from_, to, bool(flags & 1), bool(flags & 2),
                           reader.take(DIR_ID_BYTES, DIR_ID_BYTES, "directory id"))
    elif tag == Tag.APPEND:
        p_term, p_height, c_term, c_height, seq, count = reader.unpack(_APPEND_HEAD)
        if count > limits.RAFT_APPEND_BLOCKS_MAX:
            raise CodecError(f"append of {count} blocks exceeds {limits.RAFT_APPEND_BLOCKS_MAX}")
        blocks = tuple(read_block(reader) for _ in range(count))
        prev, commit = BlockId(p_term, p_height), BlockId(c_term, c_height)
        message = Append(term, from_, to, prev, blocks, commit, seq)
    elif tag == Tag.APPEND_RESP:
        success, m_t, m_h, h_t, h_h, c_t, c_h, seq = reader.unpack(_APPEND_RESP)
        _flag_bits(success, 0b1, "append response")
        message = AppendResp(
            term, from_, to, bool(success), BlockId(m_t, m_h), BlockId(h_t, h_h),
            BlockId(c_t, c_h), seq, reader.take(DIR_ID_BYTES, DIR_ID_BYTES, "directory id"),
        )
    elif tag == Tag.INSTALL_SNAPSHOT:
        message = InstallSnapshot(term, from_, to, read_snapshot(reader))
    elif tag == Tag.TIMEOUT_NOW:
        message = TimeoutNow(term, from_, to)
    else:
        raise CodecError(f"unknown message tag {tag}")
    reader.expect_end()
    return message


# --- the command batch inside a CMD block --------------------------------------------------


def encode_commands(commands: list[bytes] | tuple[bytes, ...]) -> bytes:
    """A CMD block's payload: u32 count, then u32 length + bytes per command, in order.

    Many proposals that arrive together share one block, so one fsync and one round trip
    commit all of them; the state machine applies them in this order.
    """
    assert 0 < len(commands) <= limits.RAFT_BATCH_COMMANDS_MAX, "batch size out of bounds"
    out = bytearray(_U32.pack(len(commands)))
    for command in commands:
        assert len(command) <= limits.RAFT_COMMAND_BYTES_MAX, "command over its bound"
        out += _U32.pack(len(command))
        out += command
    assert len(out) <= limits.RAFT_BLOCK_PAYLOAD_BYTES_MAX, "batch over the block payload bound"
    return bytes(out)


def decode_commands(payload: bytes | memoryview) -> list[bytes]:
    reader = Reader(payload)
    (count,) = reader.unpack(_U32)
    if count > limits.RAFT_BATCH_COMMANDS_MAX:
        raise CodecError(f"batch of {count} commands exceeds {limits.RAFT_BATCH_COMMANDS_MAX}")
    commands = []
    for _ in range(count):
        (size,) = reader.unpack(_U32)
        commands.append(reader.take(size, limits.RAFT_COMMAND_BYTES_MAX, "command"))
    reader.expect_end()
    return commands


# --- what a caller asks of the runner --------------------------------------------------------


class RequestKind(IntEnum):
    """A proposal or a read; the values are the tags the client frames of a standalone node
    (bench/raft_client.py) carry."""

    PROPOSE = Tag.CLIENT_PROPOSE  # body: a state-machine command to commit and apply
    READ = Tag.CLIENT_READ  # body: a state-machine query, answered linearizably
