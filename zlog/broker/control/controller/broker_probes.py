"""The controller's own connection to each broker, to learn of a dead one before its session
runs out.

A broker killed (or its host's network cut) stops heartbeating, and the session timeout
(`broker.session.timeout.ms`) is what fences it; its partitions wait that long for a new
leader. But a broker process that dies has its TCP connections closed by the kernel at once:
the controller, holding a ZeroMQ connection to every broker's control endpoint, sees that one
drop within milliseconds. A drop alone proves nothing, though: a network that resets
connections, or a middlebox, drops it too while the broker runs on and its workers lead on the
lease its last answered heartbeat gave them. So the controller fences before the session only
a broker whose processes are certainly gone (`service.py`).

That is told apart without waiting: while a probe is down, a plain TCP connect to the
broker's control port (`port_check.py`) is refused at once when nothing listens there any
more, and a broker whose port refuses connections, silent since its probe went down, is fenced
at once. Its workers took no write since (they check the supervisor's lifeline before each
append, and it is cut before the port refuses: `zlog/broker/supervisor_lifeline.py`). A
connect that hangs or succeeds proves nothing, and the session stands. A frozen broker
(SIGSTOP, a stalled VM) keeps its connections open and its port accepting; its session
fences it.

A controller that just took over has no probe history, and a probe that has never connected
proves nothing either; only its port's refusal counts, so a broker that died with the old
controller is still fenced at once.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import zmq

from zlog.broker.control.port_check import FIRST_WAIT_MS, PortCheck
from zlog.transport.rpc import RpcClient
from zlog.transport.sockets import RECONNECT_INTERVAL_MS

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Probe:
    endpoint: str
    client: RpcClient | None
    down_since_ms: int | None  # None while connected
    retry_at_ms: int = 0
    port_check: PortCheck | None = None  # a TCP connect under way while the probe is down
    next_check_ms: int = 0  # when the next connect may start
    refused: bool = False  # the control port refused a connection since the probe went down
    reached: bool = False  # it connected once: a drop since means something


class BrokerProbes:
    def __init__(self, own_node_id: int, context: zmq.Context[Any] | None = None) -> None:
        self._own_node_id = own_node_id
        self._context = context
        self._probes: dict[int, _Probe] = {}

    def run(self, control_endpoints: Mapping[int, str], now_ms: int) -> None:
        """Follow the registered brokers (node id → control endpoint) and take each probe's
        connection events; a broken probe is replaced after the reconnect interval."""
        for node_id in [n for n, p in self._probes.items()
                        if control_endpoints.get(n) != p.endpoint]:
            self._drop(node_id)
        for node_id, endpoint in control_endpoints.items():
            if node_id == self._own_node_id or not endpoint:
                continue
            probe = self._probes.get(node_id)
            if probe is None:
                probe = self._probes[node_id] = _Probe(endpoint, None, now_ms)
            self._take_events(node_id, probe, now_ms)

    def down_since_ms(self) -> dict[int, int]:
        """Each broker whose probe dropped (or never connected, and its port refused a
        connection), and since when: a heartbeat since then means it came back."""
        return {node_id: probe.down_since_ms for node_id, probe in self._probes.items()
                if probe.down_since_ms is not None and (probe.reached or probe.refused)}

    def connected(self) -> frozenset[int]:
        """Brokers whose probe is connected now."""
        return frozenset(node_id for node_id, probe in self._probes.items()
                         if probe.down_since_ms is None)

    def refused(self) -> frozenset[int]:
        """Brokers that are down and whose control port refused a connection since: no
        process listens there any more."""
        return frozenset(node_id for node_id, probe in self._probes.items()
                         if probe.down_since_ms is not None and probe.refused)

    def sockets(self) -> tuple[zmq.Socket[bytes], ...]:
        """The probes' sockets, so that a dropped connection wakes the loop at once."""
        return tuple(sock for probe in self._probes.values() if probe.client is not None
                     for sock in probe.client.sockets)

    def close(self) -> None:
        for node_id in list(self._probes):
            self._drop(node_id)

    def _take_events(self, node_id: int, probe: _Probe, now_ms: int) -> None:
        if probe.client is None:
            if now_ms < probe.retry_at_ms:
                return
            try:
                probe.client = RpcClient(probe.endpoint, context=self._context)
            except zmq.ZMQError as error:
                log.warning("cannot probe broker %d at %s: %s", node_id, probe.endpoint, error)
                probe.retry_at_ms = now_ms + RECONNECT_INTERVAL_MS
                return
        client = probe.client
        client.poll_responses(0)  # takes the connection events
        if client.broken is not None:
            client.close()
            probe.client = None
            probe.retry_at_ms = now_ms + RECONNECT_INTERVAL_MS
            if probe.down_since_ms is None:
                probe.down_since_ms = now_ms
                log.info("broker %d's control endpoint %s is unreachable: %s", node_id,
                         probe.endpoint, client.broken)
        elif client.connected:
            probe.down_since_ms = None
            probe.refused = False
            probe.reached = True
        if probe.down_since_ms is not None:
            self._check_port(probe, now_ms)

    @staticmethod
    def _check_port(probe: _Probe, now_ms: int) -> None:
        """Keep one TCP connect to a down broker's control port going, and note a refusal."""
        wait_ms = 0
        if probe.port_check is None:
            if now_ms < probe.next_check_ms:
                return
            probe.next_check_ms = now_ms + RECONNECT_INTERVAL_MS
            probe.port_check = PortCheck.start(probe.endpoint, now_ms)
            if probe.port_check is None:
                return  # not a numeric address: the interval rule alone
            wait_ms = FIRST_WAIT_MS
        outcome = probe.port_check.outcome(now_ms, wait_ms)
        if outcome is None:
            return
        probe.refused = outcome == "refused"
        probe.port_check.close()
        probe.port_check = None

    def _drop(self, node_id: int) -> None:
        probe = self._probes.pop(node_id)
        if probe.port_check is not None:
            probe.port_check.close()
        if probe.client is not None:
            with contextlib.suppress(zmq.ZMQError):
                probe.client.close()
