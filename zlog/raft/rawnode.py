"""The Chained-Raft node: a pure, deterministic state machine (etcd RawNode style).

Inputs are `tick()`, `step(msg)` and the client calls (`propose`, `propose_config`,
`read_index`, `transfer_leader`, `compact`); outputs come out of `ready()` as one `Ready`
at a time. The driver contract for each Ready (docs/raft.md §5.3):

  1. persist hard_state, head, new_blocks, snapshot and pruned atomically (one fsync);
  2. send the messages;
  3. if `restore`, reset the state machine to `snapshot.data`; apply `committed` in order;
  4. call `advance(ready)`.

A crash between steps loses only what was not yet persisted. There is no I/O, no clock
(time is `tick()` calls), no global random (an injected `random.Random` draws the election
timeouts) and every iteration is in sorted order, so one seed replays one run exactly.

A proposal's outcome: `propose` returns the BlockId (term, height) it minted; it succeeded
iff the committed path later holds exactly that id at that height, and failed as soon as a
different block commits at that height.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.raft.election import Election, up_to_date
from zlog.raft.errors import (
    ConfigChangeError,
    LeaderTransferError,
    NotLeaderError,
    ProposalDroppedError,
)
from zlog.raft.membership import recorded_dirs_update
from zlog.raft.messages import (
    NO_DIR_ID,
    Append,
    AppendResp,
    Block,
    BlockId,
    BlockKind,
    ConfigState,
    InstallSnapshot,
    Message,
    PersistedState,
    Ready,
    Snapshot,
    SoftState,
    TimeoutNow,
    Vote,
    VoteResp,
)
from zlog.raft.state import ROLE_NAMES, PendingRead, Role

__all__ = ["NotLeaderError", "RaftConfig", "RawNode", "up_to_date"]


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Tuning of one node; every cluster member should use the same values."""

    election_ticks: int = 10
    """E: ticks without hearing a leader before a follower campaigns (randomized in [E, 2E)),
    also the check-quorum period and the stickiness window. Must exceed heartbeat_ticks;
    10x the heartbeat is the usual ratio. With the runner's 50 ms tick, 10 gives 0.5-1 s
    failover."""

    heartbeat_ticks: int = 1
    """H: ticks between the leader's heartbeat rounds. Each round also retries probes,
    stalled streams and snapshots. Must be at least 1 and below election_ticks."""

    max_append_blocks: int = 64
    """B: the most blocks one Append carries; a catch-up is split into batches of B."""

    pre_vote: bool = True
    """Run a pre-vote round before raising the term (dissertation 9.6), so a node that was
    cut off cannot depose a healthy leader when it returns. Default on."""

    check_quorum: bool = True
    """Every E ticks the leader counts the voters heard from since the last count and steps
    down below a quorum, so a leader cut off from its quorum leaves within 2E ticks; followers
    ignore vote requests while they hear from a live leader (stickiness). Default on."""

    compaction_threshold_blocks: int = 8192
    """`compaction_due` turns true once this many applied blocks sit above the snapshot base;
    the driver then snapshots its state machine and calls `compact`."""

    max_inflight_appends: int = 16
    """Appends carrying blocks that may be unacknowledged per follower in the streaming
    state; bounds the leader's outbox. Default 16."""

    max_uncommitted_blocks: int = 4096
    """`propose` refuses (ProposalDroppedError) while this many blocks above commit wait."""

    max_committed_per_ready: int = 1024
    """The most committed blocks one Ready hands to the state machine."""

    promotion_lag_blocks: int = 64
    """A learner may become a voter only once its match is within this many blocks of head."""

    def __post_init__(self) -> None:
        assert self.heartbeat_ticks >= 1
        assert self.election_ticks > self.heartbeat_ticks
        assert self.max_append_blocks >= 1
        assert self.max_inflight_appends >= 1
        assert self.max_uncommitted_blocks >= 1
        assert self.max_committed_per_ready >= 1
        assert self.compaction_threshold_blocks >= 1
        assert self.promotion_lag_blocks >= 0


