"""Unit tests of zlog.raft.rawnode.Node, one rule each (etcd's raft_paper_test.go style).

Nodes here are driven by hand: messages are built directly and the Ready is inspected, so
each test shows exactly which input produces which output under which rule of
docs/raft.md.
"""

from __future__ import annotations

import contextlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zlog.raft.errors import NotLeaderError, ProposalDroppedError
from zlog.raft.messages import (
    GENESIS,
    Append,
    AppendResp,
    Block,
    BlockId,
    BlockKind,
    ConfigState,
    HardState,
    InstallSnapshot,
    Message,
    PersistedState,
    Ready,
    Snapshot,
    TimeoutNow,
    Vote,
    VoteResp,
)
from zlog.raft.rawnode import RaftConfig, RawNode, up_to_date

BOOT = ConfigState.of([1, 2, 3])
CFG = RaftConfig()


def new_node(node_id: int = 1, cfg: RaftConfig = CFG, bootstrap: ConfigState = BOOT) -> RawNode:
    node = RawNode(node_id, cfg, None, random.Random(node_id), bootstrap)
    flush(node)
    return node


def flush(node: RawNode) -> list[Ready]:
    """Play the driver: take and advance every Ready; return them for inspection."""
    readies = []
    while node.has_ready():
        ready = node.ready()
        readies.append(ready)
        node.advance(ready)
    return readies


def sent(readies: list[Ready]) -> list[Message]:
    return [m for r in readies for m in r.messages]


def cmd(term: int, height: int, parent: BlockId, payload: bytes = b"") -> Block:
    return Block(BlockId(term, height), parent, BlockKind.CMD, payload)


def follower_with(blocks: list[Block], term: int, node_id: int = 2) -> RawNode:
    """A follower in `term` holding `blocks` (heads the last one) via one leader Append."""
    node = new_node(node_id)
    node.step(Append(term, 1, node_id, GENESIS, tuple(blocks), GENESIS, 0))
    flush(node)
    assert node.head == blocks[-1].id
    return node


def make_leader(cfg: RaftConfig = CFG) -> RawNode:
    """Node 1 elected leader of term 1 by node 2's votes (pre-vote, then vote)."""
    node = new_node(1, cfg)
    node.campaign()
    flush(node)
    if cfg.pre_vote:
        node.step(VoteResp(1, 2, 1, True, pre=True))
        flush(node)
    node.step(VoteResp(1, 2, 1, True))
    flush(node)
    assert node.role == "leader"
    return node


# -- up to date ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("candidate", "voter", "expected"),
    [
        (BlockId(3, 1), BlockId(2, 9), True),  # higher head term wins, whatever the height
        (BlockId(2, 9), BlockId(3, 1), False),
        (BlockId(2, 5), BlockId(2, 5), True),  # equal heads: "equal or extends"
        (BlockId(2, 6), BlockId(2, 5), True),  # equal terms compare by height
        (BlockId(2, 4), BlockId(2, 5), False),
    ],
)
def test_up_to_date(candidate: BlockId, voter: BlockId, expected: bool) -> None:
    """Section 4 utd(c, f): c.term > f.term, or equal terms and c.height >= f.height."""
    assert up_to_date(candidate, voter) is expected


# -- genesis and bootstrap -------------------------------------------------------------------------


def test_bootstrap_persists_genesis_snapshot_first() -> None:
    """A new cluster's first Ready persists the genesis config, without an FSM restore."""
    node = RawNode(1, CFG, None, random.Random(1), BOOT)
    ready = node.ready()
    assert ready.snapshot == Snapshot(GENESIS, BOOT, b"")
    assert ready.restore is False
    assert ready.hard_state == HardState(0, None, GENESIS)
    assert ready.head == GENESIS


def test_joining_node_has_nothing_to_persist_and_no_vote() -> None:
    """A node joining later (no bootstrap) waits for blocks; it never campaigns."""
    node = RawNode(4, CFG, None, random.Random(4), None)
    assert not node.has_ready()
    assert node.config.voters == ()
    for _ in range(5 * CFG.election_ticks):
        node.tick()
    assert node.role == "follower"
    assert not node.has_ready()


