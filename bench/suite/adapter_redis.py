"""The Redis Streams peer: Debian's `redis-server` with AOF on, fsync every second.

A partition is a stream (`topic:p`); a record is one `XADD <stream> * v <value>`. Produce sends
pipelines of `chunk` XADDs (no MULTI), each pipeline to one stream, round-robin, and counts a
record once its pipeline's replies arrived (Redis answers after the write reached its memory and
AOF buffer; `appendfsync everysec` writes the AOF once a second). Consume from the beginning reads
`XRANGE` pages of 10,000 entries (redis-py gives one tuple per entry: the record-object path;
there is no batch-level path). Latency pipelines the XADDs that are due and reads with
`XREAD BLOCK`. acks=all has no meaning on one node without replicas, so only acks=1 runs.
"""

from __future__ import annotations

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
    find_binary,
    free_port,
    latency_padding,
    make_values,
    stamped,
    version_of,
)
from bench.suite.histogram import encode, new_histogram, record_ns, summary

NAME: Final = "redis"
PAGE: Final = 10_000


def stream(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def _client(endpoint: str) -> Any:
    import redis

    host, port = endpoint.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), protocol=2)


class Server:
    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"127.0.0.1:{self.port}"
        self.server: ServerProcess | None = None

    @staticmethod
    def binary() -> str | None:
        return find_binary("redis-server")

    def start(self) -> None:
        binary = self.binary()
        if binary is None:
            raise RuntimeError("redis-server is not installed (make bench-peers)")

        def command(directory: Path) -> list[str]:
            return [binary, "--port", str(self.port), "--bind", "127.0.0.1",
                    "--dir", str(directory), "--appendonly", "yes",
                    "--appendfsync", "everysec", "--save", "", "--daemonize", "no",
                    "--protected-mode", "yes"]

        self.server = ServerProcess(NAME, command)
        self.server.wait_ready(lambda: bool(_client(self.endpoint).ping()))

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    @property
    def pid(self) -> int | None:
        return self.server.pid if self.server else None

    def create(self, topic: str, partitions: int) -> None:
        """Streams are created by their first XADD."""

    def delete(self, topic: str, partitions: int) -> None:
        client = _client(self.endpoint)
        client.delete(*(stream(topic, p) for p in range(partitions)))

    def version(self) -> str:
        binary = self.binary() or "redis-server"
        import redis

        return f"{version_of([binary, '--version'])}; redis-py {redis.__version__} + hiredis"


# --------------------------------------------------------------------------------- children


def produce(spec: Spec) -> dict[str, Any]:
    values = [row.tobytes() for row in make_values(spec["value_bytes"], spec["chunk"])]
    client = _client(spec["endpoint"])
    partitions = spec["partitions"]
    topic = spec["topic"]
    for partition in range(partitions):  # connection and streams made outside the clock
        client.xadd(stream(topic, partition), {"v": values[0]})
    started = child_ready_and_wait(spec)
    stop_at = started + int(spec["duration_s"] * 1e9)
    sent = 0
    index = spec["process_index"]
    while time.monotonic_ns() < stop_at:
        pipe = client.pipeline(transaction=False)  # execute() empties a pipeline
        name = stream(topic, index % partitions)
        for value in values:
            pipe.xadd(name, {"v": value})
        pipe.execute(raise_on_error=True)
        sent += len(values)
        index += 1
    ended = time.monotonic_ns()
    return {"records": sent, "start_ns": started, "end_ns": ended,
            "warmup_records": partitions}


def consume(spec: Spec) -> dict[str, Any]:
    if spec["mode"] != "records":
        raise ValueError("Redis Streams has no batch-level read")
    client = _client(spec["endpoint"])
    name = stream(spec["topic"], 0)
    wanted = spec["records"]
    client.ping()
    started = child_ready_and_wait(spec)
    received = 0
    touched = 0
    cursor = "-"
    while received < wanted:
        entries = client.xrange(name, min=cursor, max="+", count=min(PAGE, wanted - received))
        if not entries:
            break
        for _entry_id, fields in entries:
            touched += len(fields[b"v"])
        received += len(entries)
        cursor = "(" + entries[-1][0].decode()
    ended = time.monotonic_ns()
    return {"records": received, "start_ns": started, "end_ns": ended, "touched": touched}


def latency_send(spec: Spec) -> dict[str, Any]:
    padding = latency_padding(spec["value_bytes"])
    name = stream(spec["topic"], 0)
    client = _client(spec["endpoint"])
    client.ping()
    schedule = Schedule.after_go(spec)
    for due in schedule.due():
        pipe = client.pipeline(transaction=False)
        for index in due:
            pipe.xadd(name, {"v": stamped(schedule.scheduled_ns(index), padding)})
        pipe.execute()
    return {"records": spec["total"], "sender_late_us_max": schedule.late_us_max}


def latency_receive(spec: Spec) -> dict[str, Any]:
    client = _client(spec["endpoint"])
    name = stream(spec["topic"], 0)
    total = spec["total"]
    warmup = spec["warmup_records"]
    histogram = new_histogram()
    received = 0
    last_id = "0"  # the stream is new: everything in it is this run's
    client.ping()
    child_ready_and_wait(spec)
    deadline = time.monotonic() + spec["deadline_s"]
    while received < total and time.monotonic() < deadline:
        answer = client.xread({name: last_id}, count=PAGE, block=500)
        if not answer:
            continue
        entries = answer[0][1]
        now = time.monotonic_ns()
        stamps = np.array([int.from_bytes(fields[b"v"][:STAMP_BYTES], "little")
                           for _id, fields in entries], dtype=np.int64)
        stamps = stamps[stamps != 0]
        skip = max(0, warmup - received)
        record_ns(histogram, now - stamps[skip:])
        received += len(stamps)
        last_id = entries[-1][0]
    return {"records": received, **summary(histogram), "histogram": encode(histogram)}
