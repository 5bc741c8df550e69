"""Kafka listener benchmark: Kafka clients against one `zlog serve`, beside the native client
in the same run. One partition, 100-byte values, acks=1.

- `confluent_produce_records_per_s`: confluent-kafka's Producer (librdkafka's batching:
  linger.ms 5, batches up to 1 MiB, lz4 off) producing for `--duration-s`, from the first
  produce() to the last delivery report (`flush`); beside it the native `Producer.send_many`
  of broker_bench in the same run, and `kafka_vs_native_ratio` = Kafka / native;
- `confluent_consume_records_per_s`: confluent-kafka's Consumer at librdkafka's defaults
  reading back what the produce phase wrote, from the beginning; and beside it, labelled
  tuned, `confluent_consume_tuned_records_per_s` with one setting changed,
  `fetch.queue.backoff.ms` 1 (TUNED_CONSUMER_CONFIG says why);
- `kafka_latency_p50_us` / `_p99_us`: end-to-end latency at `--rate` records/s with
  confluent-kafka (linger.ms 0, fetch.wait.max.ms 10), each value stamped with its scheduled
  send time and charged from it (no coordinated omission), beside the native client's at the
  same rate (`native_latency_*`, broker_bench's latency phase);
- `kcat_round_trip`: `kcat -P` of `--kcat-records` records from a file, then `kcat -C` of all
  of them, each timed.

Each client runs in a process of its own. Usage: python bench/kafka_bench.py [--json PATH].

`--sasl-ssl` instead runs confluent-kafka's produce and consume phases against a broker with
security off (PLAINTEXT) and then one with security on (SASL_SSL, SCRAM-SHA-256, a user that
is not a super-user, a certificate of a throwaway CA), and reports both: what TLS, the login's
ACL checks and the copy into the cipher cost the Kafka data path (bench/kafka_sasl_ab.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import numpy as np

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import broker_bench  # noqa: E402
from zlog_testbed.free_ports import free_port  # noqa: E402

VALUE_BYTES: Final = broker_bench.VALUE_BYTES
STAMP_BYTES: Final = broker_bench.STAMP_BYTES
PARTITION: Final = 0
CONSUMER_GROUP: Final = "kafka-bench"
# librdkafka fetches until its queue for a partition holds queued.min.messages (100,000 by
# default), then stops fetching it for fetch.queue.backoff.ms (1,000 ms by default; its debug
# log says "Fetch backoff for 1000ms: Local: Queue full"). A Python application reading a
# backlog drains its queue slower than the broker fills it, so at the defaults a catch-up read
# is about 100,000 records per second and idle most of the time, against zlog as against
# Kafka. Pausing for 1 ms instead keeps the queue full and the application busy.
TUNED_CONSUMER_CONFIG: Final = {"fetch.queue.backoff.ms": 1}


def _client_config(args: argparse.Namespace) -> dict[str, object]:
    """Every client's connection settings: the bootstrap, and `--client-config` (JSON: the
    SASL_SSL settings of a `--sasl-ssl` run)."""
    extra: dict[str, object] = json.loads(args.client_config) if args.client_config else {}
    return {"bootstrap.servers": args.bootstrap, **extra}


def _producer_config(args: argparse.Namespace, **extra: object) -> dict[str, object]:
    return {**_client_config(args), "acks": "1", "enable.idempotence": False,
            "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 1 << 20,
            "batch.size": 1 << 20, **extra}


def phase_kafka_produce(args: argparse.Namespace) -> dict[str, Any]:
    import confluent_kafka

    producer = confluent_kafka.Producer(_producer_config(args, **{"linger.ms": 5}))
    value = bytes(range(VALUE_BYTES))
    producer.produce(args.topic, value, partition=PARTITION)
    producer.flush(30)  # metadata and connections first
    sent = 0
    started = time.perf_counter()
    stop_at = started + args.duration_s
    produce = producer.produce
    while time.perf_counter() < stop_at:
        for _ in range(10_000):
            try:
                produce(args.topic, value, partition=PARTITION)
            except BufferError:
                producer.poll(0.001)
                continue
            sent += 1
        producer.poll(0)
    left = producer.flush(60)
    elapsed = time.perf_counter() - started
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return {"records": sent + 1, "measured_records": sent, "elapsed_s": elapsed}


def phase_kafka_consume(args: argparse.Namespace) -> dict[str, Any]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({
        **_client_config(args), "group.id": CONSUMER_GROUP, "enable.auto.commit": False,
        **(TUNED_CONSUMER_CONFIG if args.tuned else {})})
    consumer.assign([confluent_kafka.TopicPartition(args.topic, PARTITION, 0)])
    received = 0
    started = time.perf_counter()
    deadline = started + 120
    while received < args.records and time.perf_counter() < deadline:
        messages = consumer.consume(100_000, 0.5)
        for message in messages:
            if message.error() is not None:
                raise RuntimeError(str(message.error()))
        received += len(messages)
    elapsed = time.perf_counter() - started
    consumer.close()
    return {"records": received, "elapsed_s": elapsed}


def phase_kafka_latency_produce(args: argparse.Namespace) -> dict[str, Any]:
    import confluent_kafka

    producer = confluent_kafka.Producer(_producer_config(args, **{"linger.ms": 0}))
    producer.produce(args.topic, bytes(VALUE_BYTES), partition=PARTITION)
    producer.flush(30)
    Path(args.ready_file).write_text("producer")
    interval_ns = round(1e9 / args.rate)
    total = round(args.rate * (args.duration_s + args.warmup_s))
    padding = bytes(VALUE_BYTES - STAMP_BYTES)
    t0 = time.perf_counter_ns() + 1_000_000
    for index in range(total):
        scheduled = t0 + index * interval_ns
        now = time.perf_counter_ns()
        if now < scheduled:
            time.sleep((scheduled - now) / 1e9)
        producer.produce(args.topic, scheduled.to_bytes(STAMP_BYTES, "little") + padding,
                         partition=PARTITION)
        producer.poll(0)
    producer.flush(60)
    return {"records": total}


def phase_kafka_latency_consume(args: argparse.Namespace) -> dict[str, Any]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({
        **_client_config(args), "group.id": "kafka-bench-latency",
        "enable.auto.commit": False, "fetch.wait.max.ms": 10, "fetch.min.bytes": 1,
        "fetch.error.backoff.ms": 1})
    consumer.assign([confluent_kafka.TopicPartition(
        args.topic, PARTITION, confluent_kafka.OFFSET_END)])
    consumer.poll(1.0)  # connected and fetching
    Path(args.ready_file).write_text("consumer")
    expected = round(args.rate * (args.duration_s + args.warmup_s))
    warmup = round(args.rate * args.warmup_s)
    latencies: list[int] = []
    deadline = time.monotonic() + args.duration_s + args.warmup_s + 60
    while len(latencies) < expected and time.monotonic() < deadline:
        # poll, not consume: consume(n) waits for n records or its timeout.
        message = consumer.poll(0.1)
        if message is None or message.error() is not None:
            continue
        now = time.perf_counter_ns()
        value = message.value()
        if value and any(value[:STAMP_BYTES]):
            latencies.append(now - int.from_bytes(value[:STAMP_BYTES], "little"))
    consumer.close()
    samples = np.array(latencies[warmup:], dtype=np.int64)
    return {"records": len(latencies), "expected": expected,
            **broker_bench._percentiles(samples)}


PHASES: Final = {
    "kafka-produce": phase_kafka_produce,
    "kafka-consume": phase_kafka_consume,
    "kafka-latency-produce": phase_kafka_latency_produce,
    "kafka-latency-consume": phase_kafka_latency_consume,
}


def _command(args: argparse.Namespace, phase: str, topic: str, **extra: object) -> list[str]:
    command = [sys.executable, str(Path(__file__).resolve()), "--phase", phase,
               "--bootstrap", args.bootstrap, "--topic", topic,
               "--duration-s", str(args.duration_s), "--warmup-s", str(args.warmup_s),
               "--rate", str(args.rate), "--client-config", args.client_config]
    for name, value in extra.items():
        command += [f"--{name.replace('_', '-')}", str(value)]
    return command


def _run(args: argparse.Namespace, phase: str, topic: str, **extra: object) -> dict[str, Any]:
    done = subprocess.run(_command(args, phase, topic, **extra), check=False,
                          capture_output=True, text=True, cwd=REPO_ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"phase {phase} failed ({done.returncode}):\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def kafka_latency(args: argparse.Namespace, topic: str, scratch: Path,
                  broker_pid: int) -> dict[str, Any]:
    ready = scratch / f"{topic}.consumer-ready"
    consumer = subprocess.Popen(_command(args, "kafka-latency-consume", topic,
                                         ready_file=ready),
                                stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            if consumer.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the latency consumer did not get ready")
            time.sleep(0.01)
        cpu_started_s = broker_bench._cpu_s(broker_pid)
        produced = _run(args, "kafka-latency-produce", topic, ready_file=scratch / f"{topic}.p")
        output, _ = consumer.communicate(timeout=args.duration_s + args.warmup_s + 90)
        broker_cpu_s = broker_bench._cpu_s(broker_pid) - cpu_started_s
    finally:
        if consumer.poll() is None:
            consumer.kill()
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    result["broker_cpu_us_per_record"] = broker_cpu_s / produced["records"] * 1e6
    return result


def kcat_round_trip(args: argparse.Namespace, topic: str, scratch: Path) -> dict[str, Any]:
    if shutil.which("kcat") is None:
        return {"skipped": "kcat is not installed (make kafka-clients)"}
    lines = scratch / "kcat-records.txt"
    value = b"v" * (VALUE_BYTES - 1)
    with lines.open("wb") as out:
        for _ in range(args.kcat_records // 10_000):
            out.write((value + b"\n") * 10_000)
    started = time.perf_counter()
    subprocess.run(["kcat", "-b", args.bootstrap, "-P", "-t", topic, "-p", str(PARTITION),
                    "-X", "linger.ms=5", "-X", "batch.size=1048576", "-l", str(lines)],
                   check=True, capture_output=True, timeout=600)
    produced_s = time.perf_counter() - started
    started = time.perf_counter()
    done = subprocess.run(["kcat", "-b", args.bootstrap, "-C", "-t", topic, "-p",
                           str(PARTITION), "-o", "beginning", "-c", str(args.kcat_records),
                           "-e", "-q", "-f", "%o\n"],
                          check=True, capture_output=True, timeout=600)
    consumed_s = time.perf_counter() - started
    offsets = done.stdout.split()
    return {"records": args.kcat_records, "produce_s": produced_s, "consume_s": consumed_s,
            "consumed": len(offsets),
            "last_offset": int(offsets[-1]) if offsets else -1,
            "produce_records_per_s": args.kcat_records / produced_s,
            "consume_records_per_s": len(offsets) / consumed_s}


def native_figures(args: argparse.Namespace, broker: broker_bench.Broker,
                   scratch: Path) -> dict[str, Any]:
    """broker_bench's native send_many and latency phases, with its default settings."""
    native = broker_bench.parse_arguments(
        ["--duration-s", str(args.duration_s), "--warmup-s", str(args.warmup_s),
         "--rate", str(args.rate)])
    native.profile = "defaults"
    native.acks = 1
    broker_bench.create_topic(broker.endpoint, "native-produce")
    produced = broker_bench.run_phase(native, "produce-many", "native-produce", broker.endpoint)
    broker_bench.create_topic(broker.endpoint, "native-latency")
    latency = broker_bench.run_latency(native, "native-latency", broker.endpoint, scratch,
                                       broker.process.pid)
    return {"native_send_many_records_per_s": produced["measured_records"]
            / produced["elapsed_s"],
            "native_latency_p50_us": latency.get("p50_us"),
            "native_latency_p99_us": latency.get("p99_us"),
            "native_latency_broker_cpu_us_per_record": latency["broker_cpu_us_per_record"]}


