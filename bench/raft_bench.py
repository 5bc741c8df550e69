"""Chained-Raft benchmark: three node processes on loopback, fsync on, the KV state machine.

Three measurements, each on a fresh cluster of `python -m bench.raft_node` processes:
- throughput: many concurrent clients (each with one request outstanding, spread over a few
  DEALER sockets to the leader) propose small commands for `--duration-s`; committed (applied
  and answered) proposals per second;
- commit latency at a steady `--rate` proposals/s: sends are scheduled by the clock, and each
  latency runs from the scheduled send time to the reply, so a stall delays the sends after it
  and is counted in full (no coordinated omission);
- failover: `--kills` times, kill -9 the leader, then send proposals to the survivors every
  few ms; failover time runs from the kill to the first successful commit (by the next
  leader). The killed node restarts and catches up before the next round.

Usage: python bench/raft_bench.py [--json PATH] [--duration-s S] [--clients N] [--rate R]
       [--kills K] [--tick-ms T] [--election-ticks E]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import psutil
import zmq

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.raft_client import (  # noqa: E402
    ClientReply,
    ClientRequest,
    ClientRequestKind,
    RaftClient,
    decode_client_reply,
    encode_client_request,
)
from bench.raft_kv import kv_incr  # noqa: E402


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))
    return ordered[index]


class Cluster:
    """Three node processes with data directories under `directory`."""

    def __init__(self, directory: Path, arguments: argparse.Namespace, size: int = 3) -> None:
        ports = _free_ports(2 * size)
        self.node_ids = list(range(1, size + 1))
        self.peers = {n: f"tcp://127.0.0.1:{ports[n - 1]}" for n in self.node_ids}
        self.client_ports = {n: ports[size + n - 1] for n in self.node_ids}
        self.client_addresses = {n: f"tcp://127.0.0.1:{p}" for n, p in self.client_ports.items()}
        self.directory = directory
        self.arguments = arguments
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.client = RaftClient(self.client_addresses, timeout_ms=10_000)

    def start(self, node_id: int) -> None:
        peers = ",".join(f"{n}={address}" for n, address in self.peers.items())
        command = [
            sys.executable, "-m", "bench.raft_node", "--id", str(node_id), "--peers", peers,
            "--data-dir", str(self.directory / f"node{node_id}"),
            "--client-port", str(self.client_ports[node_id]),
            "--tick-ms", str(self.arguments.tick_ms),
            "--election-ticks", str(self.arguments.election_ticks),
        ]
        if self.arguments.no_fsync:
            command.append("--no-fsync")
        log_file = (self.directory / f"node{node_id}.log").open("ab")
        self.processes[node_id] = subprocess.Popen(
            command, cwd=REPO_ROOT, stdout=log_file, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
        log_file.close()

    def start_all(self) -> None:
        for node_id in self.node_ids:
            self.start(node_id)

    def kill(self, node_id: int) -> None:
        process = self.processes.pop(node_id)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

    def status(self, node_id: int) -> dict[str, Any] | None:
        if node_id not in self.processes:
            return None
        try:
            return self.client.status(node_id, timeout_ms=300)
        except Exception:  # down or not yet serving: no status
            return None

    def wait_for_leader(self, timeout_s: float = 30.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            statuses = [s for s in map(self.status, list(self.processes)) if s is not None]
            leaders = [s["node_id"] for s in statuses if s["role"] == "leader"]
            if len(leaders) == 1 and len(statuses) == len(self.processes):
                return int(leaders[0])
            time.sleep(0.01)
        raise TimeoutError("no leader")

    def wait_converged(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            statuses = [self.status(n) for n in self.node_ids]
            if all(s is not None for s in statuses):
                applied = {str(s["applied"]) for s in statuses if s is not None}
                if len(applied) == 1:
                    return
            time.sleep(0.01)
        raise TimeoutError("nodes did not converge")

    def close(self) -> None:
        for process in self.processes.values():
            process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()
        self.client.close()


class Connection:
    """Raw DEALER sockets to one node: send proposals, collect replies, no retries."""

    def __init__(self, context: zmq.Context[Any], address: str, socket_count: int) -> None:
        self.sockets = []
        for _ in range(socket_count):
            dealer = context.socket(zmq.DEALER)
            dealer.setsockopt(zmq.LINGER, 0)
            dealer.connect(address)
            self.sockets.append(dealer)
        self.poller = zmq.Poller()
        for dealer in self.sockets:
            self.poller.register(dealer, zmq.POLLIN)
        self.request_ids = itertools.count(1)

    def send(self, index: int, command: bytes) -> int:
        request_id = next(self.request_ids)
        request = ClientRequest(ClientRequestKind.PROPOSE, request_id, command)
        self.sockets[index].send(encode_client_request(request))
        return request_id

    def replies(self, timeout_ms: int) -> list[tuple[int, ClientReply]]:
        received: list[tuple[int, ClientReply]] = []
        for dealer, _ in self.poller.poll(timeout_ms):
            index = self.sockets.index(dealer)
            while True:
                try:
                    frames = dealer.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                received.extend((index, decode_client_reply(f)) for f in frames)
        return received

    def close(self) -> None:
        for dealer in self.sockets:
            dealer.close(linger=0)


def measure_throughput(cluster: Cluster, arguments: argparse.Namespace) -> dict[str, Any]:
    """Closed loop: `clients` requests always outstanding; count answered commits."""
    leader = cluster.wait_for_leader()
    connection = Connection(zmq.Context.instance(), cluster.client_addresses[leader], 8)
    command = kv_incr(b"throughput")
    per_socket = max(1, arguments.clients // len(connection.sockets))
    for index in range(len(connection.sockets)):
        for _ in range(per_socket):
            connection.send(index, command)
    order = [leader] + [n for n in cluster.node_ids if n != leader]
    processes = [psutil.Process(cluster.processes[n].pid) for n in order]
    processes.append(psutil.Process())
    committed = errors = 0
    warmup_end = time.monotonic() + 1.0
    measure_end = warmup_end + arguments.duration_s
    measuring = False
    while (now := time.monotonic()) < measure_end:
        if not measuring and now >= warmup_end:
            measuring, committed, errors = True, 0, 0
            cpu_before = [p.cpu_times() for p in processes]
            started = now
        for index, reply in connection.replies(100):
            if reply.error_code == 0:
                committed += 1
            else:
                errors += 1
            connection.send(index, command)
    elapsed = time.monotonic() - started
    cpu_share = [
        round(100 * ((a.user + a.system) - (b.user + b.system)) / elapsed, 1)
        for a, b in zip((p.cpu_times() for p in processes), cpu_before, strict=True)
    ]
    status = cluster.status(leader) or {}
    connection.close()
    stats = status
    return {
        "commits_per_s": round(committed / elapsed),
        "errors": errors,
        "clients": per_socket * 8,
        "cpu_percent_leader_followers_bench": cpu_share,
        "commands_per_block": round(
            stats.get("commands_proposed", 0) / max(1, stats.get("blocks_proposed", 1)), 1
        ),
    }


def measure_latency(cluster: Cluster, arguments: argparse.Namespace) -> dict[str, Any]:
    """Open loop at `rate`/s: latency from each send's scheduled time to its reply."""
    leader = cluster.wait_for_leader()
    connection = Connection(zmq.Context.instance(), cluster.client_addresses[leader], 1)
    command = kv_incr(b"latency")
    interval_s = 1.0 / arguments.rate
    total = int(arguments.rate * arguments.duration_s)
    warmup = int(arguments.rate * 1.0)
    scheduled: dict[int, float] = {}
    latencies_ms: list[float] = []
    errors = 0
    start = time.monotonic() + 0.05
    sent = 0
    deadline = start + (total + warmup) * interval_s + 5.0
    while (sent < total + warmup or scheduled) and time.monotonic() < deadline:
        now = time.monotonic()
        while sent < total + warmup and start + sent * interval_s <= now:
            request_id = connection.send(0, command)
            if sent >= warmup:
                scheduled[request_id] = start + sent * interval_s
            sent += 1
        next_send = start + sent * interval_s if sent < total + warmup else now + 0.01
        timeout_ms = max(0, int((next_send - time.monotonic()) * 1000))
        for _, reply in connection.replies(timeout_ms):
            planned = scheduled.pop(reply.request_id, None)
            if reply.error_code != 0:
                errors += 1
            elif planned is not None:
                latencies_ms.append((time.monotonic() - planned) * 1000)
    connection.close()
    fsyncs = {}
    for node_id in cluster.node_ids:
        stats = cluster.status(node_id) or {}
        fsyncs[node_id] = {k: stats.get(k) for k in ("fsyncs", "fsync_ms_total", "fsync_ms_max")}
    return {
        "latency_fsyncs": fsyncs,
        "commit_p50_ms": round(_percentile(latencies_ms, 0.50), 2),
        "commit_p99_ms": round(_percentile(latencies_ms, 0.99), 2),
        "commit_max_ms": round(max(latencies_ms), 2),
        "latency_samples": len(latencies_ms),
        "latency_errors": errors,
        "latency_lost": len(scheduled),
    }