def test_first_leader_restates_genesis_config_in_a_block() -> None:
    """The first leader's term-start block is a CONFIG block with the genesis config, so a
    node that joins later without bootstrap learns it from the chain (docs/raft.md)."""
    node = make_leader()
    block = node.get_block(node.head)
    assert block is not None
    assert block.kind == BlockKind.CONFIG
    assert ConfigState.decode(block.payload) == BOOT


# -- term rule -------------------------------------------------------------------------------------


def test_higher_term_append_makes_follower_and_clears_vote() -> None:
    """Term rule: adopt m.term, clear the vote, follow the sender, persist."""
    node = new_node(2)
    node.campaign()  # pre-vote only: term unchanged
    flush(node)
    assert node.role == "precandidate"
    assert node.term == 0
    node.step(Append(5, 1, 2, GENESIS, (), GENESIS, 0))
    readies = flush(node)
    assert (node.role, node.term, node.vote, node.leader_id) == ("follower", 5, None, 1)
    assert readies[0].hard_state == HardState(5, None, GENESIS)


def test_lower_term_append_is_rejected_with_current_term() -> None:
    """Term rule: a stale leader gets AppendResp(success=false) carrying our term."""
    node = follower_with([cmd(3, 1, GENESIS)], term=3)
    node.step(Append(2, 9, 2, GENESIS, (), GENESIS, 7))
    (reply,) = sent(flush(node))
    assert isinstance(reply, AppendResp)
    assert (reply.term, reply.success, reply.to, reply.seq) == (3, False, 9, 7)
    assert node.term == 3


def test_lower_term_vote_is_rejected_with_current_term() -> None:
    node = follower_with([cmd(3, 1, GENESIS)], term=3)
    node.step(Vote(2, 3, 2, BlockId(2, 9)))
    (reply,) = sent(flush(node))
    assert reply == VoteResp(3, 2, 3, False)


def test_stale_replies_are_dropped() -> None:
    node = follower_with([cmd(3, 1, GENESIS)], term=3)
    node.step(VoteResp(2, 3, 2, True))
    node.step(AppendResp(1, 3, 2, True, GENESIS, GENESIS, GENESIS, 0))
    assert sent(flush(node)) == []


def test_messages_for_another_node_are_ignored() -> None:
    node = new_node(2)
    node.step(Append(5, 1, 3, GENESIS, (), GENESIS, 0))
    assert node.term == 0
    assert not node.has_ready()


# -- votes -----------------------------------------------------------------------------------------


def test_vote_granted_once_per_term_and_persisted_with_the_reply() -> None:
    """Section 4 Vote and invariant 2: voted_for goes to disk in the Ready carrying the grant."""
    node = new_node(2, RaftConfig(pre_vote=False, check_quorum=False))
    node.step(Vote(1, 1, 2, GENESIS))
    (ready,) = flush(node)
    assert ready.hard_state == HardState(1, 1, GENESIS)
    assert ready.messages == (VoteResp(1, 2, 1, True),)
    node.step(Vote(1, 3, 2, GENESIS))
    node.step(Vote(1, 1, 2, GENESIS))  # the same candidate again: idempotent
    replies = sent(flush(node))
    assert replies == [VoteResp(1, 2, 3, False), VoteResp(1, 2, 1, True)]


def test_vote_refused_to_less_up_to_date_candidate() -> None:
    node = follower_with([cmd(2, 1, GENESIS), cmd(2, 2, BlockId(2, 1))], term=2)
    for _ in range(CFG.election_ticks):  # outlive stickiness
        node.tick()
    flush(node)
    node.step(Vote(3, 3, 2, BlockId(2, 1)))
    (reply,) = sent(flush(node))
    assert isinstance(reply, VoteResp)
    assert not reply.granted
    assert node.term == 3  # the term rule still applied


