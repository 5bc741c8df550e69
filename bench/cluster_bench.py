"""Cluster benchmark: three brokers on this machine (127.0.0.1-3), 100-byte records.

One run starts a fresh single broker and a fresh cluster of three (every broker a metadata
voter, one partition worker each, data in temporary directories, rings in /dev/shm) and
measures, each client phase in its own process (bench/broker_bench.py's phases):

- `rf1_acks1_records_per_s`: `Producer.send_many` at the client's defaults with acks=1, one
  partition of one replica on the single broker (the clock runs from the first send to the last
  acknowledgement);
- `rf3_acks_all_records_per_s`: the same with acks=all into a partition of three replicas
  (`min.insync.replicas=2`) on the cluster, and `rf3_vs_rf1_ratio` the two in this run;
- `rf1_acks1_p50_us`/`p99_us` and `acks_all_p50_us`/`p99_us`: end-to-end latency at 5,000
  records/s (`send` per record, linger 0; a consumer reading from the leader, which serves only
  what every in-sync replica holds, so the acks=all figure includes replication);
- `failover_p50_ms`/`p99_ms`: an idempotent producer sends acks=all records one after another
  (a window of 100 unanswered) while the broker leading the partition is killed (kill -9 of its
  supervisor and workers), `--failover-rounds` times; a round's figure runs from the kill to the
  acknowledgement of the first record sent after it (answers already on their way at the kill
  do not count). The killed broker is restarted and the next round waits until it is back in
  the ISR. Settings are the defaults (broker session 1.5 s; the controller fences a broker
  whose connection drops after one heartbeat interval, 250 ms);
- `catch_up_mb_per_s`: a follower is stopped, `--catch-up-mib` MiB are written without it, and
  it is started again; the figure is those bytes over the time from its start to its return to
  the ISR (its restart included);
- `acked_lost`, `duplicates`: over the throughput phases (acknowledged records against the log
  ends) and the failover rounds (every acknowledged value read back at its offset, each once).

`--json PATH` writes the figures. Performance is measured here, never asserted in a test.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Final

import numpy as np

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import broker_bench  # noqa: E402
from bench.broker_bench import VALUE_BYTES, Broker, run_latency, run_phase  # noqa: E402
from zlog.client import Admin, Consumer, NewTopic, Producer, TopicPartition  # noqa: E402
from zlog.client.records import RecordMetadata  # noqa: E402
from zlog.errors import ZlogError  # noqa: E402
from zlog_testbed.free_ports import free_port_pair  # noqa: E402

BROKERS: Final = 3
READY_TIMEOUT_S: Final = 60.0
POLL_S: Final = 0.02
MB: Final = 1_000_000
FAILOVER_WINDOW: Final = 100  # records sent and not yet answered, at most
HEADLINE: Final = ("rf3_acks_all_records_per_s", "rf1_acks1_records_per_s", "rf3_vs_rf1_ratio",
                   "acks_all_p99_us", "rf1_acks1_p99_us", "failover_p50_ms", "failover_p99_ms",
                   "catch_up_mb_per_s", "acked_lost", "duplicates")


# ---------------------------------------------------------------------------------- processes


class Cluster:
    """Three `zlog serve` processes at their defaults but for the addresses and one worker."""

    def __init__(self) -> None:
        hosts = [f"127.0.0.{node}" for node in range(1, BROKERS + 1)]
        port = free_port_pair(hosts)
        self.endpoints = {node: f"tcp://{host}:{port}" for node, host in enumerate(hosts, 1)}
        voters = ",".join(f"{node}@{endpoint}" for node, endpoint in self.endpoints.items())
        self.brokers = {
            node: Broker(1, endpoint=endpoint, extra_args=(
                "--node-id", str(node), "--voters", voters, "--advertised-host",
                endpoint.split("//")[1].rsplit(":", 1)[0]))
            for node, endpoint in self.endpoints.items()}
        self.bootstrap = ",".join(self.endpoints.values())
        self.admin = Admin(self.bootstrap)
        _wait(lambda: len(self._live_brokers()) == BROKERS, "every broker registered")

    def _live_brokers(self) -> list[int]:
        with contextlib.suppress(ZlogError):
            return [b.node_id for b in self.admin.describe_cluster().brokers
                    if b.state == "live"]
        return []

    def partition(self, topic: str) -> tuple[int, tuple[int, ...], bool]:
        """(leader, ISR, served) of partition 0, from fresh metadata."""
        self.admin.close()
        self.admin = Admin(self.bootstrap)
        (description,) = self.admin.describe_topics([topic])
        found = description.partitions[0]
        return found.leader, tuple(found.isr), bool(found.endpoint)

    def controller(self) -> int:
        return self.admin.describe_cluster().controller_id

    def wait_isr(self, topic: str, isr: set[int]) -> None:
        def whole() -> bool:
            with contextlib.suppress(ZlogError):
                _leader, current, served = self.partition(topic)
                return set(current) == isr and served
            return False

        _wait(whole, f"{topic}: ISR {sorted(isr)}")

    def close(self) -> None:
        self.admin.close()
        for broker in self.brokers.values():
            broker.stop()


def _wait(check: Any, what: str, timeout_s: float = READY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(POLL_S)


@contextlib.contextmanager
def running_cluster() -> Iterator[Cluster]:
    cluster = Cluster()
    try:
        yield cluster
    finally:
        cluster.close()


def _create(bootstrap: str, name: str, replication_factor: int) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(name, 1, replication_factor=replication_factor,
                                      configs={"min.insync.replicas":
                                               str(min(2, replication_factor))})])


def _log_end(bootstrap: str, topic: str) -> int:
    with Admin(bootstrap) as admin:
        found = admin.list_offsets({TopicPartition(topic, 0): -1})
    return next(iter(found.values())).offset


# ---------------------------------------------------------------------------------- phases


def throughput(args: argparse.Namespace, endpoint: str, topic: str, acks: str
               ) -> tuple[float, int, int]:
    """records/s of send_many at the client's defaults; (rate, acknowledged, log end)."""
    phase_args = _phase_args(args, acks)
    result = run_phase(phase_args, "produce-many", topic, endpoint)
    return (result["measured_records"] / result["elapsed_s"], int(result["records"]),
            _log_end(endpoint, topic))


