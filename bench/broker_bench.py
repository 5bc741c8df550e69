"""Broker benchmark: one `zlog serve`, one partition, 100-byte values, acks=1.

One run starts a real broker process (free loopback port, temporary data dir, rings in
/dev/shm) and measures, each phase in its own client process. The throughput phases run twice:
first with the client's defaults (`Producer(endpoint, acks=1)`, `Consumer(endpoint)`: what a
user gets, but for acks, pinned to 1 to match the other logs' rows; the default acks=all costs
nothing more on one replica), then tuned by the flags (`--batch-size`, `--fetch-bytes`,
`--linger-ms`, `--compression`; keys prefixed `tuned_`), and the run reports defaults / tuned:

- produce records/s and MB/s with `Producer.send_many` (the fast path: 2-D uint8 arrays of
  `--chunk` rows), and with the per-record `Producer.send`; the clock runs from the first
  send to the last acknowledgement (`flush`);
- consume records/s from the beginning of what the fast produce phase wrote, with
  `Consumer.poll_batches` (batch level: numpy arrays per batch, each batch's values gathered
  into one array so the bytes are really read) and with `Consumer.poll` (one ConsumerRecord
  per record);
- end-to-end latency at a steady rate (default 5,000 records/s): the producer process sends
  record i at its scheduled time t0 + i / rate (a late sender catches up at once), the value
  carries that scheduled time (`time.perf_counter_ns`, CLOCK_MONOTONIC, the same clock in
  every process of the host), and the consumer process charges each record from its
  *scheduled* time to its receipt, so a stall counts against every record it delays (no
  coordinated omission). Percentiles come from an HDR histogram (`hdrhistogram`, 3
  significant digits) when that package imports, else from numpy over all samples; the JSON
  says which. Every latency phase runs at the client's defaults (`send` with linger_ms 0, a
  subscription for the consumer). The latency phase runs twice: with a network consumer
  (`latency_*`) and with `Consumer(local=True)`, which reads the leader's shared-memory ring
  directly
  (`zlog_local_latency_*`);
- the local producer phases (`zlog_local_produce_*`): `Producer(local=True)`, whose requests
  reach the worker through a shared-memory queue (docs/local-path.md), in the latency phase
  with `Consumer(local=True)` (the whole trip on this host without a socket) and in the
  send_many phase (records/s). `--local-produce-only` runs only these.

`--security` runs send_many and the latency phase with security off, then on, instead
(bench/security_ab.py).

Usage: python bench/broker_bench.py [--json PATH] [--repeat N] [--duration-s S] ...
`--phase` runs one client phase in this process (how the parent starts its children).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
import psutil

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.suite.common import precise_sleeps  # noqa: E402
from zlog.cli_security import install_client_keys  # noqa: E402
from zlog.client import Admin, Consumer, NewTopic, Producer, TopicPartition  # noqa: E402
from zlog.errors import ZlogError  # noqa: E402
from zlog.record.header import BATCH_HEADER_BYTES  # noqa: E402
from zlog.transport.messages.admin import ApiVersionsRequestV0  # noqa: E402
from zlog.transport.rpc import RpcClient  # noqa: E402
from zlog_testbed.free_ports import free_port  # noqa: E402

VALUE_BYTES: Final = 100
STAMP_BYTES: Final = 8
START_TIMEOUT_S: Final = 30.0
CALL_TIMEOUT_MS: Final = 10_000
MB: Final = 1_000_000
DD_RUNS: Final = 3
LARGE_BATCH_BYTES: Final = 1024 * 1024
RECORD_FRAMING_BYTES_MAX: Final = 16  # length, attributes, deltas, key and value lengths, headers


# ---------------------------------------------------------------------------------- broker


class Broker:
    """`python -m zlog serve` on a free port with a private data dir and ring dir."""

    def __init__(self, workers: int, *, endpoint: str | None = None,
                 extra_args: Sequence[str] = ()) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="zb-", dir="/tmp"))
        shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
        self.ring_dir = Path(tempfile.mkdtemp(prefix="zb-ring-", dir=shm))
        self.endpoint = endpoint or f"tcp://127.0.0.1:{free_port()}"
        self.log_path = self.directory / "broker.log"
        self._command = [sys.executable, "-m", "zlog", "serve", "--data-dir",
                         str(self.directory / "data"), "--listen", self.endpoint,
                         "--workers", str(workers), "--ring-dir", str(self.ring_dir),
                         "--kafka-listen", "127.0.0.1:0", *extra_args]
        self.process = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        with self.log_path.open("ab") as log_file:
            return subprocess.Popen(self._command, cwd=REPO_ROOT, stdout=log_file,
                                    stderr=subprocess.STDOUT)

    def kill_all(self) -> float:
        """kill -9 of the supervisor and its workers (frozen first: no replacement starts);
        returns the monotonic time the last SIGKILL was sent."""
        supervisor = psutil.Process(self.process.pid)
        supervisor.suspend()
        workers = supervisor.children(recursive=True)
        for process in [*workers, supervisor]:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        killed_at = time.monotonic()
        self.process.wait()
        psutil.wait_procs(workers, timeout=START_TIMEOUT_S)
        return killed_at

    def restart(self) -> None:
        """Start again on the same data dir (after `kill_all` or a stop)."""
        assert self.process.poll() is not None
        self.process = self._spawn()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the broker exited:\n{self.log_path.read_text()}")
            with RpcClient(self.endpoint) as rpc:
                try:
                    rpc.call(ApiVersionsRequestV0(), 200)
                    return
                except ZlogError:
                    time.sleep(0.1)
        raise RuntimeError(f"the broker did not answer within {START_TIMEOUT_S} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(START_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)
        shutil.rmtree(self.ring_dir, ignore_errors=True)


@contextlib.contextmanager
def running_broker(workers: int, extra_args: Sequence[str] = ()) -> Iterator[Broker]:
    broker = Broker(workers, extra_args=extra_args)
    try:
        broker.wait_ready()
        yield broker
    finally:
        broker.stop()


def create_topic(endpoint: str, name: str) -> None:
    with Admin(endpoint, request_timeout_ms=CALL_TIMEOUT_MS) as admin:
        admin.create_topics([NewTopic(name, 1)])


# ---------------------------------------------------------------------------------- phases


def _producer(args: argparse.Namespace, *, linger_ms: int) -> Producer:
    """The client's defaults (`--profile defaults`), or the tuned settings of the flags."""
    local = bool(args.local_producer)
    if args.profile == "defaults":
        return Producer(args.endpoint, acks=args.acks, local=local)
    return Producer(args.endpoint, acks=args.acks, linger_ms=linger_ms,
                    batch_size=args.batch_size, bulk_batch_size=args.batch_size,
                    compression=args.compression, local=local)