def test_pre_vote_changes_nothing_locally() -> None:
    """Pre-vote (dissertation 9.6): granted without a term change or a recorded vote."""
    node = new_node(2)
    node.step(Vote(1, 3, 2, GENESIS, pre=True))
    (ready,) = flush(node)
    assert ready.messages == (VoteResp(1, 2, 3, True, pre=True),)
    assert ready.hard_state is None
    assert (node.term, node.vote) == (0, None)


def test_pre_vote_refused_while_a_leader_is_heard() -> None:
    """Pre-vote grant needs (no leader, or election_elapsed >= E)."""
    node = follower_with([cmd(1, 1, GENESIS)], term=1)
    node.step(Vote(2, 3, 2, BlockId(1, 1), pre=True))
    (reply,) = sent(flush(node))
    assert reply == VoteResp(1, 2, 3, False, pre=True)
    for _ in range(CFG.election_ticks):
        node.tick()
    flush(node)
    node.step(Vote(2, 3, 2, BlockId(1, 1), pre=True))
    (reply,) = sent(flush(node))
    assert reply == VoteResp(2, 2, 3, True, pre=True)


def test_a_follower_told_its_leader_is_gone_grants_pre_votes_and_campaigns_soon() -> None:
    """leader_unreachable: the election timer counts as run out (pre-votes are granted at
    once) and the follower campaigns within 1 to E/2 ticks, not after E to 2E."""
    for seed in range(20):
        node = RawNode(2, CFG, None, random.Random(seed), BOOT)
        node.step(Append(1, 1, 2, GENESIS, (cmd(1, 1, GENESIS),), GENESIS, 0))
        flush(node)
        node.leader_unreachable(1)
        node.step(Vote(2, 3, 2, BlockId(1, 1), pre=True))
        (reply,) = sent(flush(node))
        assert reply == VoteResp(2, 2, 3, True, pre=True), f"seed {seed}"
        ticks = 0
        while node.role != "precandidate":
            node.tick()
            ticks += 1
            assert ticks <= CFG.election_ticks // 2, f"seed {seed}: no campaign yet"
        assert ticks >= 1, f"seed {seed}"


def test_a_report_about_another_node_or_heard_leader_changes_nothing() -> None:
    """Only the current leader's loss counts; a leader heard again restarts the timer."""
    node = follower_with([cmd(1, 1, GENESIS)], term=1)
    node.leader_unreachable(3)
    node.step(Vote(2, 3, 2, BlockId(1, 1), pre=True))
    (reply,) = sent(flush(node))
    assert reply == VoteResp(1, 2, 3, False, pre=True)
    node.leader_unreachable(1)
    node.step(Append(1, 1, 2, BlockId(1, 1), (), BlockId(1, 1), 0))  # the leader, heard again
    flush(node)
    for _ in range(CFG.election_ticks - 1):
        node.tick()
    flush(node)
    assert node.role == "follower"
    leader = make_leader()
    leader.leader_unreachable(1)
    assert leader.role == "leader"


def test_stickiness_ignores_votes_while_leader_is_live() -> None:
    """Term rule: a real Vote (no transfer) is ignored, term unchanged, while a leader was
    heard within E ticks; a transfer Vote goes through."""
    node = follower_with([cmd(1, 1, GENESIS)], term=1)
    node.step(Vote(2, 3, 2, BlockId(1, 1)))
    assert not node.has_ready()
    assert node.term == 1
    node.step(Vote(2, 3, 2, BlockId(1, 1), transfer=True))
    (reply,) = sent(flush(node))
    assert reply == VoteResp(2, 2, 3, True)


def test_pre_vote_rejection_with_higher_term_is_adopted() -> None:
    """etcd's rule: a rejection carrying a higher term moves a pre-candidate to that term."""
    node = new_node(1)
    node.campaign()
    flush(node)
    node.step(VoteResp(4, 2, 1, False, pre=True))
    flush(node)
    assert (node.role, node.term) == ("follower", 4)


