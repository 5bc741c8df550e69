"""This broker's registration and heartbeats (zlog/broker/control/broker_lifecycle.py): the
lease its workers lead under, and what it says when the controller refuses it.

Spec: docs/replication.md §4.1 (the lease). The controller link is a twin that keeps what is
sent and lets the test answer it; time is the `now_ms` handed in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from zlog.broker.control.broker_lifecycle import BrokerLifecycle, Identity
from zlog.errors import ErrorCode
from zlog.transport.messages import (
    Request,
    Response,
)
from zlog.transport.messages.cluster import (
    BrokerHeartbeatRequestV0,
    BrokerHeartbeatResponseV0,
    BrokerRegistrationRequestV0,
    BrokerRegistrationResponseV0,
)
from zlog.transport.rpc import RpcResult

SESSION_MS = 1_500
HEARTBEAT_MS = 250


class _Link:
    """A controller link that delivers nothing by itself: `answer` hands the oldest request
    its response."""

    def __init__(self) -> None:
        self.sent: list[tuple[Request, Callable[[RpcResult], None]]] = []
        self.last_error = ""

    def send(self, request: Request, timeout_ms: int,
             handler: Callable[[RpcResult], None]) -> bool:
        del timeout_ms
        self.sent.append((request, handler))
        return True

    def answer(self, response: Response) -> Request:
        request, handler = self.sent.pop(0)
        handler(RpcResult(1, request, response, None))
        return request


def _lifecycle() -> tuple[BrokerLifecycle, _Link]:
    link = _Link()
    lifecycle = BrokerLifecycle(
        Identity(2, "incarnation", "h2", "tcp://h2:7400", 1, dir_id="d2"),
        heartbeat_interval_ms=HEARTBEAT_MS, session_timeout_ms=SESSION_MS,
        link=link, worker_endpoints=lambda: ("",))  # type: ignore[arg-type]
    return lifecycle, link


def _registered(lifecycle: BrokerLifecycle, link: _Link, now_ms: int) -> None:
    lifecycle.run(now_ms)
    request = link.answer(BrokerRegistrationResponseV0(0, "", "cluster", 7, 1))
    assert isinstance(request, BrokerRegistrationRequestV0)


def test_a_registration_alone_gives_no_lease() -> None:
    """A new registration is fenced until a heartbeat says otherwise: its workers may lead
    only once a heartbeat was answered unfenced."""
    lifecycle, link = _lifecycle()
    _registered(lifecycle, link, 1_000)
    assert lifecycle.lease_until_ms == 0
    lifecycle.run(1_010)
    request = link.answer(BrokerHeartbeatResponseV0(0, "", True, False, 1))
    assert isinstance(request, BrokerHeartbeatRequestV0)
    assert lifecycle.lease_until_ms == 0  # answered fenced
    lifecycle.run(1_010 + HEARTBEAT_MS)
    link.answer(BrokerHeartbeatResponseV0(0, "", False, False, 1))
    assert lifecycle.lease_until_ms == 1_010 + HEARTBEAT_MS + SESSION_MS


def test_a_refused_registration_is_said_once_at_warning_level(
        caplog: pytest.LogCaptureFixture) -> None:
    """A registration the controller refuses for good reason (a directory another broker
    registered) is retried, and the operator hears why, once, not at every retry."""
    lifecycle, link = _lifecycle()
    refusal = BrokerRegistrationResponseV0(
        int(ErrorCode.INVALID_REGISTRATION), "directory d2 is registered by broker 3", "", -1, 1)
    with caplog.at_level(logging.DEBUG, logger="zlog.broker.control.broker_lifecycle"):
        for attempt in range(3):
            lifecycle.run(attempt * 1_000)
            link.answer(refusal)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "directory d2 is registered by broker 3" in warnings[0].message
    assert not lifecycle.registered
