"""The broker's end of the metadata log: a Chained-Raft node, typed commands in, results out.

The supervisor proposes `commands` through here and hears each outcome on its own
loop thread: the Raft runner settles a proposal on its thread, and `MetadataLog` only queues the
completion and wakes the supervisor (`wake`), which runs `run_completions()` at its next turn.
So nothing the control plane holds is ever touched by two threads.

The metadata log's leader is the controller: Raft's "not the leader" (`raft.errors.NotLeaderError`,
NOT_LEADER_OR_FOLLOWER) reaches every proposer here as NOT_CONTROLLER, with the leader the Raft
node knows of, so an answer can name the controller to try (`as_controller_error`).

With `voters`, the node is one of several, over TCP on the port after each voter's control
port; alone, it talks to nobody (inproc) and elects itself at once.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Final

import zmq

from zlog.broker.config import METADATA_ELECTION_TICKS, raft_endpoint
from zlog.broker.control.metadata.commands import (
    Command,
    Done,
    decode_result,
    encode_command,
)
from zlog.broker.control.metadata.state_machine import MetadataStateMachine
from zlog.errors import ErrorCode, ZlogError
from zlog.raft.errors import NotLeaderError
from zlog.raft.messages import NO_DIR_ID
from zlog.raft.runner import RaftRunner, RunnerConfig
from zlog.raft.status import NodeStatus
from zlog.transport.raft_peers import PeerTransport

log = logging.getLogger("zlog.broker.metadata_log")

RAFT_DIRECTORY: Final = "__raft"
STOP_TRANSFER_TIMEOUT_MS: Final = 2_000  # a stopping leader's wait to hand leadership off


class MetadataLog:
    """This host's Raft node and the proposals in flight through it."""

    def __init__(
        self,
        node_id: int,
        data_dir: Path,
        fsm: MetadataStateMachine,
        *,
        tick_ms: int,
        wake: Callable[[], None],
        context: zmq.Context[Any],
        voters: Mapping[int, str] | None = None,
        listen: str = "",
        dir_id: bytes = NO_DIR_ID,
        join: bool = False,
        may_lead: Callable[[], bool] = lambda: True,
    ) -> None:
        """`voters`: each voter's control endpoint (their Raft peers listen on the next port;
        this node binds the port after `listen`); none: this node alone, over inproc, unless
        it `join`s a cluster as a learner (it then learns its peers: `add_peers`).
        `may_lead`: whether the controller's loop turns (loop_watch.py), asked by the Raft
        thread at every tick."""
        self.node_id = node_id
        self._wake = wake
        self._completions: deque[Callable[[], None]] = deque()
        if join or (voters and len(voters) > 1):
            peers = {voter: raft_endpoint(endpoint) for voter, endpoint in (voters or {}).items()}
            peers[node_id] = raft_endpoint(listen)
            # Elections within about half a second to a second; a stopping leader hands off.
            runner_config = RunnerConfig(tick_ms=tick_ms, election_ticks=METADATA_ELECTION_TICKS,
                                         stop_transfer_timeout_ms=STOP_TRANSFER_TIMEOUT_MS)
        else:
            peers = {node_id: f"inproc://zlog-raft-{node_id}-{os.getpid()}-{id(self)}"}
            # One voter: an election only follows a restart, so keep it short (2 ticks), and
            # there is nobody to hand leadership to on stop, so do not wait for a transfer.
            runner_config = RunnerConfig(tick_ms=tick_ms, election_ticks=2,
                                         stop_transfer_timeout_ms=0)
        self._runner = RaftRunner(node_id, peers, data_dir / RAFT_DIRECTORY, fsm,
                                  config=runner_config, links=PeerTransport.factory(context),
                                  dir_id=dir_id, join=join, may_lead=may_lead)
        self._tick_ms = tick_ms

    def start(self) -> None:
        self._runner.start()

    def stop(self) -> None:
        self._runner.stop()

    def status(self) -> NodeStatus:
        return self._runner.status()

    def leader_unreachable(self, leader: int) -> None:
        """`leader`'s process is gone: this node stops waiting out its election timeout."""
        self._runner.report_leader_unreachable(leader)

    def propose(self, command: Command, done: Done) -> None:
        """Propose `command`; `done(result, error)` runs later, from `run_completions`."""
        future = self._runner.propose(encode_command(command))
        result_type = command.RESULT

        def settled(outcome: Future[bytes]) -> None:  # on the Raft thread: queue, wake
            self._completions.append(lambda: _complete(outcome, result_type, done))
            self._wake()

        future.add_done_callback(settled)

    def add_learner(self, node_id: int, endpoint: str, done: LearnerAdded) -> None:
        """Leader: add a learner (RaftRunner.add_learner); `done(members, error)` runs later,
        from `run_completions`, with every member's "id@endpoint"."""
        future = self._runner.add_learner(node_id, endpoint)

        def settled(outcome: Future[bytes]) -> None:  # on the Raft thread: queue, wake
            self._completions.append(lambda: _learner_added(outcome, done))
            self._wake()

        future.add_done_callback(settled)

    def add_peers(self, peers: Mapping[int, str]) -> None:
        self._runner.add_peers(peers)

    def run_completions(self) -> None:
        """On the supervisor's loop thread: tell each proposer its outcome."""
        while self._completions:
            self._completions.popleft()()


LearnerAdded = Callable[[tuple[str, ...] | None, ZlogError | None], None]


def as_controller_error(error: ZlogError) -> ZlogError:
    """The error a proposer of the metadata log hears: NOT_CONTROLLER, naming the leader the
    Raft node knew of, where Raft answered that this node does not lead; any other as it is."""
    if isinstance(error, NotLeaderError):
        return NotLeaderError(error.leader_hint, error.message, ErrorCode.NOT_CONTROLLER)
    return error


def _learner_added(future: Future[bytes], done: LearnerAdded) -> None:
    try:
        members = future.result().decode()
    except ZlogError as error:
        done(None, as_controller_error(error))
        return
    done(tuple(line for line in members.split("\n") if line), None)


def _complete(future: Future[bytes], result_type: Any, done: Done) -> None:
    try:
        result = decode_result(result_type, future.result())
    except ZlogError as error:
        done(None, as_controller_error(error))
        return
    except Exception as error:
        done(None, ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR, f"metadata log: {error}"))
        return
    done(result, None)
