"""The messages that move replicas between brokers (JSON bodies, Kafka's api keys).

* **AlterPartitionReassignments v0** (key 45, KIP-455): partitions start moving to new
  replica sets; a null replica list cancels the move in progress. zlog applies the whole
  request or none of it, so the answer is one error code, not one per partition.
* **ListPartitionReassignments v0** (key 46): every reassignment in progress, with the
  replicas being added and removed.
* **UnregisterBroker v0** (key 64): Kafka's removes a broker's registration; zlog's first
  drains it (every replica it holds is reassigned to the other live brokers) and deregisters
  it once it holds none (docs/replication.md, "Reassignment, drain and add-broker").

Clients send them to any broker's control endpoint; one that is not the controller forwards
them there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

from zlog.transport.api import ApiKey
from zlog.transport.wire_types import AtLeast, ErrorCode16, Index32


@dataclass(frozen=True, slots=True)
class ReassignmentSpec:
    topic: str
    partition: Index32
    replicas: tuple[Index32, ...] | None  # the target, preferred leader first; None: cancel


@dataclass(frozen=True, slots=True)
class AlterPartitionReassignmentsRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.ALTER_PARTITION_REASSIGNMENTS
    API_VERSION: ClassVar[int] = 0

    reassignments: tuple[ReassignmentSpec, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionReassignmentsResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.ALTER_PARTITION_REASSIGNMENTS
    API_VERSION: ClassVar[int] = 0

    error_code: ErrorCode16
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class ListPartitionReassignmentsRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.LIST_PARTITION_REASSIGNMENTS
    API_VERSION: ClassVar[int] = 0


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    topic: str
    partition: Index32
    replicas: tuple[Index32, ...]  # the target, then the replicas leaving
    adding: tuple[Index32, ...]
    removing: tuple[Index32, ...]


@dataclass(frozen=True, slots=True)
class ListPartitionReassignmentsResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.LIST_PARTITION_REASSIGNMENTS
    API_VERSION: ClassVar[int] = 0

    error_code: ErrorCode16
    error_message: str = ""
    reassignments: tuple[OngoingReassignment, ...] = ()


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.UNREGISTER_BROKER
    API_VERSION: ClassVar[int] = 0

    broker_id: Index32


@dataclass(frozen=True, slots=True)
class UnregisterBrokerResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.UNREGISTER_BROKER
    API_VERSION: ClassVar[int] = 0

    error_code: ErrorCode16
    error_message: str = ""
    moved: Annotated[int, AtLeast(0)] = 0  # partitions that started moving off the broker
