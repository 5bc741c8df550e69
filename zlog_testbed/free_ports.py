"""Free TCP ports on this host's addresses, for brokers started by the tests, the benchmarks and
the fault harness.

A voter listens on two ports (control p, metadata log p + 1), so a cluster on 127.0.0.1-N needs
a p with both free on every address. The answer can race with another process binding the
same port; callers start their brokers at once.

Tests run two at a time (pytest-xdist, `make test`): a port the kernel handed one of them
(port 0) may be handed again at once, to the other, before the first test's broker binds it.
So under xdist each test process takes its ports from a range of its own below the kernel's
ephemeral range, which the kernel never hands out by itself: two test processes can never
pick the same port, and no socket bound to port 0 can take one of theirs.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path

PORT_MAX = 65_535
PRIVATE_PORTS_LOW = 10_000  # where the test processes' own ranges start
PRIVATE_RANGE_PORTS = 4_000  # ports per test process


def _ephemeral_low() -> int:
    """The lowest port the kernel hands out for port 0 (32768 on a default Linux)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def _private_candidates() -> Iterator[int] | None:
    """This xdist worker's own ports, from a random start, or None outside xdist (or when the
    ranges would reach the kernel's ephemeral range)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or not worker[2:].isdigit():
        return None
    low = PRIVATE_PORTS_LOW + int(worker[2:]) * PRIVATE_RANGE_PORTS
    high = low + PRIVATE_RANGE_PORTS
    if high > _ephemeral_low():
        return None
    start = random.randrange(low, high)
    return itertools.chain(range(start, high), range(low, start))


def free_port(host: str = "127.0.0.1") -> int:
    candidates = _private_candidates()
    if candidates is not None:
        for candidate in candidates:
            with socket.socket() as sock:
                try:
                    sock.bind((host, candidate))
                except OSError:
                    continue
                return candidate
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