def test_pre_vote_quorum_starts_real_election() -> None:
    node = new_node(1)
    node.campaign()
    readies = flush(node)
    assert {m.to for m in sent(readies)} == {2, 3}
    assert all(isinstance(m, Vote) and m.pre and m.term == 1 for m in sent(readies))
    node.step(VoteResp(1, 3, 1, True, pre=True))
    readies = flush(node)
    assert (node.role, node.term, node.vote) == ("candidate", 1, 1)
    assert readies[0].hard_state == HardState(1, 1, GENESIS)
    assert all(isinstance(m, Vote) and not m.pre for m in sent(readies))


# -- follower Append -------------------------------------------------------------------------------


def test_append_with_unknown_prev_is_rejected_with_hints() -> None:
    """Rule 1: prev not stored -> success=false, hint_head=head, hint_commit=commit."""
    node = follower_with([cmd(1, 1, GENESIS)], term=1)
    node.step(Append(1, 1, 2, BlockId(1, 5), (cmd(1, 6, BlockId(1, 5)),), GENESIS, 3))
    (reply,) = sent(flush(node))
    assert reply == AppendResp(1, 2, 1, False, BlockId(1, 5), BlockId(1, 1), GENESIS, 3)


def test_append_reply_follows_persistence_in_the_same_ready() -> None:
    """Rule 5: blocks and head are in the Ready whose messages carry the success reply."""
    node = new_node(2)
    blocks = (cmd(1, 1, GENESIS), cmd(1, 2, BlockId(1, 1)))
    node.step(Append(1, 1, 2, GENESIS, blocks, BlockId(1, 1), 0))
    (ready,) = flush(node)
    assert ready.new_blocks == blocks
    assert ready.head == BlockId(1, 2)
    assert ready.hard_state == HardState(1, None, BlockId(1, 1))
    assert ready.committed == blocks[:1]
    (reply,) = ready.messages
    assert isinstance(reply, AppendResp)
    assert reply.success
    assert reply.match == BlockId(1, 2)


def test_commit_is_min_of_leader_commit_and_last_new() -> None:
    """Rule 4: cand = m.commit if it is at or below last, else last."""
    node = new_node(2)
    node.step(Append(1, 1, 2, GENESIS, (cmd(1, 1, GENESIS),), BlockId(1, 9), 0))
    flush(node)
    assert node.commit == BlockId(1, 1)


def test_new_leader_branch_replaces_head_but_keeps_dead_branch_until_commit() -> None:
    """Rule 3 and GC: head moves to the new leader's branch; the old branch stays stored
    until commit passes the fork, then is reported in Ready.pruned."""
    node = follower_with([cmd(1, 1, GENESIS), cmd(1, 2, BlockId(1, 1))], term=1)
    fork = cmd(2, 2, BlockId(1, 1))
    node.step(Append(2, 3, 2, BlockId(1, 1), (fork,), GENESIS, 0))
    flush(node)
    assert node.head == fork.id
    assert node.get_block(BlockId(1, 2)) is not None
    node.step(Append(2, 3, 2, fork.id, (), fork.id, 0))
    readies = flush(node)
    assert node.commit == fork.id
    assert BlockId(1, 2) in readies[0].pruned
    assert node.get_block(BlockId(1, 2)) is None


def test_conflicting_block_is_dropped_not_raised() -> None:
    """A block that contradicts a stored one breaks the protocol: drop and count it."""
    node = follower_with([cmd(1, 1, GENESIS, b"x")], term=1)
    node.step(Append(1, 1, 2, GENESIS, (cmd(1, 1, GENESIS, b"y"),), GENESIS, 0))
    assert sent(flush(node)) == []
    assert node.odd_messages == 1


# -- leader ----------------------------------------------------------------------------------------


def test_single_voter_commits_after_its_own_persistence() -> None:
    """Leader: its own match counts only once its blocks are persisted (advance)."""
    node = RawNode(1, CFG, None, random.Random(1), ConfigState.of([1]))
    flush(node)
    node.campaign()
    ready = node.ready()
    assert node.role == "leader"
    assert node.commit == GENESIS, "nothing is durable before advance()"
    node.advance(ready)
    assert node.commit == node.head
    block_id = node.propose(b"x")
    assert block_id == BlockId(1, 2)
    readies = flush(node)
    assert block_id not in [b.id for b in readies[0].committed], "not before persistence"
    assert block_id in [b.id for r in readies for b in r.committed]


