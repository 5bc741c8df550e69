"""The gateway's calls into zlog's native protocol, one set of connections per thread.

Each Kafka request is answered on a thread of the gateway's pool, since a native call blocks
(a JoinGroup for as long as the group takes to rebalance); zmq sockets belong to the thread
that made them, so every thread keeps its own Connections and its own link to each group's
coordinator.

With security on, the gateway speaks to its broker as the broker's own principal (a
super-user), so it checks each call itself first, under the Kafka client's principal, with the
same rules the native listener applies (zlog/broker/request_acls.py): `as_principal` gives the
view of one logged-in client.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from zlog.broker.authorizer import Authorizer
from zlog.broker.request_acls import check_request
from zlog.client.cluster import Connections
from zlog.client.group.admin import GroupAdmin
from zlog.client.group.coordinator import CoordinatorLink
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages import Request, Response
from zlog.transport.messages.admin import (
    MetadataRequestV0,
    MetadataResponseV0,
    PartitionMetadata,
    TopicMetadata,
)
from zlog.transport.messages.groups import GroupRequest, GroupResponse
from zlog.transport.messages.security import ANONYMOUS

R = TypeVar("R", bound=Response)

log = logging.getLogger("zlog.kafka_gateway")

REQUEST_TIMEOUT_MS_DEFAULT = 30_000
LEADER_ASK_TIMEOUT_MS: Final = 2_000
KAFKA_ENDPOINT: Final = "kafka_endpoint"
"""PartitionMetadata's field naming the leading worker's Kafka port, "host:port"."""


@dataclass
class _ThreadState:
    connections: Connections
    groups: GroupAdmin
    links: dict[str, CoordinatorLink] = field(default_factory=dict)


class Native:
    """zlog's native calls, from whichever thread asks."""

    def __init__(self, control_endpoint: str,
                 request_timeout_ms: int = REQUEST_TIMEOUT_MS_DEFAULT) -> None:
        self.control_endpoint = control_endpoint
        self.request_timeout_ms = request_timeout_ms
        self._local = threading.local()
        self.principal = ANONYMOUS
        self.authorizer: Authorizer | None = None  # None: security off, nothing checked

    def as_principal(self, principal: str, authorizer: Authorizer) -> Native:
        """These calls (the same connections) made for `principal`: each checked first."""
        view = copy.copy(self)
        view.principal, view.authorizer = principal, authorizer
        return view

    def authorize(self, request: Request) -> None:
        """Raise the authorization error if the principal may not make `request`."""
        if self.authorizer is not None:
            check_request(self.authorizer, self.principal, request)

    def may(self, operation: str, resource_type: str, name: str) -> bool:
        return self.authorizer is None or self.authorizer.allowed(self.principal, operation,
                                                                  resource_type, name)

    def _state(self) -> _ThreadState:
        state: _ThreadState | None = getattr(self._local, "state", None)
        if state is None:
            connections = Connections(self.control_endpoint)
            state = _ThreadState(connections, GroupAdmin(connections, self.request_timeout_ms))
            self._local.state = state
        return state

    def control(self, request: Request, expected: type[R], timeout_ms: int | None = None, *,
                kafka_ports: bool = True) -> R:
        """The control plane's answer (any broker's, the local one first); a Metadata answer
        completed with every leader's Kafka port (`_with_leaders_kafka_ports`) unless the
        caller needs only its topics (`kafka_ports` False)."""
        self.authorize(request)
        state = self._state()
        response = state.connections.call_control(request, timeout_ms or self.request_timeout_ms)
        if kafka_ports and isinstance(response, MetadataResponseV0):
            response = _with_leaders_kafka_ports(state.connections, response)
        if not isinstance(response, expected):
            raise ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR,
                            f"expected {expected.__name__}, the broker sent "
                            f"{type(response).__name__}")
        return response

    def group(self, group_id: str, request: GroupRequest,
              timeout_ms: int | None = None) -> GroupResponse:
        """One call to the group's coordinator, found first; its answer as it is, errors
        included: the Kafka client retries what Kafka calls retriable."""
        self.authorize(request)
        state = self._state()
        link = state.links.get(group_id)
        if link is None:
            link = state.groups.link(group_id)
            state.links[group_id] = link
        return link.send_once(request, timeout_ms or self.request_timeout_ms)

    @property
    def groups(self) -> GroupAdmin:
        """The calls that span coordinators (ListGroups)."""
        return self._state().groups


def _with_leaders_kafka_ports(connections: Connections,
                              response: MetadataResponseV0) -> MetadataResponseV0:
    """`response` with the Kafka port of each partition's leader filled in.

    A broker knows the Kafka ports of its own workers only, so a partition led elsewhere
    comes without one; its leader's broker is asked for the topics it leads (briefly: a
    broker out of reach leaves its partitions without a Kafka leader, which a client reads
    as LEADER_NOT_AVAILABLE and asks again, by when another broker may lead them).
    """
    if not hasattr(PartitionMetadata, KAFKA_ENDPOINT):  # workers without Kafka ports
        return response
    missing: dict[int, set[str]] = {}
    for topic in response.topics:
        for partition in topic.partitions:
            if partition.leader >= 0 and not getattr(partition, KAFKA_ENDPOINT):
                missing.setdefault(partition.leader, set()).add(topic.name)
    control_endpoints = {broker.node_id: broker.control_endpoint for broker in response.brokers}
    found: dict[tuple[str, int, int], str] = {}  # (topic, partition, leader) -> Kafka port
    for leader, topics in missing.items():
        endpoint = control_endpoints.get(leader)
        if not endpoint:
            continue
        try:
            answer = connections.call_endpoint(endpoint, MetadataRequestV0(tuple(sorted(topics))),
                                               LEADER_ASK_TIMEOUT_MS)
        except ZlogError as error:
            log.debug("kafka ports of broker %d's partitions: %s", leader, error)
            continue
        if isinstance(answer, MetadataResponseV0):
            found.update({(topic.name, p.partition, p.leader): getattr(p, KAFKA_ENDPOINT)
                          for topic in answer.topics for p in topic.partitions
                          if p.leader == leader and getattr(p, KAFKA_ENDPOINT)})
    if not found:
        return response

    def completed(topic: TopicMetadata) -> TopicMetadata:
        partitions = []
        for partition in topic.partitions:
            port = found.get((topic.name, partition.partition, partition.leader))
            changes: dict[str, Any] = {KAFKA_ENDPOINT: port} if port else {}
            partitions.append(dataclasses.replace(partition, **changes))
        return dataclasses.replace(topic, partitions=tuple(partitions))

    return dataclasses.replace(response, topics=tuple(completed(t) for t in response.topics))
