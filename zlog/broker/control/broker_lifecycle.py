"""This broker in the cluster: its registration, its heartbeats, and its workers' ISR changes,
all over one connection to the controller.

Every supervisor runs one, the controller's own included (it reaches its own control endpoint
like any other broker, so there is one code path). At start it registers (BrokerRegistration)
and learns its broker epoch; from then on it sends a heartbeat every
`broker_heartbeat_interval_ms` with its workers' data endpoints, and learns whether the
controller fenced it. A heartbeat answered STALE_BROKER_EPOCH (the controller no longer knows
this registration) registers again. A controlled shutdown is a flag on the heartbeats: the
controller moves this broker's leaderships away and says when it may stop.

Requests travel over the supervisor's `ControllerLink`, which follows the controller as it
moves. Nothing here blocks: `run()` sends what is due, on the supervisor's loop thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Final

from zlog import limits
from zlog.broker.control.controller_link import ControllerLink
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages import Request
from zlog.transport.messages.cluster import (
    AlterPartitionRequestV0,
    AlterPartitionResponseV0,
    BrokerHeartbeatRequestV0,
    BrokerHeartbeatResponseV0,
    BrokerRegistrationRequestV0,
    BrokerRegistrationResponseV0,
)
from zlog.transport.rpc import RpcResult

log = logging.getLogger(__name__)

REGISTRATION_RETRY_MS: Final = 200  # between registration attempts while none succeeds
REQUEST_TIMEOUT_MS: Final = 5_000


class Registration(Enum):
    UNREGISTERED = "unregistered"
    REGISTERING = "registering"
    REGISTERED = "registered"


@dataclass(frozen=True, slots=True)
class Identity:
    """What this broker registers as."""

    node_id: int
    incarnation_id: str
    host: str
    control_endpoint: str
    workers: int
    rack: str = ""
    dir_id: str = ""


AlterIsrDone = Callable[[int, str], None]
"""(error code, message) back to the worker that proposed an ISR change."""


class BrokerLifecycle:
    def __init__(
        self,
        identity: Identity,
        *,
        heartbeat_interval_ms: int,
        session_timeout_ms: int,
        link: ControllerLink,
        lease_margin_ms: int = 0,
        worker_endpoints: Callable[[], tuple[str, ...]],
        worker_kafka_endpoints: Callable[[], tuple[str, ...]] = tuple,
    ) -> None:
        self.identity = identity
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.session_timeout_ms = session_timeout_ms
        self.lease_margin_ms = lease_margin_ms  # the lease: a session less this
        self._link = link
        self._worker_endpoints = worker_endpoints
        self._worker_kafka_endpoints = worker_kafka_endpoints
        self.registration = Registration.UNREGISTERED
        self.cluster_id = ""
        self.broker_epoch = -1
        self.fenced = False
        self.want_shutdown = False
        self.shutdown_ready = False
        self.last_error = ""  # why the last registration or heartbeat failed (for logs)
        self._last_refusal = ""  # the registration refusal last logged at warning level
        self._isr_in_flight = 0
        self._now_ms = 0
        self.last_answer_ms = 0  # when the controller last answered a heartbeat
        self._next_registration_ms = 0
        self._next_heartbeat_ms = 0
        self._heartbeat_in_flight = False
        self._sent_ms = 0  # when the registration or heartbeat in flight was sent
        self.lease_until_ms = 0  # this broker leads until then (worker_protocol.Lease)

    @property
    def registered(self) -> bool:
        return self.registration == Registration.REGISTERED

    def run(self, now_ms: int) -> None:
        """Send what is due (the link has handed over the answers that arrived)."""
        self._now_ms = now_ms
        if self.registration != Registration.REGISTERED:
            if self.registration == Registration.UNREGISTERED and now_ms >= \
                    self._next_registration_ms:
                self._register(now_ms)
            return
        if not self._heartbeat_in_flight and now_ms >= self._next_heartbeat_ms:
            self._heartbeat(now_ms)

    def _send(self, request: Request, handler: Callable[[RpcResult], None]) -> bool:
        sent = self._link.send(request, REQUEST_TIMEOUT_MS, handler)
        if not sent:
            self.last_error = self._link.last_error
        return sent

    def _register(self, now_ms: int) -> None:
        identity = self.identity
        request = BrokerRegistrationRequestV0(
            identity.node_id, identity.incarnation_id, self.cluster_id, identity.host,
            identity.control_endpoint, identity.workers, identity.rack, identity.dir_id)
        self._next_registration_ms = now_ms + REGISTRATION_RETRY_MS
        self._sent_ms = now_ms
        if self._send(request, self._registered):
            self.registration = Registration.REGISTERING

    def _registered(self, result: RpcResult) -> None:
        response = result.response
        if not isinstance(response, BrokerRegistrationResponseV0) or response.error_code != 0:
            self.last_error = str(result.error) if result.error is not None else \
                getattr(response, "error_message", "")
            # A refusal is said once per reason (a retry says it again only if it changed):
            # NOT_CONTROLLER while a controller is elected is expected; INVALID_REGISTRATION or
            # INCONSISTENT_CLUSTER_ID need an operator.
            code = (response.error_code if isinstance(response, BrokerRegistrationResponseV0)
                    else -1)
            level = (logging.DEBUG if code in (-1, ErrorCode.NOT_CONTROLLER)
                     or self.last_error == self._last_refusal else logging.WARNING)
            log.log(level, "registration not accepted: %s", self.last_error)
            self._last_refusal = self.last_error
            self.registration = Registration.UNREGISTERED
            return
        if response.broker_epoch != self.broker_epoch:
            log.info("registered broker %d in cluster %s (broker epoch %d)",
                     self.identity.node_id, response.cluster_id, response.broker_epoch)
        self.cluster_id = response.cluster_id
        self.broker_epoch = response.broker_epoch
        self.registration = Registration.REGISTERED
        self._next_heartbeat_ms = 0
        self.last_answer_ms = self._now_ms
        self._last_refusal = ""
        # No lease yet: a registration is fenced until a heartbeat is answered unfenced.

    def _heartbeat(self, now_ms: int) -> None:
        request = BrokerHeartbeatRequestV0(self.identity.node_id, self.broker_epoch,
                                           self._worker_endpoints(), self.want_shutdown,
                                           self._worker_kafka_endpoints())
        self._next_heartbeat_ms = now_ms + self.heartbeat_interval_ms
        self._sent_ms = now_ms
        self._heartbeat_in_flight = self._send(request, self._heartbeat_answered)

    def _heartbeat_answered(self, result: RpcResult) -> None:
        self._heartbeat_in_flight = False
        response = result.response
        if not isinstance(response, BrokerHeartbeatResponseV0):
            self.last_error = str(result.error)
            return
        if response.error_code == ErrorCode.STALE_BROKER_EPOCH:
            log.warning("the controller does not know broker epoch %d: registering again",
                        self.broker_epoch)
            self.registration = Registration.UNREGISTERED
            return
        if response.error_code != 0:
            self.last_error = response.error_message
            return
        if response.fenced != self.fenced:
            log.warning("this broker is %s", "fenced" if response.fenced else "unfenced")
        self.fenced = response.fenced
        self.shutdown_ready = response.shutdown_ready
        self.last_answer_ms = self._now_ms
        if not response.fenced:
            self._extend_lease()

    def _extend_lease(self) -> None:
        """The controller's session for this broker started no earlier than the request
        that was just answered was sent: leading until then plus a session never outlasts
        the controller's own deadline for it. Less the margin: the controller that answered
        may have been cut off from the metadata log's quorum, and answers until its Raft
        node steps down, up to an election timeout after the others may have elected a new
        controller, whose sessions start at its takeover."""
        self.lease_until_ms = max(self.lease_until_ms, self._sent_ms + self.session_timeout_ms
                                  - self.lease_margin_ms)

    def alter_isr(self, request: AlterPartitionRequestV0, done: AlterIsrDone) -> None:
        """Take a worker's ISR change to the controller; `done` hears its answer."""

        def answered(result: RpcResult) -> None:
            self._isr_in_flight -= 1
            response = result.response
            if isinstance(response, AlterPartitionResponseV0):
                done(response.error_code, response.error_message)
            else:
                error = result.error or ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR, "no answer")
                done(int(error.code), error.message)

        if (self._isr_in_flight >= limits.ALTER_ISR_IN_FLIGHT_MAX
                or not self._send(request, answered)):
            done(int(ErrorCode.NOT_CONTROLLER), "no controller to take the change to yet")
            return
        self._isr_in_flight += 1