def test_leader_appends_no_op_at_term_start_and_probes() -> None:
    node = make_leader(RaftConfig(pre_vote=False))
    assert node.head == BlockId(1, 1)
    node.tick()
    appends = [m for m in sent(flush(node)) if isinstance(m, Append)]
    assert {m.to for m in appends} == {2, 3}
    assert all(m.prev == GENESIS and m.blocks[0].id == BlockId(1, 1) for m in appends)


def test_leader_commit_requires_current_term_block() -> None:
    """Section 4 commit rule: a quorum match on an older-term block does not commit it."""
    persisted = PersistedState(
        HardState(1, None, GENESIS), BlockId(1, 1), (cmd(1, 1, GENESIS),), Snapshot(
            GENESIS, BOOT, b""
        )
    )
    node = RawNode(1, RaftConfig(pre_vote=False), persisted, random.Random(1))
    node.campaign()
    flush(node)
    node.step(VoteResp(2, 2, 1, True))
    flush(node)
    assert node.role == "leader"
    assert node.head == BlockId(2, 2)
    node.step(AppendResp(2, 2, 1, True, BlockId(1, 1), BlockId(1, 1), GENESIS, 0))
    flush(node)
    assert node.commit == GENESIS, "(1,1) is on a majority but is not of term 2"
    node.step(AppendResp(2, 2, 1, True, BlockId(2, 2), BlockId(2, 2), GENESIS, 0))
    flush(node)
    assert node.commit == BlockId(2, 2)


def test_client_calls_on_follower_raise_not_leader_with_hint() -> None:
    node = follower_with([cmd(1, 1, GENESIS)], term=1)
    for call in (
        lambda: node.propose(b"x"),
        lambda: node.read_index(b"r"),
        lambda: node.transfer_leader(3),
        lambda: node.propose_config(BOOT),
    ):
        with pytest.raises(NotLeaderError) as raised:
            call()
        assert raised.value.leader_hint == 1


def test_proposals_refused_during_transfer_and_over_backlog() -> None:
    node = make_leader(RaftConfig(max_uncommitted_blocks=2))
    node.propose(b"a")
    with pytest.raises(ProposalDroppedError):
        node.propose(b"b")
    other = make_leader()
    other.transfer_leader(2)
    with pytest.raises(ProposalDroppedError):
        other.propose(b"c")


def test_timeout_now_campaigns_without_pre_vote() -> None:
    node = follower_with([cmd(1, 1, GENESIS)], term=1)
    node.step(TimeoutNow(1, 1, 2))
    readies = flush(node)
    assert node.role == "candidate"
    assert node.term == 2
    assert all(isinstance(m, Vote) and m.transfer and not m.pre for m in sent(readies))


# -- a host that cannot lead (set_may_lead) -------------------------------------------------------


def test_a_leader_whose_host_cannot_lead_hands_off_to_the_most_caught_up_voter() -> None:
    node = make_leader()
    # Node 2 holds the whole path, node 3 nothing yet.
    node.step(AppendResp(1, 2, 1, True, node.head, node.head, GENESIS, 0))
    flush(node)
    node.set_may_lead(False)
    assert [m for m in sent(flush(node)) if isinstance(m, TimeoutNow)] == [
        TimeoutNow(1, 1, 2)]
    with pytest.raises(ProposalDroppedError):
        node.propose(b"refused while the leadership moves")


def test_a_hand_off_given_up_is_tried_again_while_the_host_cannot_lead() -> None:
    node = make_leader()
    node.set_may_lead(False)  # nobody holds the path yet: node 2 is caught up first
    flush(node)
    node.step(AppendResp(1, 3, 1, True, node.head, node.head, GENESIS, 0))  # 2 stays silent
    assert not [m for m in sent(flush(node)) if isinstance(m, TimeoutNow)]
    for _ in range(CFG.election_ticks):  # the transfer to 2 is given up after E ticks ...
        node.tick()
    timeouts = [m for m in sent(flush(node)) if isinstance(m, TimeoutNow)]
    assert timeouts == [TimeoutNow(1, 1, 3)], "... and started again, to whoever caught up"


