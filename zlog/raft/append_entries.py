"""Moving blocks: the leader's Append/InstallSnapshot stream, the follower's rules, commit.

Both sides of docs/raft.md §4 live here, together with the two things that
happen when commit moves: dead-branch GC and ReadIndex release. Fork choice is "follow the
leader": a follower moves its head only to the last block of a current-term Append that its
head does not already extend, so reordered or duplicated Appends cannot pull it back.
"""

from __future__ import annotations

from functools import partial

from zlog.raft.messages import (
    NO_DIR_ID,
    Append,
    AppendResp,
    Block,
    BlockId,
    BlockKind,
    ConfigState,
    InstallSnapshot,
    ReadState,
    TimeoutNow,
)
from zlog.raft.progress import Progress, ProgressState
from zlog.raft.quorum import committed_height, has_quorum
from zlog.raft.state import NodeState, PendingRead, Role


class AppendEntries(NodeState):
    """Leader-side streaming and commit, follower-side acceptance and snapshot install."""

    # -- leader: building the path -------------------------------------------------------------

    def _append_local(self, kind: BlockKind, payload: bytes) -> BlockId:
        """Mint block (term, head.height + 1) on the leader's own head."""
        assert self._role == Role.LEADER, "only the leader mints blocks"
        head = self._chain.head
        assert head.term <= self._term
        block = Block(BlockId(self._term, head.height + 1), head, kind, payload)
        self._insert(block)
        self._chain.set_head(block.id)
        if kind == BlockKind.CONFIG:
            self._sync_progress()
        assert self._chain.head == block.id
        return block.id

    def _replication_targets(self) -> list[int]:
        """Members of the config at head, plus those of the config it replaced.

        Keeping the previous members lets a removed node receive the block that removes it,
        so it learns it is no longer a voter and stops asking for votes.
        """
        members = set(self._chain.config.members)
        last_config_height = self._chain.last_config_height
        if last_config_height > self._chain.base.height:
            members |= set(self._chain.config_at(last_config_height - 1).members)
        members.discard(self._id)
        targets = sorted(members)
        assert self._id not in targets
        assert set(self._chain.config.members) - {self._id} <= members
        return targets

    def _sync_progress(self) -> None:
        """Track exactly the replication targets; newcomers start probing at head."""
        assert self._role == Role.LEADER
        targets = self._replication_targets()
        for peer in targets:
            if peer not in self._progress:
                self._progress[peer] = Progress(
                    next_h=self._chain.head.height, progress_tick=self._now
                )
        for peer in sorted(self._progress):
            if peer not in targets:
                del self._progress[peer]
        if self._transferee is not None and self._transferee not in self._progress:
            self._transferee = None
        assert sorted(self._progress) == targets

    # -- leader: sending -----------------------------------------------------------------------

    def _send_append(self, peer: int, allow_empty: bool = False) -> None:
        """Send `peer` the next batch of the path (or a snapshot if it fell below the base)."""
        assert self._role == Role.LEADER
        progress = self._progress[peer]
        assert not allow_empty or progress.state == ProgressState.PROBE, "only probes go empty"
        if progress.state == ProgressState.SNAPSHOT:
            return
        if progress.next_h <= self._chain.base.height:
            self._send_snapshot(peer, progress)
            return
        if progress.paused(self._cfg.max_inflight_appends) and not allow_empty:
            return
        head_height = self._chain.head.height
        assert progress.next_h <= head_height + 1
        prev = self._chain.path_at(progress.next_h - 1)
        assert prev is not None
        last_h = min(progress.next_h + self._cfg.max_append_blocks - 1, head_height)
        blocks: tuple[Block, ...] = ()
        if progress.next_h <= last_h and not progress.paused(self._cfg.max_inflight_appends):
            blocks = tuple(self._chain.path_blocks(progress.next_h, last_h))
        if not blocks and not allow_empty:
            return
        self._send(Append(self._term, self._id, peer, prev, blocks, self._commit, self._seq))
        if blocks:
            progress.sent(last_h, self._cfg.max_inflight_appends)
        elif progress.state == ProgressState.PROBE:
            progress.probe_sent = True

    def _send_heartbeat(self, peer: int) -> None:
        """An empty Append at the peer's known match: keeps it following, carries commit/seq."""
        progress = self._progress[peer]
        height = max(progress.match_h, self._chain.base.height)
        assert height <= self._chain.head.height, "a match never passes the leader's head"
        prev = self._chain.path_at(height)
        assert prev is not None
        self._send(Append(self._term, self._id, peer, prev, (), self._commit, self._seq))

    def _send_snapshot(self, peer: int, progress: Progress) -> None:
        snapshot = self._snapshot
        assert snapshot is not None, "a base above genesis always has its snapshot"
        assert snapshot.last == self._chain.base
        self._send(InstallSnapshot(self._term, self._id, peer, snapshot))
        progress.become_snapshot(snapshot.last.height, self._now)

    def _broadcast_append(self) -> None:
        for peer in sorted(self._progress):
            self._send_append(peer)

    def _broadcast_heartbeat(self) -> None:
        """One heartbeat round: probe, retry stalled streams and snapshots, or just ping."""
        assert self._role == Role.LEADER
        election = self._cfg.election_ticks
        messages_before = len(self._msgs)
        for peer in sorted(self._progress):
            progress = self._progress[peer]
            stalled = self._now - progress.progress_tick >= election
            if progress.state == ProgressState.PROBE:
                progress.probe_sent = False
                self._send_append(peer, allow_empty=True)
            elif progress.state == ProgressState.SNAPSHOT and stalled:
                progress.become_probe(progress.match_h + 1, self._now)
                self._send_append(peer, allow_empty=True)
            elif progress.state == ProgressState.REPLICATE and stalled and progress.inflight:
                progress.become_probe(progress.match_h + 1, self._now)  # assume Appends lost
                self._send_append(peer, allow_empty=True)
            else:
                self._send_heartbeat(peer)
                self._send_append(peer)
        assert len(self._msgs) - messages_before <= 2 * len(self._progress), "bounded fan-out"

    def _maybe_send_timeout_now(self, peer: int) -> None:
        """Leader transfer: once the target holds our whole path, tell it to campaign now."""
        if self._transferee != peer:
            return
        assert self._role == Role.LEADER
        assert peer in self._chain.config.voters or peer in self._progress
        if self._progress[peer].match_h == self._chain.head.height:
            self._send(TimeoutNow(self._term, self._id, peer))

    # -- leader: replies and commit ------------------------------------------------------------

    def _handle_append_resp(self, msg: AppendResp) -> None:
        assert self._role == Role.LEADER
        assert msg.term == self._term
        progress = self._progress.get(msg.from_)
        if progress is None:
            return
        if msg.dir_id != progress.dir_id:
            if progress.dir_id != NO_DIR_ID:  # a new disk: what the old one held is gone
                progress = Progress(next_h=self._chain.head.height, progress_tick=self._now)
                self._progress[msg.from_] = progress
            progress.dir_id = msg.dir_id
        progress.recent_active = True
        progress.acked_seq = max(progress.acked_seq, msg.seq)
        if msg.success:
            self._handle_append_success(msg, progress)
        else:
            self._handle_append_reject(msg, progress)
        self._release_reads()

    def _handle_append_success(self, msg: AppendResp, progress: Progress) -> None:
        assert msg.success
        assert self._role == Role.LEADER
        match = msg.match
        if match.height > self._chain.head.height or (
            match.height > self._chain.base.height and not self._chain.on_path(match)
        ):
            self.odd_messages += 1  # a reply cannot name a block off the leader's path
            return
        moved = progress.update_match(match.height, self._now)
        assert progress.match_h >= match.height, "a match only grows"
        if progress.state == ProgressState.PROBE or (
            progress.state == ProgressState.SNAPSHOT and progress.match_h >= progress.snapshot_h
        ):
            progress.become_replicate(self._now)
        if moved:
            self._maybe_commit()
        if not self._leading():
            return  # the commit removed this leader from the configuration
        self._maybe_send_timeout_now(msg.from_)
        self._send_append(msg.from_)

    def _handle_append_reject(self, msg: AppendResp, progress: Progress) -> None:
        assert not msg.success
        assert self._role == Role.LEADER
        rejected = msg.match
        if progress.state == ProgressState.SNAPSHOT or rejected.height <= progress.match_h:
            return  # stale: a later reply already told us more
        if progress.state == ProgressState.PROBE and rejected.height != progress.next_h - 1:
            return  # answers an older probe
        if progress.state == ProgressState.REPLICATE and rejected.height >= progress.next_h:
            return
        hint = msg.hint_head
        if (
            hint.height > self._chain.base.height
            and hint.height <= self._chain.head.height
            and self._chain.on_path(hint)
        ):
            next_h = hint.height + 1
        else:
            next_h = min(progress.next_h - 1, msg.hint_commit.height + 1)
        next_h = max(min(next_h, rejected.height), progress.match_h + 1)
        assert progress.match_h < next_h <= rejected.height, "probe strictly below the reject"
        progress.become_probe(next_h, self._now)
        self._send_append(msg.from_, allow_empty=True)

    def _self_match_h(self) -> int:
        """How far this leader's own disk holds its path: only persisted blocks count."""
        persisted = self._persisted_head
        if persisted.height <= self._chain.base.height:
            return self._chain.base.height
        height = persisted.height if self._chain.on_path(persisted) else 0
        assert height <= self._chain.head.height
        assert height == 0 or self._chain.path_at(height) == persisted
        return height

    def _maybe_commit(self) -> bool:
        """Raft 5.4.2: commit the quorum height only through a block of the current term."""
        assert self._role == Role.LEADER
        config = self._chain.config
        voters = config.voters
        matches = {peer: progress.match_h for peer, progress in self._progress.items()
                   if config.counts(peer, progress.dir_id)}
        if config.counts(self._id, self._dir_id):
            matches[self._id] = self._self_match_h()
        height = committed_height(voters, matches)
        if height <= self._commit.height:
            return False
        block_id = self._chain.path_at(height)
        assert block_id is not None, "a quorum cannot hold more than the leader's path"
        if block_id.term != self._term:
            return False  # Figure 8: older-term blocks commit only beneath a current one
        self._advance_commit(block_id)
        return True

    def _advance_commit(self, block_id: BlockId) -> None:
        """Move commit forward along the path, prune dead branches, wake what waited on it."""
        assert self._chain.on_path(block_id), "commit is always on the path"
        assert block_id.height > self._commit.height, "commit never moves backward"
        previous = self._commit
        self._commit = block_id
        self._record_pruned(self._chain.prune_forks(previous.height, block_id.height))
        if self._role != Role.LEADER:
            return
        if (
            self._chain.last_config_height <= block_id.height
            and self._id not in self._chain.config.voters
        ):
            self._step_down_removed()
            return
        self._release_reads()

    def _step_down_removed(self) -> None:
        """The config removing this leader committed: tell everyone the commit, hand off to
        the best voter, then follow."""
        voters = [v for v in self._chain.config.voters if v in self._progress]
        assert self._id not in self._chain.config.voters
        assert self._chain.last_config_height <= self._commit.height, "removal committed"
        self._broadcast_heartbeat()
        if voters:
            best = max(voters, key=lambda v: (self._progress[v].match_h, -v))
            if self._progress[best].match_h == self._chain.head.height:
                self._send(TimeoutNow(self._term, self._id, best))
        self._become_follower(self._term, None)

    # -- leader: ReadIndex ---------------------------------------------------------------------

    def _release_reads(self) -> None:
        """Answer every read whose heartbeat a quorum has echoed (dissertation 6.4)."""
        if self._role != Role.LEADER:
            return
        if self._reads_waiting and self._commit.term == self._term:
            self._seq += 1
            for ctx in self._reads_waiting:
                self._reads.append(PendingRead(ctx, self._commit, self._seq))
            self._reads_waiting = []
            self._broadcast_heartbeat()
        voters = self._chain.config.voters
        while self._reads:
            read = self._reads[0]
            if not has_quorum(voters, partial(self._echoed, seq=read.seq)):
                break
            self._reads.pop(0)
            assert read.index.height <= self._commit.height, "a read point is committed"
            assert read.index.term == self._term, "read points come from this term"
            self._read_states.append(ReadState(read.ctx, read.index))

    def _echoed(self, voter: int, seq: int) -> bool:
        assert seq <= self._seq, "a read waits for a seq already sent"
        if voter == self._id:
            return True
        progress = self._progress.get(voter)
        return (progress is not None and progress.acked_seq >= seq
                and self._chain.config.counts(voter, progress.dir_id))

    # -- follower ------------------------------------------------------------------------------

    def _reply(self, msg: Append | InstallSnapshot, success: bool, match: BlockId) -> None:
        seq = msg.seq if isinstance(msg, Append) else 0
        assert msg.to == self._id
        assert not success or msg.term == self._term, "only current-term senders succeed"
        self._send(
            AppendResp(
                self._term, self._id, msg.from_, success, match,
                self._chain.head, self._commit, seq, self._dir_id,
            )
        )

    def _handle_append(self, msg: Append) -> None:
        """Follower Append rules 1-5 of section 4."""
        assert msg.term == self._term
        assert self._role == Role.FOLLOWER
        self._leader = msg.from_
        self._election_elapsed = 0
        base = self._chain.base
        if msg.prev.height > base.height and not self._chain.contains(msg.prev):
            self._reply(msg, False, msg.prev)  # rule 1: ask the leader to back off
            return
        if not self._valid_batch(msg):
            self.odd_messages += 1  # a correct leader never sends it; drop without a word
            return
        for block in msg.blocks:
            if block.id.height > base.height:
                self._insert(block)
        last = msg.blocks[-1].id if msg.blocks else msg.prev
        if last.height > base.height and not self._chain.on_path(last):
            self._chain.set_head(last)  # rule 3: follow the leader's branch
        assert self._chain.extends(self._chain.head, self._commit)
        candidate = msg.commit if msg.commit.height <= last.height else last
        if candidate.height > self._commit.height:
            if self._chain.on_path(candidate):
                self._advance_commit(candidate)  # rule 4: min(leader commit, last new)
            else:
                self.odd_messages += 1  # a leader's commit is an ancestor of what it sends
        self._reply(msg, True, last)

    def _valid_batch(self, msg: Append) -> bool:
        """Rule 2: a contiguous chain from prev, heights +1, terms within [parent, msg.term]."""
        assert msg.term == self._term
        previous = msg.prev
        base = self._chain.base
        assert msg.prev.height <= base.height or self._chain.contains(msg.prev)
        for block in msg.blocks:
            if block.parent != previous or block.id.height != previous.height + 1:
                return False
            if not previous.term <= block.id.term <= msg.term:
                return False
            if block.id.height == base.height and block.id != base:
                return False
            if block.id.height == base.height + 1 and block.parent != base:
                return False
            if block.kind == BlockKind.CONFIG and not _decodes(block.payload):
                return False
            if block.id.height > base.height and not self._fits(block):
                return False
            previous = block.id
        return msg.prev.height != base.height or msg.prev == base

    def _fits(self, block: Block) -> bool:
        """A block may join the store only if it matches what is stored under its id and
        does not conflict with commit (a current-term leader's path extends commit)."""
        assert block.id.height > self._chain.base.height
        stored = self._chain.get(block.id)
        if stored is not None:
            return stored == block
        assert self._commit.height >= self._chain.base.height
        return block.id.height > self._commit.height

    def _handle_snapshot(self, msg: InstallSnapshot) -> None:
        """Install a leader's snapshot (section 4, Snapshot/compaction)."""
        assert msg.term == self._term
        assert self._role == Role.FOLLOWER
        self._leader = msg.from_
        self._election_elapsed = 0
        snapshot = msg.snapshot
        last = snapshot.last
        if last.term > msg.term or not snapshot.config.voters:
            self.odd_messages += 1  # no leader can have committed a block of a later term
            return
        if last.height <= self._commit.height:
            self._reply(msg, True, self._commit)  # we already have everything it holds
            return
        self._record_pruned(self._chain.install(last, snapshot.config))
        self._commit = last
        self._emitted = last
        self._snapshot = snapshot
        self._pending_snapshot = snapshot
        self._restore = True
        assert self._chain.base == last
        assert self._chain.extends(self._chain.head, last)
        self._reply(msg, True, last)


def _decodes(payload: bytes) -> bool:
    try:
        config = ConfigState.decode(payload)
    except ValueError:
        return False
    return bool(config.voters)
