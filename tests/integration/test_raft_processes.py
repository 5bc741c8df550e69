"""Chained Raft over real sockets: three runners, a leader killed with SIGKILL, a restart.

Spec: docs/raft.md §5 (the driver contract: persist, send, apply, advance) and §6
invariant 6 (State Machine Safety) checked from outside: every acknowledged command is applied
exactly once on every node, and the nodes end with identical state machines.

Each process is `python -m bench.raft_node` on 127.0.0.1 with ports picked free; the client is
`RaftClient`, which only retries a command when the reply proves it was not applied, so each
unique id may appear at most once however the leader dies.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from bench.raft_client import RaftClient, decode_client_reply
from bench.raft_kv import KvOp, KvStateMachine, decode_list, kv_command, kv_incr
from bench.raft_node import ClientServer, SharedKvStateMachine
from zlog.errors import ErrorCode, ZlogError
from zlog.raft import codec
from zlog.raft.messages import TimeoutNow
from zlog.raft.proposals import NotLeaderOrFollowerError
from zlog.raft.runner import RaftRunner, RunnerConfig
from zlog.transport.raft_peers import PeerTransport
from zlog_testbed.waiting import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
TICK_MS = 20
ELECTION_TICKS = 10
COMPACTION_THRESHOLD_BLOCKS = 64  # small, so a restarted node catches up from a snapshot
LOG_KEY = b"log"
COUNTER_KEY = b"counter"


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class ProcessCluster:
    """Three `python -m bench.raft_node` processes, each with its own data directory."""

    def __init__(self, directory: Path, size: int = 3) -> None:
        ports = _free_ports(2 * size)
        self.node_ids = list(range(1, size + 1))
        self.peers = {n: f"tcp://127.0.0.1:{ports[n - 1]}" for n in self.node_ids}
        self.client_ports = {n: ports[size + n - 1] for n in self.node_ids}
        self.client_addresses = {n: f"tcp://127.0.0.1:{p}" for n, p in self.client_ports.items()}
        self.directory = directory
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.client = RaftClient(self.client_addresses, timeout_ms=5000)

    def start(self, node_id: int) -> None:
        peers = ",".join(f"{n}={address}" for n, address in self.peers.items())
        command = [
            sys.executable, "-m", "bench.raft_node", "--id", str(node_id), "--peers", peers,
            "--data-dir", str(self.directory / f"node{node_id}"),
            "--client-port", str(self.client_ports[node_id]),
            "--tick-ms", str(TICK_MS), "--election-ticks", str(ELECTION_TICKS),
            "--compaction-threshold-blocks", str(COMPACTION_THRESHOLD_BLOCKS),
        ]
        log_file = (self.directory / f"node{node_id}.log").open("ab")
        self.processes[node_id] = subprocess.Popen(
            command, cwd=REPO_ROOT, stdout=log_file, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
        log_file.close()

    def kill(self, node_id: int) -> None:
        process = self.processes.pop(node_id)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

    def terminate_all(self) -> dict[int, int]:
        for process in self.processes.values():
            process.send_signal(signal.SIGTERM)
        codes = {n: process.wait(timeout=10) for n, process in self.processes.items()}
        self.processes.clear()
        return codes

    def status(self, node_id: int) -> dict[str, Any] | None:
        if node_id not in self.processes:
            return None
        try:
            return self.client.status(node_id, timeout_ms=300)
        except ZlogError:
            return None

    def leader(self) -> int | None:
        """The node that says it leads, if exactly one live node does and others agree."""
        statuses = [s for s in (self.status(n) for n in self.processes) if s is not None]
        leaders = [s["node_id"] for s in statuses if s["role"] == "leader"]
        return int(leaders[0]) if len(leaders) == 1 else None

    def converged(self) -> bool:
        """Every live node applied the same blocks and holds the same state machine."""
        statuses = [self.status(n) for n in self.node_ids]
        if any(s is None for s in statuses):
            return False
        views = {(str(s["applied"]), s["fsm_digest"]) for s in statuses if s is not None}
        commits = {str(s["commit"]) for s in statuses if s is not None}
        return len(views) == 1 and len(commits) == 1

    def log_tails(self) -> str:
        tails = []
        for node_id in self.node_ids:
            path = self.directory / f"node{node_id}.log"
            if path.exists():
                lines = path.read_text(errors="replace").splitlines()[-15:]
                tails.append(f"--- node {node_id}\n" + "\n".join(lines))
        return "\n".join(tails)

    def close(self) -> None:
        for process in self.processes.values():
            process.kill()
            process.wait(timeout=10)
        self.processes.clear()
        self.client.close()


class Workload:
    """Client threads proposing unique appends and counter increments until stopped.

    Every outcome is recorded: acknowledged (applied exactly once), unknown (a timeout: applied
    at most once) or refused (never applied).
    """

    def __init__(self, addresses: dict[int, str], threads: int) -> None:
        self.addresses = addresses
        self.acked_ids: set[bytes] = set()
        self.unknown_ids: set[bytes] = set()
        self.acked_increments: list[int] = []
        self.unknown_increments = 0
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(index,), daemon=True)
            for index in range(threads)
        ]

    @property
    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked_ids)

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=15)
            assert not thread.is_alive(), "a client thread hung"

    def _run(self, index: int) -> None:
        client = RaftClient(self.addresses, timeout_ms=5000, attempt_timeout_ms=1000)
        try:
            for sequence in itertools.count():
                if self._stop.is_set():
                    return
                unique_id = f"c{index}-{sequence}".encode()
                self._propose(client, kv_command(KvOp.APPEND, LOG_KEY, unique_id), unique_id)
                self._propose(client, kv_incr(COUNTER_KEY), None)
        except BaseException as error:  # surfaced by the test, not lost in a thread
            self.errors.append(error)
        finally:
            client.close()

    def _propose(self, client: RaftClient, command: bytes, unique_id: bytes | None) -> None:
        try:
            result = client.propose(command)
        except ZlogError as error:
            if error.code != ErrorCode.REQUEST_TIMED_OUT:
                return  # refused: certainly not applied
            with self._lock:
                if unique_id is None:
                    self.unknown_increments += 1
                else:
                    self.unknown_ids.add(unique_id)
            return
        with self._lock:
            if unique_id is None:
                self.acked_increments.append(int(result))
            else:
                self.acked_ids.add(unique_id)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ProcessCluster]:
    cluster = ProcessCluster(tmp_path)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.mark.slow
def test_leader_killed_mid_load_loses_and_duplicates_nothing(cluster: ProcessCluster) -> None:
    """§5, §6 invariant 6: kill -9 the leader under load, restart it; state machines end equal."""
    for node_id in cluster.node_ids:
        cluster.start(node_id)
    wait_until(lambda: cluster.leader() is not None, timeout_s=20, what="a first leader")
    workload = Workload(cluster.client_addresses, threads=2)
    workload.start()
    try:
        wait_until(lambda: workload.acked_count >= 300, timeout_s=20, what="300 commits")
        old_leader = cluster.leader()
        assert old_leader is not None
        acked_at_kill = workload.acked_count
        cluster.kill(old_leader)
        wait_until(
            lambda: workload.acked_count >= acked_at_kill + 300, timeout_s=20,
            what="commits under a new leader",
        )
        new_leader = cluster.leader()
        assert new_leader not in (None, old_leader)
        cluster.start(old_leader)  # from its data directory
        acked_at_restart = workload.acked_count
        wait_until(
            lambda: workload.acked_count >= acked_at_restart + 300, timeout_s=20,
            what="commits after the restart",
        )
    finally:
        workload.stop()
    assert not workload.errors, workload.errors
    wait_until(cluster.converged, timeout_s=20, what=f"convergence\n{cluster.log_tails()}")

    applied_ids = decode_list(cluster.client.read(kv_command(KvOp.LIST, LOG_KEY)))
    assert len(applied_ids) == len(set(applied_ids)), "a command was applied twice"
    assert workload.acked_ids <= set(applied_ids), "an acknowledged command was lost"
    assert set(applied_ids) <= workload.acked_ids | workload.unknown_ids
    counter = int(cluster.client.read(kv_command(KvOp.GET, COUNTER_KEY)))
    acked_increments = len(workload.acked_increments)
    assert acked_increments <= counter <= acked_increments + workload.unknown_increments
    assert len(set(workload.acked_increments)) == acked_increments, "two increments, one value"

    restarted = cluster.status(old_leader)
    assert restarted is not None
    # The leader compacted past the dead node's head, so it caught up by InstallSnapshot.
    assert restarted["snapshots_restored"] >= 1
    codes = cluster.terminate_all()
    assert codes == dict.fromkeys(cluster.node_ids, 0), cluster.log_tails()


@pytest.mark.slow
def test_sigterm_on_the_leader_hands_leadership_off(cluster: ProcessCluster) -> None:
    """Graceful stop: the leader transfers leadership (TimeoutNow) and exits with status 0."""
    for node_id in cluster.node_ids:
        cluster.start(node_id)
    wait_until(lambda: cluster.leader() is not None, timeout_s=20, what="a first leader")
    assert cluster.client.propose(kv_incr(COUNTER_KEY)) == b"1"
    old_leader = cluster.leader()
    assert old_leader is not None
    process = cluster.processes.pop(old_leader)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 0
    # A transfer makes a new leader at once; without one it would take an election timeout.
    wait_until(lambda: cluster.leader() is not None, timeout_s=5, what="the next leader")
    assert cluster.client.propose(kv_incr(COUNTER_KEY)) == b"2"


def test_embedded_runners_on_threads(tmp_path: Path) -> None:
    """The supervisor's use: RaftRunner on a thread, propose()/read() return Futures."""
    ports = _free_ports(3)
    peers = {n: f"tcp://127.0.0.1:{ports[n - 1]}" for n in (1, 2, 3)}
    config = RunnerConfig(tick_ms=TICK_MS, election_ticks=ELECTION_TICKS)
    runners = {
        n: RaftRunner(n, peers, tmp_path / f"node{n}", KvStateMachine(), config=config,
                      links=PeerTransport.factory(zmq.Context.instance()))
        for n in peers
    }
    for runner in runners.values():
        runner.start()
    try:
        def leaders() -> list[RaftRunner]:
            return [r for r in runners.values() if r.status().role == "leader"]

        wait_until(lambda: len(leaders()) == 1, timeout_s=10, what="a leader")
        leader = leaders()[0]
        futures = [leader.propose(kv_incr(COUNTER_KEY)) for _ in range(500)]
        assert sorted(int(f.result(timeout=10)) for f in futures) == list(range(1, 501))
        assert leader.read(kv_command(KvOp.GET, COUNTER_KEY)).result(timeout=10) == b"500"
        follower = next(r for r in runners.values() if r is not leader)
        with pytest.raises(NotLeaderOrFollowerError) as refused:
            follower.propose(kv_incr(COUNTER_KEY)).result(timeout=10)
        assert refused.value.leader_hint == leader.node_id
    finally:
        for runner in runners.values():
            runner.stop()


