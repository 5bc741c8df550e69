"""Consumer-group benchmark: one `zlog serve` at its defaults, members as their own processes.

One run starts a fresh single broker (one node is enough for these figures: the coordinator is
one worker whichever the cluster size; replication would add the followers' fetch to each
reply) and measures, for the server-side protocol (`consumer`) and the classic one side by side:

- `rebalance_p50_ms` / `rebalance_p99_ms`, per protocol and per cause (`join`, `leave`, `kill`):
  ten members read a 60-partition topic that a producer process keeps writing (`--rate`
  records/s, round robin). A join runs from the new member's `subscribe` call, a clean leave
  from the leaving member's `close` call, a kill from the SIGKILL, to the instant every
  partition is owned again by exactly one live member (the last assign or revoke the members
  write down). Rounds alternate a leave and a join, so the group goes 10 -> 9 -> 10; a kill is
  bounded by the session timeout (the broker's `group_consumer_session_timeout_ms` for the
  server-side protocol, the client's `session_timeout_ms` for classic), so there are fewer
  rounds of it (`--kill-rounds`);
- `unaffected_member_gap_ms_max`: over the join and leave rounds, the longest pause between two
  records a member received from the partitions it kept through the round (members that lost
  or gained partitions count only the ones they kept); `unaffected_member_gap_ms_median` is the
  median of the rounds' longest pauses, `touched_member_gap_ms_max` the longest over the members
  that themselves gained or gave up partitions in the round (the others' is the rest);
  `baseline_gap_ms_max` is the same over a quiet second before each round, for comparison;
- `commits_per_s`: OffsetCommit requests of one partition each, acknowledged per second by one
  coordinator, from `--commit-clients` processes each keeping `--commit-window` requests in
  flight; `commit_sync_per_s` is one process calling `Consumer.commit` in a loop;
  `commit_worker_cpu_us` and `commit_clients_cpu_us` are the CPU one acknowledged commit cost
  the coordinating worker and the committing processes (rates on a shared machine vary with the
  neighbours' load; the CPU per commit much less);
- `group_records_per_s` against `plain_records_per_s`: `--records` records pre-written to a
  6-partition topic are read by three members of one group (each `poll_batches`) and by one
  plain consumer assigned every partition, both at the client's defaults but for
  `auto_offset_reset="earliest"`; a figure runs from the first record received to the last
  (the group's also from the first `subscribe`, `group_records_per_s_with_join`).

Every member, producer and committer is a child process of this script (`--child`); each writes
JSON lines stamped with `time.monotonic()` (one clock for the whole machine).

Usage: python bench/groups_bench.py [--json PATH] [--repeat N] ...
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

import numpy as np
import psutil

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.broker_bench import Broker, machine_load, write_json  # noqa: E402
from zlog.client import Admin, Consumer, NewTopic, Producer, TopicPartition  # noqa: E402
from zlog.client.cluster import Connections  # noqa: E402
from zlog.client.group.coordinator import CoordinatorLink  # noqa: E402
from zlog.errors import ErrorCode  # noqa: E402
from zlog.transport.messages.groups import (  # noqa: E402
    OffsetCommitRequestV0,
    OffsetCommitResponseV0,
    PartitionCommit,
)
from zlog.transport.rpc import RpcClient  # noqa: E402

PROTOCOLS: Final = ("consumer", "classic")
MEMBERS: Final = 10
PARTITIONS: Final = 60
THROUGHPUT_PARTITIONS: Final = 6
THROUGHPUT_MEMBERS: Final = 3
WAIT_S: Final = 120.0
POLL_S: Final = 0.05
QUIET_S: Final = {"consumer": 2.5, "classic": 4.0}
"""No ownership change for this long after a round ends it (classic heartbeats every 3 s)."""
BASELINE_S: Final = 1.0
OWNERSHIP_EVENTS: Final = ("assign", "revoke", "lost")


# ---------------------------------------------------------------------------------- children


def _write(out: IO[str], kind: str, **fields: object) -> None:
    out.write(json.dumps({"t": time.monotonic(), "event": kind, **fields}) + "\n")
    out.flush()


def child_member(args: argparse.Namespace) -> None:
    """A group member at the client's defaults; SIGTERM closes it cleanly (a leave)."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with open(args.events, "a", encoding="utf-8") as out:
        def callback(kind: str) -> Callable[[set[TopicPartition]], None]:
            return lambda tps: _write(out, kind, partitions=sorted(tp.partition for tp in tps))

        consumer = Consumer(args.endpoint, group_id=args.group, group_protocol=args.protocol)
        _write(out, "subscribe")
        consumer.subscribe([args.topic], on_assign=callback("assign"),
                           on_revoke=callback("revoke"), on_lost=callback("lost"))
        while not stop.is_set():
            records = consumer.poll(100)
            if records:
                _write(out, "records", partitions=sorted({r.partition for r in records}))
        _write(out, "leaving")
        consumer.close()
        _write(out, "closed")


