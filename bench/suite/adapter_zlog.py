"""zlog: `python -m zlog serve` on a free loopback port; the client library in the children.

zlog runs at the client's defaults (`Producer(endpoint, acks=...)`, `Consumer(endpoint)`), as a
user gets it; `zlog_tuned` (adapter_zlog_tuned.py) is the same with the settings a bulk user
would tune (1 MiB batches and fetches, linger 5 ms). Produce uses `Producer.send_many` (the fast
path: 2-D uint8 arrays of `chunk` rows), keyless, so each chunk goes to one partition; chunks are
spread over the partitions round-robin. Consume from
the beginning uses `Consumer.poll` (one ConsumerRecord per record) or `Consumer.poll_batches` (one
BatchView per batch, its values gathered into one array). Latency uses `Producer.send` per record
with linger 0 and `poll_batches` on the receiving side.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Final

import numpy as np

from bench.suite.common import (
    STAMP_BYTES,
    Schedule,
    ServerProcess,
    Spec,
    child_ready_and_wait,
    free_port,
    latency_padding,
    make_values,
    stamped,
)
from bench.suite.histogram import encode, new_histogram, record_ns, summary

NAME: Final = "zlog"
CALL_TIMEOUT_MS: Final = 10_000
BATCH_SIZE: Final = 1024 * 1024
LINGER_MS: Final = 5
FETCH_BYTES: Final = 4 * 1024 * 1024
LOCAL_SPIN_US: Final = 200  # zlog_local: the consumer's busy spin on the ring head per wait


class Server:
    """One broker with `workers` partition workers; rings in /dev/shm when it exists."""

    def __init__(self, workers: int = 1) -> None:
        self.workers = workers
        self.endpoint = f"tcp://127.0.0.1:{free_port()}"
        self.server: ServerProcess | None = None

    def start(self) -> None:
        def command(directory: Path) -> list[str]:
            ring_dir = Path("/dev/shm") if Path("/dev/shm").is_dir() else directory
            rings = ring_dir / f"zlog-suite-rings-{directory.name}"
            self.ring_dir = rings
            return [sys.executable, "-m", "zlog", "serve", "--data-dir", str(directory / "data"),
                    "--listen", self.endpoint, "--workers", str(self.workers),
                    "--ring-dir", str(rings), "--kafka-listen", "127.0.0.1:0"]

        self.server = ServerProcess(NAME, command)
        self.server.wait_ready(self._ready)

    def _ready(self) -> bool:
        from zlog.client import Admin

        with Admin(self.endpoint, request_timeout_ms=300) as admin:
            admin.describe_cluster()
        return True

    def stop(self) -> None:
        import shutil

        if self.server is not None:
            self.server.stop()
            shutil.rmtree(self.ring_dir, ignore_errors=True)

    @property
    def pid(self) -> int | None:
        return self.server.pid if self.server else None

    def create(self, topic: str, partitions: int) -> None:
        from zlog.client import Admin, NewTopic

        with Admin(self.endpoint, request_timeout_ms=CALL_TIMEOUT_MS) as admin:
            admin.create_topics([NewTopic(topic, partitions)])

    def delete(self, topic: str, partitions: int) -> None:
        from zlog.client import Admin

        with Admin(self.endpoint, request_timeout_ms=CALL_TIMEOUT_MS) as admin:
            admin.delete_topics([topic], raise_on_error=False)

    def version(self) -> str:
        import zlog

        return f"zlog {getattr(zlog, '__version__', '0.1.0')} (working tree)"


# --------------------------------------------------------------------------------- children


def produce(spec: Spec) -> dict[str, Any]:

    chunk = spec["chunk"]
    values = make_values(spec["value_bytes"], chunk)
    partitions = spec["partitions"]
    with _producer(spec) as producer:
        for partition in range(partitions):  # metadata, producer id, connections
            producer.send_many(spec["topic"], values[:10], partition=partition).result(30)
        started = child_ready_and_wait(spec)
        stop_at = started + int(spec["duration_s"] * 1e9)
        sent = 0
        index = spec["process_index"]
        futures = []
        while time.monotonic_ns() < stop_at:
            futures.append(producer.send_many(spec["topic"], values,
                                              partition=index % partitions))
            sent += chunk
            index += 1
        producer.flush()
        ended = time.monotonic_ns()
        for future in futures:
            future.result(0)  # every batch acknowledged without error
    return {"records": sent, "start_ns": started, "end_ns": ended,
            "warmup_records": 10 * partitions}


def _producer(spec: Spec) -> Any:
    """The client's defaults, or with spec["tuned"] the bulk settings (zlog_tuned)."""
    from zlog.client import Producer

    if not spec.get("tuned"):
        return Producer(spec["endpoint"], acks=spec["acks"])
    return Producer(spec["endpoint"], acks=spec["acks"], linger_ms=LINGER_MS,
                    batch_size=BATCH_SIZE, bulk_batch_size=BATCH_SIZE)