def latency(args: argparse.Namespace, endpoint: str, topic: str, *, acks: str,
            broker_pid: int, scratch: Path) -> dict[str, Any]:
    return run_latency(_phase_args(args, acks), topic, endpoint, scratch, broker_pid)


def _phase_args(args: argparse.Namespace, acks: str) -> argparse.Namespace:
    phase_args = broker_bench.parse_arguments([])
    phase_args.profile = "defaults"  # what a user gets: Producer(bootstrap, acks=...)
    phase_args.acks = acks
    phase_args.duration_s = args.duration_s
    phase_args.rate = args.rate
    return phase_args


class _Acks:
    """acks=all records sent one after another, at most FAILOVER_WINDOW unanswered; counts the
    acknowledgements and times those of records sent after a given instant."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = Producer(bootstrap, acks="all", linger_ms=0)
        self.topic = topic
        self.futures: list[Future[RecordMetadata]] = []
        self.acked = 0
        self._watch_from = float("inf")
        self._watched: list[tuple[float, float]] = []  # (sent at, acknowledged at)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.failure: BaseException | None = None

    def _run(self) -> None:
        try:
            index = 0
            while not self._stop.is_set():
                sent_at = time.monotonic()
                future = self.producer.send(self.topic, f"v{index:09d}".encode(), partition=0)
                future.add_done_callback(functools.partial(self._acked, sent_at))
                self.futures.append(future)
                if index >= FAILOVER_WINDOW:
                    with contextlib.suppress(Exception):
                        self.futures[index - FAILOVER_WINDOW].result(120)
                index += 1
        except BaseException as error:
            self.failure = error

    def _acked(self, sent_at: float, future: Future[RecordMetadata]) -> None:
        if future.exception() is None:
            self.acked += 1
            if sent_at > self._watch_from:
                self._watched.append((sent_at, time.monotonic()))

    def watch_from(self, instant: float) -> None:
        """Keep the send and answer times of records sent after `instant` (just before a
        kill; few records, as the answers stop until a new leader takes over)."""
        self._watched = []
        self._watch_from = instant

    def first_ack_sent_after(self, instant: float) -> float | None:
        """When the first record sent after `instant` (the SIGKILL: the killed leader cannot
        have answered it) was acknowledged."""
        later = [acked_at for sent_at, acked_at in list(self._watched) if sent_at > instant]
        return min(later) if later else None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)
        self.producer.flush(120_000)
        self.producer.close()


def failover(cluster: Cluster, rounds: int) -> tuple[list[float], int, int]:
    """Each round's ms from the kill to the next acknowledgement; (times, lost, duplicates)."""
    topic = "failover"
    _create(cluster.bootstrap, topic, BROKERS)
    cluster.wait_isr(topic, set(cluster.brokers))
    sender = _Acks(cluster.bootstrap, topic)
    times_ms: list[float] = []
    sender.start()
    try:
        for round_index in range(rounds):
            target = (round_index + 1) * 2_000
            _wait(lambda target=target: sender.acked >= target, "acknowledgements")
            leader, _isr, _served = cluster.partition(topic)
            role = "leader and controller" if cluster.controller() == leader else "leader"
            sender.watch_from(time.monotonic())
            killed_at = cluster.brokers[leader].kill_all()
            _wait(lambda killed_at=killed_at: sender.first_ack_sent_after(killed_at)
                  is not None,
                  "an acknowledgement after the kill")
            first = sender.first_ack_sent_after(killed_at)
            assert first is not None
            times_ms.append((first - killed_at) * 1000)
            print(f"  failover round {round_index}: broker {leader} ({role}) killed, next ack "
                  f"after {times_ms[-1]:.0f} ms", flush=True)
            cluster.brokers[leader].restart()
            cluster.wait_isr(topic, set(cluster.brokers))
    finally:
        sender.stop()
    if sender.failure is not None:
        raise RuntimeError(f"the failover producer failed: {sender.failure!r}")
    lost, duplicates = _check_values(cluster.bootstrap, topic, sender.futures)
    return times_ms, lost, duplicates


