"""The gateway's calls into zlog's native protocol, one set of connections per thread.

Each Kafka request is answered on a thread of the gateway's pool, since a native call blocks
(a JoinGroup for as long as the group takes to rebalance); zmq sockets belong to the thread
that made them, so every thread keeps its own Connections and its own link to each group's
coordinator.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TypeVar

from zlog.client.cluster import Connections
from zlog.client.group.admin import GroupAdmin
from zlog.client.group.coordinator import CoordinatorLink
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages import Request, Response
from zlog.transport.messages.groups import GroupRequest, GroupResponse

R = TypeVar("R", bound=Response)

REQUEST_TIMEOUT_MS_DEFAULT = 30_000


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

    def _state(self) -> _ThreadState:
        state: _ThreadState | None = getattr(self._local, "state", None)
        if state is None:
            connections = Connections(self.control_endpoint)
            state = _ThreadState(connections, GroupAdmin(connections, self.request_timeout_ms))
            self._local.state = state
        return state

    def control(self, request: Request, expected: type[R], timeout_ms: int | None = None) -> R:
        """The control plane's answer (any broker's, the local one first)."""
        response = self._state().connections.call_control(
            request, timeout_ms or self.request_timeout_ms)
        if not isinstance(response, expected):
            raise ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR,
                            f"expected {expected.__name__}, the broker sent "
                            f"{type(response).__name__}")
        return response

    def group(self, group_id: str, request: GroupRequest,
              timeout_ms: int | None = None) -> GroupResponse:
        """One call to the group's coordinator, found first; its answer as it is, errors
        included: the Kafka client retries what Kafka calls retriable."""
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
