"""The transport's ceiling: raw pyzmq PUSH/PULL of the same value bytes, no broker, no storage.

Produce: each PUSH process sends frames of `chunk` values concatenated (the same rows the other
systems get, one frame per chunk, as zlog's producer sends one frame per record batch) to a PULL
process, which counts values and is the clock: records/s from the go to the last frame received.
Latency: one zmq message per record, PUSH to PULL, each stamped with its scheduled send time.
There is nothing to consume from the beginning, no acks and no partitions.
"""

from __future__ import annotations

import time
from typing import Any, Final

import numpy as np

from bench.suite.common import (
    STAMP_BYTES,
    Schedule,
    Spec,
    child_ready_and_wait,
    free_port,
    latency_padding,
    make_values,
    stamped,
)
from bench.suite.histogram import encode, new_histogram, record_ns, summary

NAME: Final = "zmq"
HELLO: Final = b"h"
END: Final = b""
RECEIVE_TIMEOUT_MS: Final = 500


class Server:
    """No server: a fresh loopback endpoint per case for the PULL child to bind."""

    def __init__(self) -> None:
        self.endpoint = ""
        self.pid: int | None = None

    def start(self) -> None:
        """Nothing to start."""

    def stop(self) -> None:
        """Nothing to stop."""

    def create(self, topic: str, partitions: int) -> None:
        self.endpoint = f"tcp://127.0.0.1:{free_port()}"

    def delete(self, topic: str, partitions: int) -> None:
        """Nothing is stored."""

    def version(self) -> str:
        import zmq

        return f"pyzmq {zmq.__version__}, libzmq {zmq.zmq_version()}"


# --------------------------------------------------------------------------------- children


def produce(spec: Spec) -> dict[str, Any]:
    """A PUSH process (role 'produce') or the PULL process (`spec['receiver']`)."""
    import zmq

    if spec.get("receiver"):
        return _receive_frames(spec)
    frame = make_values(spec["value_bytes"], spec["chunk"]).tobytes()
    context = zmq.Context()
    push = context.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 10_000)
    push.connect(spec["endpoint"])
    push.send(HELLO)
    started = child_ready_and_wait(spec)
    stop_at = started + int(spec["duration_s"] * 1e9)
    sent = 0
    while time.monotonic_ns() < stop_at:
        push.send(frame, copy=False)
        sent += spec["chunk"]
    push.send(END)
    ended = time.monotonic_ns()
    push.close()
    context.term()
    return {"records": sent, "start_ns": started, "end_ns": ended, "sender": True}


def _receive_frames(spec: Spec) -> dict[str, Any]:
    import zmq

    context = zmq.Context()
    pull = context.socket(zmq.PULL)
    pull.bind(spec["endpoint"])
    width = spec["value_bytes"]
    hellos = 0
    while hellos < spec["producers"]:
        if pull.recv() == HELLO:
            hellos += 1
    started = child_ready_and_wait(spec)
    ends = 0
    received = 0
    ended = started
    while ends < spec["producers"]:
        frame = pull.recv(copy=False)
        size = len(frame.buffer)
        if size == 0:
            ends += 1
            continue
        received += size // width
        ended = time.monotonic_ns()
    pull.close()
    context.term()
    return {"records": received, "start_ns": started, "end_ns": ended, "receiver": True}


def consume(spec: Spec) -> dict[str, Any]:
    raise ValueError("raw zmq stores nothing: there is no consume-from-the-beginning")


def latency_send(spec: Spec) -> dict[str, Any]:
    import zmq

    padding = latency_padding(spec["value_bytes"])
    context = zmq.Context()
    push = context.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 10_000)
    push.connect(spec["endpoint"])
    push.send(bytes(spec["value_bytes"]))  # connected and warm; the stamp 0 is skipped
    schedule = Schedule.after_go(spec)
    for due in schedule.due():
        for index in due:
            push.send(stamped(schedule.scheduled_ns(index), padding))
    push.close()
    context.term()
    return {"records": spec["total"], "sender_late_us_max": schedule.late_us_max}


def latency_receive(spec: Spec) -> dict[str, Any]:
    import zmq

    context = zmq.Context()
    pull = context.socket(zmq.PULL)
    pull.bind(spec["endpoint"])
    result = receive_stamped(pull, spec)
    context.term()
    return result


def receive_stamped(pull: Any, spec: Spec) -> dict[str, Any]:
    """One stamped record per message on `pull` until `total` or the deadline; closes `pull`."""
    import zmq

    pull.setsockopt(zmq.RCVTIMEO, RECEIVE_TIMEOUT_MS)
    total = spec["total"]
    latencies = np.zeros(total, dtype=np.int64)
    received = 0
    child_ready_and_wait(spec)
    deadline = time.monotonic() + spec["deadline_s"]
    while received < total and time.monotonic() < deadline:
        try:
            message = pull.recv()
        except zmq.Again:
            continue
        now = time.monotonic_ns()
        stamp = int.from_bytes(message[:STAMP_BYTES], "little")
        if stamp:
            latencies[received] = now - stamp
            received += 1
    pull.close(linger=0)
    histogram = new_histogram()
    record_ns(histogram, latencies[spec["warmup_records"]:received])
    return {"records": received, **summary(histogram), "histogram": encode(histogram)}
