"""The messages brokers send each other beside a follower's fetch (data.py): epoch queries and
the controller's APIs. Kafka's api keys and field names; JSON bodies (json_codec.py).

* **OffsetForLeaderEpoch v0** (Kafka key 23): "where does epoch e end in your log?" The
  answer (epoch, end offset) is where a follower cuts its log after a leader change (KIP-101,
  KIP-279).
* **BrokerRegistration / BrokerHeartbeat / AlterPartition v0** (Kafka keys 62, 63, 56):
  a supervisor to the controller. Only the controller answers them; any other supervisor
  answers NOT_CONTROLLER with the controller it knows of.
* **AddRaftLearner v0** (zlog's key 1000): a broker started with `--join` asks to receive
  the metadata log as a learner (docs/raft.md §4.16). Any member forwards it to the controller,
  which adds the learner (a committed configuration change) and answers with every member's
  Raft endpoint, so the new broker can answer the leader.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, ClassVar

from zlog.transport.api import ApiKey
from zlog.transport.wire import INT32_MAX
from zlog.transport.wire_types import (
    Absent,
    AtLeast,
    Epoch32,
    ErrorCode16,
    Index32,
    NodeId32,
    Range,
    Sentence,
    Sparse,
)

BrokerEpoch = Annotated[int, AtLeast(0)]
"""A broker's registration, as the metadata log numbered it."""
Epoch32Known = Annotated[int, Range(0, INT32_MAX)]
"""An int32 epoch that is known (never -1)."""

# ---------------------------------------------------------------------------------------------
# OffsetForLeaderEpoch v0.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EpochQuery:
    topic: str
    partition: Index32
    current_leader_epoch: Epoch32  # the epoch the asker believes current, checked as in a fetch
    leader_epoch: Epoch32  # the epoch whose end is asked for


@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.OFFSET_FOR_LEADER_EPOCH
    API_VERSION: ClassVar[int] = 0

    replica_id: NodeId32  # the follower asking (-1 for a consumer)
    queries: tuple[EpochQuery, ...]


@dataclass(frozen=True, slots=True)
class EpochAnswer:
    topic: str
    partition: Index32
    error_code: ErrorCode16
    leader_epoch: Epoch32  # the largest epoch <= the one asked for that the leader has, or -1
    end_offset: Annotated[int, AtLeast(-1)]  # where that epoch ends in the leader's log, or -1
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.OFFSET_FOR_LEADER_EPOCH
    API_VERSION: ClassVar[int] = 0

    answers: tuple[EpochAnswer, ...]


# ---------------------------------------------------------------------------------------------
# The controller's APIs.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerRegistrationRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.BROKER_REGISTRATION
    API_VERSION: ClassVar[int] = 0

    node_id: Index32
    incarnation_id: str  # new at each start of the broker's supervisor
    cluster_id: str  # the cluster the broker belongs to ("" for one that does not know yet)
    host: str
    control_endpoint: str
    workers: Annotated[int, Range(1, INT32_MAX)]
    rack: str = ""
    dir_id: str = ""


@dataclass(frozen=True, slots=True)
class BrokerRegistrationResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.BROKER_REGISTRATION
    API_VERSION: ClassVar[int] = 0

    error_code: ErrorCode16
    error_message: Annotated[str, Absent("")]
    cluster_id: Annotated[str, Absent("")]
    broker_epoch: Annotated[int, AtLeast(-1)]  # -1 on error
    controller_id: NodeId32  # who answered, or the controller this node knows of


@dataclass(frozen=True, slots=True)
class AddRaftLearnerRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.ADD_RAFT_LEARNER
    API_VERSION: ClassVar[int] = 0

    node_id: Index32
    dir_id: str  # the joining broker's data directory id (32 hex digits)
    raft_endpoint: str  # where its metadata-log node listens


@dataclass(frozen=True, slots=True)
class AddRaftLearnerResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.ADD_RAFT_LEARNER
    API_VERSION: ClassVar[int] = 0

    error_code: ErrorCode16
    error_message: Annotated[str, Absent("")]
    controller_id: NodeId32
    members: tuple[str, ...] = ()  # "id@raft endpoint" of every member the configuration names


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.BROKER_HEARTBEAT
    API_VERSION: ClassVar[int] = 0

    node_id: Index32
    broker_epoch: BrokerEpoch
    worker_endpoints: tuple[str, ...]  # each worker's data endpoint, "" while unknown
    want_shutdown: bool = False  # a controlled shutdown: move my leaderships away
    # each worker's Kafka port, host:port ("" while unknown; empty: the broker has none)
    worker_kafka_endpoints: Annotated[tuple[str, ...], Sparse] = ()


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.BROKER_HEARTBEAT
    API_VERSION: ClassVar[int] = 0

    error_code: ErrorCode16
    error_message: Annotated[str, Absent("")]
    fenced: bool  # the metadata says this broker is fenced
    shutdown_ready: bool  # it leads nothing another broker could lead: it may stop now
    controller_id: NodeId32


MemberEpochs = Annotated[Mapping[int, int], Sentence("{field} maps broker ids to broker epochs")]
"""Broker id -> the broker epoch it fetched with, as a JSON object keyed by decimal ids."""


@dataclass(frozen=True, slots=True)
class AlterPartitionRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.ALTER_PARTITION
    API_VERSION: ClassVar[int] = 0

    node_id: Index32  # the leader asking
    broker_epoch: BrokerEpoch
    topic: str
    partition: Index32
    leader_epoch: Epoch32Known
    partition_epoch: Epoch32Known  # the record the new ISR was computed from
    new_isr: tuple[Index32, ...]
    member_epochs: MemberEpochs = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AlterPartitionResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.ALTER_PARTITION
    API_VERSION: ClassVar[int] = 0

    error_code: ErrorCode16
    error_message: Annotated[str, Absent("")]
    controller_id: NodeId32
