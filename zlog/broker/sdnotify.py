"""systemd's notify protocol (sd_notify(3)) in a few lines, with no libsystemd dependency.

Under `Type=notify` systemd passes NOTIFY_SOCKET, a unix datagram socket path (a leading `@`
means Linux's abstract namespace, spelled with a NUL byte). The service sends newline-separated
`KEY=VALUE` datagrams: READY=1 once serving, WATCHDOG=1 keep-alives at least every
WATCHDOG_USEC, STOPPING=1 when shutting down, STATUS=... for `systemctl status`. Outside
systemd (no NOTIFY_SOCKET) every call does nothing, so the broker runs the same either way.

Notifications are best effort: a failed send is logged once and never stops the broker, nor
waits for a service manager that does not read.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

log = logging.getLogger(__name__)


class SystemdNotifier:
    """Sends state changes to the service manager named by NOTIFY_SOCKET, if any."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        self.address = _socket_address(environ.get("NOTIFY_SOCKET", ""))
        self.watchdog_interval_ms = _watchdog_interval_ms(environ)
        self._socket: socket.socket | None = None
        self._warned = False
        if self.address is not None:
            self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)

    @property
    def enabled(self) -> bool:
        return self._socket is not None

    def notify(self, *assignments: str) -> bool:
        """Send `KEY=VALUE` lines as one datagram; False when not under systemd or it failed."""
        assert assignments and all("=" in item for item in assignments)
        if self._socket is None or self.address is None:
            return False
        try:
            # Never waiting: a datagram socket's queue is short (net.unix.max_dgram_qlen), and
            # a service manager slow to read it must not stop the supervisor's loop, whose
            # turns the keep-alives vouch for. A dropped one is followed by the next.
            self._socket.sendto("\n".join(assignments).encode(), socket.MSG_DONTWAIT,
                                self.address)
        except OSError as error:
            if not self._warned:
                log.warning("sd_notify to %r failed: %s", self.address, error)
                self._warned = True
            return False
        return True

    def ready(self, status: str = "") -> bool:
        return self.notify("READY=1", *([f"STATUS={status}"] if status else []))

    def stopping(self, status: str = "") -> bool:
        return self.notify("STOPPING=1", *([f"STATUS={status}"] if status else []))

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def status(self, text: str) -> bool:
        return self.notify(f"STATUS={text}")

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def _socket_address(path: str) -> str | None:
    """NOTIFY_SOCKET -> an AF_UNIX address; `@name` is abstract (a leading NUL)."""
    if not path:
        return None
    if path.startswith("@"):
        return "\0" + path[1:]
    if path.startswith("/"):
        return path
    log.warning("ignoring NOTIFY_SOCKET=%r: neither an absolute path nor @abstract", path)
    return None


def _watchdog_interval_ms(environ: Mapping[str, str]) -> int | None:
    """Half of WATCHDOG_USEC in ms (sd_watchdog_enabled's advice), when it is meant for us."""
    text = environ.get("WATCHDOG_USEC", "")
    if not text.isdigit() or int(text) == 0:
        return None
    watchdog_pid = environ.get("WATCHDOG_PID", "")
    if watchdog_pid.isdigit() and int(watchdog_pid) != os.getpid():
        return None  # set for another process (e.g. inherited from our parent)
    return max(1, int(text) // 2000)
