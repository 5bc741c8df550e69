"""The scripted regression scenarios of docs/raft.md §6.3, step by step.

Every scenario runs on the hand-driven cluster of harness.py, whose driver also checks
every invariant of section 6 after every step.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.scenarios.raft.harness import Cluster
from zlog.raft.errors import ConfigChangeError, NotLeaderError
from zlog.raft.messages import (
    GENESIS,
    Append,
    AppendResp,
    BlockId,
    ConfigState,
    Message,
    VoteResp,
)
from zlog.raft.rawnode import RaftConfig

PLAIN = RaftConfig(pre_vote=False, check_quorum=False)  # terms move exactly when told
ONE_BLOCK = RaftConfig(pre_vote=False, check_quorum=False, max_append_blocks=1)


def appends_to(node: int) -> Callable[[Message], bool]:
    return lambda m: isinstance(m, Append) and m.to == node


# -- Figure 8 -----------------------------------------------------------------------------------


def figure8_prefix() -> tuple[Cluster, BlockId, BlockId]:
    """S1 (term 2) puts B on S1, S2; S5 (term 3, voted by S3, S4) forks B' at B's height;
    S1 (term 4) copies B to S3, so B is on a majority while S1's no-op is only on S1."""
    c = Cluster([1, 2, 3, 4, 5], cfg=ONE_BLOCK)
    c.elect(1)  # term 1: the genesis CONFIG block (1,1) commits everywhere
    c.crash(1)
    c.restart(1)
    c.elect(1)  # term 2: no-op (2,2) commits everywhere
    assert c[1].term == 2
    b = c.propose(1, b"B")
    assert b == BlockId(2, 3)
    c.deliver(appends_to(2))
    c.deliver(kind="AppendResp")
    c.drop()
    c.isolate(1)
    c.isolate(2)
    c[5].campaign()
    c.drain(5)
    c.deliver(kind="Vote", to=3)
    c.deliver(kind="Vote", to=4)
    c.deliver(kind="VoteResp")
    assert c[5].role == "leader"
    assert c[5].term == 3
    b_prime = c[5].head
    assert b_prime == BlockId(3, 3)
    c.drop()  # nobody hears of B'
    c.crash(5)
    c.heal()
    c.isolate(5)
    c.crash(1)  # S1 left term 2 behind; its first campaign (term 3) cannot win
    c.restart(1)
    c.campaign(1)
    c.drop()
    c.campaign(1)
    c.deliver(kind="Vote")
    c.deliver(kind="VoteResp")
    assert c[1].role == "leader"
    assert c[1].term == 4
    assert c[1].head == BlockId(4, 4)
    c.drop(lambda m: m.to != 3)
    # Catch S3 up one block at a time: it lacks B, rejects, is probed back, then gets B.
    for _ in range(3):
        c.deliver(appends_to(3))
        c.deliver(kind="AppendResp", frm=3)
        c.drop(lambda m: m.to != 3)
        if c[3].head == b:
            break
    assert c[3].head == b
    c.deliver(kind="AppendResp", frm=3)
    return c, b, b_prime


def test_figure8_older_term_block_on_majority_does_not_commit() -> None:
    """Raft 5.4.2 / section 4 commit rule: B (term 2) is on S1, S2, S3 but S1 (term 4) must
    not commit it by counting replicas; only a current-term block can commit it."""
    c, b, _ = figure8_prefix()
    assert c[1].match_height(3) == b.height
    assert c[1].commit == BlockId(2, 2), "B is on a majority yet must not commit"
    # If S1 now crashes, S5 (head term 3 > 2) can win term 5 and B becomes a dead branch.
    c.crash(1)
    c.drop()
    c.heal()
    c.restart(5)
    c.isolate(1)
    c.elect(5)
    assert c[5].term == 5
    assert c[5].head.term == 5
    assert c[5].block_at(3) == BlockId(3, 3)
    c.tick([5], count=2)
    c.stabilize()
    for node in (2, 3, 4):
        assert c[node].block_at(3) == BlockId(3, 3), "B' won height 3"
        assert c[node].commit.height >= 4
    assert b in c.pruned(3), "once commit passes height 3, B is a dead branch and is pruned"
    assert c[3].get_block(b) is None


