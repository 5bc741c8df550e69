"""Free TCP ports on this host's addresses, for brokers started by the tests, the benchmarks and
the fault harness.

A voter listens on two ports (control p, metadata log p + 1), so a cluster on 127.0.0.1-N needs
a p with both free on every address. The answer can race with another process binding the
same port; callers start their brokers at once.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Sequence

PORT_MAX = 65_535


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def free_port_pair(hosts: Sequence[str]) -> int:
    """A port p with p and p + 1 free on every host (a voter's control and Raft ports)."""
    for _ in range(100):
        port = free_port(hosts[0])
        if port >= PORT_MAX:
            continue
        try:
            with contextlib.ExitStack() as stack:
                for host in hosts:
                    for candidate in (port, port + 1):
                        sock = stack.enter_context(socket.socket())
                        sock.bind((host, candidate))
        except OSError:
            continue
        return port
    raise RuntimeError("no free pair of ports on " + ", ".join(hosts))
