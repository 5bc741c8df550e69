"""What the supervisor's loop shows the metrics endpoint and /readyz: one frozen view at a
time, published whole by the loop (supervisor_metrics.py) and read by the endpoint's threads,
which never touch the loop's own state. Kept free of the endpoint's imports so that the
supervisor starts without them (the endpoint opens once the broker serves)."""

from __future__ import annotations

from dataclasses import dataclass, field

from zlog.broker.control.metadata.state import ClusterState
from zlog.raft.status import NodeStatus


@dataclass(frozen=True, slots=True)
class WorkerView:
    worker_id: int
    state: str
    restarts: int
    endpoint: str


@dataclass(frozen=True, slots=True)
class LoopView:
    """What the supervisor's loop last published for the metrics (and /readyz)."""

    node_id: int
    serving: bool = False
    ready: bool = False
    not_ready_why: str = "starting"
    state: ClusterState = field(default_factory=ClusterState)
    raft: NodeStatus | None = None
    workers: tuple[WorkerView, ...] = ()
    ports: tuple[int, ...] = ()  # the TCP ports clients connect to: control and data
    raft_leader_changes: int = 0
    leader_elections: int = 0
    isr_shrinks: int = 0
    isr_expands: int = 0


class MetadataChanges:
    """Counts leader elections and ISR changes between the metadata versions the loop sees
    (every broker applies the same log, so each counts them all; take the max over brokers)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, int], tuple[int, int]] = {}  # -> (leader epoch, ISR size)
        self._seen_state: ClusterState | None = None
        self._raft_leader: int | None = None
        self.raft_leader_changes = 0
        self.leader_elections = 0
        self.isr_shrinks = 0
        self.isr_expands = 0

    def observe(self, state: ClusterState, raft: NodeStatus | None) -> None:
        if raft is not None and raft.leader is not None and raft.leader != self._raft_leader:
            if self._raft_leader is not None:
                self.raft_leader_changes += 1
            self._raft_leader = raft.leader
        if state is self._seen_state:
            return
        first = self._seen_state is None
        self._seen_state = state
        seen: dict[tuple[str, int], tuple[int, int]] = {}
        for topic in state.topics.values():
            for info in topic.partitions:
                key = (topic.name, info.partition)
                now = (info.leader_epoch, len(info.isr))
                seen[key] = now
                before = self._seen.get(key)
                if before is None or first:
                    continue
                self.leader_elections += max(0, now[0] - before[0])
                if now[1] < before[1]:
                    self.isr_shrinks += 1
                elif now[1] > before[1]:
                    self.isr_expands += 1
        self._seen = seen


def listen_port(endpoint: str) -> int | None:
    """The TCP port of `tcp://host:port` (None for ipc or an unbound wildcard)."""
    if not endpoint.startswith("tcp://"):
        return None
    port = endpoint.rpartition(":")[2]
    return int(port) if port.isdigit() else None