def test_figure8_current_term_block_commits_b_indirectly() -> None:
    """Section 4 commit rule: once S1's term-4 no-op reaches a majority, B commits beneath
    it, and S5 (head term 3) can no longer win (S3's head is term 4)."""
    c, b, _ = figure8_prefix()
    c.tick([1])
    c.deliver(appends_to(3))
    c.deliver(kind="AppendResp", frm=3)
    c.deliver(appends_to(2))
    c.deliver(kind="AppendResp", frm=2)
    assert c[1].commit == BlockId(4, 4)
    assert c[1].block_at(b.height) == b
    c.stabilize()
    c.crash(1)
    c.restart(5)
    c[5].campaign()
    c.drain(5)
    c.deliver(kind="Vote")
    c.deliver(kind="VoteResp")
    assert c[5].role != "leader", "S5 lacks committed B and the no-op; no majority grants"


# -- stale and duplicate Appends ----------------------------------------------------------------


def test_stale_or_duplicate_append_does_not_regress_head() -> None:
    """Section 4 rule 3: fork choice keeps head when it already extends `last`; a reordered
    or duplicated older Append of the same term cannot pull head back."""
    c = Cluster([1, 2, 3], cfg=ONE_BLOCK)
    c.elect(1)
    for payload in (b"a", b"b", b"c"):
        c.propose(1, payload)
    appends = [m for m in c.take(appends_to(2)) if isinstance(m, Append)]
    assert len(appends) == 3
    assert [m.blocks[0].id.height for m in appends] == [2, 3, 4]
    for msg in appends:
        c.step(msg)
    assert c[2].head == BlockId(1, 4)
    c.take(kind="AppendResp", frm=2)
    for msg in reversed(appends):  # duplicates, newest first: the worst reordering
        c.step(msg)
        assert c[2].head == BlockId(1, 4)
    replies = [m for m in c.take(kind="AppendResp", frm=2) if isinstance(m, AppendResp)]
    assert [r.match for r in replies] == [BlockId(1, 4), BlockId(1, 3), BlockId(1, 2)]
    assert all(r.success for r in replies), "match is `last`, never head"


def test_reordered_appends_fill_in_without_losing_head() -> None:
    """Rule 1 then rule 3: an Append whose prev is missing is rejected with hints; the
    earlier one arriving later extends the chain without moving head backwards."""
    c = Cluster([1, 2, 3], cfg=ONE_BLOCK)
    c.elect(1)
    c.propose(1, b"a")
    c.propose(1, b"b")
    first, second = [m for m in c.take(appends_to(2)) if isinstance(m, Append)]
    c.step(second)
    (reject,) = [m for m in c.take(kind="AppendResp") if isinstance(m, AppendResp)]
    assert not reject.success
    assert reject.match == second.prev
    assert reject.hint_head == BlockId(1, 1)
    c.step(first)
    c.step(second)
    assert c[2].head == BlockId(1, 3)


# -- split catch-up batches ---------------------------------------------------------------------


