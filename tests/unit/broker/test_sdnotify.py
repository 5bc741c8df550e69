"""sd_notify over a real unix datagram socket, as systemd would listen (sd_notify(3))."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from zlog.broker.sdnotify import SystemdNotifier


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / "notify.sock")
    sock.bind(path)
    sock.settimeout(5)
    try:
        yield sock, path
    finally:
        sock.close()


def test_ready_watchdog_stopping_arrive_as_datagrams(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    notifier = SystemdNotifier({"NOTIFY_SOCKET": path})
    assert notifier.enabled
    assert notifier.ready("serving")
    assert sock.recv(4096) == b"READY=1\nSTATUS=serving"
    assert notifier.watchdog()
    assert sock.recv(4096) == b"WATCHDOG=1"
    assert notifier.stopping()
    assert sock.recv(4096) == b"STOPPING=1"
    notifier.close()


def test_abstract_namespace_socket() -> None:
    name = f"zlog-test-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(5)
    try:
        notifier = SystemdNotifier({"NOTIFY_SOCKET": "@" + name})
        assert notifier.ready()
        assert sock.recv(4096) == b"READY=1"
        notifier.close()
    finally:
        sock.close()


def test_without_systemd_everything_is_a_no_op() -> None:
    for environ in ({}, {"NOTIFY_SOCKET": ""}, {"NOTIFY_SOCKET": "relative/path"}):
        notifier = SystemdNotifier(environ)
        assert not notifier.enabled
        assert not notifier.ready()
        assert notifier.watchdog_interval_ms is None


def test_a_vanished_socket_is_reported_once_and_never_raises(tmp_path: Path) -> None:
    notifier = SystemdNotifier({"NOTIFY_SOCKET": str(tmp_path / "gone.sock")})
    assert not notifier.ready()
    assert not notifier.watchdog()
    notifier.close()


def test_watchdog_interval_is_half_of_watchdog_usec_and_only_for_us() -> None:
    assert SystemdNotifier({"WATCHDOG_USEC": "20000000"}).watchdog_interval_ms == 10_000
    mine = {"WATCHDOG_USEC": "4000", "WATCHDOG_PID": str(os.getpid())}
    assert SystemdNotifier(mine).watchdog_interval_ms == 2
    other = {"WATCHDOG_USEC": "20000000", "WATCHDOG_PID": str(os.getpid() + 1)}
    assert SystemdNotifier(other).watchdog_interval_ms is None
    assert SystemdNotifier({"WATCHDOG_USEC": "0"}).watchdog_interval_ms is None


def test_a_service_manager_not_reading_never_blocks_the_sender(
        listener: tuple[socket.socket, str]) -> None:
    """The queue of a unix datagram socket is short (net.unix.max_dgram_qlen, often 10): once
    it is full, a blocking send waits for the reader, and the supervisor's loop with it. A
    notification that does not fit is dropped instead (the next keep-alive follows)."""
    _sock, path = listener
    notifier = SystemdNotifier({"NOTIFY_SOCKET": path})
    sent: list[bool] = []
    sender = threading.Thread(target=lambda: sent.extend(notifier.watchdog()
                                                         for _ in range(1_000)), daemon=True)
    sender.start()
    sender.join(10)
    assert not sender.is_alive(), f"blocked after {len(sent)} notifications"
    assert sent[0] and not sent[-1], "the first fit, the last were dropped"
    notifier.close()