def test_a_node_whose_host_cannot_lead_never_campaigns_but_still_votes() -> None:
    node = follower_with([cmd(1, 1, GENESIS)], term=1)
    node.set_may_lead(False)
    for _ in range(4 * CFG.election_ticks):
        node.tick()
    node.step(TimeoutNow(1, 1, 2))
    readies = flush(node)
    assert (node.role, node.term) == ("follower", 1), "no campaign, no transfer taken"
    node.step(Vote(2, 3, 2, BlockId(1, 1)))
    (answer,) = [m for m in sent(flush(node)) if isinstance(m, VoteResp)]
    assert answer.granted, "the others elect one of themselves with its vote"
    assert not [m for m in sent(readies) if isinstance(m, Vote)]
    node.set_may_lead(True)  # it works again: it campaigns when a timeout runs out
    for _ in range(2 * CFG.election_ticks):
        node.tick()
    assert node.role in ("precandidate", "candidate")


# -- Ready / advance -------------------------------------------------------------------------------


def test_ready_is_exclusive_until_advance() -> None:
    """Section 5: one Ready at a time; has_ready is False while it is outstanding."""
    node = new_node(2)
    node.step(Append(1, 1, 2, GENESIS, (cmd(1, 1, GENESIS),), GENESIS, 0))
    ready = node.ready()
    node.step(Append(1, 1, 2, BlockId(1, 1), (cmd(1, 2, BlockId(1, 1)),), GENESIS, 1))
    assert not node.has_ready()
    with pytest.raises(AssertionError):
        node.ready()
    node.advance(ready)
    assert node.has_ready()
    later = node.ready()
    assert [b.id for b in later.new_blocks] == [BlockId(1, 2)]


def test_advance_moves_applied() -> None:
    node = new_node(2)
    node.step(Append(1, 1, 2, GENESIS, (cmd(1, 1, GENESIS),), BlockId(1, 1), 0))
    ready = node.ready()
    assert node.applied == GENESIS
    node.advance(ready)
    assert node.applied == BlockId(1, 1)


def test_compact_validates_and_reports() -> None:
    """Section 4 compaction: only an applied block on the path; Ready carries snapshot and
    the deleted blocks."""
    node = new_node(2, RaftConfig(compaction_threshold_blocks=2))
    blocks = (cmd(1, 1, GENESIS), cmd(1, 2, BlockId(1, 1)), cmd(1, 3, BlockId(1, 2)))
    node.step(Append(1, 1, 2, GENESIS, blocks, BlockId(1, 2), 0))
    flush(node)
    assert node.applied == BlockId(1, 2)
    assert node.compaction_due
    with pytest.raises(ValueError):
        node.compact(BlockId(1, 3), b"too far")
    node.compact(BlockId(1, 2), b"state")
    (ready,) = flush(node)
    assert ready.snapshot == Snapshot(BlockId(1, 2), BOOT, b"state")
    assert ready.restore is False
    assert ready.pruned == (BlockId(1, 1), BlockId(1, 2))
    assert node.base == BlockId(1, 2)
    node.compact(BlockId(1, 1), b"older")  # at or below the base: ignored
    assert not node.has_ready()


def test_install_snapshot_restores_and_never_mixes_committed() -> None:
    """Section 4 install on a follower: the Ready restores the FSM and carries no committed
    blocks, so the driver's order cannot matter."""
    node = follower_with([cmd(1, 1, GENESIS)], term=1)
    snapshot = Snapshot(BlockId(1, 9), BOOT, b"fsm")
    node.step(InstallSnapshot(1, 1, 2, snapshot))
    (ready,) = flush(node)
    assert ready.snapshot == snapshot
    assert ready.restore
    assert ready.committed == ()
    assert ready.pruned == (BlockId(1, 1),)
    assert (node.base, node.head, node.commit, node.applied) == (snapshot.last,) * 4
    (reply,) = ready.messages
    assert isinstance(reply, AppendResp)
    assert reply.match == snapshot.last


