"""Who leads: timers, pre-vote, votes, the no-op of a new term, check-quorum, transfer.

Rules from docs/raft.md §4 (Vote, Pre-vote, Check-quorum) and the
dissertation's 9.6: a node that times out first asks "would you vote for me?" at term+1
without changing anyone's term, so a node cut off from the cluster cannot inflate the term
and depose a healthy leader when it comes back. Up-to-date compares heads: a higher head term
wins, and equal terms compare heights (both heads lie on one leader's linear chain).
"""

from __future__ import annotations

from zlog.raft.append_entries import AppendEntries
from zlog.raft.messages import (
    GENESIS,
    BlockId,
    BlockKind,
    TimeoutNow,
    Vote,
    VoteResp,
)
from zlog.raft.progress import Progress
from zlog.raft.quorum import VoteResult, has_quorum, vote_result
from zlog.raft.state import Role


def up_to_date(candidate: BlockId, voter: BlockId) -> bool:
    """utd(c, f): c.term > f.term, or equal terms and c.height >= f.height (section 4)."""
    assert candidate.height >= 0
    assert voter.height >= 0
    if candidate.term != voter.term:
        return candidate.term > voter.term
    return candidate.height >= voter.height


class Election(AppendEntries):
    """Campaigns and votes on top of replication; the leader's periodic duties."""

    # -- timers --------------------------------------------------------------------------------

    def _tick_election(self) -> None:
        """Followers and candidates: campaign when no leader was heard for the timeout."""
        assert self._role != Role.LEADER
        # Capped, not reset, when it cannot campaign: a learner must still see its leader
        # go quiet, or it would refuse pre-votes forever (it would seem to hear a leader).
        self._election_elapsed = min(self._election_elapsed + 1, 2 * self._cfg.election_ticks)
        if self._election_elapsed < self._timeout or not self._promotable():
            return
        self._campaign(transfer=False)
        assert self._election_elapsed == 0

    def _leader_unreachable(self, leader: int) -> None:
        """A follower of a leader reported gone: its timer counts as expired (pre-votes are
        granted), and it campaigns after 1 to E/2 ticks: random, so that two followers told at
        once rarely split the vote, and at least one tick, so that the other has been told."""
        if self._role != Role.FOLLOWER or self._leader != leader:
            return
        election = self._cfg.election_ticks
        self._election_elapsed = max(self._election_elapsed, election)
        delay = self._rng.randrange(1, max(2, election // 2 + 1))
        self._timeout = min(2 * election, self._election_elapsed + delay)  # elapsed stops at 2E

    def _tick_leader(self) -> None:
        """Heartbeats every H ticks; every E ticks check-quorum and give up a stuck transfer."""
        assert self._role == Role.LEADER
        self._heartbeat_elapsed += 1
        self._election_elapsed += 1
        if self._election_elapsed >= self._cfg.election_ticks:
            self._election_elapsed = 0
            self._transferee = None
            if self._cfg.check_quorum and not self._quorum_active():
                self._become_follower(self._term, None)
                return
            for progress in self._progress.values():
                progress.recent_active = False
        if not self._may_lead:
            self._hand_off()  # again after a transfer given up (E ticks), maybe to another
        assert self._election_elapsed < self._cfg.election_ticks
        if self._heartbeat_elapsed >= self._cfg.heartbeat_ticks:
            self._heartbeat_elapsed = 0
            self._broadcast_heartbeat()

    def _hand_off(self) -> int | None:
        """Start a transfer to the voter that holds most of our path (it takes over soonest,
        and is surely alive), unless one is under way; the target, or None with nobody to
        hand to."""
        assert self._role == Role.LEADER
        if self._transferee is not None:
            return self._transferee
        config = self._chain.config
        targets = [peer for peer in config.voters if peer != self._id and peer in self._progress
                   and config.counts(peer, self._progress[peer].dir_id)]
        if not targets:
            return None
        target = max(targets, key=lambda peer: (self._progress[peer].match_h, -peer))
        self._hand_off_to(target)
        return target

    def _hand_off_to(self, target: int) -> None:
        """Transfer to `target`: catch it up, then TimeoutNow; given up after E ticks."""
        self._transferee = target
        self._election_elapsed = 0
        if self._progress[target].match_h == self._chain.head.height:
            self._maybe_send_timeout_now(target)
        else:
            self._send_append(target)

    def _quorum_active(self) -> bool:
        """Whether a quorum of voters (self included) was heard from in the last E ticks."""

        assert self._role == Role.LEADER
        assert self._cfg.check_quorum

        def active(voter: int) -> bool:
            if voter == self._id:
                return True
            progress = self._progress.get(voter)
            return (progress is not None and progress.recent_active
                    and self._chain.config.counts(voter, progress.dir_id))

        return has_quorum(self._chain.config.voters, active)

    # -- campaigning ---------------------------------------------------------------------------

    def _campaign(self, transfer: bool) -> None:
        """Start a pre-vote round, or (transfer, or pre-vote off) a real election at once."""
        assert self._role != Role.LEADER
        if not self._promotable():
            return  # learners and removed nodes never campaign
        if self._cfg.pre_vote and not transfer:
            self._role = Role.PRECANDIDATE
            self._leader = None
            self._votes = {self._id: True}
            self._reset_election_timer()
            self._request_votes(pre=True, transfer=False)
        else:
            self._become_candidate()
            self._request_votes(pre=False, transfer=transfer)
        assert self._role != Role.FOLLOWER or self._votes == {}, "a lost round leaves no votes"

    def _become_candidate(self) -> None:
        assert self._role != Role.LEADER
        self._term += 1
        self._vote = self._id  # persisted with the Ready that carries the Vote requests
        self._role = Role.CANDIDATE
        self._leader = None
        self._votes = {self._id: True}
        self._reset_election_timer()
        assert self._vote == self._id

    def _request_votes(self, pre: bool, transfer: bool) -> None:
        term = self._term + 1 if pre else self._term
        head = self._chain.head
        assert self._votes == {self._id: True}, "a round starts with only our own vote"
        assert head.term < term, "a candidate's head is older than the term it asks for"
        for voter in self._chain.config.voters:
            if voter != self._id:
                self._send(Vote(term, self._id, voter, head, pre=pre, transfer=transfer))
        self._count_votes(pre)

    def _count_votes(self, pre: bool) -> None:
        """Act on a decided election: the config at head decides who counts."""
        assert self._role == (Role.PRECANDIDATE if pre else Role.CANDIDATE)
        result = vote_result(self._chain.config.voters, self._votes)
        if result == VoteResult.WON:
            if pre:
                self._become_candidate()
                self._request_votes(pre=False, transfer=False)
            else:
                self._become_leader()
        elif result == VoteResult.LOST:
            self._become_follower(self._term, None)

    def _handle_vote(self, msg: Vote) -> None:
        """Grant at most one real vote per term; pre-votes change nothing locally."""
        head = self._chain.head
        if msg.head.term > msg.term:
            self.odd_messages += 1  # a candidate's head cannot be ahead of its term
            return
        if msg.pre:
            assert msg.term >= self._term
            granted = (
                msg.term > self._term
                and self._chain.config.counts(self._id, self._dir_id)
                and up_to_date(msg.head, head)
                and (self._leader is None or self._election_elapsed >= self._cfg.election_ticks)
            )
            term = msg.term if granted else self._term
            self._send(VoteResp(term, self._id, msg.from_, granted, pre=True,
                                dir_id=self._dir_id))
            return
        assert msg.term == self._term
        can_vote = self._vote == msg.from_ or (self._vote is None and self._leader is None)
        # A new disk under a recorded voter's id holds none of that voter's log or vote.
        granted = (can_vote and up_to_date(msg.head, head)
                   and self._chain.config.counts(self._id, self._dir_id))
        if granted:
            self._vote = msg.from_  # goes to disk before the reply leaves (Ready order)
            self._reset_election_timer()
        self._send(VoteResp(self._term, self._id, msg.from_, granted, pre=False,
                            dir_id=self._dir_id))

    def _handle_vote_resp(self, msg: VoteResp) -> None:
        if msg.pre:
            if self._role != Role.PRECANDIDATE:
                return
            if msg.granted and msg.term != self._term + 1:
                return
            if not msg.granted and msg.term != self._term:
                return
        elif self._role != Role.CANDIDATE or msg.term != self._term:
            return
        assert msg.from_ != self._id
        if msg.granted and not self._chain.config.counts(msg.from_, msg.dir_id):
            return  # a wiped voter's vote: it may have granted another candidate this term
        self._votes.setdefault(msg.from_, msg.granted)
        assert self._votes[self._id] is True
        self._count_votes(msg.pre)

    def _handle_timeout_now(self, msg: TimeoutNow) -> None:
        """The leader hands over: campaign now, skipping pre-vote and others' stickiness."""
        assert msg.term == self._term
        if self._role == Role.LEADER or not self._promotable():
            return
        self._campaign(transfer=True)
        assert self._role in (Role.CANDIDATE, Role.LEADER), "transfer skips pre-vote"

    # -- leading -------------------------------------------------------------------------------

    def _become_leader(self) -> None:
        """Take office: reset progress, append the term's first block, start probing."""
        assert self._role == Role.CANDIDATE
        assert self._vote == self._id
        self._role = Role.LEADER
        self._leader = self._id
        self._reset_leader_state()
        self._election_elapsed = 0
        head = self._chain.head
        for peer in self._replication_targets():
            self._progress[peer] = Progress(next_h=head.height + 1, progress_tick=self._now)
        if self._chain.last_config_height == GENESIS.height and self._chain.base == GENESIS:
            # No CONFIG block yet: restate the genesis config in a block, so a node that
            # joins later (with no bootstrap) learns it from the chain itself.
            self._append_local(BlockKind.CONFIG, self._chain.base_config.encode())
        else:
            self._append_local(BlockKind.NOOP, b"")
        self._broadcast_append()
        assert self._chain.head.term == self._term