def one_failover(cluster: Cluster, context: zmq.Context[Any]) -> float:
    """Kill the leader; ms until a survivor answers a proposal with success."""
    leader = cluster.wait_for_leader()
    survivors = [n for n in cluster.node_ids if n != leader]
    connections = {n: Connection(context, cluster.client_addresses[n], 1) for n in survivors}
    command = kv_incr(b"failover")
    killed_at = time.monotonic()
    cluster.kill(leader)
    try:
        while time.monotonic() - killed_at < 30:
            for connection in connections.values():
                connection.send(0, command)
            for connection in connections.values():
                for _, reply in connection.replies(2):
                    if reply.error_code == 0:
                        return (time.monotonic() - killed_at) * 1000
        raise TimeoutError("no commit within 30 s of the kill")
    finally:
        for connection in connections.values():
            connection.close()
        cluster.start(leader)
        cluster.wait_for_leader()
        cluster.wait_converged()


def measure_failover(cluster: Cluster, arguments: argparse.Namespace) -> dict[str, Any]:
    context: zmq.Context[Any] = zmq.Context.instance()
    cluster.wait_for_leader()
    cluster.client.propose(kv_incr(b"failover"))
    samples_ms = [one_failover(cluster, context) for _ in range(arguments.kills)]
    return {
        "failover_p50_ms": round(_percentile(samples_ms, 0.50), 1),
        "failover_p99_ms": round(_percentile(samples_ms, 0.99), 1),
        "failover_samples_ms": [round(s, 1) for s in samples_ms],
    }


