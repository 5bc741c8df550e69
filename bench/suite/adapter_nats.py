"""The NATS JetStream peer: Debian's `nats-server -js` with file storage; the `nats-py` client.

A partition is a stream (`topic-p`, subject `topic.p`, file storage, one replica: the only choice
on one server). Produce uses `js.publish_async` (up to 4,000 publishes waiting for their PubAck)
and counts a record once every ack arrived (`publish_async_completed`); a PubAck means the server
stored the message in its file store (JetStream syncs to disk every 2 minutes by default).
Consume from the beginning is an ephemeral pull consumer (ack policy none, deliver all) fetching
1,000 messages at a time: one `Msg` object per record, there is no batch-level path. Latency
publishes with `js.publish_async` and receives with the same pull consumer. acks=all has no
meaning for a single-replica stream, so only acks=1 runs.
"""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any, Final

import numpy as np

from bench.suite.common import (
    STAMP_BYTES,
    ServerProcess,
    Spec,
    child_ready_and_wait,
    due_count,
    find_binary,
    free_port,
    latency_padding,
    make_values,
    send_stop_ns,
    stamped,
    version_of,
)
from bench.suite.histogram import encode, new_histogram, record_ns, summary

NAME: Final = "nats"
FETCH: Final = 1000
MAX_PENDING: Final = 4000