def phase_produce_many(args: argparse.Namespace) -> dict[str, Any]:
    """send_many of `--chunk` rows at a time for `--duration-s`, then flush."""
    rng = np.random.default_rng(1)
    chunks = [rng.integers(0, 256, size=(args.chunk, VALUE_BYTES), dtype=np.uint8)
              for _ in range(4)]
    with _producer(args, linger_ms=args.linger_ms) as producer:
        producer.send_many(args.topic, chunks[0][:10]).result(30)  # metadata, producer id
        sent = 0
        started = time.perf_counter()
        stop_at = started + args.duration_s
        futures = []
        index = 0
        while time.perf_counter() < stop_at:
            futures.append(producer.send_many(args.topic, chunks[index % len(chunks)]))
            sent += args.chunk
            index += 1
        producer.flush()
        elapsed = time.perf_counter() - started
        for future in futures:
            future.result(0)  # every batch acknowledged without error
    return {"records": sent + 10, "measured_records": sent, "elapsed_s": elapsed}


def phase_produce_large(args: argparse.Namespace) -> dict[str, Any]:
    """1 MiB batches: send_many of 1 MiB of `--large-value-bytes` rows at a time, uncompressed,
    batch_size 1 MiB, until `--large-mib` MiB of values are sent; the figure is acknowledged
    MB/s of values. With `--warm-dir`, pages are recycled first (`recycle_pages`)."""
    # As many rows as fill one batch of at most 1 MiB with their record framing (Kafka's
    # max.message.bytes is 1 MiB + 12), so each send_many call is one batch.
    rows = (LARGE_BATCH_BYTES - BATCH_HEADER_BYTES) // (args.large_value_bytes
                                                              + RECORD_FRAMING_BYTES_MAX)
    rng = np.random.default_rng(2)
    chunk = rng.integers(0, 256, size=(rows, args.large_value_bytes), dtype=np.uint8)
    calls = max(1, args.large_mib * 1024 * 1024 // (rows * args.large_value_bytes))
    with Producer(args.endpoint, acks=1, linger_ms=args.linger_ms, compression=None,
                  batch_size=LARGE_BATCH_BYTES, bulk_batch_size=LARGE_BATCH_BYTES) as producer:
        producer.send_many(args.topic, chunk[:1]).result(30)  # metadata, producer id
        if args.warm_dir:
            recycle_pages(Path(args.warm_dir), 2 * args.large_mib)
        started = time.perf_counter()
        futures = [producer.send_many(args.topic, chunk) for _ in range(calls)]
        producer.flush()
        elapsed = time.perf_counter() - started
        batches = sum(len(future.result(0)) for future in futures)
    assert batches == len(futures), (batches, len(futures))  # one batch per call
    sent = calls * rows
    return {"records": sent + 1, "measured_records": sent, "elapsed_s": elapsed,
            "bytes": sent * args.large_value_bytes, "batches": batches}


def recycle_pages(directory: Path, mib: int) -> None:
    """Write `mib` MiB to a file and delete it at once, so that the next writes reuse pages.

    On this virtual machine the host backs guest memory lazily and takes back pages the guest
    has left free for a few seconds, so the first write to such a page stalls the guest on a
    host page fault: writes into fresh pages of the page cache run at ~0.45 GB/s, into pages
    freed a moment ago at ~4.5 GB/s. A bare-metal host has no such cost; this puts a run that
    writes less than `mib` MiB on the second footing.
    """
    target = directory / "recycle.tmp"
    block = bytes(1024 * 1024)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _ in range(mib):
            os.write(fd, block)
    finally:
        os.close(fd)
        target.unlink()


def dd_mb_per_s(target: Path, mib: int) -> float:
    """`dd if=/dev/zero bs=1M count=mib` into a new file (the page cache, no sync)."""
    started = time.perf_counter()
    subprocess.run(["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={mib}"],
                   check=True, capture_output=True)
    return mib * 1024 * 1024 / (time.perf_counter() - started) / MB


def run_large_batch_figures(args: argparse.Namespace, broker: Broker, run: int) -> dict[str, Any]:
    """zlog's 1 MiB batches against dd writing as many bytes, each on recycled pages.

    Each of the three dd runs, and the zlog run (in its own process, just before its clock
    starts), first recycles twice the bytes it will write (`recycle_pages`). Without that the
    figures depend on what the guest did with its memory minutes before: a write into pages
    the host took back runs at ~0.45 GB/s, dd included, and into pages reclaimed from the
    page cache or freed a moment ago at ~4.5 GB/s.
    """
    directory = broker.directory
    topic = f"large-{run}"
    create_topic(broker.endpoint, topic)
    dd_rates: list[float] = []
    for _ in range(DD_RUNS):
        recycle_pages(directory, 2 * args.large_mib)
        target = directory / "dd.tmp"
        dd_rates.append(dd_mb_per_s(target, args.large_mib))
        target.unlink()
    large = run_phase(args, "produce-large", topic, broker.endpoint, warm_dir=directory)
    zlog_rate = large["bytes"] / large["elapsed_s"] / MB
    dd_rate = statistics.median(dd_rates)
    return {
        "produce_1mib_batches_mb_per_s": zlog_rate,
        "dd_page_cache_mb_per_s": dd_rate,
        "dd_runs_mb_per_s": dd_rates,
        "produce_1mib_batches_vs_dd": zlog_rate / dd_rate,
    }


def phase_produce_send(args: argparse.Namespace) -> dict[str, Any]:
    """One `send` per record for `--duration-s`, then flush."""
    value = bytes(range(VALUE_BYTES))
    with _producer(args, linger_ms=args.linger_ms) as producer:
        producer.send(args.topic, value).result(30)
        sent = 0
        started = time.perf_counter()
        stop_at = started + args.duration_s
        send = producer.send
        topic = args.topic
        while True:
            for _ in range(1000):
                send(topic, value)
            sent += 1000
            if time.perf_counter() >= stop_at:
                break
        producer.flush()
        elapsed = time.perf_counter() - started
    return {"records": sent + 1, "measured_records": sent, "elapsed_s": elapsed}


def _consumer(args: argparse.Namespace, reset: str) -> Consumer:
    local = bool(args.local_consumer)
    if args.profile == "defaults":
        return Consumer(args.endpoint, auto_offset_reset=reset, local=local,
                        local_zero_copy=local)
    return Consumer(args.endpoint, auto_offset_reset=reset, fetch_max_wait_ms=args.max_wait_ms,
                    max_partition_fetch_bytes=args.fetch_bytes,
                    bulk_partition_fetch_bytes=args.fetch_bytes, local=local,
                    local_zero_copy=local, local_spin_us=args.local_spin_us)


def phase_consume_batches(args: argparse.Namespace) -> dict[str, Any]:
    """poll_batches from the beginning until `--records` records arrived."""
    tp = TopicPartition(args.topic, 0)
    checksum = 0
    with _consumer(args, "earliest") as consumer:
        consumer.assign([tp])
        consumer.position(tp)  # ListOffsets outside the clock
        received = 0
        started = time.perf_counter()
        while received < args.records:
            for _tp, view in consumer.poll_batches(1000):
                values, _bounds = view.values_concatenated()
                checksum ^= int(values[-1]) if values.size else 0
                received += len(view)
        elapsed = time.perf_counter() - started
    return {"records": received, "elapsed_s": elapsed, "checksum": checksum}


def phase_consume_poll(args: argparse.Namespace) -> dict[str, Any]:
    """poll() (one ConsumerRecord per record) from the beginning until `--records` arrived."""
    tp = TopicPartition(args.topic, 0)
    value_bytes = 0
    with _consumer(args, "earliest") as consumer:
        consumer.assign([tp])
        consumer.position(tp)
        received = 0
        started = time.perf_counter()
        while received < args.records:
            records = consumer.poll(1000, max_records=args.max_poll_records)
            for record in records:
                value_bytes += len(record.value or b"")
            received += len(records)
        elapsed = time.perf_counter() - started
    return {"records": received, "elapsed_s": elapsed, "value_bytes": value_bytes}


def phase_latency_produce(args: argparse.Namespace) -> dict[str, Any]:
    """send() at `--rate` records/s, each value stamped with its scheduled send time."""
    interval_ns = round(1e9 / args.rate)
    total = round(args.rate * (args.duration_s + args.warmup_s))
    padding = bytes(VALUE_BYTES - STAMP_BYTES)
    late_ns_max = 0
    with _producer(args, linger_ms=0) as producer:
        producer.send(args.topic, bytes(VALUE_BYTES)).result(30)  # warm the path
        Path(args.ready_file).write_text("producer")
        t0 = time.perf_counter_ns() + 1_000_000
        cpu_started = time.process_time()
        for index in range(total):
            scheduled = t0 + index * interval_ns
            now = time.perf_counter_ns()
            if now < scheduled:  # sleep, never spin: a spinning thread holds the GIL
                time.sleep((scheduled - now) / 1e9)
                now = time.perf_counter_ns()
            late_ns_max = max(late_ns_max, now - scheduled)
            producer.send(args.topic, scheduled.to_bytes(STAMP_BYTES, "little") + padding)
        producer.flush()
        cpu_s = time.process_time() - cpu_started
    return {"records": total, "sender_late_us_max": late_ns_max / 1000,
            "cpu_us_per_record": cpu_s / total * 1e6}


def phase_latency_consume(args: argparse.Namespace) -> dict[str, Any]:
    """Receive the latency phase's records; latency = receipt - scheduled send time."""
    tp = TopicPartition(args.topic, 0)
    expected = round(args.rate * (args.duration_s + args.warmup_s)) + 1  # + the path warm-up
    warmup = round(args.rate * args.warmup_s)
    samples: list[np.ndarray] = []
    received = 0
    with _consumer(args, "latest") as consumer:
        consumer.assign([tp])
        consumer.position(tp)
        consumer.poll_batches(0)  # the first fetch is parked at the broker
        Path(args.ready_file).write_text("consumer")
        deadline = time.monotonic() + args.duration_s + args.warmup_s + 30
        cpu_started = time.process_time()
        while received < expected and time.monotonic() < deadline:
            for _tp, view in consumer.poll_batches(100):
                now = time.perf_counter_ns()
                values, _bounds = view.values_concatenated()
                rows = values.reshape(-1, VALUE_BYTES)[:, :STAMP_BYTES]
                stamps = np.ascontiguousarray(rows).view("<i8").ravel()
                if not consumer.views_intact():  # zero copy: overwritten while we read it
                    raise RuntimeError("a zero-copy view was overwritten while it was read")
                samples.append(now - stamps[stamps != 0])  # 0: the record that warms the path
                received += len(view)
        cpu_s = time.process_time() - cpu_started
    latencies_ns = np.concatenate(samples)[warmup:] if samples else np.zeros(0, np.int64)
    return {"records": received, "expected": expected,
            "cpu_us_per_record": cpu_s / max(received, 1) * 1e6, **_percentiles(latencies_ns)}


def _percentiles(latencies_ns: np.ndarray) -> dict[str, Any]:
    latencies_us = latencies_ns / 1000
    result: dict[str, Any] = {"samples": int(latencies_us.size)}
    if latencies_us.size == 0:
        return result
    try:
        from hdrh.histogram import HdrHistogram
    except ImportError:
        points = np.percentile(latencies_us, [50, 99, 99.9])
        result.update(method="numpy percentiles over all samples",
                      p50_us=float(points[0]), p99_us=float(points[1]),
                      p999_us=float(points[2]))
    else:
        histogram = HdrHistogram(1, 60_000_000, 3)
        for value in np.maximum(latencies_us, 1).astype(np.int64).tolist():
            histogram.record_value(value)
        result.update(method="hdrhistogram (3 significant digits)",
                      p50_us=float(histogram.get_value_at_percentile(50)),
                      p99_us=float(histogram.get_value_at_percentile(99)),
                      p999_us=float(histogram.get_value_at_percentile(99.9)))
    result.update(max_us=float(latencies_us.max()), mean_us=float(latencies_us.mean()))
    return result


PHASES: Final = {
    "produce-many": phase_produce_many,
    "produce-send": phase_produce_send,
    "produce-large": phase_produce_large,
    "consume-batches": phase_consume_batches,
    "consume-poll": phase_consume_poll,
    "latency-produce": phase_latency_produce,
    "latency-consume": phase_latency_consume,
}


# ---------------------------------------------------------------------------------- driver


def _phase_command(args: argparse.Namespace, phase: str, topic: str, endpoint: str,
                   **extra: object) -> list[str]:
    command = [sys.executable, str(Path(__file__).resolve()), "--phase", phase,
               "--endpoint", endpoint, "--topic", topic]
    for name in ("profile", "acks", "duration_s", "warmup_s", "rate", "chunk", "batch_size",
                 "linger_ms",
                 "max_wait_ms", "fetch_bytes", "max_poll_records", "local_spin_us",
                 "large_value_bytes", "large_mib"):
        command += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    if args.compression:
        command += ["--compression", args.compression]
    for name, value in extra.items():
        command += [f"--{name.replace('_', '-')}", str(value)]
    return command


def run_phase(args: argparse.Namespace, phase: str, topic: str, endpoint: str,
              **extra: object) -> dict[str, Any]:
    done = subprocess.run(_phase_command(args, phase, topic, endpoint, **extra),
                          check=False, capture_output=True, text=True, cwd=REPO_ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"phase {phase} failed ({done.returncode}):\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _wait_for_file(path: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{path.name}: the consumer did not get ready")
        time.sleep(0.01)


def run_latency(args: argparse.Namespace, topic: str, endpoint: str, scratch: Path,
                broker_pid: int, *, local: bool = False, local_producer: bool = False,
                ) -> dict[str, Any]:
    ready = scratch / f"{topic}.consumer-ready"
    consumer = subprocess.Popen(
        _phase_command(args, "latency-consume", topic, endpoint, ready_file=ready,
                       local_consumer=int(local)),
        stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        _wait_for_file(ready, consumer)
        workers_cpu_started = _cpu_s(broker_pid)
        produced = run_phase(args, "latency-produce", topic, endpoint,
                             ready_file=scratch / f"{topic}.producer-ready",
                             local_producer=int(local_producer))
        output, _ = consumer.communicate(timeout=args.duration_s + args.warmup_s + 60)
        broker_cpu_s = _cpu_s(broker_pid) - workers_cpu_started
    finally:
        if consumer.poll() is None:
            consumer.kill()
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    result["sender_late_us_max"] = produced["sender_late_us_max"]
    result["producer_cpu_us_per_record"] = produced["cpu_us_per_record"]
    result["broker_cpu_us_per_record"] = broker_cpu_s / produced["records"] * 1e6
    return result


def _cpu_s(pid: int) -> float:
    """CPU seconds used so far by a process and its children (the broker and its workers)."""
    root = psutil.Process(pid)
    total = 0.0
    for process in (root, *root.children(recursive=True)):
        with contextlib.suppress(psutil.NoSuchProcess):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def machine_load() -> dict[str, float]:
    load: dict[str, float] = {"loadavg_1m": os.getloadavg()[0]}
    with contextlib.suppress(OSError, ValueError, IndexError):
        some = Path("/proc/pressure/cpu").read_text().splitlines()[0].split()
        load["cpu_pressure_some_avg10"] = float(some[1].split("=")[1])
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("Dirty:"):
                load["dirty_kib"] = float(line.split()[1])
    return load


def one_run(args: argparse.Namespace, run: int) -> dict[str, Any]:
    """Every phase once against a fresh broker."""
    figures: dict[str, Any] = {"machine_before": machine_load()}
    metrics = (["--metrics-listen", f"127.0.0.1:{free_port()}"] if args.metrics == "on"
               else ["--metrics-listen", ""])
    with (running_broker(args.workers, metrics) as broker,
          tempfile.TemporaryDirectory() as scratch):
        endpoint = broker.endpoint
        for topic in ("latency", "latency-local"):
            create_topic(endpoint, f"{topic}-{run}")
        if args.large_only:
            figures.update(run_large_batch_figures(args, broker, run))
            return figures
        args.profile = "defaults"  # every latency phase: what a user gets
        if args.local_produce_only:
            figures.update(run_local_produce_figures(args, broker, Path(scratch), run))
            return figures
        if args.latency_only:
            figures.update(run_latency_figures(args, f"latency-{run}", broker, Path(scratch)))
            figures.update(run_latency_figures(args, f"latency-local-{run}", broker,
                                               Path(scratch), local=True))
            return figures
        for profile in PROFILES:  # the client's defaults first, then the tuned settings
            args.profile = profile
            prefix = "" if profile == "defaults" else f"{profile}_"
            create_topic(endpoint, f"many-{profile}-{run}")
            create_topic(endpoint, f"send-{profile}-{run}")
            figures.update({prefix + key: value for key, value in run_throughput_figures(
                args, endpoint, f"many-{profile}-{run}", f"send-{profile}-{run}").items()})
        args.profile = "defaults"
        for kind in ("produce", "consume"):
            figures[f"{kind}_defaults_vs_tuned"] = (
                figures[f"{kind}_records_per_s"] / figures[f"tuned_{kind}_records_per_s"])
        figures["machine_throughput"] = machine_load()
        figures.update(run_latency_figures(args, f"latency-{run}", broker, Path(scratch)))
        figures.update(run_latency_figures(args, f"latency-local-{run}", broker, Path(scratch),
                                           local=True))
        figures.update(run_local_produce_figures(args, broker, Path(scratch), run))
        figures["machine_latency"] = machine_load()
        # Last: the 1 MiB phase writes and frees gigabytes of page cache (recycle_pages), and
        # on this virtual machine the host then takes those pages back; the next allocations
        # fault on the host for tens of ms, which a latency phase after it would measure.
        figures.update(run_large_batch_figures(args, broker, run))
    return figures


def run_throughput_figures(
    args: argparse.Namespace, endpoint: str, many_topic: str, send_topic: str
) -> dict[str, float]:
    """send_many, send, poll_batches and poll under `args.profile`'s client settings."""
    figures: dict[str, float] = {}
    many = run_phase(args, "produce-many", many_topic, endpoint)
    figures["produce_records_per_s"] = many["measured_records"] / many["elapsed_s"]
    figures["produce_mb_per_s"] = figures["produce_records_per_s"] * VALUE_BYTES / MB
    send = run_phase(args, "produce-send", send_topic, endpoint)
    figures["produce_send_records_per_s"] = send["measured_records"] / send["elapsed_s"]
    batches = run_phase(args, "consume-batches", many_topic, endpoint, records=many["records"])
    figures["consume_records_per_s"] = batches["records"] / batches["elapsed_s"]
    figures["consume_mb_per_s"] = figures["consume_records_per_s"] * VALUE_BYTES / MB
    poll_records = min(many["records"], args.poll_records)
    polled = run_phase(args, "consume-poll", many_topic, endpoint, records=poll_records)
    figures["consume_poll_records_per_s"] = polled["records"] / polled["elapsed_s"]
    return figures


def _latency_points(prefix: str, latency: dict[str, Any]) -> dict[str, Any]:
    """The percentiles, the maximum and the records lost of a latency phase, named `prefix_*`."""
    return {
        f"{prefix}_p50_us": latency.get("p50_us"),
        f"{prefix}_p99_us": latency.get("p99_us"),
        f"{prefix}_p999_us": latency.get("p999_us"),
        f"{prefix}_max_us": latency.get("max_us"),
        f"{prefix}_records_lost": latency["expected"] - latency["records"],
    }


def run_latency_figures(args: argparse.Namespace, topic: str, broker: Broker, scratch: Path,
                        *, local: bool = False) -> dict[str, Any]:
    latency = run_latency(args, topic, broker.endpoint, scratch, broker.process.pid, local=local)
    if local:  # the same phase with Consumer(local=True): reads the ring, no fetch
        return {
            **_latency_points("zlog_local_latency", latency),
            "zlog_local_latency_cpu_us_per_record_consumer": latency["cpu_us_per_record"],
        }
    return {
        "latency_p50_us": latency.get("p50_us"),
        "latency_p99_us": latency.get("p99_us"),
        "latency_p999_us": latency.get("p999_us"),
        "latency_max_us": latency.get("max_us"),
        "latency_mean_us": latency.get("mean_us"),
        "latency_samples": latency["samples"],
        "latency_records_lost": latency["expected"] - latency["records"],
        "latency_method": latency.get("method"),
        "latency_sender_late_us_max": latency["sender_late_us_max"],
        "latency_cpu_us_per_record_producer": latency["producer_cpu_us_per_record"],
        "latency_cpu_us_per_record_consumer": latency["cpu_us_per_record"],
        "latency_cpu_us_per_record_broker": latency["broker_cpu_us_per_record"],
    }


def run_local_produce_figures(args: argparse.Namespace, broker: Broker, scratch: Path,
                              run: int) -> dict[str, Any]:
    """`Producer(local=True)`: the latency phase with a local consumer, and send_many."""
    latency_topic, many_topic = f"local-produce-latency-{run}", f"local-produce-many-{run}"
    for topic in (latency_topic, many_topic):
        create_topic(broker.endpoint, topic)
    latency = run_latency(args, latency_topic, broker.endpoint, scratch, broker.process.pid,
                          local=True, local_producer=True)
    many = run_phase(args, "produce-many", many_topic, broker.endpoint, local_producer=1)
    return {
        **_latency_points("zlog_local_produce_latency", latency),
        "zlog_local_produce_cpu_us_per_record_producer": latency["producer_cpu_us_per_record"],
        "zlog_local_produce_cpu_us_per_record_broker": latency["broker_cpu_us_per_record"],
        "zlog_local_produce_cpu_us_per_record_consumer": latency["cpu_us_per_record"],
        "zlog_local_produce_records_per_s": many["measured_records"] / many["elapsed_s"],
    }


PROFILES: Final = ("defaults", "tuned")
HEADLINE: Final = ("produce_records_per_s", "consume_records_per_s", "tuned_produce_records_per_s",
                   "tuned_consume_records_per_s", "latency_p50_us",
                   "latency_p99_us", "latency_p999_us")
LOWER_IS_BETTER: Final = ("latency_p50_us", "latency_p99_us", "latency_p999_us",
                          "latency_max_us")


def summarize(runs: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """Medians of the runs at the top level; every run and the min-max spread kept."""
    numeric = [k for k, v in runs[0].items() if isinstance(v, int | float) and k != "run"]
    summary: dict[str, Any] = {}
    for key in numeric:
        values = [r[key] for r in runs if isinstance(r.get(key), int | float)]
        summary[key] = statistics.median(values)
        summary.setdefault("spread", {})[key] = [min(values), max(values)]
    summary["latency_method"] = runs[0].get("latency_method")
    summary["runs"] = runs
    summary["settings"] = {
        "value_bytes": VALUE_BYTES, "acks": 1, "partitions": 1, "workers": args.workers,
        "duration_s": args.duration_s, "rate": args.rate, "chunk": args.chunk,
        "batch_size": args.batch_size, "linger_ms": args.linger_ms,
        "compression": args.compression, "fetch_max_wait_ms": args.max_wait_ms,
        "max_partition_fetch_bytes": args.fetch_bytes, "repeat": args.repeat,
    }
    summary["python"] = sys.version.split()[0]
    summary["cpus"] = os.cpu_count()
    return summary


def report(summary: dict[str, Any]) -> None:
    spread = summary["spread"]
    lines = [
        ("defaults: send_many records/s", "produce_records_per_s", "{:,.0f}"),
        ("defaults: send_many MB/s", "produce_mb_per_s", "{:,.1f}"),
        ("defaults: send() records/s", "produce_send_records_per_s", "{:,.0f}"),
        ("defaults: poll_batches records/s", "consume_records_per_s", "{:,.0f}"),
        ("defaults: poll_batches MB/s", "consume_mb_per_s", "{:,.1f}"),
        ("defaults: poll() records/s", "consume_poll_records_per_s", "{:,.0f}"),
        ("tuned: send_many records/s", "tuned_produce_records_per_s", "{:,.0f}"),
        ("tuned: send() records/s", "tuned_produce_send_records_per_s", "{:,.0f}"),
        ("tuned: poll_batches records/s", "tuned_consume_records_per_s", "{:,.0f}"),
        ("tuned: poll() records/s", "tuned_consume_poll_records_per_s", "{:,.0f}"),
        ("send_many defaults / tuned", "produce_defaults_vs_tuned", "{:.2f}"),
        ("poll_batches defaults / tuned", "consume_defaults_vs_tuned", "{:.2f}"),
        ("produce 1 MiB batches MB/s", "produce_1mib_batches_mb_per_s", "{:,.0f}"),
        ("dd into the page cache MB/s", "dd_page_cache_mb_per_s", "{:,.0f}"),
        ("1 MiB batches / dd", "produce_1mib_batches_vs_dd", "{:.2f}"),
        ("latency p50 us", "latency_p50_us", "{:,.0f}"),
        ("latency p99 us", "latency_p99_us", "{:,.0f}"),
        ("latency p99.9 us", "latency_p999_us", "{:,.0f}"),
        ("latency max us", "latency_max_us", "{:,.0f}"),
        ("zlog_local latency p50 us", "zlog_local_latency_p50_us", "{:,.0f}"),
        ("zlog_local latency p99 us", "zlog_local_latency_p99_us", "{:,.0f}"),
        ("zlog_local latency p99.9 us", "zlog_local_latency_p999_us", "{:,.0f}"),
        ("zlog_local latency max us", "zlog_local_latency_max_us", "{:,.0f}"),
        ("local produce latency p50 us", "zlog_local_produce_latency_p50_us", "{:,.0f}"),
        ("local produce latency p99 us", "zlog_local_produce_latency_p99_us", "{:,.0f}"),
        ("local produce latency p99.9 us", "zlog_local_produce_latency_p999_us", "{:,.0f}"),
        ("local produce latency max us", "zlog_local_produce_latency_max_us", "{:,.0f}"),
        ("local send_many records/s", "zlog_local_produce_records_per_s", "{:,.0f}"),
    ]
    for label, key, form in lines:
        if key not in summary:
            continue
        low, high = spread[key]
        print(f"{label:32} {form.format(summary[key]):>12}   "
              f"(runs: {form.format(low)} .. {form.format(high)})")
    if "latency_cpu_us_per_record_broker" in summary:
        print("CPU us per record at the latency rate: " + ", ".join(
            f"{who} {summary[f'latency_cpu_us_per_record_{who}']:.0f}"
            for who in ("producer", "broker", "consumer")))
    if "zlog_local_produce_cpu_us_per_record_broker" in summary:
        print("CPU us per record, local producer and consumer: " + ", ".join(
            f"{who} {summary[f'zlog_local_produce_cpu_us_per_record_{who}']:.0f}"
            for who in ("producer", "broker", "consumer")))
    if "latency_samples" in summary:
        print(f"latency percentiles by {summary['latency_method']}; "
              f"{summary['latency_samples']:.0f} samples per run")


def write_json(path: Path | None, summary: dict[str, Any]) -> None:
    """`--json PATH`: the summary, indented, its directory made."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(summary, indent=2) + "\n")


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--repeat", type=int, default=3, help="runs, each on a fresh broker")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--metrics", choices=("on", "off"), default="on",
                        help="the broker's metrics endpoint and its workers' counters "
                             "(docs/operations-metrics.md): on (as deployed) or off, for the "
                             "A/B of their cost")
    parser.add_argument("--duration-s", type=float, default=5.0, help="per phase")
    parser.add_argument("--warmup-s", type=float, default=1.0, help="latency phase warm-up")
    parser.add_argument("--rate", type=float, default=5000.0, help="latency phase records/s")
    parser.add_argument("--chunk", type=int, default=10_000, help="rows per send_many call")
    parser.add_argument("--batch-size", type=int, default=1024 * 1024, help="producer bytes")
    parser.add_argument("--linger-ms", type=int, default=5, help="throughput phases")
    parser.add_argument("--compression", default=None, help="none (default) or lz4")
    parser.add_argument("--max-wait-ms", type=int, default=500, help="consumer long poll")
    parser.add_argument("--fetch-bytes", type=int, default=4 * 1024 * 1024,
                        help="consumer max_partition_fetch_bytes")
    parser.add_argument("--max-poll-records", type=int, default=10_000)
    parser.add_argument("--poll-records", type=int, default=2_000_000,
                        help="records read by the poll() phase")
    parser.add_argument("--latency-only", action="store_true", help="skip throughput phases")
    parser.add_argument("--security", action="store_true",
                        help="send_many and latency with security off, then on (CURVE, ACLs): "
                             "bench/security_ab.py")
    parser.add_argument("--large-value-bytes", type=int, default=1024,
                        help="value size in the 1 MiB batch phase")
    parser.add_argument("--large-mib", type=int, default=1024,
                        help="MiB of values the 1 MiB batch phase sends (and dd writes)")
    parser.add_argument("--large-only", action="store_true",
                        help="only the 1 MiB batch and dd figures")
    parser.add_argument("--warm-dir", default="", help=argparse.SUPPRESS)
    parser.add_argument("--local-spin-us", type=int, default=200,
                        help="the local consumer's busy spin on the ring head before it sleeps")
    parser.add_argument("--phase", choices=sorted(PHASES), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--profile", choices=PROFILES, default="tuned", help=argparse.SUPPRESS)
    parser.add_argument("--acks", default="1", help=argparse.SUPPRESS)  # cluster_bench: all
    parser.add_argument("--endpoint", default="", help=argparse.SUPPRESS)
    parser.add_argument("--topic", default="", help=argparse.SUPPRESS)
    parser.add_argument("--records", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--ready-file", default="", help=argparse.SUPPRESS)
    parser.add_argument("--local-consumer", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--local-producer", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--local-produce-only", action="store_true",
                        help="only the local producer phases (zlog_local_produce_*)")
    args = parser.parse_args(argv)
    if args.compression in ("none", ""):
        args.compression = None
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    if args.phase is not None:
        precise_sleeps()  # as every child of the side-by-side suite does
        install_client_keys(args)  # $ZLOG_KEY_FILE: the --security runs' principal
        print(json.dumps(PHASES[args.phase](args)), flush=True)
        return 0
    if args.security:
        # imported here: security_ab imports this module
        from bench.security_ab import report_security, run_security_ab

        security_summary = run_security_ab(args)
        report_security(security_summary)
        write_json(args.json, security_summary)
        return 0
    runs = []
    for run in range(args.repeat):
        figures = one_run(args, run)
        figures["run"] = run
        runs.append(figures)
        print(f"run {run}: " + ", ".join(
            f"{k}={figures[k]:,.0f}" for k in HEADLINE if figures.get(k) is not None),
            flush=True)
    summary = summarize(runs, args)
    report(summary)
    write_json(args.json, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