def test_split_catch_up_batch_cannot_elect_follower_lacking_committed_block() -> None:
    """Section 2 (head.term, not [B]'s last-appended term): term-2 block (2,5) is committed
    by S1 and S2; S3 gets only the first, term-1 half of its catch-up (a split batch) before
    S2 dies. With [B]'s rule S3 would claim last term 2; with head.term it claims (1,2) and
    cannot win: S1's head (2,5) is more up to date."""
    cfg = RaftConfig(pre_vote=False, check_quorum=False, max_append_blocks=2)
    c = Cluster([1, 2, 3], cfg=cfg)
    c.isolate(3)
    c.elect(1)
    c.propose(1, b"x")
    c.propose(1, b"y")
    c.stabilize()
    assert c[1].commit == BlockId(1, 3)
    c.crash(1)
    c.drop()
    c.restart(1)
    c.elect(2)  # term 2: S2 with S1's vote
    c.propose(2, b"z")
    c.stabilize()
    assert c[2].commit == BlockId(2, 5)
    c.heal()
    c.tick([2])  # probes S3 from the top; S3 rejects and is probed back to genesis
    for _ in range(10):
        c.deliver(lambda m: isinstance(m, Append | AppendResp) and 3 in (m.to, m.from_))
        c.drop(lambda m: 3 not in (m.to, m.from_))
        if c[3].head != GENESIS:
            break
    assert c[3].head == BlockId(1, 2), "first half of the split batch: term-1 blocks only"
    c.crash(2)
    c.drop()
    c[3].campaign()
    c.drain(3)
    c.stabilize()
    assert c[3].role != "leader"
    assert c[1].vote != 3
    c.elect(1)
    assert c[1].block_at(5) == BlockId(2, 5), "the committed block survives"


# -- restart keeps head and vote ------------------------------------------------------------------


def test_restart_keeps_head_and_vote() -> None:
    """Section 2: term, vote and head are durable. A voter that granted S1 in term 1 and
    restarted must refuse S3 in the same term (section 6 invariant 2)."""
    c = Cluster([1, 2, 3], cfg=PLAIN)
    c[1].campaign()
    c.drain(1)
    c[3].campaign()
    c.drain(3)
    c.deliver(kind="Vote", frm=1, to=2)
    granted = [m for m in c.take(kind="VoteResp", frm=2) if isinstance(m, VoteResp)]
    assert granted[0].granted
    c.crash(2)
    node = c.restart(2)
    assert (node.term, node.vote) == (1, 1)
    c.deliver(kind="Vote", frm=3, to=2)
    (answer,) = [m for m in c.take(kind="VoteResp", frm=2) if isinstance(m, VoteResp)]
    assert not answer.granted
    # Head survives too.
    c.stabilize()
    c.step(granted[0])
    c.stabilize()
    leader = c.leaders()[0]
    c.propose(leader, b"kept")
    c.stabilize()
    head = c[2].head
    c.crash(2)
    assert c.restart(2).head == head


def test_vote_lost_with_its_ready_was_never_sent() -> None:
    """Section 5: a crash before persisting loses the vote *and* the reply that announced
    it, so voting again after restart is safe."""
    c = Cluster([1, 2, 3], cfg=PLAIN)
    c[1].campaign()
    c.drain(1)
    (vote,) = c.take(kind="Vote", frm=1, to=2)
    c[2].step(vote)
    c.crash(2, lose_ready=True)
    node = c.restart(2)
    assert node.vote is None
    assert not c.take(kind="VoteResp", frm=2)


# -- up to date: equal head terms compare by height ----------------------------------------------


def test_equal_head_terms_compare_by_height() -> None:
    """Section 4 utd: same head term means both heads lie on one leader's chain, so the
    taller one extends the other and wins."""
    c = Cluster([1, 2, 3], cfg=PLAIN)
    c.elect(1)
    c.propose(1, b"a")
    c.deliver(appends_to(2))
    c.drop()
    assert c[2].head == BlockId(1, 2)
    assert c[3].head == BlockId(1, 1)
    c.crash(1)
    c[3].campaign()
    c.drain(3)
    c.deliver(kind="Vote", to=2)
    (answer,) = [m for m in c.take(kind="VoteResp") if isinstance(m, VoteResp)]
    assert not answer.granted, "(1,1) is not as up to date as (1,2)"
    c[2].campaign()
    c.drain(2)
    c.deliver(kind="Vote", to=3)
    c.deliver(kind="VoteResp")
    assert c[2].role == "leader"


# -- check-quorum and reads ----------------------------------------------------------------------