def run(args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    args.bootstrap = f"127.0.0.1:{port}"
    broker = broker_bench.Broker(1, extra_args=["--kafka-listen", args.bootstrap])
    scratch = Path(tempfile.mkdtemp(prefix="zkb-"))
    figures: dict[str, Any] = {"machine_before": broker_bench.machine_load()}
    try:
        broker.wait_ready()
        figures.update(native_figures(args, broker, scratch))
        broker_bench.create_topic(broker.endpoint, "kafka-produce")
        produced = _run(args, "kafka-produce", "kafka-produce")
        figures["confluent_produce_records_per_s"] = (produced["measured_records"]
                                                      / produced["elapsed_s"])
        consumed = _run(args, "kafka-consume", "kafka-produce", records=produced["records"])
        figures["confluent_consume_records_per_s"] = consumed["records"] / consumed["elapsed_s"]
        figures["confluent_consumed_records"] = consumed["records"]
        tuned = _run(args, "kafka-consume", "kafka-produce", records=produced["records"],
                     tuned=1)
        figures["confluent_consume_tuned_records_per_s"] = tuned["records"] / tuned["elapsed_s"]
        figures["confluent_consume_tuned_config"] = TUNED_CONSUMER_CONFIG
        broker_bench.create_topic(broker.endpoint, "kafka-latency")
        latency = kafka_latency(args, "kafka-latency", scratch, broker.process.pid)
        figures["kafka_latency_p50_us"] = latency.get("p50_us")
        figures["kafka_latency_p99_us"] = latency.get("p99_us")
        figures["kafka_latency"] = latency
        broker_bench.create_topic(broker.endpoint, "kcat")
        figures["kcat_round_trip"] = kcat_round_trip(args, "kcat", scratch)
    finally:
        broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    figures["kafka_vs_native_ratio"] = (figures["confluent_produce_records_per_s"]
                                        / figures["native_send_many_records_per_s"])
    if figures.get("native_latency_p50_us") and figures.get("kafka_latency_p50_us"):
        figures["kafka_vs_native_latency_p50_ratio"] = (figures["kafka_latency_p50_us"]
                                                        / figures["native_latency_p50_us"])
    figures["machine_after"] = broker_bench.machine_load()
    return figures


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--duration-s", type=float, default=5.0, help="per phase")
    parser.add_argument("--warmup-s", type=float, default=1.0, help="latency phase warm-up")
    parser.add_argument("--rate", type=float, default=5000.0, help="latency phase records/s")
    parser.add_argument("--kcat-records", type=int, default=1_000_000)
    parser.add_argument("--phase", choices=sorted(PHASES), default=None,
                        help="run one client phase in this process (the driver's children)")
    parser.add_argument("--bootstrap", default="")
    parser.add_argument("--topic", default="")
    parser.add_argument("--records", type=int, default=0)
    parser.add_argument("--tuned", type=int, default=0, help="kafka-consume: TUNED_CONSUMER_CONFIG")
    parser.add_argument("--ready-file", default="")
    parser.add_argument("--client-config", default="",
                        help="JSON: more client settings (the phases' children)")
    parser.add_argument("--sasl-ssl", action="store_true",
                        help="produce and consume over PLAINTEXT, then SASL_SSL "
                             "(bench/kafka_sasl_ab.py)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    if args.phase is not None:
        print(json.dumps(PHASES[args.phase](args)))
        return 0
    if args.sasl_ssl:
        from bench.kafka_sasl_ab import run_sasl_ab  # imported here: it imports this module

        figures = run_sasl_ab(args)
    else:
        figures = run(args)
    text = json.dumps(figures, indent=2, sort_keys=True)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
