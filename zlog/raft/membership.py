"""Which data directory each member runs on, and when the leader records a new one.

docs/raft.md §4.15 (KIP-853's idea): a voter is the pair (node id, directory id). A node whose
disk was wiped comes back under the same id with a new directory and an empty log; counting
its vote or its acknowledgements as the old voter's could elect a leader that lacks committed
blocks, or commit a block on fewer real copies than a quorum. So replies carry the sender's
directory id, and a configuration that records a directory for a voter counts only replies
from that directory. The leader writes what it learns into the configuration:

* a member with no directory recorded yet gets the one it answers from (all at once: this
  changes no one's vote, it only narrows who may cast it);
* a learner whose directory changed gets the new one (learners never count anyway);
* a voter answering from another directory than the recorded one is a new replica: it
  catches up like a learner, and once it is within `lag_blocks` of head the leader swaps
  (id, old dir) for (id, new dir), one voter per configuration change. The old directory
  is gone for good, so every quorum of the old configuration that can still answer lies
  inside the surviving voters and overlaps every quorum of the new one.

Pure: the caller passes what it knows and proposes the returned configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from zlog.raft.messages import NO_DIR_ID, ConfigState


def recorded_dirs_update(
    config: ConfigState,
    seen_dirs: Mapping[int, bytes],
    caught_up: Callable[[int], bool],
) -> ConfigState | None:
    """The next configuration recording directories, or None when nothing is due.

    `seen_dirs` maps members to the directory they last answered from (the leader itself
    included); `caught_up(voter)` says whether a voter's new directory holds the log closely
    enough to vote again.
    """
    fills: dict[int, bytes] = {}
    for member in config.members:
        seen = seen_dirs.get(member, NO_DIR_ID)
        recorded = config.dir_of(member)
        if seen in (NO_DIR_ID, recorded):
            continue
        if recorded == NO_DIR_ID or member in config.learners:
            fills[member] = seen
    if fills:
        return config.changed(dirs=fills)
    for voter in config.voters:
        seen = seen_dirs.get(voter, NO_DIR_ID)
        if seen not in (NO_DIR_ID, config.dir_of(voter)) and caught_up(voter):
            return config.changed(dirs={voter: seen})
    return None