def test_restart_rebuilds_from_persisted_state() -> None:
    """Section 2: head and hard state come back; applied restarts at the snapshot base."""
    blocks = (cmd(1, 1, GENESIS), cmd(1, 2, BlockId(1, 1)))
    persisted = PersistedState(
        HardState(1, 3, BlockId(1, 1)), BlockId(1, 2), blocks, Snapshot(GENESIS, BOOT, b"")
    )
    node = RawNode(2, CFG, persisted, random.Random(2))
    assert (node.term, node.vote, node.head, node.commit) == (1, 3, BlockId(1, 2), BlockId(1, 1))
    assert node.applied == GENESIS
    (ready,) = flush(node)
    assert [b.id for b in ready.committed] == [BlockId(1, 1)]
    assert ready.hard_state is None


# -- never raise on odd input ----------------------------------------------------------------------

# Ids near the fuzzed node's own chain, so that odd messages also hit stored blocks.
SEEDED = [cmd(1, 1, GENESIS), cmd(1, 2, BlockId(1, 1)), cmd(2, 3, BlockId(1, 2))]
ids = st.one_of(
    st.sampled_from([GENESIS, *(b.id for b in SEEDED)]),
    st.builds(BlockId, st.integers(0, 4), st.integers(0, 6)),
)


@st.composite
def blocks_after(draw: st.DrawFn, prev: BlockId) -> tuple[Block, ...]:
    chain = []
    parent = prev
    for _ in range(draw(st.integers(0, 3))):
        term = draw(st.integers(parent.term, parent.term + 2))
        kind = draw(st.sampled_from([BlockKind.NOOP, BlockKind.CMD, BlockKind.CONFIG]))
        payload = BOOT.encode() if kind == BlockKind.CONFIG and draw(st.booleans()) else b"p"
        block = Block(BlockId(term, parent.height + 1), parent, kind, payload)
        chain.append(block)
        parent = block.id
    return tuple(chain)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    term = draw(st.integers(0, 4))
    frm = draw(st.integers(1, 4))
    to = draw(st.sampled_from([1, 1, 1, 2]))
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return Vote(term, frm, to, draw(ids), draw(st.booleans()), draw(st.booleans()))
    if kind == 1:
        return VoteResp(term, frm, to, draw(st.booleans()), draw(st.booleans()))
    if kind == 2:
        prev = draw(ids)
        blocks = draw(blocks_after(prev))
        return Append(term, frm, to, prev, blocks, draw(ids), draw(st.integers(0, 3)))
    if kind == 3:
        return AppendResp(
            term, frm, to, draw(st.booleans()), draw(ids), draw(ids), draw(ids), 0
        )
    if kind == 4:
        config = draw(st.sampled_from([BOOT, ConfigState.of([2, 3])]))
        return InstallSnapshot(term, frm, to, Snapshot(draw(ids), config, b"s"))
    return TimeoutNow(term, frm, to)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.one_of(messages(), st.just("tick"), st.just("propose")), max_size=40))
def test_step_never_raises_on_odd_messages(inputs: list[Message | str]) -> None:
    """Node.step must never raise on stale or odd input: ignore or reject per spec."""
    node = new_node(1)
    node.step(Append(2, 2, 1, GENESIS, tuple(SEEDED), BlockId(1, 1), 0))
    flush(node)
    assert node.head == BlockId(2, 3)
    for item in inputs:
        if item == "tick":
            node.tick()
        elif item == "propose":
            with contextlib.suppress(NotLeaderError, ProposalDroppedError):
                node.propose(b"x")
        else:
            assert not isinstance(item, str)
            node.step(item)
        flush(node)
        assert node.head.term <= node.term
        assert node.block_at(node.commit.height) == node.commit or node.commit == node.base