def stream(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def subject(topic: str, partition: int) -> str:
    return f"{topic}.{partition}"


def _ready(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
        return sock.recv(4).startswith(b"INFO")


class Server:
    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"nats://127.0.0.1:{self.port}"
        self.server: ServerProcess | None = None

    @staticmethod
    def binary() -> str | None:
        return find_binary("nats-server")

    def start(self) -> None:
        binary = self.binary()
        if binary is None:
            raise RuntimeError("nats-server is not installed (make bench-peers)")

        def command(directory: Path) -> list[str]:
            return [binary, "-js", "-sd", str(directory / "jetstream"), "-a", "127.0.0.1",
                    "-p", str(self.port)]

        self.server = ServerProcess(NAME, command)
        self.server.wait_ready(lambda: _ready(self.port))
        asyncio.run(self._wait_jetstream())

    async def _wait_jetstream(self) -> None:
        import nats

        nc = await nats.connect(self.endpoint)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    await nc.jetstream().account_info()
                    return
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.1)
        finally:
            await nc.close()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    @property
    def pid(self) -> int | None:
        return self.server.pid if self.server else None

    def create(self, topic: str, partitions: int) -> None:
        asyncio.run(self._create(topic, partitions))

    async def _create(self, topic: str, partitions: int) -> None:
        import nats
        from nats.js.api import StorageType

        nc = await nats.connect(self.endpoint)
        try:
            js = nc.jetstream()
            for partition in range(partitions):
                await js.add_stream(name=stream(topic, partition),
                                    subjects=[subject(topic, partition)],
                                    storage=StorageType.FILE)
        finally:
            await nc.close()

    def delete(self, topic: str, partitions: int) -> None:
        asyncio.run(self._delete(topic, partitions))

    async def _delete(self, topic: str, partitions: int) -> None:
        import nats

        nc = await nats.connect(self.endpoint)
        try:
            js = nc.jetstream()
            for partition in range(partitions):
                await js.delete_stream(stream(topic, partition))
        finally:
            await nc.close()

    def version(self) -> str:
        from importlib.metadata import version

        binary = self.binary() or "nats-server"
        return f"{version_of([binary, '--version'])}; nats-py {version('nats-py')}"


# --------------------------------------------------------------------------------- children


async def _connect(endpoint: str) -> tuple[Any, Any]:
    import nats

    nc = await nats.connect(endpoint, pending_size=64 * 1024 * 1024)
    return nc, nc.jetstream(publish_async_max_pending=MAX_PENDING)


def produce(spec: Spec) -> dict[str, Any]:
    return asyncio.run(_produce(spec))


async def _produce(spec: Spec) -> dict[str, Any]:
    values = [row.tobytes() for row in make_values(spec["value_bytes"], spec["chunk"])]
    nc, js = await _connect(spec["endpoint"])
    partitions = spec["partitions"]
    subjects = [subject(spec["topic"], p) for p in range(partitions)]
    for name in subjects:
        await js.publish(name, values[0])
    started = child_ready_and_wait(spec)
    stop_at = started + int(spec["duration_s"] * 1e9)
    sent = 0
    index = spec["process_index"]
    futures = []
    while time.monotonic_ns() < stop_at:
        name = subjects[index % partitions]
        futures.extend([await js.publish_async(name, value) for value in values])
        sent += len(values)
        index += 1
        if len(futures) > 100_000:
            futures = [f for f in futures if not f.done() or f.result() is None]
    await js.publish_async_completed()
    ended = time.monotonic_ns()
    for future in futures:
        future.result()  # every publish acknowledged without error
    await nc.close()
    return {"records": sent, "start_ns": started, "end_ns": ended,
            "warmup_records": partitions}


async def _pull(js: Any, topic: str, *, deliver_new: bool) -> Any:
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    config = ConsumerConfig(ack_policy=AckPolicy.NONE,
                            deliver_policy=DeliverPolicy.NEW if deliver_new else DeliverPolicy.ALL)
    return await js.pull_subscribe(subject(topic, 0), stream=stream(topic, 0), config=config)


def consume(spec: Spec) -> dict[str, Any]:
    return asyncio.run(_consume(spec))


async def _consume(spec: Spec) -> dict[str, Any]:
    if spec["mode"] != "records":
        raise ValueError("NATS JetStream has no batch-level read")
    import nats.errors

    nc, js = await _connect(spec["endpoint"])
    sub = await _pull(js, spec["topic"], deliver_new=False)
    wanted = spec["records"]
    started = child_ready_and_wait(spec)
    received = 0
    touched = 0
    while received < wanted:
        try:
            messages = await sub.fetch(min(FETCH, wanted - received), timeout=5)
        except nats.errors.TimeoutError:
            break
        for message in messages:
            touched += len(message.data)
        received += len(messages)
    ended = time.monotonic_ns()
    await nc.close()
    return {"records": received, "start_ns": started, "end_ns": ended, "touched": touched}


def latency_send(spec: Spec) -> dict[str, Any]:
    return asyncio.run(_latency_send(spec))


async def _latency_send(spec: Spec) -> dict[str, Any]:
    padding = latency_padding(spec["value_bytes"])
    interval_ns = round(1e9 / spec["rate"])
    total = spec["total"]
    name = subject(spec["topic"], 0)
    nc, js = await _connect(spec["endpoint"])
    await js.publish(name, bytes(spec["value_bytes"]))
    late_max = 0
    t0 = child_ready_and_wait(spec) + 2_000_000
    stop_ns = send_stop_ns(spec, t0)
    sent = 0
    while sent < total:
        now = time.monotonic_ns()
        if stop_ns is not None and now > stop_ns:
            late_max = max(late_max, now - (t0 + sent * interval_ns))
            break
        due = due_count(now, t0, interval_ns, total)
        if due > sent:
            late_max = max(late_max, now - (t0 + sent * interval_ns))
        while sent < due:
            await js.publish_async(name, stamped(t0 + sent * interval_ns, padding))
            sent += 1
        remaining = t0 + sent * interval_ns - time.monotonic_ns()
        await asyncio.sleep(max(remaining, 0) / 1e9)  # lets the acks be read meanwhile
    await js.publish_async_completed()
    await nc.close()
    return {"records": total, "sender_late_us_max": late_max / 1000}


def latency_receive(spec: Spec) -> dict[str, Any]:
    return asyncio.run(_latency_receive(spec))


async def _latency_receive(spec: Spec) -> dict[str, Any]:
    from nats.js.api import DeliverPolicy

    nc, js = await _connect(spec["endpoint"])
    total = spec["total"]
    warmup = spec["warmup_records"]
    histogram = new_histogram()
    latencies: list[int] = []

    async def on_message(message: Any) -> None:
        stamp = int.from_bytes(message.data[:STAMP_BYTES], "little")
        if stamp:  # the sender's warm-up message carries no stamp
            latencies.append(time.monotonic_ns() - stamp)

    # A push consumer (ordered: ack none, flow control): a pull `fetch` of a batch waits for
    # the whole batch or its timeout, which would add that wait to every latency.
    sub = await js.subscribe(subject(spec["topic"], 0), stream=stream(spec["topic"], 0),
                             cb=on_message, ordered_consumer=True,
                             deliver_policy=DeliverPolicy.NEW)
    child_ready_and_wait(spec)
    deadline = time.monotonic() + spec["deadline_s"]
    while len(latencies) < total and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await sub.unsubscribe()
    await nc.close()
    record_ns(histogram, np.array(latencies[warmup:], dtype=np.int64))
    return {"records": len(latencies), **summary(histogram), "histogram": encode(histogram)}
