"""A broker started with `--join`: how it gets itself added to the metadata log as a learner.

docs/raft.md §4.16. Until this broker's own copy of the metadata log names it as a member, it
asks the member it was given (AddRaftLearner; any member forwards it to the controller) every
`JOIN_RETRY_MS`. The controller proposes the configuration that adds it, with its Raft
endpoint, and answers with every member's Raft endpoint, which this broker's Raft node then
reaches. The leader streams it the log; once the configuration that names it arrives, asking
stops. A learner restarted with its data is a member from its first moment and never asks; one
restarted on an empty disk asks again and is answered at once (it is a member already); the
leader then streams it the log from scratch, and records its new directory (§4.15).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

import zmq

from zlog.broker.config import raft_endpoint
from zlog.broker.control.controller_link import ControllerLink
from zlog.errors import ErrorCode
from zlog.raft.status import NodeStatus
from zlog.transport.messages.cluster import (
    AddRaftLearnerRequestV0,
    AddRaftLearnerResponseV0,
)
from zlog.transport.rpc import RpcResult

log = logging.getLogger(__name__)

JOIN_RETRY_MS: Final = 500  # between two requests while not a member yet
JOIN_TIMEOUT_MS: Final = 5_000  # one request's wait (the controller proposes, then answers)


def parse_members(members: tuple[str, ...]) -> dict[int, str]:
    """"id@endpoint" lines -> {id: endpoint}; malformed lines are skipped (logged)."""
    parsed: dict[int, str] = {}
    for member in members:
        node, at, endpoint = member.partition("@")
        if at and node.isdigit() and endpoint:
            parsed[int(node)] = endpoint
        else:
            log.warning("ignored a malformed member %r in an AddRaftLearner answer", member)
    return parsed


class RaftJoin:
    def __init__(self, node_id: int, dir_id: str, control_endpoint: str, join_endpoint: str, *,
                 raft_status: Callable[[], NodeStatus | None],
                 add_peers: Callable[[Mapping[int, str]], None],
                 context: zmq.Context[Any]) -> None:
        # Its Raft endpoint as the others reach it: next to its advertised control endpoint.
        self._request = AddRaftLearnerRequestV0(node_id, dir_id,
                                                raft_endpoint(control_endpoint))
        self._raft_status = raft_status
        self._add_peers = add_peers
        self.link = ControllerLink(lambda: join_endpoint, context)
        self._next_ms = 0
        self._waiting = False

    def member(self) -> bool:
        """Whether this node's copy of the metadata log names it (voter or learner)."""
        status = self._raft_status()
        node_id = self._request.node_id
        return status is not None and (node_id in status.learners or node_id in status.voters)

    def sockets(self) -> tuple[zmq.Socket[bytes], ...]:
        return self.link.sockets()

    def run(self, now_ms: int) -> None:
        self.link.run()
        if self._waiting or now_ms < self._next_ms or self.member():
            return
        self._next_ms = now_ms + JOIN_RETRY_MS
        self._waiting = self.link.send(self._request, JOIN_TIMEOUT_MS, self._answered)
        if not self._waiting:
            log.info("cannot ask to join yet: %s", self.link.last_error)

    def close(self) -> None:
        self.link.close()

    def _answered(self, result: RpcResult) -> None:
        self._waiting = False
        response = result.response
        if not isinstance(response, AddRaftLearnerResponseV0):
            log.info("asking to join the metadata log failed: %s", result.error)
            return
        if response.error_code != ErrorCode.NONE:
            log.info("asking to join the metadata log: error %d (%s)", response.error_code,
                     response.error_message)
            return
        members = parse_members(response.members)
        members.pop(self._request.node_id, None)
        log.info("added as a learner of the metadata log; members %s", members)
        self._add_peers(members)
