"""The state-machine seam: what the runner applies committed commands to.

docs/raft.md §4.8 Apply: every node applies the blocks of the committed path in order,
so a state machine must be deterministic (the same commands in the same order give the same
state and the same results on every node) and must be able to dump and reload its whole state
(§4.10 Snapshot and compaction: the snapshot replaces the blocks it covers). zlog's metadata state
machine (brokers, topics, assignments) implements this Protocol; the tests and the benchmark
use a small key-value one (bench/raft_kv.py).
"""

from __future__ import annotations

from typing import Protocol


class StateMachine(Protocol):
    """What the runner drives. Called only from the runner's loop thread, never concurrently."""

    def apply(self, command: bytes) -> bytes:
        """Apply one committed command; the result goes back to the proposer.

        Must be deterministic and must not raise for a bad command: every node applies the
        same bytes, so a malformed command has to become the same error result everywhere.
        """
        ...

    def snapshot(self) -> bytes:
        """The whole state as bytes, equal on every node that applied the same commands."""
        ...

    def restore(self, data: bytes) -> None:
        """Replace the whole state with a snapshot() taken here or on another node."""
        ...

    def query(self, query: bytes) -> bytes:
        """Answer a read without changing state; the runner calls it only when the read is
        linearizable (ReadIndex, §4), so queries never need to go through the log."""
        ...
