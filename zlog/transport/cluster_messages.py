"""The messages brokers send each other: replica fetches, epoch queries, and the controller's
APIs (registration, heartbeats, ISR changes). Kafka's api keys and field names.

* **Fetch v1** (struct body, batches as frames): a follower's fetch. Beside v0's fields it says
  who asks (replica id and broker epoch), which leader epoch it believes current, and the epoch
  of its last batch, so the leader can tell it where its log diverges (`diverging_epoch`,
  KIP-320/KIP-595) instead of sending batches it must not append; and per partition the topic
  id of its replica (KIP-516), which the leader refuses if it is not its own
  (UNKNOWN_TOPIC_ID).
* **OffsetForLeaderEpoch v0** (JSON, Kafka key 23): "where does epoch e end in your log?" The
  answer (epoch, end offset) is where a follower cuts its log after a leader change (KIP-101,
  KIP-279).
* **BrokerRegistration / BrokerHeartbeat / AlterPartition v0** (JSON, Kafka keys 62, 63, 56):
  a supervisor to the controller. Only the controller answers them; any other supervisor
  answers NOT_CONTROLLER with the controller it knows of.
* **AddRaftLearner v0** (JSON, zlog's key 1000): a broker started with `--join` asks to receive
  the metadata log as a learner (docs/raft.md §4.16). Any member forwards it to the controller,
  which adds the learner (a committed configuration change) and answers with every member's
  Raft endpoint, so the new broker can answer the leader.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from zlog.transport.api import ApiKey
from zlog.transport.wire import Buffer
from zlog.types import NO_TOPIC_ID

NO_EPOCH = -1  # Kafka's UNDEFINED_EPOCH: no epoch known


# ---------------------------------------------------------------------------------------------
# Fetch v1: a follower's fetch (struct body; batches as frames).
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplicaFetchEntry:
    topic: str
    partition: int  # int32
    fetch_offset: int  # int64: the follower's log end; everything below it is in its ring
    current_leader_epoch: int  # int32: the epoch the follower believes current (KIP-320)
    last_fetched_epoch: int  # int32: the epoch of its last batch, -1 for an empty log
    log_start_offset: int  # int64: the follower's own log start
    partition_max_bytes: int  # int32
    topic_id: str = NO_TOPIC_ID  # 16 bytes (KIP-516): the topic the follower's replica is of


@dataclass(frozen=True, slots=True)
class FetchRequestV1:
    API_KEY: ClassVar[ApiKey] = ApiKey.FETCH
    API_VERSION: ClassVar[int] = 1

    replica_id: int  # int32: the follower's broker id
    broker_epoch: int  # int64: its registration; an older one is refused (KIP-380)
    max_wait_ms: int  # int32
    min_bytes: int  # int32
    max_bytes: int  # int32
    entries: tuple[ReplicaFetchEntry, ...]


@dataclass(frozen=True, slots=True)
class ReplicaFetchResult:
    topic: str
    partition: int  # int32
    error_code: int  # int16
    leader_epoch: int  # int32: the leader's epoch when it answered
    high_watermark: int  # int64
    log_start_offset: int  # int64
    log_end_offset: int  # int64: the leader's log end (for lag)
    diverging_epoch: int = NO_EPOCH  # int32: set (with its end) instead of batches on divergence
    diverging_end_offset: int = -1  # int64
    chunks: tuple[Buffer, ...] = ()
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class FetchResponseV1:
    API_KEY: ClassVar[ApiKey] = ApiKey.FETCH
    API_VERSION: ClassVar[int] = 1

    entries: tuple[ReplicaFetchResult, ...]


# ---------------------------------------------------------------------------------------------
# OffsetForLeaderEpoch v0 (JSON).
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EpochQuery:
    topic: str
    partition: int
    current_leader_epoch: int  # the epoch the asker believes current, checked as in a fetch
    leader_epoch: int  # the epoch whose end is asked for


@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.OFFSET_FOR_LEADER_EPOCH
    API_VERSION: ClassVar[int] = 0

    replica_id: int  # the follower asking (-1 for a consumer)
    queries: tuple[EpochQuery, ...]


@dataclass(frozen=True, slots=True)
class EpochAnswer:
    topic: str
    partition: int
    error_code: int
    leader_epoch: int  # the largest epoch <= the one asked for that the leader has, or -1
    end_offset: int  # where that epoch ends in the leader's log, or -1
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.OFFSET_FOR_LEADER_EPOCH
    API_VERSION: ClassVar[int] = 0

    answers: tuple[EpochAnswer, ...]


# ---------------------------------------------------------------------------------------------
# The controller's APIs (JSON).
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerRegistrationRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.BROKER_REGISTRATION
    API_VERSION: ClassVar[int] = 0

    node_id: int
    incarnation_id: str  # new at each start of the broker's supervisor
    cluster_id: str  # the cluster the broker belongs to ("" for one that does not know yet)
    host: str
    control_endpoint: str
    workers: int
    rack: str = ""
    dir_id: str = ""


@dataclass(frozen=True, slots=True)
class BrokerRegistrationResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.BROKER_REGISTRATION
    API_VERSION: ClassVar[int] = 0

    error_code: int
    error_message: str
    cluster_id: str
    broker_epoch: int  # -1 on error
    controller_id: int  # who answered, or the controller this node knows of (NOT_CONTROLLER)


@dataclass(frozen=True, slots=True)
class AddRaftLearnerRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.ADD_RAFT_LEARNER
    API_VERSION: ClassVar[int] = 0

    node_id: int
    dir_id: str  # the joining broker's data directory id (32 hex digits)
    raft_endpoint: str  # where its metadata-log node listens


@dataclass(frozen=True, slots=True)
class AddRaftLearnerResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.ADD_RAFT_LEARNER
    API_VERSION: ClassVar[int] = 0

    error_code: int
    error_message: str
    controller_id: int
    members: tuple[str, ...] = ()  # "id@raft endpoint" of every member the configuration names


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.BROKER_HEARTBEAT
    API_VERSION: ClassVar[int] = 0

    node_id: int
    broker_epoch: int
    worker_endpoints: tuple[str, ...]  # each worker's data endpoint, "" while unknown
    want_shutdown: bool = False  # a controlled shutdown: move my leaderships away


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.BROKER_HEARTBEAT
    API_VERSION: ClassVar[int] = 0

    error_code: int
    error_message: str
    fenced: bool  # the metadata says this broker is fenced
    shutdown_ready: bool  # it leads nothing another broker could lead: it may stop now
    controller_id: int


@dataclass(frozen=True, slots=True)
class AlterPartitionRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.ALTER_PARTITION
    API_VERSION: ClassVar[int] = 0

    node_id: int  # the leader asking
    broker_epoch: int
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int  # the record the new ISR was computed from
    new_isr: tuple[int, ...]
    member_epochs: Mapping[int, int] = field(default_factory=dict)  # broker -> epoch it fetched


@dataclass(frozen=True, slots=True)
class AlterPartitionResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.ALTER_PARTITION
    API_VERSION: ClassVar[int] = 0

    error_code: int
    error_message: str
    controller_id: int
