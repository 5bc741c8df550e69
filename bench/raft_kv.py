"""A small key-value state machine for Chained Raft: what the tests and the benchmark replicate.

zlog's own state machine is the cluster metadata
(zlog/broker/control/metadata/state_machine.py); this one exists to drive a runner from outside,
where counters show a lost or doubled increment at a glance. It implements
zlog.raft.fsm.StateMachine and reads commands with the Raft codec's bounded Reader, so a
malformed command is refused the way a peer's frame is.
"""

from __future__ import annotations

import hashlib
import struct
from enum import IntEnum
from typing import Final

from zlog import limits
from zlog.raft.codec import CodecError, Reader

KEY_BYTES_MAX: Final = 1024
_KEY_HEAD = struct.Struct(">BH")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")


class KvOp(IntEnum):
    SET = 1  # value := argument; returns the old value (b"" if none)
    GET = 2  # returns the value (b"" if none); as a query it needs no log entry
    INCR = 3  # value := int(value) + i64 argument; returns the new value as decimal ASCII
    APPEND = 4  # adds the argument to the key's list; returns the new length as decimal ASCII
    LIST = 5  # query: the key's list, as a command batch (codec.encode_commands layout)


BAD_COMMAND: Final = b"!bad command"


def kv_command(op: KvOp, key: bytes, argument: bytes = b"") -> bytes:
    """`u8 op | u16 key_len | key | argument`: the one layout for commands and queries."""
    assert len(key) <= KEY_BYTES_MAX, "key over its bound"
    return _KEY_HEAD.pack(op, len(key)) + key + argument


def kv_incr(key: bytes, delta: int = 1) -> bytes:
    return kv_command(KvOp.INCR, key, _I64.pack(delta))


def _parse(command: bytes) -> tuple[KvOp, bytes, bytes]:
    reader = Reader(command)
    op, key_len = reader.unpack(_KEY_HEAD)
    try:
        kv_op = KvOp(op)
    except ValueError:
        raise CodecError(f"unknown kv op {op}") from None
    key = reader.take(key_len, KEY_BYTES_MAX, "key")
    return kv_op, key, command[reader.offset :]


class KvStateMachine:
    """A deterministic key-value store with counters and append-only lists.

    Lists exist so that tests can see duplicates: a command applied twice appends its unique
    id twice, where a SET would hide it.
    """

    def __init__(self) -> None:
        self.values: dict[bytes, bytes] = {}
        self.lists: dict[bytes, list[bytes]] = {}
        self.applied_commands = 0

    def apply(self, command: bytes) -> bytes:
        self.applied_commands += 1
        try:
            op, key, argument = _parse(command)
        except CodecError:
            return BAD_COMMAND
        if op == KvOp.SET:
            old = self.values.get(key, b"")
            self.values[key] = argument
            return old
        if op == KvOp.INCR:
            return self._incr(key, argument)
        if op == KvOp.APPEND:
            items = self.lists.setdefault(key, [])
            items.append(argument)
            return str(len(items)).encode()
        return self.query(command)

    def _incr(self, key: bytes, argument: bytes) -> bytes:
        if len(argument) != _I64.size:
            return BAD_COMMAND
        try:
            current = int(self.values.get(key, b"0"))
        except ValueError:
            return BAD_COMMAND
        (delta,) = _I64.unpack(argument)
        value = str(current + delta).encode()
        self.values[key] = value
        return value

    def query(self, query: bytes) -> bytes:
        try:
            op, key, _ = _parse(query)
        except CodecError:
            return BAD_COMMAND
        if op == KvOp.GET:
            return self.values.get(key, b"")
        if op == KvOp.LIST:
            items = self.lists.get(key, [])
            out = bytearray(_U32.pack(len(items)))
            for item in items:
                out += _U32.pack(len(item)) + item
            return bytes(out)
        return BAD_COMMAND

    def snapshot(self) -> bytes:
        """Sorted keys, so equal states give equal bytes on every node."""
        out = bytearray(_U32.pack(self.applied_commands))
        out += _U32.pack(len(self.values))
        for key in sorted(self.values):
            out += _pack_bytes(key) + _pack_bytes(self.values[key])
        out += _U32.pack(len(self.lists))
        for key in sorted(self.lists):
            out += _pack_bytes(key) + _U32.pack(len(self.lists[key]))
            for item in self.lists[key]:
                out += _pack_bytes(item)
        return bytes(out)

    def restore(self, data: bytes) -> None:
        reader = Reader(data)
        (applied_commands,) = reader.unpack(_U32)
        values: dict[bytes, bytes] = {}
        for _ in range(_count(reader)):
            key = _read_bytes(reader)
            values[key] = _read_bytes(reader)
        lists: dict[bytes, list[bytes]] = {}
        for _ in range(_count(reader)):
            key = _read_bytes(reader)
            lists[key] = [_read_bytes(reader) for _ in range(_count(reader))]
        reader.expect_end()
        self.values, self.lists, self.applied_commands = values, lists, applied_commands

    def digest(self) -> str:
        """A short fingerprint of the state: equal digests mean equal states."""
        return hashlib.sha256(self.snapshot()).hexdigest()[:16]


def _pack_bytes(value: bytes) -> bytes:
    return _U32.pack(len(value)) + value


def _read_bytes(reader: Reader) -> bytes:
    (size,) = reader.unpack(_U32)
    return reader.take(size, limits.RAFT_COMMAND_BYTES_MAX, "snapshot field")


def _count(reader: Reader) -> int:
    (count,) = reader.unpack(_U32)
    if count * _U32.size > reader.remaining():  # each entry holds at least one length
        raise CodecError(f"count {count} cannot fit in the {reader.remaining()} bytes left")
    return count


def decode_list(data: bytes) -> list[bytes]:
    """The answer to a LIST query."""
    reader = Reader(data)
    items = [_read_bytes(reader) for _ in range(_count(reader))]
    reader.expect_end()
    return items
