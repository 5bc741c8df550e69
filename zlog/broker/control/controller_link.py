"""This supervisor's one connection to the controller, wherever the controller is now.

The broker's registration and heartbeats, its workers' ISR changes, and the clients' metadata
changes forwarded from a supervisor that is not the controller all travel over it. The
controller is whoever leads the metadata log; `controller_endpoint()` says where that is (None
while an election runs). When it moves, the old connection is closed and every request still
waiting on it is answered NOT_CONTROLLER, so each sender decides for itself whether to try again.
Nothing here blocks: `run()` takes the answers that arrived, on the supervisor's loop thread.

When the connection drops while the controller has not moved, a TCP connect to its port
(`port_check.py`) tells a dead controller from a dropped connection: refused, and `on_gone`
hears of it, so this node's metadata log need not wait out a whole election timeout to notice
that its leader died with the controller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import zmq

from zlog.broker.control.port_check import FIRST_WAIT_MS, PortCheck
from zlog.clock import monotonic_ms
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages import Request
from zlog.transport.rpc import RpcClient, RpcResult

Handler = Callable[[RpcResult], None]


class ControllerLink:
    def __init__(self, controller_endpoint: Callable[[], str | None],
                 context: zmq.Context[Any] | None = None,
                 on_gone: Callable[[str], None] = lambda endpoint: None) -> None:
        self._controller_endpoint = controller_endpoint
        self._context = context
        self._on_gone = on_gone  # hears a controller endpoint that refused a connection
        self._rpc: RpcClient | None = None
        self._port_check: PortCheck | None = None  # after a drop, is anything still there?
        self._port_check_endpoint = ""
        self._handlers: dict[int, tuple[Request, Handler]] = {}
        self.last_error = ""  # why the last send failed (for logs)

    @property
    def waiting_count(self) -> int:
        return len(self._handlers)

    def sockets(self) -> tuple[zmq.Socket[bytes], ...]:
        return () if self._rpc is None else self._rpc.sockets

    def run(self) -> None:
        """Hand each answer (or timeout) that arrived to its sender; follow the controller."""
        self._client()
        self._check_port(monotonic_ms())
        if self._rpc is None:
            return
        for result in self._rpc.poll_responses(0):
            entry = self._handlers.pop(result.correlation_id, None)
            if entry is not None:
                entry[1](result)

    def send(self, request: Request, timeout_ms: int, handler: Handler) -> bool:
        """Send `request` to the controller; `handler` hears the outcome. False: not sent (no
        controller known, or too much in flight); `last_error` says why."""
        rpc = self._client()
        if rpc is None:
            self.last_error = "no controller is known yet"
            return False
        if not rpc.has_capacity:
            self.last_error = f"{rpc.in_flight} requests wait for the controller"
            return False
        try:
            correlation_id = rpc.send(request, timeout_ms)
        except ZlogError as error:
            self.last_error = str(error)
            return False
        self._handlers[correlation_id] = (request, handler)
        return True

    def close(self) -> None:
        self._fail_waiting("this broker is stopping")
        if self._port_check is not None:
            self._port_check.close()
            self._port_check = None
        if self._rpc is not None:
            self._rpc.close()
            self._rpc = None

    def _client(self) -> RpcClient | None:
        endpoint = self._controller_endpoint()
        rpc = self._rpc
        if rpc is not None and rpc.broken is not None and rpc.endpoint == endpoint:
            self._start_port_check(rpc.endpoint, monotonic_ms())
        if rpc is not None and (rpc.endpoint != endpoint or rpc.broken is not None):
            for result in rpc.poll_responses(0):  # answers that made it before the move
                entry = self._handlers.pop(result.correlation_id, None)
                if entry is not None:
                    entry[1](result)
            self._fail_waiting("the connection to the controller was closed")
            rpc.close()
            rpc = self._rpc = None
        if endpoint is None:
            return None
        if rpc is None:
            try:
                rpc = self._rpc = RpcClient(endpoint, context=self._context)
            except zmq.ZMQError as error:
                self.last_error = f"cannot connect to the controller at {endpoint}: {error}"
                return None
        return rpc

    def _start_port_check(self, endpoint: str, now_ms: int) -> None:
        if self._port_check is not None:
            self._port_check.close()
        self._port_check = PortCheck.start(endpoint, now_ms)
        self._port_check_endpoint = endpoint
        self._check_port(now_ms, FIRST_WAIT_MS)

    def _check_port(self, now_ms: int, wait_ms: int = 0) -> None:
        check = self._port_check
        if check is None:
            return
        outcome = check.outcome(now_ms, wait_ms)
        if outcome is None:
            return
        check.close()
        self._port_check = None
        if outcome == "refused" and self._port_check_endpoint == self._controller_endpoint():
            self._on_gone(self._port_check_endpoint)

    def _fail_waiting(self, why: str) -> None:
        waiting, self._handlers = self._handlers, {}
        for correlation_id, (request, handler) in waiting.items():
            handler(RpcResult(correlation_id, request, None,
                              ZlogError(ErrorCode.NOT_CONTROLLER, why)))