def child_producer(args: argparse.Namespace) -> None:
    """`--rate` records/s round robin over the topic's partitions until SIGTERM."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with Producer(args.endpoint) as producer:
        started = time.monotonic()
        index = 0
        while not stop.is_set():
            due = started + index / args.rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            producer.send(args.topic, b"x" * 100, partition=index % args.partitions)
            index += 1


def child_reader(args: argparse.Namespace) -> None:
    """Reads with `poll_batches` until `--records` (in all) were read by everyone writing to
    the same results directory; as a group member when `--group` is set."""
    consumer = Consumer(args.endpoint, group_id=args.group or None,
                        auto_offset_reset="earliest")
    subscribed = time.monotonic()
    if args.group:
        consumer.subscribe([args.topic])
    else:
        consumer.assign([TopicPartition(args.topic, p) for p in range(args.partitions)])
    results = Path(args.events)
    mine = results / f"{os.getpid()}.count"
    count = 0
    first = last = None
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        for _tp, view in consumer.poll_batches(100):
            count += len(view.offsets)
            last = time.monotonic()
            first = first or last
        mine.write_text(str(count))
        total = sum(int(p.read_text() or 0) for p in results.glob("*.count"))
        if total >= args.records:
            break
    print(json.dumps({"records": count, "subscribed": subscribed, "first": first,
                      "last": last}), flush=True)
    consumer.close()


def child_committer(args: argparse.Namespace) -> None:
    """OffsetCommit requests of one partition each, `--commit-window` in flight, for
    `--duration-s`; prints how many were acknowledged (and refused) in that time."""
    connections = Connections(args.endpoint)
    link = CoordinatorLink(connections, args.group, request_timeout_ms=30_000,
                           retry_backoff_ms=100)
    tp = TopicPartition(args.topic, args.partition)
    link.call(OffsetCommitRequestV0(args.group, ((tp, PartitionCommit(0)),)),
              OffsetCommitResponseV0)  # the offsets topic exists, its coordinator has loaded
    assert link.endpoint is not None
    rpc = RpcClient(link.endpoint, max_in_flight=args.commit_window)
    acknowledged = refused = 0
    offset = 0
    started = time.monotonic()
    started_cpu_s = time.process_time()
    ends = started + args.duration_s
    while time.monotonic() < ends:
        while rpc.has_capacity:
            offset += 1
            rpc.send(OffsetCommitRequestV0(args.group, ((tp, PartitionCommit(offset)),)))
        for result in rpc.poll_responses(100):
            response = result.unwrap()
            assert isinstance(response, OffsetCommitResponseV0)
            if response.error_code == ErrorCode.NONE and all(
                    code == ErrorCode.NONE for _, code in response.partitions):
                acknowledged += 1
            else:
                refused += 1
    elapsed = time.monotonic() - started
    cpu_s = time.process_time() - started_cpu_s
    rpc.close()
    connections.close()
    print(json.dumps({"acknowledged": acknowledged, "refused": refused,
                      "elapsed_s": elapsed, "cpu_s": cpu_s}), flush=True)


def child_commit_sync(args: argparse.Namespace) -> None:
    """`Consumer.commit` in a loop, as an application committing after each record would."""
    tp = TopicPartition(args.topic, args.partition)
    with Consumer(args.endpoint, group_id=args.group) as consumer:
        consumer.commit({tp: 0})  # finds the coordinator
        done = 0
        started = time.monotonic()
        while time.monotonic() - started < args.duration_s:
            done += 1
            consumer.commit({tp: done})
        elapsed = time.monotonic() - started
    print(json.dumps({"acknowledged": done, "elapsed_s": elapsed}), flush=True)


CHILDREN: Final = {"member": child_member, "producer": child_producer,
                   "reader": child_reader, "committer": child_committer,
                   "commit-sync": child_commit_sync}


def _spawn(kind: str, **options: object) -> subprocess.Popen[str]:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", kind]
    for name, value in options.items():
        command += [f"--{name.replace('_', '-')}", str(value)]
    return subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)


def _finish(process: subprocess.Popen[str], timeout_s: float = WAIT_S) -> dict[str, Any]:
    output, _ = process.communicate(timeout=timeout_s)
    if process.returncode != 0:
        raise RuntimeError(f"a child failed ({process.returncode})")
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# ---------------------------------------------------------------------------------- rebalances


@dataclass
class Member:
    """One member process and what it wrote down so far."""

    name: str
    events_path: Path
    process: subprocess.Popen[str]
    events: list[dict[str, Any]] = field(default_factory=list)
    _read_bytes: int = 0
    killed_at: float | None = None

    def read(self) -> None:
        chunk = b""
        with contextlib.suppress(FileNotFoundError), self.events_path.open("rb") as events:
            events.seek(self._read_bytes)
            chunk = events.read()
        if not chunk:
            return
        complete = chunk[:chunk.rfind(b"\n") + 1]
        self._read_bytes += len(complete)
        self.events += [json.loads(line) for line in complete.splitlines()]

    def has_left(self) -> bool:
        self.read()
        return not self.alive

    @property
    def alive(self) -> bool:
        return self.killed_at is None and not any(e["event"] == "closed" for e in self.events)

    def owned_at(self, instant: float) -> set[int]:
        owned: set[int] = set()
        if self.killed_at is not None and instant >= self.killed_at:
            return owned
        for event in self.events:
            if event["t"] > instant:
                break
            if event["event"] == "assign":
                owned |= set(event["partitions"])
            elif event["event"] in ("revoke", "lost"):
                owned -= set(event["partitions"])
        return owned

    def first(self, kind: str) -> float:
        return float(next(e["t"] for e in self.events if e["event"] == kind))

    def receipts(self, partitions: set[int], start: float, end: float) -> list[float]:
        """When records of `partitions` arrived, from the last before `start` to the first
        after `end`."""
        times = [e["t"] for e in self.events
                 if e["event"] == "records" and partitions & set(e["partitions"])]
        before = [t for t in times if t < start][-1:]
        after = [t for t in times if t > end][:1]
        return before + [t for t in times if start <= t <= end] + after


class Group:
    """Members of one group reading one topic, and the ownership their events describe."""

    def __init__(self, endpoint: str, protocol: str, topic: str, scratch: Path) -> None:
        self.endpoint = endpoint
        self.protocol = protocol
        self.topic = topic
        self.group_id = f"bench-{protocol}"
        self.scratch = scratch
        self.members: list[Member] = []
        self._started = 0

    def start_member(self) -> Member:
        name = f"{self.protocol}-{self._started}"
        self._started += 1
        path = self.scratch / f"{name}.events"
        process = _spawn("member", endpoint=self.endpoint, group=self.group_id,
                         topic=self.topic, protocol=self.protocol, events=path)
        member = Member(name, path, process)
        self.members.append(member)
        return member

    def live(self) -> list[Member]:
        return [m for m in self.members if m.alive]

    def last_ownership_event(self) -> float:
        return max((e["t"] for m in self.members for e in m.events
                    if e["event"] in OWNERSHIP_EVENTS), default=0.0)

    def settled(self, members: int) -> bool:
        """Every partition owned by exactly one of `members` live members, each owning
        some, and nothing changed for the protocol's quiet time."""
        for member in self.members:
            member.read()
        live = self.live()
        if len(live) != members:
            return False
        now = time.monotonic()
        owned = [m.owned_at(now) for m in live]
        if not all(owned) or sum(len(o) for o in owned) != PARTITIONS:
            return False
        if set().union(*owned) != set(range(PARTITIONS)):
            return False
        return now - self.last_ownership_event() >= QUIET_S[self.protocol]

    def wait_settled(self, members: int) -> float:
        """Waits until settled; returns the last ownership change (when it settled)."""
        deadline = time.monotonic() + WAIT_S
        while not self.settled(members):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.group_id}: {members} members did not settle")
            time.sleep(POLL_S)
        return self.last_ownership_event()

    def close(self) -> None:
        for member in self.members:
            _stop(member.process)


