"""The Chained-Raft runner: one node of the metadata log in one OS process (or thread).

The core (`rawnode.RawNode`) is pure: it counts ticks, takes messages and hands back Ready batches.
This module gives it a clock, a disk, a network and a state machine, in one loop on one
thread, and follows the driver contract of docs/raft.md §5.3 for every Ready:

    1. persist hard state, head, new blocks, snapshot and pruned ids: ONE fsync (storage.py);
    2. send the messages (links.py; never blocks, drops when a peer is down);
    3. apply the committed blocks to the state machine (after restoring it from a leader's
       snapshot when `ready.restore`), and answer the proposals and reads they settle;
    4. advance().

with two moves that take the local fsync off the commit path and that change nothing a
crash can observe (etcd's synchronous driver makes both):

    - Appends go out BEFORE step 1 (Raft dissertation §10.2.1). Only a leader sends them;
      it counts its own copy toward commit only once advance() reports it durable, and a
      majority of followers holding a block makes it durable without the leader, so the
      leader's fsync and the followers' run at the same time instead of in turn.
    - Step 3 runs BEFORE step 1, and its replies go out at once. A committed block is
      already durable on a quorum (the core counts this node only after an earlier
      advance()), so neither the state machine (rebuilt from the log after a crash) nor a
      client's answer depends on this Ready's fsync; waiting for it would add one fsync to
      every commit under load, since a Ready usually carries new blocks too.

Every other message (votes, acks, snapshots) still waits for the fsync it depends on.

Loop turn, bounded in every step so that no source starves another:

    poll(peer ROUTER, wake pipe; timeout = time to the next tick)
    -> step every peer message received -> queue the calls of other threads
    -> tick() when due (and expire deadlines) -> propose ONE block per batch of queued
    commands, one read_index for all queued reads -> run Readies until none is left

Batching is what makes it fast: while the loop is busy with an fsync, calls pile up in the
inbox, and the next turn proposes all of them as one block (one fsync and one round trip
for the lot). Commands in a block are `codec.encode_commands`; the state machine applies them
in order and each proposer gets its own command's result.

`RaftRunner(...).start()` runs the loop on a thread (or `run()` on the caller's), and
`propose()` / `read()` return concurrent.futures.Future objects that any thread may wait on;
`request_stop()` (safe from a signal handler) hands leadership off and stops. The loop thread
is the only one that touches the core, the sockets, the storage and the state machine.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from pathlib import Path

import zmq

from zlog import limits
from zlog.clock import monotonic_ms
from zlog.errors import ErrorCode, ZlogError
from zlog.raft import codec
from zlog.raft.codec import CodecError, RequestKind
from zlog.raft.errors import NotLeaderError
from zlog.raft.errors import ProposalDroppedError as CoreRefusedError
from zlog.raft.fsm import StateMachine
from zlog.raft.links import PeerLinks, PeerLinksFactory
from zlog.raft.messages import GENESIS, NO_DIR_ID, Append, Block, BlockKind, ConfigState, Ready
from zlog.raft.proposals import (
    Outcome,
    ProposalTracker,
    ReadTracker,
    Waiter,
)
from zlog.raft.rawnode import RaftConfig, RawNode
from zlog.raft.status import NodeStatus
from zlog.raft.storage import REWRITE_THRESHOLD_BYTES_DEFAULT, RaftStorage

log = logging.getLogger("zlog.raft.runner")



@dataclass(frozen=True, slots=True)
class RunnerConfig:
    """Timing and bounds of one runner. Ticks are the core's only notion of time."""

    tick_ms: int = 50  # wall time per core tick; failover takes election_ticks..2x of them
    election_ticks: int = 10  # ticks without a leader before a follower campaigns (E)
    heartbeat_ticks: int = 1  # leader heartbeat period in ticks (H < E)
    max_append_blocks: int = 64  # blocks per Append message
    pre_vote: bool = True  # §4 pre-vote: an isolated node rejoining does not bump the term
    check_quorum: bool = True  # §4: a leader that lost its quorum steps down within 2E ticks
    compaction_threshold_blocks: int = 8192  # snapshot once this many blocks are past the base
    compaction_threshold_bytes: int = 32 * 1024 * 1024  # or once the store holds this much
    proposal_timeout_ms: int = 10_000  # then REQUEST_TIMED_OUT (outcome unknown)
    read_timeout_ms: int = 5_000  # then REQUEST_TIMED_OUT (reads are safe to retry)
    batch_commands_max: int = limits.RAFT_BATCH_COMMANDS_MAX_DEFAULT  # commands per block
    batch_bytes_max: int = limits.RAFT_BATCH_BYTES_MAX_DEFAULT  # command bytes per block
    fsync: bool = True  # off only to measure something other than the disk
    rewrite_threshold_bytes: int = REWRITE_THRESHOLD_BYTES_DEFAULT  # storage file rewrite
    stop_transfer_timeout_ms: int = 1000  # how long a stopping leader waits to hand off

    def raft_config(self) -> RaftConfig:
        return RaftConfig(
            election_ticks=self.election_ticks,
            heartbeat_ticks=self.heartbeat_ticks,
            max_append_blocks=self.max_append_blocks,
            pre_vote=self.pre_vote,
            check_quorum=self.check_quorum,
            compaction_threshold_blocks=self.compaction_threshold_blocks,
        )


