"""Drives a GroupCoordinator by hand: numbered requests, replies by request id, a log of every
record written and time that moves only when a test moves it."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from zlog.groups.classic.consumer_protocol import Subscription, encode_subscription
from zlog.groups.config import GroupConfig
from zlog.groups.coordinator import GroupCoordinator
from zlog.groups.output import Output
from zlog.groups.records import OffsetsRecord, decode_record, encode_record
from zlog.groups.replay import LoadedGroups, replay
from zlog.transport.messages.groups import (
    GroupRequest as Request,
)
from zlog.transport.messages.groups import (
    GroupResponse as Response,
)
from zlog.transport.messages.groups import (
    HeartbeatRequestV0,
    JoinGroupProtocol,
    JoinGroupRequestV0,
    MemberAssignment,
    SyncGroupRequestV0,
)

SESSION_MS = 10_000
REBALANCE_MS = 30_000


@dataclass
class Driver:
    config: GroupConfig = field(default_factory=lambda: GroupConfig(initial_rebalance_delay_ms=0))
    counts: dict[str, int] = field(default_factory=lambda: {"t": 6})
    seed: int = 0
    now_ms: int = 1_000_000
    log: list[OffsetsRecord] = field(default_factory=list)
    replies: dict[int, Response] = field(default_factory=dict)
    view: LoadedGroups = field(default_factory=LoadedGroups)
    next_id: int = 1
    coordinator: GroupCoordinator = field(init=False)

    def __post_init__(self) -> None:
        self.coordinator = GroupCoordinator(self.config, random.Random(self.seed), self.counts)
        self.take(self.coordinator.load(LoadedGroups(), self.now_ms))

    def take(self, out: Output) -> Output:
        """Carry out an output: every record goes through its bytes into the log (and the
        incrementally replayed `view`); replies are kept by request id."""
        for record in out.records:
            assert decode_record(*encode_record(record), record.headers) == record
            self.log.append(record)
            self.view.apply(record)
        for request_id, response in out.replies:
            assert request_id not in self.replies, f"request {request_id} answered twice"
            self.replies[request_id] = response
        return out

    def rid(self) -> int:
        self.next_id += 1
        return self.next_id

    def send(self, make: Any, **fields: Any) -> Response | None:
        """Send a request built by `make(**fields)`; its reply, if not parked."""
        return self.reply(self.handle(make(**fields)))

    def handle(self, req: Request) -> int:
        """Hand the coordinator a request under a new request id, which it returns."""
        request_id = self.rid()
        self.take(self.coordinator.handle(request_id, req, self.now_ms))
        return request_id

    def reply(self, request_id: int) -> Response | None:
        return self.replies.get(request_id)

    def tick(self, delta_ms: int) -> Output:
        self.now_ms += delta_ms
        return self.take(self.coordinator.advance(self.now_ms))

    def replayed(self) -> LoadedGroups:
        return replay(self.log)

    # --- classic shorthands ---------------------------------------------------------------

    def join(self, group: str = "g", member_id: str = "", *, topics: tuple[str, ...] = ("t",),
             protocols: tuple[str, ...] = ("range",), instance_id: str | None = None,
             session_ms: int = SESSION_MS, protocol_type: str = "consumer",
             owned: tuple[Any, ...] = (), generation: int = -1) -> int:
        """Send a JoinGroup; returns its request id (the reply may be parked)."""
        metadata = encode_subscription(Subscription(topics, None, owned, generation))
        return self.handle(JoinGroupRequestV0(
            group, member_id, protocol_type,
            tuple(JoinGroupProtocol(p, metadata) for p in protocols), session_ms, REBALANCE_MS,
            instance_id, "client", "/127.0.0.1"))

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
             group: str = "g", instance_id: str | None = None) -> int:
        return self.handle(SyncGroupRequestV0(
            group, generation, member_id, instance_id,
            tuple(MemberAssignment(*item) for item in sorted((assignments or {}).items()))))

    def heartbeat(self, member_id: str, generation: int, group: str = "g",
                  instance_id: str | None = None) -> Response | None:
        return self.send(HeartbeatRequestV0, group_id=group, generation=generation,
                         member_id=member_id, group_instance_id=instance_id)
