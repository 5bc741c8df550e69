"""Which handler answers which API key, and the answer to any request frame.

ApiVersions is answered here from the one table. The data APIs are the partition workers':
one sent to the gateway is answered NOT_LEADER_OR_FOLLOWER for each partition it names, so
the client reads Metadata again and goes to the leader's own port (a Produce with acks=0 gets
no answer, as Kafka gives none). A native error becomes the request's own answer with its
code and sentence; a bug is logged and answered UNKNOWN_SERVER_ERROR, and the connection goes
on.

With security on, each connection has a `Session`: its login answers until the client has
logged in (zlog/kafka/kafka_login.py), then every call is checked under the client's principal
(native.py), and the principal's request quota holds the answer, reported as
throttle_time_ms.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from zlog.clock import monotonic_ms
from zlog.errors import ErrorCode, ZlogError
from zlog.kafka.kafka_login import KafkaLogin
from zlog.kafka.requests import BadRequest, KafkaRequest, parse_request
from zlog.kafka.responses import api_versions_response, error_response, respond
from zlog.kafka_gateway import admin_handlers, consumer_group_handlers, group_handlers
from zlog.kafka_gateway.calls import Call, Gateway, Handler
from zlog.kafka_gateway.gateway_security import GatewaySecurity
from zlog.transport.api import ApiKey

log = logging.getLogger("zlog.kafka_gateway")

HANDLERS: Final[dict[int, Handler]] = {
    ApiKey.METADATA: admin_handlers.metadata,
    ApiKey.CREATE_TOPICS: admin_handlers.create_topics,
    ApiKey.DELETE_TOPICS: admin_handlers.delete_topics,
    ApiKey.CREATE_PARTITIONS: admin_handlers.create_partitions,
    ApiKey.DESCRIBE_CONFIGS: admin_handlers.describe_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: admin_handlers.incremental_alter_configs,
    ApiKey.ELECT_LEADERS: admin_handlers.elect_leaders,
    ApiKey.DESCRIBE_CLUSTER: admin_handlers.describe_cluster,
    ApiKey.INIT_PRODUCER_ID: admin_handlers.init_producer_id,
    ApiKey.FIND_COORDINATOR: group_handlers.find_coordinator,
    ApiKey.JOIN_GROUP: group_handlers.join_group,
    ApiKey.SYNC_GROUP: group_handlers.sync_group,
    ApiKey.HEARTBEAT: group_handlers.heartbeat,
    ApiKey.LEAVE_GROUP: group_handlers.leave_group,
    ApiKey.OFFSET_COMMIT: group_handlers.offset_commit,
    ApiKey.OFFSET_FETCH: group_handlers.offset_fetch,
    ApiKey.DESCRIBE_GROUPS: group_handlers.describe_groups,
    ApiKey.LIST_GROUPS: group_handlers.list_groups,
    ApiKey.DELETE_GROUPS: group_handlers.delete_groups,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_group_handlers.consumer_group_heartbeat,
}

RunBlocking = Callable[[Handler, Gateway, Call], Awaitable[dict[str, object]]]


@dataclass(frozen=True, slots=True)
class Session:
    """A connection's login and what its principal is checked against (security on)."""

    login: KafkaLogin
    security: GatewaySecurity


@dataclass(frozen=True, slots=True)
class Answer:
    """The framed answer (None: Kafka sends none), whether to close the connection after it,
    and how long to hold it (a quota's throttle)."""

    reply: bytes | None
    close: bool = False
    throttle_ms: int = 0


async def answer(frame: bytes, gateway: Gateway, client_host: str, run: RunBlocking,
                 session: Session | None = None) -> Answer:
    """The answer to one request frame."""
    try:
        request = parse_request(frame)
    except BadRequest as bad:
        log.debug("kafka request from %s: %s", client_host, bad.reason)
        return Answer(error_response(bad.api_key, bad.api_version, bad.correlation_id,
                                     bad.error, request=bad.body, message=bad.reason))
    if session is not None:
        step = session.login.step(request)
        if step is not None:
            return Answer(step.reply, step.close)
    if request.api_key == ApiKey.API_VERSIONS:
        return Answer(api_versions_response(request.api_version, request.correlation_id,
                                            sasl=session is not None))
    handler = HANDLERS.get(request.api_key)
    if handler is None:
        return Answer(_not_here(request))
    principal_gateway, throttle_ms = gateway, 0
    if session is not None:
        principal = session.login.principal
        assert principal is not None, "the login answers until the client has logged in"
        security = session.security
        principal_gateway = dataclasses.replace(
            gateway, native=gateway.native.as_principal(principal, security.authorizer))
        if principal not in security.authorizer.super_users:
            throttle_ms = security.quotas.record(principal, request.client_id or "",
                                                 "requests_per_s", 1, monotonic_ms())
    try:
        values = await run(handler, principal_gateway, Call(request, client_host))
    except ZlogError as error:
        return Answer(_error(request, error.code, error.message), throttle_ms=throttle_ms)
    except Exception:  # a bug, not input: this client gets an error, the others go on
        log.exception("kafka request %s v%d failed", ApiKey(request.api_key).name,
                      request.api_version)
        return Answer(_error(request, ErrorCode.UNKNOWN_SERVER_ERROR,
                             "the broker failed on this"))
    if "throttle_time_ms" in values:
        values["throttle_time_ms"] = throttle_ms
    return Answer(respond(request.api_key, request.api_version, request.correlation_id, values),
                  throttle_ms=throttle_ms)


def _error(request: KafkaRequest, code: ErrorCode, message: str) -> bytes:
    return error_response(request.api_key, request.api_version, request.correlation_id, code,
                          request=request.body, message=message)


def _not_here(request: KafkaRequest) -> bytes | None:
    if request.api_key == ApiKey.PRODUCE and request.body.acks == 0:
        return None
    return _error(request, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                  "this is the broker's gateway; a partition's leader serves its data")
