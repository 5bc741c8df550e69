"""The Chained-Raft codec: every type round-trips, and garbage raises only CodecError.

Spec: docs/raft.md §2 (Block, persistent state) and §3 (messages). The codec is what
peers and storage trust, so the property tests cover each field's whole range, and the
garbage tests check that truncation, bit flips and random bytes never escape as IndexError or
struct.error (docs/reliability.md §2.1: bad input is an operating error).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zlog import limits
from zlog.errors import ErrorCode
from zlog.raft import codec
from zlog.raft.codec import CodecError
from zlog.raft.messages import (
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

u64 = st.integers(min_value=0, max_value=2**64 - 1)
node_ids = st.integers(min_value=0, max_value=2**64 - 1)
block_ids = st.builds(BlockId, u64, u64)
payloads = st.binary(max_size=300)


@st.composite
def blocks(draw: st.DrawFn) -> Block:
    parent = draw(st.none() | block_ids)
    return Block(draw(block_ids), parent, draw(st.sampled_from(BlockKind)), draw(payloads))


@st.composite
def configs(draw: st.DrawFn) -> ConfigState:
    members = draw(st.lists(node_ids, max_size=9, unique=True))
    voter_count = draw(st.integers(0, len(members)))
    return ConfigState.of(members[:voter_count], members[voter_count:])



snapshots = st.builds(Snapshot, block_ids, configs(), payloads)
hard_states = st.builds(HardState, u64, st.none() | node_ids, block_ids)
messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(Vote, u64, node_ids, node_ids, block_ids, st.booleans(), st.booleans()),
    st.builds(VoteResp, u64, node_ids, node_ids, st.booleans(), st.booleans()),
    st.builds(
        Append, u64, node_ids, node_ids, block_ids,
        st.lists(blocks(), max_size=4).map(tuple), block_ids, u64,
    ),
    st.builds(
        AppendResp, u64, node_ids, node_ids, st.booleans(), block_ids, block_ids, block_ids, u64
    ),
    st.builds(InstallSnapshot, u64, node_ids, node_ids, snapshots),
    st.builds(TimeoutNow, u64, node_ids, node_ids),
)


# Values framed on their own (version byte, tag byte, body), the way a peer message is: the
# codec's writers and readers, which storage uses unframed, are checked through these.
_T = TypeVar("_T")


def _open(
    data: bytes | memoryview, expected: codec.Tag | None = None
) -> tuple[codec.Tag, codec.Reader]:
    reader = codec.Reader(data)
    version, tag = reader.unpack(struct.Struct(">BB"))
    if version != codec.VERSION:
        raise CodecError(f"unknown codec version {version}")
    try:
        known = codec.Tag(tag)
    except ValueError:
        raise CodecError(f"unknown tag {tag}") from None
    if expected is not None and known != expected:
        raise CodecError(f"expected {expected.name}, got {known.name}")
    return known, reader


@dataclass(frozen=True)
class _Framed(Generic[_T]):
    """One kind of value framed on its own: `u8 version | u8 tag | body`."""

    tag: codec.Tag
    write: Callable[[bytearray, _T], None]
    read: Callable[[codec.Reader], _T]

    def encode(self, value: _T) -> bytes:
        out = bytearray((codec.VERSION, self.tag))
        self.write(out, value)
        return bytes(out)

    def decode(self, data: bytes) -> _T:
        _, reader = _open(data, self.tag)
        value = self.read(reader)
        reader.expect_end()
        return value


BLOCKS = _Framed(codec.Tag.BLOCK, codec.write_block, codec.read_block)
SNAPSHOTS = _Framed(codec.Tag.SNAPSHOT, codec.write_snapshot, codec.read_snapshot)
# A CONFIG block's payload is ConfigState.encode(), unframed; this is a config on its own.
CONFIGS = _Framed(codec.Tag.CONFIG, codec.write_config, codec.read_config)
HARD_STATES = _Framed(codec.Tag.HARD_STATE, codec.write_hard_state, codec.read_hard_state)


@given(messages)
def test_message_round_trip(message: Message) -> None:
    """§3: every message decodes to an equal value, so peers agree on what was sent."""
    assert codec.decode_message(codec.encode_message(message)) == message


@given(blocks())
def test_block_round_trip(block: Block) -> None:
    """§2: a block's id, parent, kind and payload survive the wire and the disk unchanged."""
    assert BLOCKS.decode(BLOCKS.encode(block)) == block


