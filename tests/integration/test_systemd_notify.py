"""A real broker under a real NOTIFY_SOCKET, as systemd runs it with `Type=notify` and
`WatchdogSec=`: READY=1 once serving, WATCHDOG=1 from the supervisor's loop and only while it
turns, STOPPING=1 on SIGTERM (systemd/zlog.service; zlog/broker/sdnotify.py)."""

from __future__ import annotations

import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from zlog_testbed.broker_process import BrokerProcess
from zlog_testbed.thread_freeze import ThreadFreezeError, frozen_thread

pytestmark = pytest.mark.slow

WATCHDOG_USEC = 400_000  # WatchdogSec=0.4s: the broker sends WATCHDOG=1 every 200 ms
FROZEN_S = 1.5  # over 7 watchdog intervals with the loop stuck: systemd would have killed it
DEADLINE_S = 30.0


class NotifyListener:
    """The service manager's end: a unix datagram socket, as NOTIFY_SOCKET names it."""

    def __init__(self, directory: Path) -> None:
        self.path = str(directory / "notify.sock")
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socket.bind(self.path)

    def next_message(self, timeout_s: float) -> bytes | None:
        self.socket.settimeout(timeout_s)
        try:
            return self.socket.recv(4096)
        except (TimeoutError, BlockingIOError):  # nothing came (a timeout of 0: nothing queued)
            return None

    def wait_for(self, assignment: bytes, timeout_s: float = DEADLINE_S) -> list[bytes]:
        """Every message up to and including the first with `assignment` in it."""
        deadline = time.monotonic() + timeout_s
        seen: list[bytes] = []
        while (remaining := deadline - time.monotonic()) > 0:
            message = self.next_message(remaining)
            if message is None:
                break
            seen.append(message)
            if assignment in message.split(b"\n"):
                return seen
        raise AssertionError(f"no {assignment!r} within {timeout_s}s; got {seen}")

    def drain(self) -> list[bytes]:
        messages = []
        while (message := self.next_message(0.0)) is not None:
            messages.append(message)
        return messages


@pytest.fixture
def notified_broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, NotifyListener]]:
    directory = Path(tempfile.mkdtemp(prefix="zn-", dir="/tmp"))  # a short socket path
    listener = NotifyListener(directory)
    broker = BrokerProcess(workers=1)
    broker.environment.update({"NOTIFY_SOCKET": listener.path,
                               "WATCHDOG_USEC": str(WATCHDOG_USEC)})
    try:
        yield broker, listener
    finally:
        broker.close(tmp_path)
        listener.socket.close()
        shutil.rmtree(directory, ignore_errors=True)


def test_ready_watchdog_while_the_loop_turns_and_stopping(
        notified_broker: tuple[BrokerProcess, NotifyListener]) -> None:
    broker, listener = notified_broker
    broker.start(wait=False)  # reading the notifications meanwhile, as systemd does
    before_ready = listener.wait_for(b"READY=1")
    broker.wait_ready()
    assert any(b"STATUS=serving on " + broker.endpoint.encode() in m for m in before_ready)
    for _ in range(3):
        listener.wait_for(b"WATCHDOG=1", timeout_s=5.0)

    # The supervisor's loop is its main thread; the metadata log's thread goes on beside it.
    try:
        with frozen_thread(broker.supervisor_pid):
            listener.drain()  # sent before the freeze took hold
            assert listener.next_message(FROZEN_S) is None, "a keep-alive from a stuck loop"
    except ThreadFreezeError as error:
        pytest.skip(f"cannot freeze one thread here: {error}")
    listener.wait_for(b"WATCHDOG=1", timeout_s=5.0)  # the loop turns again

    assert broker.stop() == 0
    assert listener.wait_for(b"STOPPING=1")[-1].startswith(b"STOPPING=1")
