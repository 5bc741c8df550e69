"""The controller's probes (zlog/broker/control/controller/broker_probes.py), on real sockets: which
brokers they report down, and whose port refuses connections, for the rule that fences a
broker whose processes are gone without waiting out its session.

Spec: docs/replication.md §4.1. A probe that has never connected proves nothing (the broker
may be alive behind a cut network, leading on a lease the old controller renewed); only a
port that refuses connections, or a probe that connected and then dropped, is reported down,
and only a refusal fences before the session.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator

import zmq

from zlog.broker.control.controller.broker_probes import BrokerProbes
from zlog.clock import monotonic_ms
from zlog.transport.sockets import make_router
from zlog_testbed.waiting import wait_until

HOST = "127.0.0.7"


@contextlib.contextmanager
def _probes() -> Iterator[BrokerProbes]:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    probes = BrokerProbes(1, context)
    try:
        yield probes
    finally:
        probes.close()
        context.term()


def _run_until(probes: BrokerProbes, endpoints: dict[int, str],
               holds: Callable[[BrokerProbes], bool], what: str) -> None:
    def ran() -> bool:
        probes.run(endpoints, monotonic_ms())
        return holds(probes)

    wait_until(ran, timeout_s=5.0, interval_s=0.01, what=what)


def test_a_probe_never_connected_counts_only_if_the_port_refuses() -> None:
    """Broker 2's port accepts TCP but never speaks ZMTP (a network that swallows what it
    sends): its probe never connects, and it is not reported. Broker 3's port refuses."""
    with socket.create_server((HOST, 0)) as silent, socket.socket() as closed, \
            _probes() as probes:
        closed.bind((HOST, 0))  # held, not listening: a connect is refused
        endpoints = {2: f"tcp://{HOST}:{silent.getsockname()[1]}",
                     3: f"tcp://{HOST}:{closed.getsockname()[1]}"}
        _run_until(probes, endpoints, lambda p: 3 in p.down_since_ms(), "broker 3 down")
        assert 2 not in probes.down_since_ms()
        assert 2 not in probes.connected()
        assert probes.refused() == frozenset({3})


def test_a_probe_that_connected_and_dropped_counts_at_once() -> None:
    router, endpoint = make_router(f"tcp://{HOST}:0")
    with _probes() as probes:
        try:
            _run_until(probes, {2: endpoint}, lambda p: 2 in p.connected(), "a connection")
            router.close(linger=0)  # the broker's process is gone: its connections close
            _run_until(probes, {2: endpoint}, lambda p: 2 in p.down_since_ms(), "broker 2 down")
        finally:
            router.close(linger=0)