@given(snapshots)
def test_snapshot_round_trip(snapshot: Snapshot) -> None:
    assert SNAPSHOTS.decode(SNAPSHOTS.encode(snapshot)) == snapshot


@given(configs())
def test_config_round_trip(config: ConfigState) -> None:
    assert CONFIGS.decode(CONFIGS.encode(config)) == config


@given(hard_states)
def test_hard_state_round_trip(hard_state: HardState) -> None:
    """§2 persistent state: term, vote (None included) and commit come back exactly."""
    assert HARD_STATES.decode(HARD_STATES.encode(hard_state)) == hard_state


@given(st.lists(st.binary(max_size=100), min_size=1, max_size=20))
def test_command_batch_round_trip(commands: list[bytes]) -> None:
    """A CMD block carries commands in order; the state machine applies them in that order."""
    assert codec.decode_commands(codec.encode_commands(commands)) == commands


_DECODERS = [
    codec.decode_message,
    BLOCKS.decode,
    SNAPSHOTS.decode,
    CONFIGS.decode,
    HARD_STATES.decode,
    codec.decode_commands,
]


def _decodes_or_codec_error(data: bytes) -> None:
    for decode in _DECODERS:
        try:
            decode(data)
        except CodecError as error:
            assert error.code == ErrorCode.CORRUPT_MESSAGE


@given(st.binary(max_size=200))
def test_random_bytes_raise_only_codec_error(data: bytes) -> None:
    _decodes_or_codec_error(data)


@settings(max_examples=50)
@given(messages)
def test_every_truncation_of_a_message_is_rejected(message: Message) -> None:
    """A message cut anywhere is an error, never a shorter valid message."""
    data = codec.encode_message(message)
    for cut in range(len(data)):
        with pytest.raises(CodecError):
            codec.decode_message(data[:cut])


@settings(max_examples=50)
@given(messages, st.data())
def test_bit_flips_raise_only_codec_error(message: Message, data: st.DataObject) -> None:
    encoded = bytearray(codec.encode_message(message))
    position = data.draw(st.integers(0, len(encoded) - 1))
    encoded[position] ^= 1 << data.draw(st.integers(0, 7))
    _decodes_or_codec_error(bytes(encoded))


def test_trailing_bytes_are_rejected() -> None:
    data = codec.encode_message(TimeoutNow(1, 2, 3))
    with pytest.raises(CodecError, match="trailing"):
        codec.decode_message(data + b"\x00")


def test_unknown_version_is_rejected() -> None:
    data = bytearray(codec.encode_message(TimeoutNow(1, 2, 3)))
    data[0] = codec.VERSION + 1
    with pytest.raises(CodecError, match="version"):
        codec.decode_message(bytes(data))


def test_payload_crc_mismatch_is_rejected() -> None:
    """§2: the CRC-32C over a block's payload catches a flipped payload byte."""
    data = bytearray(BLOCKS.encode(Block(BlockId(1, 1), BlockId(0, 0), BlockKind.CMD, b"x")))
    data[-1] ^= 0xFF
    with pytest.raises(CodecError, match="CRC"):
        BLOCKS.decode(bytes(data))


def test_oversized_lengths_are_rejected_before_allocation() -> None:
    """A corrupt length is checked against its bound, not trusted to size a read."""
    block_count = struct.pack(">BBQQQQQQQQI", codec.VERSION, codec.Tag.APPEND, 1, 1, 2, 0, 0, 0,
                              0, 0, limits.RAFT_APPEND_BLOCKS_MAX + 1)
    with pytest.raises(CodecError, match="exceeds"):
        codec.decode_message(block_count)
    huge_batch = struct.pack(">I", limits.RAFT_BATCH_COMMANDS_MAX + 1)
    with pytest.raises(CodecError, match="exceeds"):
        codec.decode_commands(huge_batch)
    huge_command = struct.pack(">II", 1, limits.RAFT_COMMAND_BYTES_MAX + 1)
    with pytest.raises(CodecError, match="exceeds"):
        codec.decode_commands(huge_command)
