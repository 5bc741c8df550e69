"""What one Raft node reports about itself: a frozen snapshot any thread may read.

The runner publishes one after every tick and every Ready (`RaftRunner.status`); the broker's
control plane answers DescribeCluster and finds the controller from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zlog.raft.messages import BlockId


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """One node's view of the metadata log, as other threads read it (`RaftRunner.status`)."""

    node_id: int
    role: str  # follower, pre-candidate, candidate or leader
    term: int
    leader: int | None  # the node this one follows or is; None while it knows of none
    head: BlockId
    commit: BlockId
    applied: BlockId
    base: BlockId  # the snapshot the log starts after
    commands_applied: int
    readies: int
    fsyncs: int
    fsync_ms_total: float
    fsync_ms_max: float
    blocks_proposed: int
    commands_proposed: int
    snapshots_taken: int
    snapshots_restored: int
    loop_turns: int
    # Leader only: (peer, match height); -1 for a voter answering from another data
    # directory than the recorded one (a wiped disk, not yet swapped in: docs/raft.md §4.15).
    voter_match: tuple[tuple[int, int], ...] = ()
    voters: tuple[int, ...] = ()  # the configuration at head
    learners: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Plain JSON types, block ids as [term, height] pairs."""
        fields_ = {name: getattr(self, name) for name in self.__slots__}
        return {name: [list(item) if isinstance(item, tuple) else item for item in value]
                if isinstance(value, tuple) else value
                for name, value in fields_.items()}