def _max_gap_ms(times: list[float]) -> float:
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0) * 1000


@dataclass(frozen=True, slots=True)
class RoundGaps:
    """A round's longest kept-partition pause, over every member other than the one joining
    or leaving, and split by whether the member itself gained or gave up partitions in the
    round (`touched`: its poll thread had a reconciliation to do) or not."""

    gap_ms: float
    baseline_ms: float
    touched_ms: float
    untouched_ms: float


def _gaps(group: Group, start: float, end: float, changed: Member) -> RoundGaps:
    """The longest pause of a kept partition's records over [start, end], and the same
    over the BASELINE_S before start, over the members other than `changed`."""
    baseline = 0.0
    by_touched = {True: 0.0, False: 0.0}
    for member in group.members:
        if member is changed or not member.alive:
            continue
        before, after = member.owned_at(start), member.owned_at(end)
        kept = before & after
        if not kept:
            continue
        touched = before != after
        by_touched[touched] = max(by_touched[touched],
                                  _max_gap_ms(member.receipts(kept, start, end)))
        baseline = max(baseline, _max_gap_ms(
            member.receipts(kept, start - BASELINE_S, start)[1:-1]))
    return RoundGaps(max(by_touched.values()), baseline, by_touched[True], by_touched[False])


def rebalances(endpoint: str, protocol: str, args: argparse.Namespace, scratch: Path
               ) -> dict[str, Any]:
    """Join, leave and kill rounds of one protocol; times in ms and the gaps."""
    topic = f"rebalance-{protocol}"
    with Admin(endpoint) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS)])
    producer = _spawn("producer", endpoint=endpoint, topic=topic, rate=args.rate,
                      partitions=PARTITIONS)
    group = Group(endpoint, protocol, topic, scratch)
    times: dict[str, list[float]] = {"join": [], "leave": [], "kill": []}
    gaps: list[float] = []
    baselines: list[float] = []
    touched: list[float] = []
    untouched: list[float] = []

    def note(round_gaps: RoundGaps) -> None:
        gaps.append(round_gaps.gap_ms)
        baselines.append(round_gaps.baseline_ms)
        touched.append(round_gaps.touched_ms)
        untouched.append(round_gaps.untouched_ms)
    try:
        for _ in range(MEMBERS):
            group.start_member()
        group.wait_settled(MEMBERS)
        for round_index in range(args.rounds):
            leaving = group.live()[round_index % MEMBERS]
            leaving.process.send_signal(signal.SIGTERM)
            _wait(leaving.has_left, "a member's leave")
            started = leaving.first("leaving")
            settled = group.wait_settled(MEMBERS - 1)
            times["leave"].append((settled - started) * 1000)
            note(_gaps(group, started, settled, leaving))
            joining = group.start_member()
            settled = group.wait_settled(MEMBERS)
            started = joining.first("subscribe")
            times["join"].append((settled - started) * 1000)
            note(_gaps(group, started, settled, joining))
            print(f"  {protocol} round {round_index}: leave {times['leave'][-1]:.0f} ms, "
                  f"join {times['join'][-1]:.0f} ms, kept partitions' gap "
                  f"{max(gaps[-2:]):.0f} ms (members that gained or gave up partitions "
                  f"{max(touched[-2:]):.0f}, others {max(untouched[-2:]):.0f}; baseline "
                  f"{max(baselines[-2:]):.0f})", flush=True)
        for _ in range(args.kill_rounds):
            victim = group.live()[0]
            victim.process.kill()
            victim.killed_at = time.monotonic()
            victim.process.wait()
            settled = group.wait_settled(MEMBERS - 1)
            times["kill"].append((settled - victim.killed_at) * 1000)
            print(f"  {protocol} kill: {times['kill'][-1]:.0f} ms", flush=True)
            group.start_member()
            group.wait_settled(MEMBERS)
    finally:
        group.close()
        _stop(producer)
    figures: dict[str, Any] = {"times_ms": times, "gaps_ms": gaps, "baseline_gaps_ms": baselines,
                               "touched_member_gaps_ms": touched,
                               "untouched_member_gaps_ms": untouched}
    clean = times["join"] + times["leave"]
    figures["rebalance_p50_ms"] = statistics.median(clean)
    figures["rebalance_p99_ms"] = _quantile(clean, 0.99)
    for cause, values in times.items():
        if values:
            figures[f"{cause}_p50_ms"] = statistics.median(values)
            figures[f"{cause}_p99_ms"] = _quantile(values, 0.99)
    figures["unaffected_member_gap_ms_max"] = max(gaps, default=0.0)
    figures["baseline_gap_ms_max"] = max(baselines, default=0.0)
    figures["unaffected_member_gap_ms_median"] = statistics.median(gaps) if gaps else 0.0
    figures["touched_member_gap_ms_max"] = max(touched, default=0.0)
    return figures


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _wait(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(POLL_S)


# ---------------------------------------------------------------------------------- commits


def _cpu_s(processes: list[psutil.Process]) -> dict[int, float]:
    """User + system CPU seconds of each process so far, by pid; a process gone (a worker the
    supervisor replaced) is left out."""
    used: dict[int, float] = {}
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            used[process.pid] = sum(process.cpu_times()[:2])
    return used


def commits(broker: Broker, args: argparse.Namespace) -> dict[str, Any]:
    """Pipelined commits from `--commit-clients` processes into one group (so one
    coordinator), then one process committing synchronously.

    The CPU each acknowledged commit cost is reported beside the rate, since on a shared
    machine the rate says as much about the neighbours as about zlog: the coordinating
    worker's (the broker process that used the most CPU over the whole phase, loading and
    idle polls included) and the committing clients' (their commit loops only)."""
    endpoint = broker.endpoint
    workers = psutil.Process(broker.process.pid).children(recursive=True)
    workers_before = _cpu_s(workers)
    topic = "commits"
    with Admin(endpoint) as admin:
        admin.create_topics([NewTopic(topic, args.commit_clients)])
    group = "bench-commits"
    children = [_spawn("committer", endpoint=endpoint, group=group, topic=topic,
                       partition=index, commit_window=args.commit_window,
                       duration_s=args.duration_s)
                for index in range(args.commit_clients)]
    results = [_finish(child) for child in children]
    acknowledged = sum(r["acknowledged"] for r in results)
    elapsed = max(r["elapsed_s"] for r in results)
    worker_cpu_s = max((used - workers_before[pid] for pid, used in _cpu_s(workers).items()
                        if pid in workers_before), default=float("nan"))
    sync = _finish(_spawn("commit-sync", endpoint=endpoint, group=f"{group}-sync", topic=topic,
                          partition=0, duration_s=args.duration_s))
    return {"commits_per_s": acknowledged / elapsed,
            "commits_refused": sum(r["refused"] for r in results),
            "commit_worker_cpu_us": worker_cpu_s / max(acknowledged, 1) * 1e6,
            "commit_clients_cpu_us": sum(r["cpu_s"] for r in results) / max(acknowledged, 1) * 1e6,
            "commit_sync_per_s": sync["acknowledged"] / sync["elapsed_s"]}


# ---------------------------------------------------------------------------------- throughput


def throughput(endpoint: str, args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    """Three members of one group against one plain consumer, over the same records."""
    topic = "group-throughput"
    with Admin(endpoint) as admin:
        admin.create_topics([NewTopic(topic, THROUGHPUT_PARTITIONS)])
    rows = np.random.default_rng(1).integers(0, 256, size=(10_000, 100), dtype=np.uint8)
    per_partition = args.records // THROUGHPUT_PARTITIONS
    with Producer(endpoint) as producer:
        for partition in range(THROUGHPUT_PARTITIONS):
            for _ in range(per_partition // len(rows)):
                producer.send_many(topic, rows, partition=partition)
        producer.flush(120_000)
    total = THROUGHPUT_PARTITIONS * (per_partition // len(rows)) * len(rows)

    def read(members: int, group: str) -> list[dict[str, Any]]:
        results = scratch / f"counts-{group or 'plain'}"
        results.mkdir()
        children = [_spawn("reader", endpoint=endpoint, topic=topic, group=group,
                           partitions=THROUGHPUT_PARTITIONS, records=total, events=results)
                    for _ in range(members)]
        return [_finish(child) for child in children]

    plain = read(1, "")
    members = read(THROUGHPUT_MEMBERS, "bench-throughput")
    plain_s = plain[0]["last"] - plain[0]["first"]
    first = min(r["first"] for r in members if r["first"] is not None)
    last = max(r["last"] for r in members if r["last"] is not None)
    subscribed = min(r["subscribed"] for r in members)
    read_by_group = sum(r["records"] for r in members)
    return {"records": total,
            "plain_records_per_s": plain[0]["records"] / plain_s,
            "group_records_per_s": read_by_group / (last - first),
            "group_records_per_s_with_join": read_by_group / (last - subscribed),
            "group_vs_plain": (read_by_group / (last - first)) / (plain[0]["records"] / plain_s),
            "group_records_read": read_by_group}


# ---------------------------------------------------------------------------------- a run


def one_run(args: argparse.Namespace) -> dict[str, Any]:
    figures: dict[str, Any] = {"machine_before": machine_load()}
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        broker = Broker(os.cpu_count() or 1,  # --workers: the broker's default, one per CPU
                        extra_args=args.broker_arg)
        try:
            broker.wait_ready()
            if "rebalance" in args.only:
                for protocol in args.protocols:
                    figures[protocol] = rebalances(broker.endpoint, protocol, args, scratch)
            if "commits" in args.only:
                figures.update(commits(broker, args))
            if "throughput" in args.only:
                figures.update(throughput(broker.endpoint, args, scratch))
        finally:
            broker.stop()
    figures["machine_after"] = machine_load()
    return figures


HEADLINE: Final = ("commits_per_s", "commit_sync_per_s", "commit_worker_cpu_us",
                   "commit_clients_cpu_us", "plain_records_per_s",
                   "group_records_per_s", "group_vs_plain")
PER_PROTOCOL: Final = ("rebalance_p50_ms", "rebalance_p99_ms", "join_p99_ms", "leave_p99_ms",
                       "kill_p50_ms", "unaffected_member_gap_ms_max",
                       "unaffected_member_gap_ms_median", "touched_member_gap_ms_max",
                       "baseline_gap_ms_max")


def summarize(runs: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """Medians of the runs at the top level (per protocol for the rebalances), the p99 over
    every round of every run, and each run with the min-max spread."""
    summary: dict[str, Any] = {"spread": {}}
    for key in HEADLINE:
        values = [r[key] for r in runs if key in r]
        if values:
            summary[key] = statistics.median(values)
            summary["spread"][key] = [min(values), max(values)]
    for protocol in PROTOCOLS:
        present = [r[protocol] for r in runs if protocol in r]
        if not present:
            continue
        merged: dict[str, Any] = {}
        for key in PER_PROTOCOL:
            values = [p[key] for p in present if key in p]
            if values:
                merged[key] = statistics.median(values)
                summary["spread"][f"{protocol}_{key}"] = [min(values), max(values)]
        clean = [t for p in present for cause in ("join", "leave") for t in p["times_ms"][cause]]
        kills = [t for p in present for t in p["times_ms"]["kill"]]
        merged["all_rounds_rebalance_p99_ms"] = _quantile(clean, 0.99)
        merged["all_rounds_kill_max_ms"] = max(kills, default=None)
        merged["all_rounds_gap_ms_max"] = max(p["unaffected_member_gap_ms_max"]
                                              for p in present)
        summary[protocol] = merged
    summary["runs"] = runs
    summary["settings"] = {"members": MEMBERS, "partitions": PARTITIONS, "rate": args.rate,
                           "rounds": args.rounds, "kill_rounds": args.kill_rounds,
                           "commit_clients": args.commit_clients,
                           "commit_window": args.commit_window, "duration_s": args.duration_s,
                           "records": args.records, "repeat": args.repeat,
                           "broker": "one `zlog serve`, defaults but for: "
                                     + (" ".join(args.broker_arg) or "nothing"),
                           "clients": "defaults, but auto_offset_reset=earliest for readers"}
    summary["python"] = sys.version.split()[0]
    summary["cpus"] = os.cpu_count()
    return summary


def report(summary: dict[str, Any]) -> None:
    spread = summary["spread"]
    for protocol in PROTOCOLS:
        for key, value in summary.get(protocol, {}).items():
            low_high = spread.get(f"{protocol}_{key}")
            runs = ("" if low_high is None
                    else f"   (runs: {low_high[0]:,.0f} .. {low_high[1]:,.0f})")
            shown = "-" if value is None else f"{value:,.0f}"
            print(f"{protocol + ': ' + key:44} {shown:>12}{runs}")
    for key in HEADLINE:
        if key in summary:
            low, high = spread[key]
            print(f"{key:44} {summary[key]:>12,.2f}   (runs: {low:,.2f} .. {high:,.2f})")


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--repeat", type=int, default=3, help="runs, each on a fresh broker")
    parser.add_argument("--rounds", type=int, default=5,
                        help="leave-then-join rounds per protocol and run")
    parser.add_argument("--kill-rounds", type=int, default=1,
                        help="kill -9 rounds per protocol and run (each waits out a session)")
    parser.add_argument("--rate", type=float, default=2000.0,
                        help="records/s written while the group rebalances")
    parser.add_argument("--commit-clients", type=int, default=2)
    parser.add_argument("--commit-window", type=int, default=256,
                        help="commit requests in flight per committing process")
    parser.add_argument("--duration-s", type=float, default=5.0, help="per commit phase")
    parser.add_argument("--records", type=int, default=3_000_000,
                        help="records read by the throughput phase")
    parser.add_argument("--protocols", nargs="+", default=list(PROTOCOLS), choices=PROTOCOLS)
    parser.add_argument("--broker-arg", action="append", default=[],
                        help="a `zlog serve` flag for tuned figures, e.g. "
                             "--broker-arg=--group-consumer-heartbeat-interval-ms=250")
    parser.add_argument("--only", nargs="+", default=["rebalance", "commits", "throughput"],
                        choices=("rebalance", "commits", "throughput"))
    parser.add_argument("--child", choices=sorted(CHILDREN), default=None,
                        help=argparse.SUPPRESS)
    for name in ("endpoint", "group", "topic", "protocol", "events"):
        parser.add_argument(f"--{name}", default="", help=argparse.SUPPRESS)
    parser.add_argument("--partitions", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--partition", type=int, default=0, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    if args.child is not None:
        CHILDREN[args.child](args)
        return 0
    runs = []
    for run in range(args.repeat):
        figures = one_run(args)
        figures["run"] = run
        runs.append(figures)
        print(f"run {run}: " + ", ".join(
            f"{k}={figures[k]:,.0f}" for k in HEADLINE if k in figures), flush=True)
    summary = summarize(runs, args)
    report(summary)
    write_json(args.json, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
