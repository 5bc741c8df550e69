"""Which handler answers which API key, and the answer to any request frame.

ApiVersions is answered here from the one table. The data APIs are the partition workers':
one sent to the gateway is answered NOT_LEADER_OR_FOLLOWER for each partition it names, so
the client reads Metadata again and goes to the leader's own port (a Produce with acks=0 gets
no answer, as Kafka gives none). A native error becomes the request's own answer with its
code and sentence; a bug is logged and answered UNKNOWN_SERVER_ERROR, and the connection goes
on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

from zlog.errors import ErrorCode, ZlogError
from zlog.kafka.requests import BadRequest, KafkaRequest, parse_request
from zlog.kafka.responses import api_versions_response, error_response, respond
from zlog.kafka_gateway import admin_handlers, group_handlers
from zlog.kafka_gateway.calls import Call, Gateway, Handler
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
}

RunBlocking = Callable[[Handler, Gateway, Call], Awaitable[dict[str, object]]]


async def answer(frame: bytes, gateway: Gateway, client_host: str,
                 run: RunBlocking) -> bytes | None:
    """The framed answer to one request frame, or None when Kafka sends none."""
    try:
        request = parse_request(frame)
    except BadRequest as bad:
        log.debug("kafka request from %s: %s", client_host, bad.reason)
        return error_response(bad.api_key, bad.api_version, bad.correlation_id, bad.error,
                              request=bad.body, message=bad.reason)
    if request.api_key == ApiKey.API_VERSIONS:
        return api_versions_response(request.api_version, request.correlation_id)
    handler = HANDLERS.get(request.api_key)
    if handler is None:
        return _not_here(request)
    try:
        values = await run(handler, gateway, Call(request, client_host))
    except ZlogError as error:
        return _error(request, error.code, error.message)
    except Exception:  # a bug, not input: this client gets an error, the others go on
        log.exception("kafka request %s v%d failed", ApiKey(request.api_key).name,
                      request.api_version)
        return _error(request, ErrorCode.UNKNOWN_SERVER_ERROR, "the broker failed on this")
    return respond(request.api_key, request.api_version, request.correlation_id, values)


def _error(request: KafkaRequest, code: ErrorCode, message: str) -> bytes:
    return error_response(request.api_key, request.api_version, request.correlation_id, code,
                          request=request.body, message=message)


def _not_here(request: KafkaRequest) -> bytes | None:
    if request.api_key == ApiKey.PRODUCE and request.body.acks == 0:
        return None
    return _error(request, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                  "this is the broker's gateway; a partition's leader serves its data")
