"""Raft's "not the leader" reaches the metadata log's proposers as NOT_CONTROLLER, naming the
leader: three metadata-log nodes on threads of this process, over real TCP sockets.

Spec: docs/raft.md §7 (errors carry Kafka codes: Raft's NotLeaderError is
NOT_LEADER_OR_FOLLOWER, and the metadata log, whose leader is the controller, answers it as
NOT_CONTROLLER with the same leader hint). A proposal and a learner's addition made on a
follower are both refused that way, so whoever answers a broker can name the controller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zmq

from zlog.broker.control.metadata.commands import RegisterBroker, Result
from zlog.broker.control.metadata.log import MetadataLog
from zlog.broker.control.metadata.state_machine import MetadataStateMachine
from zlog.errors import ErrorCode, ZlogError
from zlog.raft.errors import NotLeaderError
from zlog_testbed.free_ports import free_port_pair
from zlog_testbed.waiting import wait_until

TICK_MS = 20
NODES = (1, 2, 3)


def _voters() -> dict[int, str]:
    """Each voter's control endpoint: a port p with p + 1 (its Raft port) free, no two alike."""
    ports: list[int] = []
    while len(ports) < len(NODES):
        port = free_port_pair(["127.0.0.1"])
        if all(abs(port - taken) > 1 for taken in ports):
            ports.append(port)
    return {node: f"tcp://127.0.0.1:{port}" for node, port in zip(NODES, ports, strict=True)}


@pytest.fixture
def metadata_logs(tmp_path: Path) -> Iterator[dict[int, MetadataLog]]:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    voters = _voters()
    logs = {
        node: MetadataLog(node, tmp_path / f"node{node}", MetadataStateMachine(),
                          tick_ms=TICK_MS, wake=lambda: None, context=context,
                          voters=voters, listen=voters[node])
        for node in NODES
    }
    for log in logs.values():
        log.start()
    try:
        yield logs
    finally:
        for log in logs.values():
            log.stop()
        context.destroy(linger=0)


def _leader(logs: dict[int, MetadataLog]) -> int:
    """The leader, once every node knows it (so a follower's refusal can name it)."""
    def agreed() -> bool:
        known = {log.status().leader for log in logs.values()}
        return len(known) == 1 and None not in known
    wait_until(agreed, timeout_s=30, what="one metadata-log leader every node knows")
    leader = logs[NODES[0]].status().leader
    assert leader is not None and logs[leader].status().role == "leader"
    return leader


Heard = list[ZlogError | None]


def _refusal(log: MetadataLog, start: Callable[[Heard], None]) -> ZlogError:
    """Run `start`, which asks `log` for something that ends in `heard`; wait for the error."""
    heard: Heard = []

    def answered() -> bool:
        log.run_completions()
        return bool(heard)

    start(heard)
    wait_until(answered, timeout_s=10, what="the follower's answer")
    error = heard[0]
    assert error is not None, "a follower does not apply a proposal"
    return error


def test_a_followers_proposal_is_not_controller_naming_the_leader(
    metadata_logs: dict[int, MetadataLog],
) -> None:
    leader = _leader(metadata_logs)
    follower = metadata_logs[next(node for node in NODES if node != leader)]
    command = RegisterBroker(7, "h7", "tcp://h7:7400", "c", incarnation_id="i7")

    def propose(heard: Heard) -> None:
        def done(result: Result | None, error: ZlogError | None) -> None:
            del result
            heard.append(error)
        follower.propose(command, done)

    error = _refusal(follower, propose)
    assert error.code == ErrorCode.NOT_CONTROLLER
    assert isinstance(error, NotLeaderError) and error.leader_hint == leader


def test_a_followers_learner_addition_is_not_controller_naming_the_leader(
    metadata_logs: dict[int, MetadataLog],
) -> None:
    leader = _leader(metadata_logs)
    follower = metadata_logs[next(node for node in NODES if node != leader)]

    def add(heard: Heard) -> None:
        def done(members: tuple[str, ...] | None, error: ZlogError | None) -> None:
            del members
            heard.append(error)
        follower.add_learner(9, "tcp://127.0.0.1:1", done)

    error = _refusal(follower, add)
    assert error.code == ErrorCode.NOT_CONTROLLER
    assert isinstance(error, NotLeaderError) and error.leader_hint == leader
