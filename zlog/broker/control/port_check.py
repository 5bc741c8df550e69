"""One non-blocking TCP connect, to learn whether anything still listens at an endpoint.

A refused connect (a TCP reset from the host) is positive evidence that no process holds the
port: the host is up and the process is gone. A connect that succeeds or hangs says nothing a
controller may act on (a frozen process still holds its port; a cut network drops packets),
so only a refusal counts. Numeric addresses only: resolving a name could block the
controller's loop, and such endpoints keep the slower rule that needs no check.
"""

from __future__ import annotations

import errno
import ipaddress
import select
import socket
from dataclasses import dataclass
from typing import Final, Literal

CHECK_TIMEOUT_MS: Final = 1_000  # a connect neither refused nor accepted by then proves nothing
FIRST_WAIT_MS: Final = 2  # a LAN's reset arrives within this; later ones wait for a later turn

Outcome = Literal["refused", "open", "unknown"]


@dataclass(slots=True)
class PortCheck:
    sock: socket.socket
    started_ms: int
    refused_at_once: bool = False  # the connect call itself was refused (a local port)

    @classmethod
    def start(cls, endpoint: str, now_ms: int) -> PortCheck | None:
        """A connect to a `tcp://ADDRESS:PORT` endpoint, or None when the address is not a
        literal IP address (or the endpoint is not TCP)."""
        if not endpoint.startswith("tcp://"):
            return None
        host, _, port_text = endpoint[len("tcp://"):].rpartition(":")
        host = host.strip("[]")
        try:
            family = (socket.AF_INET6 if ipaddress.ip_address(host).version == 6
                      else socket.AF_INET)
            port = int(port_text)
        except ValueError:
            return None
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        code = sock.connect_ex((host, port))
        if code not in (0, errno.EINPROGRESS, errno.EAGAIN, errno.ECONNREFUSED):
            sock.close()
            return None
        return cls(sock, now_ms, refused_at_once=code == errno.ECONNREFUSED)

    def outcome(self, now_ms: int, wait_ms: int = 0) -> Outcome | None:
        """How the connect ended, or None while it is still under way (after waiting up to
        `wait_ms` for it)."""
        if self.refused_at_once:
            return "refused"
        poller = select.poll()  # not select(): the loop's descriptors may pass FD_SETSIZE
        poller.register(self.sock, select.POLLOUT)
        if poller.poll(wait_ms):
            code = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code == errno.ECONNREFUSED:
                return "refused"
            return "open" if code == 0 else "unknown"
        if now_ms - self.started_ms >= CHECK_TIMEOUT_MS:
            return "unknown"
        return None

    def close(self) -> None:
        self.sock.close()