@dataclass(slots=True)
class RunnerStatistics:
    """Counters of the loop; only the loop thread writes them. `status()` publishes some of them
    (NodeStatus, which the benchmark's nodes report) and tests read the others; no metrics
    endpoint reads them yet (DESIGN.md §6)."""

    loop_turns: int = 0
    ticks: int = 0
    readies: int = 0
    blocks_proposed: int = 0
    commands_proposed: int = 0
    blocks_applied: int = 0
    commands_applied: int = 0
    reads_answered: int = 0
    snapshots_taken: int = 0
    snapshots_restored: int = 0
    peer_messages_received: int = 0
    peer_messages_sent: int = 0
    corrupt_peer_messages: int = 0


def _future_waiter(future: Future[bytes]) -> Waiter:
    """A waiter that completes `future`; a caller that cancelled it simply gets nothing."""

    def complete(outcome: Outcome) -> None:
        try:
            if isinstance(outcome, ZlogError):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
        except InvalidStateError:
            pass

    return complete


class RaftRunner:
    """Drives one core RawNode: clock, storage, sockets, state machine, proposals and reads."""

    def __init__(
        self,
        node_id: int,
        peers: Mapping[int, str],
        data_dir: Path,
        fsm: StateMachine,
        *,
        links: PeerLinksFactory,
        config: RunnerConfig | None = None,
        rng: random.Random | None = None,
        dir_id: bytes = NO_DIR_ID,
        join: bool = False,
        may_lead: Callable[[], bool] = lambda: True,
    ) -> None:
        """`dir_id`: the id of the data directory `data_dir` lies in, so that the log on a
        wiped disk is never counted as the one it replaced (docs/raft.md §4.15). `join`: a
        new node does not bootstrap a cluster of `peers` but waits for a leader that added
        it as a learner (§4.16); `peers` then holds what it knows to reach (itself at least).
        `may_lead`: asked at every tick (on the loop's thread) whether whatever acts on the
        log as its leader works now; while it says no, the node hands leadership off and does
        not campaign (RawNode.set_may_lead)."""
        assert node_id in peers, "peers maps every voter, this node included, to its address"
        self.node_id = node_id
        self.peers = dict(peers)
        self.config = config or RunnerConfig()
        self.fsm = fsm
        self.statistics = RunnerStatistics()
        self.storage = RaftStorage(
            data_dir,
            rewrite_threshold_bytes=self.config.rewrite_threshold_bytes,
            fsync=self.config.fsync,
        )
        persisted = self.storage.load()
        self._applied = GENESIS
        self._base = GENESIS
        if persisted is not None and persisted.snapshot is not None:
            self._base = persisted.snapshot.last
            if self._base != GENESIS:
                fsm.restore(persisted.snapshot.data)
                self._applied = self._base
        self._static_peers = dict(peers)  # the operator's word: wins over the configuration's
        self._peers_config: ConfigState | None = None  # the config `peers` last followed
        self._membership: deque[tuple[int, str, Waiter]] = deque()
        self._peer_updates: deque[Mapping[int, str]] = deque()
        bootstrap = None
        if persisted is None and not join:  # a new cluster: its voters and their endpoints
            clustered = len(self.peers) > 1
            bootstrap = ConfigState.of(sorted(self.peers), endpoints=self.peers if clustered
                                       else None)
        self.node = RawNode(
            node_id,
            self.config.raft_config(),
            persisted,
            rng or random.Random(int.from_bytes(os.urandom(8), "big")),
            bootstrap=bootstrap,
            dir_id=dir_id,
        )
        self.proposals = ProposalTracker(
            batch_commands_max=self.config.batch_commands_max,
            batch_bytes_max=self.config.batch_bytes_max,
        )
        self.reads = ReadTracker()
        self._links = links
        self._bound_links: PeerLinks | None = None  # made by start(), on the caller's thread
        self._inbox: deque[tuple[RequestKind, bytes, Waiter]] = deque()
        self._unreachable_leaders: deque[int] = deque()  # reported by other threads
        self._wake_pending = False  # a wake-up is on its way to the loop (see _drain_inbox)
        self._wake_read_fd, self._wake_write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._wake_lock = threading.RLock()
        self._stop_requested = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._was_leader = False
        self._may_lead = may_lead
        self._host_may_lead = True  # its last answer, to log each change once
        self._status_lock = threading.Lock()
        self._status = self._current_status()

    # -- API for other threads ------------------------------------------------------------------

    def start(self) -> None:
        """Run the loop on a daemon thread (embedded use).

        The peer sockets are made (and bound) here, so that a port another process holds fails
        the caller, which can say so and stop, instead of killing the thread after a start
        that looked fine. The thread then owns them (starting it is the memory barrier a
        ZeroMQ socket needs to change threads).
        """
        assert self._thread is None, "started twice"
        self._bound_links = self._links(self.node_id, self.peers)
        self._thread = threading.Thread(target=self.run, name=f"raft-{self.node_id}", daemon=True)
        self._thread.start()

    def propose(self, command: bytes) -> Future[bytes]:
        """Commit and apply `command`; the future holds its result from the state machine.

        It fails with NotLeaderError (not applied; retry at `leader_hint`), including
        ProposalSupersededError (not applied; retry), or REQUEST_TIMED_OUT (unknown).
        """
        assert len(command) <= limits.RAFT_COMMAND_BYTES_MAX, "command over its bound"
        return self._submit(RequestKind.PROPOSE, command)

    def read(self, query: bytes) -> Future[bytes]:
        """Answer `query` from the state machine, linearizably (ReadIndex, §4)."""
        return self._submit(RequestKind.READ, query)

    def report_leader_unreachable(self, leader: int) -> None:
        """Any thread: `leader`'s process is known to be gone (RawNode.leader_unreachable)."""
        self._unreachable_leaders.append(leader)
        self._wake()

    def add_learner(self, node_id: int, endpoint: str) -> Future[bytes]:
        """Leader: add `node_id` (its Raft endpoint `endpoint`) as a learner, or update its
        endpoint; the future holds every member's "id@endpoint", one a line, once the change
        is proposed (or nothing needed changing). The caller sees the change commit by the
        learner receiving the log. Fails like `propose`, or with the ConfigChangeError of a
        change that must wait (REASSIGNMENT_IN_PROGRESS)."""
        future: Future[bytes] = Future()
        self._membership.append((node_id, endpoint, _future_waiter(future)))
        self._wake()
        if self._stopped.is_set():
            self._fail_inbox()
        return future

    def add_peers(self, peers: Mapping[int, str]) -> None:
        """Reach these nodes too (a joining node learns its cluster's endpoints so)."""
        self._peer_updates.append(dict(peers))
        self._wake()

    def status(self) -> NodeStatus:
        """A snapshot of the node's view (role, term, leader, head, commit, applied)."""
        with self._status_lock:
            return self._status

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the loop to stop (leader: hand off first) and wait for it when on a thread."""
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout_s)
            assert not self._thread.is_alive(), "raft loop did not stop"

    def request_stop(self) -> None:
        """Safe from a signal handler or any thread: the loop stops at its next turn."""
        self._stop_requested.set()
        self._wake()

    def _submit(self, kind: RequestKind, body: bytes) -> Future[bytes]:
        future: Future[bytes] = Future()
        self._inbox.append((kind, body, _future_waiter(future)))
        if not self._wake_pending:  # one wake-up per burst: the loop takes all that waits
            self._wake_pending = True
            self._wake()
        if self._stopped.is_set():  # the loop may have drained the inbox for the last time
            self._fail_inbox()
        return future

    def _fail_inbox(self) -> None:
        """Answer what no loop turn will pick up; popleft makes each answer happen once."""
        error = ZlogError(ErrorCode.BROKER_NOT_AVAILABLE, "raft node stopped")
        with contextlib.suppress(IndexError):
            while True:
                self._inbox.popleft()[2](error)
        with contextlib.suppress(IndexError):
            while True:
                self._membership.popleft()[2](error)

    def _wake(self) -> None:
        """Make the loop's poll return. Under the lock that closes the pipe, so a wake-up
        never lands on a closed (or since reused) descriptor; re-entrant, because SIGTERM's
        handler may run on the loop thread while it closes."""
        with self._wake_lock:
            if self._wake_write_fd < 0:
                return
            with contextlib.suppress(BlockingIOError):  # full of wake-ups already: enough
                os.write(self._wake_write_fd, b"\x01")

    def _close_wake_pipe(self) -> None:
        with self._wake_lock:
            read_fd, write_fd = self._wake_read_fd, self._wake_write_fd
            self._wake_read_fd = self._wake_write_fd = -1
        os.close(read_fd)
        os.close(write_fd)

    # -- the loop -------------------------------------------------------------------------------

    def run(self) -> None:
        """The loop; returns after stop. Creates and closes its own sockets."""
        transport = self._bound_links or self._links(self.node_id, self.peers)
        self._bound_links = None
        poller = zmq.Poller()
        poller.register(transport.pollable, zmq.POLLIN)
        poller.register(self._wake_read_fd, zmq.POLLIN)
        self._transport = transport
        self._refresh_peers()
        log.info("raft node %d serving (peers %s)", self.node_id, self.peers)
        next_tick_ms = monotonic_ms() + self.config.tick_ms
        stop_deadline_ms: int | None = None
        try:
            while True:
                if self._stop_requested.is_set() and stop_deadline_ms is None:
                    stop_deadline_ms = self._begin_stop()
                if stop_deadline_ms is not None and self._may_stop(stop_deadline_ms):
                    break
                timeout_ms = max(0, next_tick_ms - monotonic_ms())
                if self.node.has_ready():  # a turn stopped at limits.RAFT_READIES_PER_TURN_MAX
                    timeout_ms = 0
                poller.poll(timeout_ms)
                self.statistics.loop_turns += 1
                self._receive_peers(transport)
                self._drain_inbox()
                now_ms = monotonic_ms()
                if now_ms >= next_tick_ms:
                    self._tick(now_ms)
                    # One tick per turn; after a stall, realign rather than burst ticks.
                    next_tick_ms += self.config.tick_ms
                    if next_tick_ms <= now_ms:
                        next_tick_ms = now_ms + self.config.tick_ms
                self._propose_queued()
                self._request_reads()
                self._handle_readies()
        finally:
            self._shut_down(transport)

    def _begin_stop(self) -> int:
        """A stopping leader hands off to a peer so the cluster does not wait a timeout."""
        now_ms = monotonic_ms()
        if not self._is_leader():
            return now_ms
        if self.node.hand_off() is None:
            return now_ms  # nobody to hand to
        return now_ms + self.config.stop_transfer_timeout_ms

    def _may_stop(self, stop_deadline_ms: int) -> bool:
        return not self._is_leader() or monotonic_ms() >= stop_deadline_ms

    def _shut_down(self, transport: PeerLinks) -> None:
        self._stopped.set()
        error = ZlogError(ErrorCode.BROKER_NOT_AVAILABLE, "raft node stopped")
        self.proposals.fail_queued(error)
        self.proposals.expire(now_ms=2**62)
        self.reads.fail_all(error)
        self._fail_inbox()
        transport.close()
        self.storage.close()
        self._close_wake_pipe()
        log.info("raft node %d stopped", self.node_id)

    # -- inputs -----------------------------------------------------------------------------------

    def _receive_peers(self, transport: PeerLinks) -> None:
        for sender, frame in transport.receive():
            self.statistics.peer_messages_received += 1
            try:
                message = codec.decode_message(frame)
            except CodecError as error:
                self.statistics.corrupt_peer_messages += 1
                log.warning("dropped a corrupt message from node %d: %s", sender, error)
                continue
            if message.from_ != sender or message.to != self.node_id:
                self.statistics.corrupt_peer_messages += 1
                continue
            self.node.step(message)

    def _drain_inbox(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_read_fd, 4096):
                pass
        # Cleared before the inbox is read: a request queued after this line either is read
        # below or wakes the loop again, so none waits for the next tick.
        self._wake_pending = False
        while self._unreachable_leaders:
            self.node.leader_unreachable(self._unreachable_leaders.popleft())
        while self._inbox:
            kind, body, waiter = self._inbox.popleft()
            self._queue(kind, body, waiter)
        while self._peer_updates:
            self._static_peers.update(self._peer_updates.popleft())
            self._peers_config = None
        while self._membership:
            self._add_learner(*self._membership.popleft())
        self._refresh_peers()

    def _refresh_peers(self) -> None:
        """Follow the endpoints the configuration names (and those the operator gave, which
        win); a node once known stays reachable, since a removed node must still receive the
        block that removes it."""
        config = self.node.config
        if config is self._peers_config:
            return
        self._peers_config = config
        peers = {**self.peers, **dict(config.endpoints), **self._static_peers}
        if peers != self.peers:
            self.peers = peers
            self._transport.set_peers(peers)
            log.info("raft node %d: peers now %s", self.node_id, peers)

    def _add_learner(self, node_id: int, endpoint: str, waiter: Waiter) -> None:
        if not self._is_leader():
            waiter(NotLeaderError(self.node.leader_id))
            return
        config = self.node.config
        if node_id not in config.members or dict(config.endpoints).get(node_id) != endpoint:
            learners = config.learners if node_id in config.members else (
                *config.learners, node_id)
            try:
                self.node.propose_config(config.changed(learners=learners,
                                                        endpoints={node_id: endpoint}))
            except ZlogError as error:
                waiter(error)
                return
            self._refresh_peers()  # reach the learner before the first Append leaves
        waiter("\n".join(f"{peer}@{address}" for peer, address in sorted(self.peers.items())
                         if peer in self.node.config.members).encode())

    def _queue(self, kind: RequestKind, body: bytes, waiter: Waiter) -> None:
        if not self._is_leader():
            waiter(NotLeaderError(self.node.leader_id))
            return
        now_ms = monotonic_ms()
        if kind == RequestKind.PROPOSE:
            deadline_ms = now_ms + self.config.proposal_timeout_ms
            accepted = self.proposals.enqueue(body, waiter, deadline_ms)
        else:
            accepted = self.reads.enqueue(body, waiter, now_ms + self.config.read_timeout_ms)
        if not accepted:
            waiter(ZlogError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, "too many requests waiting"))

    def _tick(self, now_ms: int) -> None:
        may_lead = self._may_lead()
        if may_lead != self._host_may_lead:
            self._host_may_lead = may_lead
            if may_lead:
                log.info("raft node %d: its host works again: it may lead", self.node_id)
            else:
                log.warning("raft node %d: its host has stalled: handing leadership off, and "
                            "not campaigning until it works again", self.node_id)
        self.node.set_may_lead(may_lead)
        self.node.tick()
        self.statistics.ticks += 1
        self.proposals.expire(now_ms)
        self.reads.expire(now_ms)
        self._publish_status()

    # -- proposals and reads ----------------------------------------------------------------------

    def _is_leader(self) -> bool:
        return str(self.node.role) == "leader"

    def _propose_queued(self) -> None:
        if self.proposals.queued_count == 0:
            return
        if not self._is_leader():
            self.proposals.fail_queued(NotLeaderError(self.node.leader_id))
            return
        while self.proposals.queued_count:
            batch = self.proposals.take_batch()
            payload = codec.encode_commands([pending.payload for pending in batch])
            try:
                block_id = self.node.propose(payload)
            except NotLeaderError as error:
                self.proposals.requeue_front(batch)
                self.proposals.fail_queued(error)
                return
            except CoreRefusedError:
                self.proposals.requeue_front(batch)  # back-pressure: retry after a Ready
                return
            self.proposals.proposed(block_id, batch)
            self.statistics.blocks_proposed += 1
            self.statistics.commands_proposed += len(batch)

    def _request_reads(self) -> None:
        ctx = self.reads.take_batch()
        if ctx is None:
            return
        try:
            self.node.read_index(ctx)
        except NotLeaderError as error:
            self.reads.fail_all(error)
        except CoreRefusedError as error:  # a transfer is under way, or too many reads
            self.reads.fail_all(ZlogError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, error.message))

    def _check_leadership(self) -> None:
        """On losing leadership, fail what can no longer be ordered here (safe retries)."""
        leader = self._is_leader()
        if self._was_leader and not leader:
            error = NotLeaderError(self.node.leader_id)
            self.proposals.fail_queued(error)
            self.reads.fail_all(error)
        self._was_leader = leader

    # -- the Ready contract -----------------------------------------------------------------------

    def _handle_readies(self) -> None:
        handled = 0
        while handled < limits.RAFT_READIES_PER_TURN_MAX and self.node.has_ready():
            handled += 1
            ready = self.node.ready()
            self.statistics.readies += 1
            self._send(ready, early=True)  # a leader's Appends overlap its own fsync
            self._apply(ready)  # 3. committed blocks are durable on a quorum already
            self.storage.save(ready)  # 1. persist (one fsync)
            self._send(ready, early=False)  # 2. everything that depends on the fsync
            self.node.advance(ready)  # 4. advance
            if ready.read_states:
                for read_state in ready.read_states:
                    self.reads.confirmed(read_state.ctx, read_state.index)
        self._check_leadership()
        self._refresh_peers()
        self._answer_reads()
        self._maybe_compact()
        if handled:
            self._publish_status()  # so status() never lags what callers were told

    def _send(self, ready: Ready, *, early: bool) -> None:
        for message in ready.messages:
            if isinstance(message, Append) == early:
                self._transport.send(message.to, codec.encode_message(message))
                self.statistics.peer_messages_sent += 1

    def _apply(self, ready: Ready) -> None:
        if ready.restore:
            assert ready.snapshot is not None and not ready.committed
            self.fsm.restore(ready.snapshot.data)
            self.proposals.skipped_to(ready.snapshot.last)
            self._applied = self._base = ready.snapshot.last
            self.statistics.snapshots_restored += 1
        elif ready.snapshot is not None and ready.snapshot.last.height > self._base.height:
            self._base = ready.snapshot.last  # our own compaction, now durable
        for block in ready.committed:
            self._apply_block(block)

    def _apply_block(self, block: Block) -> None:
        assert block.id.height == self._applied.height + 1, "committed blocks come in order"
        assert block.parent == self._applied, "committed blocks form one chain"
        results: list[bytes] | None = None
        if block.kind == BlockKind.CMD:
            results = [self.fsm.apply(command) for command in codec.decode_commands(block.payload)]
            self.statistics.commands_applied += len(results)
        elif block.kind == BlockKind.CONFIG:
            config = ConfigState.decode(block.payload)
            log.info("raft node %d: configuration %s committed: voters %s, learners %s, "
                     "directories %s", self.node_id, tuple(block.id), config.voters,
                     config.learners, {node: dir_id.hex() for node, dir_id in config.dirs})
        self.proposals.applied(block, results)
        self._applied = block.id
        self.statistics.blocks_applied += 1

    def _answer_reads(self) -> None:
        for read in self.reads.ready(self._applied.height):
            read.waiter(self.fsm.query(read.payload))
            self.statistics.reads_answered += 1

    def _maybe_compact(self) -> None:
        """Snapshot the state machine at `applied` once the store has grown past a threshold."""
        if self._applied.height <= self._base.height:
            return
        too_big = self.storage.live_bytes >= self.config.compaction_threshold_bytes
        if self.node.compaction_due or too_big:
            self.node.compact(self._applied, self.fsm.snapshot())
            self._base = self._applied
            self.statistics.snapshots_taken += 1

    def _publish_status(self) -> None:
        """Refresh the status other threads read (every tick and after every Ready)."""
        status = self._current_status()
        with self._status_lock:
            self._status = status

    def _current_status(self) -> NodeStatus:
        node, statistics, storage = self.node, self.statistics, self.storage.statistics
        return NodeStatus(
            node_id=self.node_id, role=str(node.role), term=node.term, leader=node.leader_id,
            head=node.head, commit=node.commit, applied=self._applied, base=self._base,
            commands_applied=statistics.commands_applied, readies=statistics.readies,
            fsyncs=storage.fsyncs, fsync_ms_total=round(storage.fsync_ms_total, 1),
            fsync_ms_max=round(storage.fsync_ms_max, 2),
            blocks_proposed=statistics.blocks_proposed,
            commands_proposed=statistics.commands_proposed,
            snapshots_taken=statistics.snapshots_taken,
            snapshots_restored=statistics.snapshots_restored, loop_turns=statistics.loop_turns,
            voter_match=self._voter_match(), voters=node.config.voters,
            learners=node.config.learners,
        )

    def _voter_match(self) -> tuple[tuple[int, int], ...]:
        node = self.node
        if node.leader_id != self.node_id or str(node.role) != "leader":
            return ()
        return tuple((peer, (node.match_height(peer) or 0) if node.counts_as_voter(peer) else -1)
                     for peer in sorted(node.config.voters) if peer != self.node_id)