def test_garbage_from_clients_and_peers_is_refused_and_the_nodes_keep_serving(
    tmp_path: Path,
) -> None:
    """Bad input is an operating error (docs/reliability.md §2.1): an error reply or a dropped
    frame, never a crash, and nothing stored changes. Node 2 is an impostor socket that speaks
    with peer 2's identity; nodes 1 and 3 are a quorum of three without it."""
    ports = _free_ports(4)
    peers = {n: f"tcp://127.0.0.1:{ports[n - 1]}" for n in (1, 2, 3)}
    client_address = f"tcp://127.0.0.1:{ports[3]}"
    config = RunnerConfig(tick_ms=TICK_MS, election_ticks=ELECTION_TICKS)
    fsms = {1: SharedKvStateMachine(), 3: KvStateMachine()}
    runners = [RaftRunner(n, peers, tmp_path / f"node{n}", fsms[n], config=config,
                          links=PeerTransport.factory(zmq.Context.instance())) for n in fsms]
    server = ClientServer(runners[0], fsms[1], client_address)
    for runner in runners:
        runner.start()
    server.start()
    context: zmq.Context[Any] = zmq.Context.instance()
    client = context.socket(zmq.DEALER)
    client.connect(client_address)
    impostors = []
    for n in (1, 3):
        impostor = context.socket(zmq.DEALER)
        impostor.setsockopt(zmq.IDENTITY, b"2")
        impostor.connect(peers[n])
        impostors.append(impostor)
    try:
        wait_until(
            lambda: any(r.status().role == "leader" for r in runners), timeout_s=10,
            what="a leader",
        )
        leader = next(r for r in runners if r.status().role == "leader")
        assert leader.propose(kv_incr(COUNTER_KEY)).result(timeout=10) == b"1"
        def settled() -> bool:  # both applied the command's block (height 2, after the noop)
            statuses = [r.status() for r in runners]
            return all(s.applied == s.commit and s.applied.height >= 2 for s in statuses)

        wait_until(settled, timeout_s=5, what="both nodes applying the first command")
        before = [r.status() for r in runners]
        truncated = codec.encode_message(TimeoutNow(99, 2, 1))[:-1]
        spoofed = codec.encode_message(TimeoutNow(99, 3, 1))  # says node 3, comes from 2
        for garbage in (b"", b"\x01", b"\xff" * 40, truncated, spoofed):
            for impostor in impostors:
                impostor.send(garbage)
            client.send(garbage)
            assert client.poll(5000), "no reply to a malformed request"
            reply = decode_client_reply(client.recv_multipart()[0])
            assert reply.error_code == ErrorCode.CORRUPT_MESSAGE
        wait_until(
            lambda: all(r.statistics.corrupt_peer_messages == 5 for r in runners), timeout_s=5,
            what="every bad peer frame counted and dropped",
        )
        after = [r.status() for r in runners]
        assert [(s.term, s.commit) for s in after] == [(s.term, s.commit) for s in before]
        assert leader.propose(kv_incr(COUNTER_KEY)).result(timeout=10) == b"2"
    finally:
        client.close(linger=0)
        for impostor in impostors:
            impostor.close(linger=0)
        server.stop()
        for runner in runners:
            runner.stop()