def _consumer(spec: Spec, reset: str) -> Any:
    """The network consumer, or with spec["local"] the local zero-copy one (zlog_local); the
    client's defaults, or with spec["tuned"] 4 MiB fetches (zlog_tuned)."""
    from zlog.client import Consumer

    local = bool(spec.get("local"))
    if not spec.get("tuned"):
        return Consumer(spec["endpoint"], auto_offset_reset=reset, local=local,
                        local_zero_copy=local, local_spin_us=LOCAL_SPIN_US)
    return Consumer(spec["endpoint"], auto_offset_reset=reset, fetch_max_wait_ms=500,
                    max_partition_fetch_bytes=FETCH_BYTES, bulk_partition_fetch_bytes=FETCH_BYTES,
                    local=local, local_zero_copy=local, local_spin_us=LOCAL_SPIN_US)


def _check_intact(consumer: Any) -> None:
    if not consumer.views_intact():
        raise RuntimeError("a zero-copy view was overwritten before it was read")


def consume(spec: Spec) -> dict[str, Any]:
    from zlog.client import TopicPartition

    tp = TopicPartition(spec["topic"], 0)
    wanted = spec["records"]
    touched = 0
    with _consumer(spec, "earliest") as consumer:
        consumer.assign([tp])
        consumer.position(tp)  # ListOffsets outside the clock
        started = child_ready_and_wait(spec)
        received = 0
        if spec["mode"] == "batches":
            while received < wanted:
                for _tp, view in consumer.poll_batches(1000):
                    values, _bounds = view.values_concatenated()
                    touched += int(values[-1]) if values.size else 0
                    received += len(view)
                _check_intact(consumer)
        else:
            while received < wanted:
                records = consumer.poll(1000, max_records=10_000)
                for record in records:
                    touched += len(record.value or b"")
                received += len(records)
                _check_intact(consumer)
        ended = time.monotonic_ns()
    return {"records": received, "start_ns": started, "end_ns": ended, "touched": touched}


def latency_send(spec: Spec) -> dict[str, Any]:
    from zlog.client import Producer

    padding = latency_padding(spec["value_bytes"])
    topic = spec["topic"]
    # The client's defaults (linger_ms 0: records batch by round trip, not by timer); with
    # spec["local"] (zlog_local) the producer hands its requests to the worker through shared
    # memory (docs/local-path.md).
    with Producer(spec["endpoint"], acks=spec["acks"],
                  local=bool(spec.get("local"))) as producer:
        producer.send(topic, bytes(spec["value_bytes"]), partition=0).result(30)
        schedule = Schedule.after_go(spec)
        for due in schedule.due():
            for index in due:
                producer.send(topic, stamped(schedule.scheduled_ns(index), padding), partition=0)
        producer.flush()
    return {"records": spec["total"], "sender_late_us_max": schedule.late_us_max}


def latency_receive(spec: Spec) -> dict[str, Any]:
    from zlog.client import TopicPartition

    tp = TopicPartition(spec["topic"], 0)
    total = spec["total"]
    warmup = spec["warmup_records"]
    histogram = new_histogram()
    received = 0
    width = spec["value_bytes"]
    with _consumer(spec, "latest") as consumer:
        consumer.assign([tp])
        consumer.position(tp)
        consumer.poll_batches(0)  # the first fetch is parked at the broker (or the ring opened)
        child_ready_and_wait(spec)
        deadline = time.monotonic() + spec["deadline_s"]
        while received < total and time.monotonic() < deadline:
            for _tp, view in consumer.poll_batches(100):
                now = time.monotonic_ns()
                values, _bounds = view.values_concatenated()
                rows = values.reshape(-1, width)[:, :STAMP_BYTES]
                stamps = np.ascontiguousarray(rows).view("<i8").ravel()
                stamps = stamps[stamps != 0]  # the sender's warm-up record has no stamp
                _check_intact(consumer)
                skip = max(0, warmup - received)
                record_ns(histogram, now - stamps[skip:])
                received += len(stamps)
    return {"records": received, **summary(histogram), "histogram": encode(histogram)}
