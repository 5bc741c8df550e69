"""A voter whose disk was wiped (docs/raft.md §4.15), step by step on the hand-driven cluster.

The hazard: block X commits on voters 1 and 2 of {1, 2, 3}; 2 loses its disk and restarts
empty under the same id; 1 is down. If 2's vote counted, 3 (which lacks X) would win 2 of 3
votes and lead without X, and X would be lost. The checker of harness.py fails any leader
whose head lacks a committed block ("5 Leader Completeness"), so the hazard shows up as a
failed check, and the rule as its absence.
"""

from __future__ import annotations

import pytest

from tests.scenarios.raft.harness import Cluster
from tests.sim.checker import InvariantViolation
from zlog.raft.messages import NO_DIR_ID, AppendResp, BlockId, Message
from zlog.raft.rawnode import RaftConfig

VOTERS = [1, 2, 3]


def commit_x_on_1_and_2(c: Cluster) -> BlockId:
    """Elect 1, let every node settle, then commit X with 3 cut off; crash 1; wipe 2."""
    c.elect(1)
    c.tick([1])
    c.stabilize()
    c.tick([1])
    c.stabilize()
    c.isolate(3)
    x = c.propose(1, b"X")
    c.stabilize()
    assert c[1].commit == x, "X is on 1 and 2: committed"
    assert c[3].block_at(x.height) != x, "3 lacks X"
    c.crash(1)
    c.heal()
    c.isolate(1)
    c.wipe(2)
    return x


def campaign_3(c: Cluster, rounds: int) -> None:
    for _ in range(rounds):
        c[3]._election_elapsed = c.cfg.election_ticks  # let 3 forget the old leader
        c[3]._leader = None
        c[2]._election_elapsed = c.cfg.election_ticks
        c[2]._leader = None
        c.campaign(3)
        c.stabilize()


def test_without_directory_ids_a_wiped_voter_elects_a_leader_lacking_a_committed_block() -> None:
    """The hazard is real: with no directory ids, 2's empty disk votes for 3."""
    c = Cluster(VOTERS, seed=7)
    commit_x_on_1_and_2(c)
    with pytest.raises(InvariantViolation, match="Leader Completeness"):
        campaign_3(c, rounds=3)


def test_a_wiped_voter_does_not_help_elect_a_leader_lacking_a_committed_block() -> None:
    """With directory ids recorded, 2's vote from its new directory does not count."""
    c = Cluster(VOTERS, seed=7, dir_ids=True)
    assert c[1].config.dirs == (), "nothing is recorded before the first leader learns it"
    x = commit_x_on_1_and_2(c)
    assert dict(c[3].config.dirs) == {n: c.dir_ids[n] for n in (1, 3)} | {2: c[3].config.dir_of(2)}
    assert c[3].config.dir_of(2) != c.dir_ids[2], "3 records 2's old directory"
    campaign_3(c, rounds=5)
    assert c[3].role != "leader"
    assert c.leaders() == []
    # 1 comes back: it leads again, 2's new directory catches up and replaces the old one.
    c.heal()
    c.restart(1)
    c.elect(1)
    for _ in range(4):
        c.tick([1])
        c.stabilize()
    for node in VOTERS:
        assert c[node].block_at(x.height) == x
        assert c[node].commit.height > x.height
        assert c[node].config.dir_of(2) == c.dir_ids[2], "2 is a voter again, new directory"
    assert c[1].config.voters == tuple(VOTERS)


def test_a_wiped_voters_acknowledgements_count_only_once_its_directory_is_recorded() -> None:
    """With 3 down, leader 1 and the wiped 2 are all that answer. 2's acknowledgement of Y,
    from its new directory, must not commit Y by itself: only once the configuration that
    swaps in 2's new directory (proposed when 2 holds the whole log) is on the leader's path
    does 2 count, as a voter of that configuration (single-server change: the old directory
    can never answer again, so every old quorum still possible overlaps every new one). The leader
    also forgets what 2's old disk held, or it would wait forever for 2 to acknowledge
    blocks past a match that the empty disk rejects as missing."""
    c = Cluster(VOTERS, seed=3, dir_ids=True, cfg=RaftConfig(promotion_lag_blocks=0))
    c.elect(1)
    for _ in range(2):
        c.tick([1])
        c.stabilize()
    assert len(c[1].config.dirs) == 3
    c.crash(3)
    c.wipe(2)
    c.readies[1].clear()
    y = c.propose(1, b"Y")
    for _ in range(3):
        c.tick([1])
        c.stabilize()
    assert c[2].block_at(y.height) == y, "2 holds Y on its new disk"
    readies = c.readies[1]
    swap = c[1].commit
    assert swap.height == y.height + 1, "the swap committed, and Y beneath it"
    swap_at = next(i for i, r in enumerate(readies) if any(b.id == swap for b in r.new_blocks))
    y_at = next(i for i, r in enumerate(readies)
                if r.hard_state is not None and r.hard_state.commit.height >= y.height)
    assert y_at >= swap_at, "2's acknowledgements counted only once the swap was on the path"
    assert c[1].config.dir_of(2) == c.dir_ids[2]
    assert c[1].config.voters == tuple(VOTERS)


def test_a_wiped_voter_never_campaigns_once_it_learns_it_is_not_recorded() -> None:
    """2's new disk receives the whole log, whose configuration names 2's old directory, but
    the leader never hears it acknowledge (those answers are lost), so it does not swap the
    directory in, and then crashes: 2 must not campaign (nor could it win: 3 ignores it)."""
    c = Cluster(VOTERS, seed=5, dir_ids=True, cfg=RaftConfig(promotion_lag_blocks=0))
    c.elect(1)
    for _ in range(2):
        c.tick([1])
        c.stabilize()
    c.wipe(2)
    def acknowledgement_from_2(m: Message) -> bool:
        return isinstance(m, AppendResp) and m.from_ == 2 and m.success

    for _ in range(4):  # 2's rejections get through, its acknowledgements are lost
        c.tick([1])
        for _ in range(10):
            c.drop(acknowledgement_from_2)
            c.deliver(lambda m: not acknowledgement_from_2(m))
    assert c[2].head == c[1].head, "2 holds the log"
    assert c[2].config.dir_of(2) not in (NO_DIR_ID, c.dir_ids[2]), "it names the old directory"
    term = c[2].term
    c.crash(1)
    for _ in range(5 * c.cfg.election_ticks):
        c.tick([2, 3])
        c.drop(frm=2)
        c.stabilize()
    assert c[2].role == "follower"
    assert c[2].term == term, "2 never asked for a vote"
