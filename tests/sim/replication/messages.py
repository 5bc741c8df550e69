"""What travels on the simulated network: one frozen dataclass per message.

The bodies carry the pure code's own request and answer types (`ReplicaFetchEntry`,
`ReplicaFetchResult`, `IsrRequest`) where there is one, so the wire stays as close as possible
to the real cluster's. Fields named `ghost_*` are for the checker only: the code under test
never reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from zlog.broker.control.controller.decisions import IsrRequest
from zlog.broker.control.metadata.state import ClusterState
from zlog.errors import ErrorCode
from zlog.transport.messages.data import (
    ReplicaFetchEntry,
    ReplicaFetchResult,
)

CONTROLLER = 0  # the controller's node id; brokers are 1..n, clients 100 and up


@dataclass(frozen=True, slots=True)
class Envelope:
    src: int
    dst: int
    body: object


# -- broker <-> controller ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Register:
    incarnation: str
    dir_id: str = ""  # its data directory's id ("": it names none)


@dataclass(frozen=True, slots=True)
class Registered:
    incarnation: str
    broker_epoch: int
    state: ClusterState
    version: int


@dataclass(frozen=True, slots=True)
class Heartbeat:
    broker_epoch: int
    sent_at: int  # the broker's clock when it sent this (its lease counts from here)


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    error: ErrorCode
    broker_epoch: int
    state: ClusterState
    version: int
    fenced: bool = False  # fenced, or fenced by the round being committed: no lease
    sent_at: int = -1  # the heartbeat's, echoed: the lease it gives runs from there


@dataclass(frozen=True, slots=True)
class MetadataPush:
    """A committed change: every broker learns the new state (a supervisor applying the
    metadata log)."""

    state: ClusterState
    version: int


@dataclass(frozen=True, slots=True)
class AlterIsr:
    request_id: int
    request: IsrRequest


@dataclass(frozen=True, slots=True)
class AlterIsrAnswer:
    request_id: int
    error: ErrorCode


# -- follower <-> leader -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplicaFetch:
    fetch_id: int
    entry: ReplicaFetchEntry
    broker_epoch: int
    limit_bytes: int


@dataclass(frozen=True, slots=True)
class ReplicaFetchAnswer:
    fetch_id: int
    result: ReplicaFetchResult
    ghost_leader_incarnation: str
    ghost_prev_batch: bytes | None  # the leader's batch holding fetch_offset - 1, if any
    ghost_common_prefix: int  # on a diverging answer: where the two logs stop agreeing


# -- clients <-> brokers -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Produce:
    request_id: int
    partition: int
    batch: bytes
    batch_id: int
    acks: int


@dataclass(frozen=True, slots=True)
class ProduceAnswer:
    request_id: int
    error: ErrorCode
    base_offset: int


@dataclass(frozen=True, slots=True)
class ConsumerFetch:
    request_id: int
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class ConsumerFetchAnswer:
    """A consumer's fetch answer, with the answer to ListOffsets(LATEST) at the same instant
    (a client asking both at once, in one message so that the network's draws stay those of
    one request)."""

    request_id: int
    error: ErrorCode
    high_watermark: int  # as shown to the client: -1 while the leader shows none
    batches: tuple[tuple[int, int, int], ...]  # (base offset, next offset, batch id)
    latest_offset: int = -1
    latest_error: ErrorCode = ErrorCode.NONE
    log_start_offset: int = 0  # where a consumer out of range starts again (earliest)


@dataclass(frozen=True, slots=True)
class DeleteRecords:
    """DeleteRecords of one partition, below its high watermark (offset -1), as an admin
    client sends it to the leader metadata names."""

    request_id: int
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class DeleteRecordsAnswer:
    request_id: int
    error: ErrorCode
    low_watermark: int
