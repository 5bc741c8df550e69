"""The simulated state machine: a hash chain over every applied block.

Two replicas with equal (height, digest) applied exactly the same blocks in the same order,
so the checker can compare whole histories in O(1) (the nats RCOB idea). Its snapshot is
the pair itself, which is what a restarting or lagging node restores from.
"""

from __future__ import annotations

import hashlib
import struct

from zlog.raft.messages import GENESIS, Block, BlockId

_SNAPSHOT = struct.Struct(">QQ16s")
GENESIS_DIGEST = b"\x00" * 16


def block_digest(previous: bytes, block: Block) -> bytes:
    h = hashlib.blake2b(previous, digest_size=16)
    h.update(struct.pack(">QQB", block.id.term, block.id.height, int(block.kind)))
    h.update(block.payload)
    return h.digest()


class SimStateMachine:
    def __init__(self, last: BlockId = GENESIS, digest: bytes = GENESIS_DIGEST) -> None:
        self.last = last
        self.digest = digest

    def apply(self, block: Block) -> None:
        assert block.id.height == self.last.height + 1, (
            f"applied {block.id} after {self.last}: a gap or a repeat"
        )
        assert block.parent == self.last, f"applied {block.id} whose parent is not {self.last}"
        self.digest = block_digest(self.digest, block)
        self.last = block.id

    def snapshot(self) -> bytes:
        return _SNAPSHOT.pack(self.last.term, self.last.height, self.digest)

    @classmethod
    def restore(cls, data: bytes) -> SimStateMachine:
        if not data:
            return cls()
        term, height, digest = _SNAPSHOT.unpack(data)
        return cls(BlockId(term, height), digest)