def _check_values(bootstrap: str, topic: str, futures: list[Future[RecordMetadata]]
                  ) -> tuple[int, int]:
    """Every acknowledged value at its offset (lost: those not), each value once."""
    acked = {future.result().offset: index for index, future in enumerate(futures)
             if future.done() and future.exception() is None}
    end = _log_end(bootstrap, topic)
    stored: dict[int, bytes] = {}
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + READY_TIMEOUT_S
        while len(stored) < end and time.monotonic() < deadline:
            for _tp, view in consumer.poll_batches(200):
                for offset, value in zip(view.offsets.tolist(), view.values(), strict=True):
                    stored[offset] = value or b""
    lost = sum(1 for offset, index in acked.items()
               if stored.get(offset) != f"v{index:09d}".encode())
    values = list(stored.values())
    return lost, len(values) - len(set(values))


def catch_up(cluster: Cluster, mib: int) -> float:
    """MB/s a restarted follower copies while `mib` MiB it lacks are waiting for it."""
    topic = "catch-up"
    _create(cluster.bootstrap, topic, BROKERS)
    cluster.wait_isr(topic, set(cluster.brokers))
    leader, _isr, _served = cluster.partition(topic)
    follower = max(node for node in cluster.brokers if node != leader)
    cluster.brokers[follower].kill_all()
    others = set(cluster.brokers) - {follower}
    cluster.wait_isr(topic, others)
    chunk_rows = 10_000
    rows = np.random.default_rng(1).integers(0, 256, size=(chunk_rows, VALUE_BYTES),
                                             dtype=np.uint8)
    total_bytes = mib * 1024 * 1024
    with Producer(cluster.bootstrap, acks="all") as producer:
        sent = 0
        while sent < total_bytes:
            producer.send_many(topic, rows, partition=0)
            sent += rows.nbytes
        producer.flush(300_000)
    started = time.monotonic()
    cluster.brokers[follower].restart()
    cluster.wait_isr(topic, set(cluster.brokers))
    elapsed = time.monotonic() - started
    print(f"  catch-up: {sent / MB:.0f} MB in {elapsed:.2f} s (restart included)", flush=True)
    return sent / MB / elapsed


