"""The broker's end of the metadata log: a Chained-Raft node, typed commands in, results out.

The supervisor proposes `metadata_commands` through here and hears each outcome on its own
loop thread: the Raft runner settles a proposal on its thread, and `MetadataLog` only queues the
completion and wakes the supervisor (`wake`), which runs `run_completions()` at its next turn.
So nothing the control plane holds is ever touched by two threads.

Startup registers this broker (RegisterBroker) and waits for it to commit: once it is applied,
every command committed before it is applied too, so the state the supervisor reads is current.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Final

import zmq

from zlog.broker.control.metadata import MetadataStateMachine
from zlog.broker.control.metadata_commands import (
    BrokerRegistered,
    Command,
    Done,
    RegisterBroker,
    decode_result,
    encode_command,
)
from zlog.clock import monotonic_ms
from zlog.errors import ErrorCode, ZlogError
from zlog.raft.runner import RaftRunner, RunnerConfig
from zlog.raft.status import NodeStatus
from zlog.transport.raft_peers import PeerTransport

log = logging.getLogger("zlog.broker.metadata_log")

REGISTRATION_TIMEOUT_MS: Final = 30_000  # for the metadata log to accept this broker
RAFT_DIRECTORY: Final = "__raft"


class RegistrationError(Exception):
    """The metadata log did not accept this broker in time, or refused it."""


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
    ) -> None:
        self.node_id = node_id
        self._wake = wake
        self._completions: deque[Callable[[], None]] = deque()
        self._runner = RaftRunner(
            node_id,
            {node_id: f"inproc://zlog-raft-{node_id}-{os.getpid()}-{id(self)}"},
            data_dir / RAFT_DIRECTORY,
            fsm,
            # One voter: an election only follows a restart, so keep it short (2 ticks), and
            # there is nobody to hand leadership to on stop, so do not wait for a transfer.
            config=RunnerConfig(tick_ms=tick_ms, election_ticks=2, stop_transfer_timeout_ms=0),
            links=PeerTransport.factory(context),
        )
        self._tick_ms = tick_ms

    def start(self) -> None:
        self._runner.start()

    def stop(self) -> None:
        self._runner.stop()

    def status(self) -> NodeStatus:
        return self._runner.status()

    def register(self, command: RegisterBroker) -> BrokerRegistered:
        """Propose this broker's registration until a leader takes it (an election may still
        be running at startup); blocks the caller, which is not serving yet."""
        deadline_ms = monotonic_ms() + REGISTRATION_TIMEOUT_MS
        while True:
            future = self._runner.propose(encode_command(command))
            try:
                raw = future.result(timeout=REGISTRATION_TIMEOUT_MS / 1000)
                return decode_result(BrokerRegistered, raw)
            except ZlogError as error:
                late = monotonic_ms() > deadline_ms
                if error.code != ErrorCode.NOT_LEADER_OR_FOLLOWER or late:
                    raise RegistrationError(f"the metadata log refused this broker: {error}") \
                        from None
                time.sleep(self._tick_ms / 1000)
            except TimeoutError:
                raise RegistrationError("the metadata log did not commit in time") from None

    def propose(self, command: Command, done: Done) -> None:
        """Propose `command`; `done(result, error)` runs later, from `run_completions`."""
        future = self._runner.propose(encode_command(command))
        result_type = command.RESULT

        def settled(outcome: Future[bytes]) -> None:  # on the Raft thread: queue, wake
            self._completions.append(lambda: _complete(outcome, result_type, done))
            self._wake()

        future.add_done_callback(settled)

    def run_completions(self) -> None:
        """On the supervisor's loop thread: tell each proposer its outcome."""
        while self._completions:
            self._completions.popleft()()


def _complete(future: Future[bytes], result_type: Any, done: Done) -> None:
    try:
        result = decode_result(result_type, future.result())
    except ZlogError as error:
        if error.code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            error = ZlogError(ErrorCode.NOT_CONTROLLER, error.message)
        done(None, error)
        return
    except Exception as error:
        done(None, ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR, f"metadata log: {error}"))
        return
    done(result, None)