def test_minority_leader_steps_down_and_serves_no_reads() -> None:
    """Section 4 check-quorum and ReadIndex: a leader cut off with a minority answers no
    read, steps down within E ticks, and the majority elects a leader that does answer."""
    cfg = RaftConfig(election_ticks=10)
    c = Cluster([1, 2, 3, 4, 5], cfg=cfg)
    c.elect(1)
    c.tick([1])
    c.stabilize()
    c.partition([1, 2], [3, 4, 5])
    c[1].read_index(b"stale?")
    c.drain(1)
    for _ in range(2 * cfg.election_ticks):
        c.tick([1, 2])
        c.stabilize()
    assert c[1].role == "follower", "check-quorum: no quorum heard for E ticks"
    assert c.read_states[1] == [], "no read without a quorum echo"
    with pytest.raises(NotLeaderError):
        c[1].read_index(b"again")
    for _ in range(4 * cfg.election_ticks):
        c.tick([3, 4, 5])
        c.stabilize()
        if any(c[i].role == "leader" for i in (3, 4, 5)):
            break
    (leader,) = [i for i in (3, 4, 5) if c[i].role == "leader"]
    c.propose(leader, b"w")
    c.stabilize()
    c.tick([leader])
    c.stabilize()
    c.checker.read_requested(b"fresh")
    c[leader].read_index(b"fresh")
    c.drain(leader)
    c.stabilize()
    (read,) = c.read_states[leader]
    assert read.ctx == b"fresh"
    assert read.index == c[leader].commit
    c.checker.observe_read(leader, read)


def test_read_before_first_commit_of_term_waits() -> None:
    """ReadIndex needs commit.term == current term: a read issued right after election
    waits for the term's first block to commit."""
    c = Cluster([1, 2, 3])
    c[1].campaign()
    c.drain(1)
    c.stabilize()  # pre-vote, vote: S1 leads; its no-op goes out with the votes' answers
    assert c[1].role == "leader"
    c.heal()
    c[1].read_index(b"early")
    c.drain(1)
    assert c.read_states[1] == []
    c.stabilize()
    c.tick([1])
    c.stabilize()
    (read,) = c.read_states[1]
    assert read.index.term == c[1].term


def test_isolated_node_rejoining_does_not_raise_leader_term() -> None:
    """Section 6 invariant 9 / dissertation 9.6: with pre-vote, a node that was cut off and
    timed out many times rejoins without deposing the leader."""
    cfg = RaftConfig()
    c = Cluster([1, 2, 3], cfg=cfg)
    c.elect(1)
    c.isolate(3)
    for _ in range(10 * cfg.election_ticks):
        c.tick()
        c.stabilize()
    assert c[3].term == 1, "pre-vote never raised its term"
    c.heal()
    for _ in range(3 * cfg.election_ticks):
        c.tick()
        c.stabilize()
    assert c[1].role == "leader"
    assert c[1].term == 1
    assert c[3].head == c[1].head


# -- membership ------------------------------------------------------------------------------------


def test_remove_the_leader_via_config_change() -> None:
    """Section 4 membership: a leader that removes itself keeps leading, without counting
    itself, until the change commits; then it steps down and never campaigns again."""
    c = Cluster([1, 2, 3])
    c.elect(1)
    c.tick([1])
    c.stabilize()
    change = c[1].propose_config(ConfigState.of([2, 3]))
    c.drain(1)
    assert c[1].role == "leader", "still leading while the change is uncommitted"
    assert c[1].config == ConfigState.of([2, 3]), "config applies once on the path"
    c.propose(1, b"while leaving")
    c.stabilize()
    c.tick([1])
    c.stabilize()
    assert c[2].commit.height >= change.height
    assert c[1].role == "follower"
    for _ in range(5 * c.cfg.election_ticks):
        c.tick()
        c.stabilize()
    leaders = c.leaders()
    assert len(leaders) == 1
    assert leaders[0] in (2, 3)
    term = c[leaders[0]].term
    for _ in range(5 * c.cfg.election_ticks):
        c.tick()
        c.stabilize()
    assert c[leaders[0]].term == term, "the removed node does not disrupt"
    assert c[1].role == "follower"