# ---------------------------------------------------------------------------------- a run


def catch_up_only(args: argparse.Namespace) -> dict[str, Any]:
    """The catch-up phase alone, on a fresh cluster (`--only catch-up`)."""
    with running_cluster() as cluster:
        return {"catch_up_mb_per_s": catch_up(cluster, args.catch_up_mib)}


def one_run(args: argparse.Namespace) -> dict[str, Any]:
    if args.only == "catch-up":
        return catch_up_only(args)
    figures: dict[str, Any] = {}
    lost = duplicates = 0
    with tempfile.TemporaryDirectory() as scratch:
        single = Broker(1)
        try:
            single.wait_ready()
            _create(single.endpoint, "rf1", 1)
            rate, acked, end = throughput(args, single.endpoint, "rf1", "1")
            figures["rf1_acks1_records_per_s"] = rate
            lost += max(0, acked - end)
            duplicates += max(0, end - acked)
            _create(single.endpoint, "rf1-latency", 1)
            measured = latency(args, single.endpoint, "rf1-latency", acks="1",
                               broker_pid=single.process.pid, scratch=Path(scratch))
            figures["rf1_acks1_p50_us"] = measured.get("p50_us")
            figures["rf1_acks1_p99_us"] = measured.get("p99_us")
        finally:
            single.stop()
        with running_cluster() as cluster:
            _create(cluster.bootstrap, "rf3", BROKERS)
            cluster.wait_isr("rf3", set(cluster.brokers))
            rate, acked, end = throughput(args, cluster.bootstrap, "rf3", "all")
            figures["rf3_acks_all_records_per_s"] = rate
            lost += max(0, acked - end)
            duplicates += max(0, end - acked)
            _create(cluster.bootstrap, "rf3-latency", BROKERS)
            cluster.wait_isr("rf3-latency", set(cluster.brokers))
            leader, _isr, _served = cluster.partition("rf3-latency")
            measured = latency(args, cluster.bootstrap, "rf3-latency", acks="all",
                               broker_pid=cluster.brokers[leader].process.pid,
                               scratch=Path(scratch))
            figures["acks_all_p50_us"] = measured.get("p50_us")
            figures["acks_all_p99_us"] = measured.get("p99_us")
            times_ms, failover_lost, failover_duplicates = failover(cluster,
                                                                   args.failover_rounds)
            lost += failover_lost
            duplicates += failover_duplicates
            figures["failover_ms"] = times_ms
            figures["failover_p50_ms"] = statistics.median(times_ms)
            figures["failover_p99_ms"] = _quantile(times_ms, 0.99)
            figures["catch_up_mb_per_s"] = catch_up(cluster, args.catch_up_mib)
    figures["rf3_vs_rf1_ratio"] = (figures["rf3_acks_all_records_per_s"]
                                   / figures["rf1_acks1_records_per_s"])
    figures["acked_lost"] = lost
    figures["duplicates"] = duplicates
    return figures


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--duration-s", type=float, default=5.0, help="per throughput phase")
    parser.add_argument("--rate", type=float, default=5000.0, help="latency phase records/s")
    parser.add_argument("--failover-rounds", type=int, default=20)
    parser.add_argument("--catch-up-mib", type=int, default=1024)
    parser.add_argument("--only", choices=("all", "catch-up"), default="all",
                        help="run every phase (the default) or the catch-up phase alone")
    args = parser.parse_args(argv)
    figures = one_run(args)
    for key in HEADLINE:
        if key not in figures:
            continue
        value = figures.get(key)
        print(f"{key:32s} {value:>14,.2f}" if isinstance(value, float)
              else f"{key:32s} {value!s:>14}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