class RawNode(Election):
    """One member of a Chained-Raft group. Single-threaded; the driver serializes calls."""

    def __init__(
        self,
        node_id: int,
        cfg: RaftConfig,
        persisted: PersistedState | None,
        rng: random.Random,
        bootstrap: ConfigState | None = None,
        *,
        dir_id: bytes = NO_DIR_ID,
    ) -> None:
        """`persisted` None is a brand-new node; `bootstrap` is a new cluster's voter set;
        `dir_id` names the data directory this node's log lives in (§4.15).

        A new node joining an existing cluster gets neither: it waits to be sent blocks or
        a snapshot by the leader that added it as a learner.
        """
        super().__init__(node_id, cfg, persisted, rng, bootstrap, dir_id=dir_id)
        assert self._role == Role.FOLLOWER, "every incarnation starts as a follower"
        assert self._applied == self._chain.base, "the driver restores the FSM from the base"
        self._check_invariants()

    # -- read-only properties ------------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self._id

    @property
    def term(self) -> int:
        assert self._term >= self._chain.head.term
        return self._term

    @property
    def vote(self) -> int | None:
        return self._vote

    @property
    def role(self) -> str:
        return ROLE_NAMES[self._role]

    @property
    def leader_id(self) -> int | None:
        return self._leader

    @property
    def head(self) -> BlockId:
        head = self._chain.head
        assert head.height >= self._commit.height, "head extends commit"
        return head

    @property
    def commit(self) -> BlockId:
        assert self._commit.height >= self._chain.base.height
        return self._commit

    @property
    def applied(self) -> BlockId:
        """The last block the driver applied (as of the last `advance`)."""
        assert self._applied.height <= self._commit.height
        return self._applied

    @property
    def base(self) -> BlockId:
        """The snapshot base: every block at or below its height is compacted away."""
        return self._chain.base

    @property
    def config(self) -> ConfigState:
        """The configuration at head; it applies while still uncommitted (dissertation 4)."""
        return self._chain.config

    @property
    def snapshot(self) -> Snapshot | None:
        return self._snapshot

    @property
    def compaction_due(self) -> bool:
        """Whether the driver should snapshot its state machine at `applied` and `compact`."""
        blocks_above_base = self._applied.height - self._chain.base.height
        assert blocks_above_base >= 0 or self._outstanding is not None or self._restore
        return blocks_above_base >= self._cfg.compaction_threshold_blocks

    def block_at(self, height: int) -> BlockId | None:
        """The block at `height` on this node's path base->head (None outside it)."""
        return self._chain.path_at(height)

    def get_block(self, block_id: BlockId) -> Block | None:
        """A stored block, on the path or on a dead branch not yet pruned."""
        return self._chain.get(block_id)

    def stored_ids(self) -> list[BlockId]:
        """Every stored block id (above the base), sorted; for tests and debugging."""
        return self._chain.ids()

    def match_height(self, peer: int) -> int | None:
        """Leader only: how far `peer` is known to hold the leader's path."""
        progress = self._progress.get(peer)
        assert progress is None or self._role == Role.LEADER
        return None if progress is None else progress.match_h

    def counts_as_voter(self, peer: int) -> bool:
        """Leader only: whether `peer` is a voter whose answers count, i.e. it answers from
        the data directory the configuration records for it (§4.15)."""
        progress = self._progress.get(peer)
        return (progress is not None and peer in self._chain.config.voters
                and self._chain.config.counts(peer, progress.dir_id))

    # -- inputs --------------------------------------------------------------------------------

    def tick(self) -> None:
        """One unit of logical time."""
        term_before = self._term
        self._now += 1
        if self._role == Role.LEADER:
            self._tick_leader()
        else:
            self._tick_election()
        assert self._term >= term_before
        self._check_invariants()

    def campaign(self) -> None:
        """Start an election now, as if the election timer fired (no-op for a leader)."""
        if self._role != Role.LEADER:
            self._campaign(transfer=False)
            assert self._role != Role.FOLLOWER or not self._promotable() or self._votes == {}
        self._check_invariants()

    def leader_unreachable(self, leader: int) -> None:
        """The transport learnt that `leader`'s process is gone (its host refused a connection
        to its port). A follower of it then acts as though its election timeout ran out: it
        grants pre-votes at once and campaigns within a short random number of ticks, rather
        than waiting a whole timeout to notice. Safety never rests on timers, so a wrong
        report costs at most a pre-vote round the others refuse while they hear the leader."""
        self._leader_unreachable(leader)
        self._check_invariants()

    def step(self, msg: Message) -> None:
        """Feed one message from the network. Stale or odd messages are ignored or rejected,
        never raised on."""
        if msg.to != self._id or msg.from_ == self._id:
            return
        term_before = self._term
        self._step(msg)
        assert self._term >= term_before, "terms never go backwards"
        self._check_invariants()

    def _step(self, msg: Message) -> None:
        assert msg.to == self._id
        assert msg.from_ != self._id
        if msg.term > self._term and not self._step_higher_term(msg):
            return
        if msg.term < self._term:
            self._step_lower_term(msg)
            return
        if isinstance(msg, Vote):
            self._handle_vote(msg)
        elif isinstance(msg, VoteResp):
            self._handle_vote_resp(msg)
        elif isinstance(msg, Append | InstallSnapshot):
            self._step_from_leader(msg)
        elif isinstance(msg, AppendResp):
            if self._role == Role.LEADER:
                self._handle_append_resp(msg)
                self._maybe_record_dirs()
        elif isinstance(msg, TimeoutNow):
            self._handle_timeout_now(msg)

    def _step_higher_term(self, msg: Message) -> bool:
        """The term rule for `msg.term > term`; False means drop the message."""
        assert msg.term > self._term
        if isinstance(msg, Vote):
            if msg.pre:
                assert self._term < msg.term, "answered below without a term change"
                return True  # pre-votes never change the term
            if not msg.transfer and self._in_lease():
                return False  # stickiness: a live leader was heard within E ticks
            self._become_follower(msg.term, None)
            return True
        if isinstance(msg, VoteResp) and msg.pre and msg.granted:
            return True  # the term we asked about; we raise ours only on a quorum
        leader = msg.from_ if isinstance(msg, Append | InstallSnapshot | TimeoutNow) else None
        self._become_follower(msg.term, leader)
        assert self._term == msg.term
        return True

    def _step_lower_term(self, msg: Message) -> None:
        """A stale sender: tell it our term so it steps down; drop stale replies."""
        assert msg.term < self._term
        messages_before = len(self._msgs)
        if isinstance(msg, Append | InstallSnapshot):
            match = msg.prev if isinstance(msg, Append) else msg.snapshot.last
            self._reply(msg, False, match)
        elif isinstance(msg, Vote):
            self._send(VoteResp(self._term, self._id, msg.from_, False, pre=msg.pre,
                                dir_id=self._dir_id))
        assert len(self._msgs) <= messages_before + 1, "at most one answer to a stale sender"

    def _step_from_leader(self, msg: Append | InstallSnapshot) -> None:
        assert msg.term == self._term
        assert msg.from_ != self._id
        if self._role == Role.LEADER:
            self.odd_messages += 1  # one leader per term: only a duplicated node id sends this
            return
        if self._role != Role.FOLLOWER:
            self._become_follower(self._term, msg.from_)
        if isinstance(msg, Append):
            self._handle_append(msg)
        else:
            self._handle_snapshot(msg)

    # -- client calls --------------------------------------------------------------------------

    def _require_leader(self) -> None:
        if self._role != Role.LEADER:
            raise NotLeaderError(self._leader)
        if self._transferee is not None:
            raise ProposalDroppedError(f"leadership is moving to node {self._transferee}")
        assert self._leader == self._id
        assert self._chain.head.term == self._term

    def propose(self, payload: bytes) -> BlockId:
        """Append a CMD block on the leader's head and return its id."""
        self._require_leader()
        if len(payload) > limits.BATCH_SIZE_BYTES_MAX:
            raise ZlogError(ErrorCode.MESSAGE_TOO_LARGE, f"proposal of {len(payload)} bytes")
        if self._chain.head.height - self._commit.height >= self._cfg.max_uncommitted_blocks:
            raise ProposalDroppedError("too many uncommitted blocks; followers are behind")
        block_id = self._append_local(BlockKind.CMD, bytes(payload))
        self._broadcast_append()
        assert self._chain.head == block_id
        assert block_id.term == self._term
        self._check_invariants()
        return block_id

    def propose_config(self, change: ConfigState) -> BlockId:
        """Append a CONFIG block holding the whole new configuration (section 4 rules)."""
        self._require_leader()
        change = self._chain.config.changed(change.voters, change.learners,
                                            dict(change.dirs), dict(change.endpoints))
        self._check_config_change(change)
        block_id = self._append_local(BlockKind.CONFIG, change.encode())
        self._broadcast_append()
        assert self._chain.config == change
        assert self._chain.last_config_height == block_id.height
        self._check_invariants()
        return block_id

    def _maybe_record_dirs(self) -> None:
        """Write the directories members answer from into the configuration (§4.15), when
        a configuration change may be proposed at all."""
        if not self._leading() or self._transferee is not None:
            return
        if self._commit.term != self._term or self._chain.last_config_height > self._commit.height:
            return
        seen = {peer: progress.dir_id for peer, progress in self._progress.items()}
        seen[self._id] = self._dir_id
        head_h = self._chain.head.height

        def caught_up(voter: int) -> bool:
            progress = self._progress.get(voter)
            return (progress is not None
                    and progress.match_h >= head_h - self._cfg.promotion_lag_blocks)

        change = recorded_dirs_update(self._chain.config, seen, caught_up)
        if change is None:
            return
        self._check_config_change(change)
        self._append_local(BlockKind.CONFIG, change.encode())
        self._broadcast_append()

    def _check_config_change(self, change: ConfigState) -> None:
        assert self._role == Role.LEADER
        current = self._chain.config
        assert self._commit.height <= self._chain.head.height
        if not change.voters:
            raise ConfigChangeError("a configuration needs at least one voter")
        if change == current:
            raise ConfigChangeError("the configuration is unchanged")
        if self._commit.term != self._term:
            raise ConfigChangeError(
                "the leader has not committed a block of its term yet",
                ErrorCode.REASSIGNMENT_IN_PROGRESS,
            )
        if self._chain.last_config_height > self._commit.height:
            raise ConfigChangeError(
                "a configuration change is still uncommitted", ErrorCode.REASSIGNMENT_IN_PROGRESS
            )
        changed = set(current.voters) ^ set(change.voters)
        if len(changed) > 1:
            raise ConfigChangeError(f"voters may change by one node at a time, not {changed}")
        for added in sorted(set(change.voters) - set(current.voters)):
            if added not in current.learners:
                raise ConfigChangeError(f"add node {added} as a learner first")
            match_h = self._progress[added].match_h
            if match_h < self._chain.head.height - self._cfg.promotion_lag_blocks:
                raise ConfigChangeError(
                    f"learner {added} is behind (match {match_h}, head "
                    f"{self._chain.head.height}); promote it once it has caught up",
                    ErrorCode.REASSIGNMENT_IN_PROGRESS,
                )

    def read_index(self, ctx: bytes) -> None:
        """Ask for a linearizable read point; `Ready.read_states` carries the answer.

        The answer's index is the commit at the time of the request, confirmed by a quorum
        echoing a later heartbeat; the driver serves the read once `applied` reaches it.
        Reads issued before this term's first commit wait for it.
        """
        if self._role != Role.LEADER:
            raise NotLeaderError(self._leader)
        if len(self._reads) + len(self._reads_waiting) >= self._cfg.max_uncommitted_blocks:
            raise ProposalDroppedError("too many reads waiting for a quorum")
        assert self._role == Role.LEADER
        if self._commit.term != self._term:
            self._reads_waiting.append(bytes(ctx))
            return
        self._seq += 1
        self._reads.append(PendingRead(bytes(ctx), self._commit, self._seq))
        self._broadcast_heartbeat()
        self._release_reads()
        assert all(read.index.term == self._term for read in self._reads)
        self._check_invariants()

    def transfer_leader(self, to: int) -> None:
        """Hand leadership to voter `to`: catch it up, then send it TimeoutNow.

        Proposals are refused until the transfer ends; it is abandoned after E ticks.
        """
        if self._role != Role.LEADER:
            raise NotLeaderError(self._leader)
        if to in (self._id, self._transferee):
            return
        if to not in self._chain.config.voters or to not in self._progress:
            raise LeaderTransferError(f"node {to} is not a voter")
        assert to != self._id
        self._hand_off_to(to)
        assert self._transferee == to
        self._check_invariants()

    def hand_off(self) -> int | None:
        """Leader: transfer leadership to the voter that holds most of its path (`transfer_leader`
        to it); the target, or None when no other voter can take over."""
        if self._role != Role.LEADER:
            raise NotLeaderError(self._leader)
        target = self._hand_off()
        self._check_invariants()
        return target

    def set_may_lead(self, may_lead: bool) -> None:
        """The driver's word on whether this node's host can do a leader's work now (the
        broker's loop that acts on the log turns). While it cannot, the node hands its
        leadership off (`hand_off`, again each time a transfer is given up) and neither
        campaigns nor takes a transfer; it still votes, so the others elect one of
        themselves. A leader nobody can take over from stays (there is no better one)."""
        self._may_lead = may_lead
        if not may_lead and self._role == Role.LEADER:
            self._hand_off()
        self._check_invariants()

    def compact(self, last: BlockId, data: bytes) -> None:
        """Take the driver's state-machine snapshot at applied block `last`; drop the blocks
        at or below it. Older points than the current base are ignored."""
        if last.height <= self._chain.base.height:
            return
        if last.height > self._applied.height or not self._chain.on_path(last):
            raise ValueError(f"compaction point {last} is not an applied block on the path")
        assert last.height <= self._commit.height
        config = self._chain.config_at(last.height)
        self._record_pruned(self._chain.compact(last, config))
        self._snapshot = Snapshot(last, config, bytes(data))
        self._pending_snapshot = self._snapshot
        assert self._chain.base == last
        assert all(block_id.height > last.height for block_id in self._new_blocks)
        self._check_invariants()

    # -- outputs -------------------------------------------------------------------------------

    def has_ready(self) -> bool:
        """Whether `ready()` has anything; False while a Ready awaits `advance`."""
        if self._outstanding is not None:
            return False
        assert not self._restore or self._pending_snapshot is not None
        assert self._emitted.height <= self._commit.height
        if self._msgs or self._new_blocks or self._pruned or self._read_states:
            return True
        if self._pending_snapshot is not None:
            return True
        if self._hard_state() != self._sent_hard or self._chain.head != self._sent_head:
            return True
        if SoftState(ROLE_NAMES[self._role], self._leader) != self._sent_soft:
            return True
        return self._commit.height > self._emitted.height

    def ready(self) -> Ready:
        """Hand out everything accumulated since the last Ready; call `advance` after it."""
        assert self._outstanding is None, "advance() the previous Ready first"
        hard = self._hard_state()
        soft = SoftState(ROLE_NAMES[self._role], self._leader)
        committed: tuple[Block, ...] = ()
        if not self._restore and self._commit.height > self._emitted.height:
            limit = self._emitted.height + self._cfg.max_committed_per_ready
            high = min(self._commit.height, limit)
            committed = tuple(self._chain.path_blocks(self._emitted.height + 1, high))
            self._emitted = committed[-1].id
        ready = Ready(
            hard_state=hard if hard != self._sent_hard else None,
            head=self._chain.head if self._chain.head != self._sent_head else None,
            new_blocks=tuple(
                self._new_blocks[i] for i in sorted(self._new_blocks, key=_height_order)
            ),
            snapshot=self._pending_snapshot,
            pruned=tuple(sorted(self._pruned, key=_height_order)),
            messages=tuple(self._msgs),
            committed=committed,
            read_states=tuple(self._read_states),
            soft_state=soft if soft != self._sent_soft else None,
            restore=self._restore,
        )
        assert not set(self._new_blocks) & self._pruned
        self._sent_hard, self._sent_head, self._sent_soft = hard, self._chain.head, soft
        self._msgs, self._new_blocks, self._pruned, self._read_states = [], {}, set(), []
        self._pending_snapshot, self._restore = None, False
        self._outstanding = ready
        assert not ready.restore or not ready.committed, "restore and apply never mix"
        assert all(b.id.height <= self._commit.height for b in ready.committed)
        return ready

    def advance(self, ready: Ready) -> None:
        """The driver persisted, sent and applied `ready`: count it as durable and applied."""
        assert ready is self._outstanding, "advance() takes the Ready last handed out"
        self._outstanding = None
        if ready.restore:
            assert ready.snapshot is not None
            self._applied = ready.snapshot.last
        elif ready.committed:
            self._applied = ready.committed[-1].id
        if ready.head is not None:
            self._persisted_head = ready.head
        if self._role == Role.LEADER:
            self._maybe_commit()
        assert self._applied.height <= self._commit.height
        self._check_invariants()


def _height_order(block_id: BlockId) -> tuple[int, int]:
    """Parents before children: storage may write in this order."""
    return (block_id.height, block_id.term)