def test_add_learner_then_promote() -> None:
    """Section 4 membership: a new node joins as a learner (no bootstrap), gets blocks, has no
    vote; it can be promoted only once it has caught up, one voter change at a time."""
    c = Cluster([1, 2, 3], spares=[4])
    c.elect(1)
    for i in range(5):
        c.propose(1, b"%d" % i)
    c.stabilize()
    c.tick([1])
    c.stabilize()
    with pytest.raises(ConfigChangeError):
        c[1].propose_config(ConfigState.of([1, 2, 3, 4]))  # not a learner first
    with pytest.raises(ConfigChangeError):
        c[1].propose_config(ConfigState.of([1]))  # two voters at once
    c[1].propose_config(ConfigState.of([1, 2, 3], [4]))
    c.drain(1)
    with pytest.raises(ConfigChangeError):
        c[1].propose_config(ConfigState.of([1, 2, 3, 4]))  # previous change uncommitted
    for _ in range(5):
        c.tick([1])
        c.stabilize()
    assert c[4].head == c[1].head
    assert c[4].config == ConfigState.of([1, 2, 3], [4])
    for _ in range(5 * c.cfg.election_ticks):
        c.tick([4])
    assert c[4].role == "follower", "learners never campaign"
    c[1].propose_config(ConfigState.of([1, 2, 3, 4]))
    c.drain(1)
    c.stabilize()
    c.tick([1])
    c.stabilize()
    assert c[4].config.voters == (1, 2, 3, 4)


def test_config_change_needs_a_commit_in_the_leaders_term() -> None:
    """Section 4 (the single-server-change fix): no CONFIG block before the leader has
    committed a block of its current term."""
    c = Cluster([1, 2, 3], spares=[4])
    c[1].campaign()
    c.drain(1)
    c.deliver(kind="Vote")
    c.deliver(kind="VoteResp")
    c.deliver(kind="Vote")
    c.deliver(kind="VoteResp")
    assert c[1].role == "leader"
    with pytest.raises(ConfigChangeError):
        c[1].propose_config(ConfigState.of([1, 2, 3], [4]))
    c.stabilize()
    c.tick([1])
    c.stabilize()
    c[1].propose_config(ConfigState.of([1, 2, 3], [4]))


def test_leader_transfer() -> None:
    """TimeoutNow: the target campaigns at once (no pre-vote, past stickiness) and wins."""
    c = Cluster([1, 2, 3])
    c.elect(1)
    c.propose(1, b"x")
    c.stabilize()
    c.tick([1])
    c.stabilize()
    c[1].transfer_leader(2)
    c.drain(1)
    c.stabilize()
    c.tick([1, 2])
    c.stabilize()
    assert c[2].role == "leader"
    assert c[2].term == 2
    assert c[1].role == "follower"


# -- snapshots ------------------------------------------------------------------------------------


def test_snapshot_onto_node_with_dead_branch() -> None:
    """Section 4 install: S3 holds a dead branch (its own uncommitted term-2 blocks); the
    leader compacted past the fork, so it sends a snapshot; S3 wipes the dead branch and
    restores its state machine from the snapshot."""
    c = Cluster([1, 2, 3], cfg=PLAIN)
    c.elect(1)  # term 1: (1,1) everywhere
    c.tick([1])
    c.stabilize()
    c.campaign(3)  # term 2: S3 wins with S2's vote alone
    c.deliver(kind="Vote", to=2)
    c.drop(kind="Vote")
    c.deliver(kind="VoteResp")
    assert c[3].role == "leader"
    c.propose(3, b"dead-1")
    c.propose(3, b"dead-2")
    c.drop()  # none of S3's term-2 blocks leaves it
    dead = c[3].head
    assert dead == BlockId(2, 4)
    c.crash(3)
    c.tick([1])  # S1 (term 1) hears term 2 from S2 and steps down
    c.stabilize()
    assert c[1].role == "follower"
    c.elect(1)  # term 3 with S2
    for i in range(6):
        c.propose(1, b"live-%d" % i)
    c.stabilize()
    c.tick([1])
    c.stabilize()
    c[1].compact(c[1].applied, c.snapshot_data(1))
    c.drain(1)
    assert c[1].base.height > 2, "compacted past the fork point"
    c.restart(3)
    assert c[3].head == dead
    for _ in range(6):
        c.tick([1])
        c.stabilize()
    assert c[3].head == c[1].head
    assert c[3].get_block(dead) is None
    assert dead in c.pruned(3)
    assert any(r.restore for r in c.readies[3]), "state machine restored from the snapshot"
    assert c.fsms[3].digest == c.fsms[1].digest


