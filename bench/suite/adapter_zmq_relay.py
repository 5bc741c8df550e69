"""The floor of any Python broker on ZeroMQ: a relay that acknowledges and forwards, nothing more.

One relay process (`relay` below) binds a ROUTER that
producers' DEALERs send to, answers every message with an 8-byte acknowledgement (as a broker
answers acks=1), and forwards it on a PUSH that the consumer's PULL connects to (as a broker
hands a record to a consumer waiting at the tail). It stores, validates and decodes nothing: a
broker written in Python with zmq on this path does at least this much per record, in the same
processes and threads (sender, relay, receiver, each with its zmq I/O thread), so its latency
here is at least this figure. Latency only: produce and consume have nothing to compare.
"""

from __future__ import annotations

import sys
from typing import Any, Final

from bench.suite.adapter_zmq import receive_stamped
from bench.suite.common import (
    REPO_ROOT,
    Schedule,
    ServerProcess,
    Spec,
    free_port,
    latency_padding,
    stamped,
)

NAME: Final = "zmq_relay"
ACK: Final = b"ack-----"
PROBE: Final = b"probe"
ACK_WAIT_MS: Final = 5_000  # after the last send, for the acknowledgements still due


class Server:
    """The relay process on two free loopback ports, stopped by its PID."""

    def __init__(self) -> None:
        self.endpoint = ""
        self.pid: int | None = None
        self._process: ServerProcess | None = None

    def start(self) -> None:
        in_port, out_port = free_port(), free_port()
        # The server's working directory is its temp dir: name the repository explicitly.
        code = (f"import sys; sys.path.insert(0, {str(REPO_ROOT)!r}); "
                "from bench.suite.adapter_zmq_relay import relay; "
                f"relay('tcp://127.0.0.1:{in_port}', 'tcp://127.0.0.1:{out_port}')")
        self._process = ServerProcess(NAME, lambda _directory: [sys.executable, "-c", code])
        self.pid = self._process.pid
        self.endpoint = f"tcp://127.0.0.1:{in_port},tcp://127.0.0.1:{out_port}"
        self._process.wait_ready(self._answers)

    def _answers(self) -> bool:
        import zmq

        with zmq.Context() as context, context.socket(zmq.DEALER) as dealer:
            dealer.setsockopt(zmq.LINGER, 0)
            dealer.connect(self.endpoint.split(",")[0])
            dealer.send(PROBE)
            return bool(dealer.poll(1000)) and dealer.recv() == ACK

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop()

    def create(self, topic: str, partitions: int) -> None:
        """Nothing is stored: one relay serves every case."""

    def delete(self, topic: str, partitions: int) -> None:
        """Nothing is stored."""

    def version(self) -> str:
        import zmq

        return f"a Python relay: pyzmq {zmq.__version__}, libzmq {zmq.zmq_version()}"


def relay(in_endpoint: str, out_endpoint: str) -> None:
    """Acknowledge every message to its sender and forward it (probes are only answered)."""
    import zmq

    context = zmq.Context()
    router = context.socket(zmq.ROUTER)
    router.bind(in_endpoint)
    push = context.socket(zmq.PUSH)
    push.setsockopt(zmq.SNDHWM, 0)
    push.bind(out_endpoint)
    while True:
        identity, message = router.recv_multipart(copy=False)
        router.send_multipart([identity, ACK], copy=False)
        if message.bytes != PROBE:
            push.send(message, copy=False)


# --------------------------------------------------------------------------------- children


def produce(spec: Spec) -> dict[str, Any]:
    raise ValueError("the relay stores nothing: it is a latency floor only")


def consume(spec: Spec) -> dict[str, Any]:
    raise ValueError("the relay stores nothing: it is a latency floor only")


def latency_send(spec: Spec) -> dict[str, Any]:
    """One message per record on the open-loop schedule; acknowledgements read as they come."""
    import zmq

    padding = latency_padding(spec["value_bytes"])
    total = spec["total"]
    context = zmq.Context()
    dealer = context.socket(zmq.DEALER)
    dealer.connect(spec["endpoint"].split(",")[0])
    dealer.send(bytes(spec["value_bytes"]))  # connected and warm; the stamp 0 is skipped
    dealer.recv()
    acked = 0
    schedule = Schedule.after_go(spec)
    for due in schedule.due():
        for index in due:
            dealer.send(stamped(schedule.scheduled_ns(index), padding))
        while dealer.poll(0):
            dealer.recv()
            acked += 1
    while acked < total and dealer.poll(ACK_WAIT_MS):
        dealer.recv()
        acked += 1
    dealer.close(linger=0)
    context.term()
    return {"records": total, "acked": acked, "sender_late_us_max": schedule.late_us_max}


def latency_receive(spec: Spec) -> dict[str, Any]:
    import zmq

    context = zmq.Context()
    pull = context.socket(zmq.PULL)
    pull.connect(spec["endpoint"].split(",")[1])
    result = receive_stamped(pull, spec)
    context.term()
    return result