def _cpu_pressure() -> dict[str, float]:
    """How much runnable work waited for a CPU (Linux PSI), and the load average: the
    machine is shared, and contention shows up in the tail latencies first."""
    pressure: dict[str, float] = {"load_average_1m": round(os.getloadavg()[0], 2)}
    try:
        some = Path("/proc/pressure/cpu").read_text().splitlines()[0].split()
        pressure["cpu_pressure_some_avg10_pct"] = float(some[1].split("=")[1])
    except (OSError, IndexError, ValueError):
        pass
    return pressure


def run_phase(name: str, arguments: argparse.Namespace, phase: Any) -> dict[str, Any]:
    directory = Path(tempfile.mkdtemp(prefix=f"zlog-raft-bench-{name}-", dir=arguments.dir))
    cluster = Cluster(directory, arguments)
    try:
        cluster.start_all()
        cluster.wait_for_leader()
        cluster.client.propose(kv_incr(b"warm"))
        result: dict[str, Any] = phase(cluster, arguments)
        result[f"{name}_machine"] = _cpu_pressure()
        return result
    finally:
        cluster.close()
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--duration-s", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=256)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--tick-ms", type=int, default=20)
    parser.add_argument("--election-ticks", type=int, default=10)
    parser.add_argument("--dir", default=None, help="parent of the data directories")
    parser.add_argument("--no-fsync", action="store_true",
                        help="diagnosis only: how much of the latency is the disk")
    parser.add_argument("--only", choices=["throughput", "latency", "failover"], default=None)
    arguments = parser.parse_args()
    results: dict[str, Any] = {
        "tick_ms": arguments.tick_ms,
        "election_ticks": arguments.election_ticks,
        "fsync": not arguments.no_fsync,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }
    phases = {
        "throughput": measure_throughput,
        "latency": measure_latency,
        "failover": measure_failover,
    }
    for name, phase in phases.items():
        if arguments.only in (None, name):
            results.update(run_phase(name, arguments, phase))
            print(json.dumps(results), flush=True)
    if arguments.json:
        arguments.json.parent.mkdir(parents=True, exist_ok=True)
        arguments.json.write_text(json.dumps(results, indent=2) + "\n")
    summary = {k: results.get(k) for k in (
        "commits_per_s", "commit_p50_ms", "commit_p99_ms", "failover_p50_ms", "failover_p99_ms"
    )}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