def test_blog_pruning_example_in_a_cluster() -> None:
    """[B] GC example: D (1,4) reaches only S2; S3 leads term 2 with E (2,4) -> F (2,5).
    When commit passes E on S2, D is pruned there (Ready.pruned) and never applied."""
    c = Cluster([1, 2, 3, 4, 5], cfg=PLAIN)
    c.elect(1)
    c.propose(1, b"B")
    c.propose(1, b"C")
    c.stabilize()
    c.tick([1])
    c.stabilize()
    d = c.propose(1, b"D")
    c.deliver(appends_to(2))
    c.drop()
    assert c[2].head == d
    c.crash(1)
    c[3].campaign()
    c.drain(3)
    c.deliver(kind="Vote", to=4)
    c.deliver(kind="Vote", to=5)
    c.drop(kind="Vote")
    c.deliver(kind="VoteResp")
    assert c[3].role == "leader"
    e = c[3].head
    f = c.propose(3, b"F")
    assert (e, f) == (BlockId(2, 4), BlockId(2, 5))
    c.stabilize()
    c.tick([3])
    c.stabilize()
    assert c[2].commit == f
    assert d in c.pruned(2)
    assert c[2].get_block(d) is None
    assert c[2].block_at(4) == e


def test_lower_term_vote_gets_current_term_back() -> None:
    """Term rule: a stale candidate's Vote is rejected with the current term, so it catches up
    (and its pre-vote, with pre-vote on, never raises anyone's term)."""
    c = Cluster([1, 2, 3], cfg=PLAIN)
    c.isolate(3)
    c.elect(1)  # term 1
    c.crash(1)
    c.restart(1)
    c.elect(2)  # term 2, S3 still at term 0
    assert c[3].term == 0
    c.heal()
    c.drop()
    c.campaign(3)
    c.deliver(kind="Vote", to=2)
    (answer,) = [m for m in c.take(kind="VoteResp") if isinstance(m, VoteResp)]
    assert not answer.granted
    assert answer.term == 2
    c.step(answer)
    assert (c[3].role, c[3].term) == ("follower", 2)


def test_deposed_leader_without_check_quorum_serves_no_stale_read() -> None:
    """ReadIndex (dissertation 6.4) is safe without any clock or check-quorum: a leader cut
    off with a minority still believes it leads, but no quorum echoes its heartbeat, so a
    read it accepts after the majority committed newer blocks is never answered."""
    c = Cluster([1, 2, 3, 4, 5], cfg=PLAIN)
    c.elect(1)
    c.tick([1])
    c.stabilize()
    c.partition([1, 2], [3, 4, 5])
    c.elect(3)
    c.propose(3, b"newer")
    c.stabilize()
    c.tick([3])
    c.stabilize()
    assert c[3].commit.height > c[1].commit.height
    assert c[1].role == "leader", "without check-quorum it does not know it was deposed"
    c.checker.read_requested(b"stale?")
    c[1].read_index(b"stale?")
    c.drain(1)
    for _ in range(3):
        c.tick([1, 2])
        c.stabilize()
    assert c.read_states[1] == [], "no quorum echoed: no answer"
    c.heal()
    c.tick([3])
    c.stabilize()
    c.tick([1])
    c.stabilize()
    assert c[1].role == "follower"
    assert c.read_states[1] == []
