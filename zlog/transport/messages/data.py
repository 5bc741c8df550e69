"""The data path's messages: Produce v0, Fetch v0 (a consumer's), Fetch v1 (a follower's),
ListOffsets v0 and DeleteRecords v0. Field names are the wire's names, so a reader can hold this
file next to docs/protocol.md.

Produce and Fetch bodies are structs (struct_bodies.py) with record batches riding as their own
frames, held here as buffers (memoryviews of received frames): nothing copies them. A
follower's Fetch v1 says beside v0's fields who asks (replica id and broker epoch), which
leader epoch it believes current and the epoch of its last batch, so the leader can tell it
where its log diverges (`diverging_epoch`, KIP-320/KIP-595) instead of sending batches it must
not append; and per partition the topic id of its replica (KIP-516), which the leader refuses
if it is not its own (UNKNOWN_TOPIC_ID). ListOffsets and DeleteRecords are JSON (json_codec.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar, Final

from zlog.transport.api import ApiKey
from zlog.transport.wire import Buffer
from zlog.transport.wire_types import Absent, AtLeast, ErrorCode16, Int16, Int32, Int64
from zlog.types import EARLIEST_TIMESTAMP, NO_TOPIC_ID

NO_EPOCH: Final = -1  # Kafka's UNDEFINED_EPOCH: no epoch known

# ---------------------------------------------------------------------------------------------
# Produce v0.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProduceEntry:
    """The batches for one partition; each buffer is exactly one RecordBatch v2."""

    topic: str
    partition: Int32
    batches: tuple[Buffer, ...]


@dataclass(frozen=True, slots=True)
class ProduceRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.PRODUCE
    API_VERSION: ClassVar[int] = 0

    acks: Int16  # 0 (no reply), 1 (leader), -1 (all in-sync replicas)
    timeout_ms: Int32  # how long acks=-1 may wait for replication
    entries: tuple[ProduceEntry, ...]


@dataclass(frozen=True, slots=True)
class ProduceResult:
    topic: str
    partition: Int32
    error_code: ErrorCode16
    base_offset: Int64  # the first batch's offset, -1 on error
    log_append_time_ms: Int64 = -1  # -1 when records keep their CreateTime
    log_start_offset: Int64 = -1
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class ProduceResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.PRODUCE
    API_VERSION: ClassVar[int] = 0

    entries: tuple[ProduceResult, ...]


# ---------------------------------------------------------------------------------------------
# Fetch v0: a consumer's.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchEntry:
    topic: str
    partition: Int32
    fetch_offset: Int64  # the first offset wanted
    partition_max_bytes: Int32  # soft cap for this partition (one whole batch always fits)


@dataclass(frozen=True, slots=True)
class FetchRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.FETCH
    API_VERSION: ClassVar[int] = 0

    replica_id: Int32  # -1 for consumers, the broker id for followers
    max_wait_ms: Int32  # long-poll bound
    min_bytes: Int32  # answer as soon as this much data is ready
    max_bytes: Int32  # soft cap over all partitions
    entries: tuple[FetchEntry, ...]


@dataclass(frozen=True, slots=True)
class FetchResult:
    topic: str
    partition: Int32
    error_code: ErrorCode16
    high_watermark: Int64
    last_stable_offset: Int64  # (= high watermark: no transactions yet)
    log_start_offset: Int64
    chunks: tuple[Buffer, ...] = ()  # frames, each one or more whole batches as stored
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class FetchResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.FETCH
    API_VERSION: ClassVar[int] = 0

    entries: tuple[FetchResult, ...]


# ---------------------------------------------------------------------------------------------
# Fetch v2: a consumer's subscription (docs/protocol.md, "Fetch v2").
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchRequestV2:
    """A consumer's fetch that stays: answered as a v0 fetch is, then kept parked at the
    offsets after what it sent and answered again each time more becomes readable (or its
    max_wait_ms passes), until it has sent `max_bytes` in all, a partition fails, its lifetime
    ends or its sender cancels it. A v2 request with no entries is that cancel: it ends every
    subscription of its sender's connection, and nothing answers it."""

    API_KEY: ClassVar[ApiKey] = ApiKey.FETCH
    API_VERSION: ClassVar[int] = 2

    replica_id: Int32  # -1: only consumers subscribe
    max_wait_ms: Int32  # an answer (empty if need be) at least this often
    min_bytes: Int32
    max_bytes: Int32  # the most the whole subscription sends, over all its answers
    entries: tuple[FetchEntry, ...]


@dataclass(frozen=True, slots=True)
class FetchResponseV2:
    """One answer of a subscription; `more`: further answers follow on its correlation id."""

    API_KEY: ClassVar[ApiKey] = ApiKey.FETCH
    API_VERSION: ClassVar[int] = 2

    entries: tuple[FetchResult, ...]
    more: bool


# ---------------------------------------------------------------------------------------------
# Fetch v1: a follower's.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplicaFetchEntry:
    topic: str
    partition: Int32
    fetch_offset: Int64  # the follower's log end; everything below it is in its ring
    current_leader_epoch: Int32  # the epoch the follower believes current (KIP-320)
    last_fetched_epoch: Int32  # the epoch of its last batch, -1 for an empty log
    log_start_offset: Int64  # the follower's own log start
    partition_max_bytes: Int32
    topic_id: str = NO_TOPIC_ID  # 16 bytes (KIP-516): the topic the follower's replica is of


@dataclass(frozen=True, slots=True)
class FetchRequestV1:
    API_KEY: ClassVar[ApiKey] = ApiKey.FETCH
    API_VERSION: ClassVar[int] = 1

    replica_id: Int32  # the follower's broker id
    broker_epoch: Int64  # its registration; an older one is refused (KIP-380)
    max_wait_ms: Int32
    min_bytes: Int32
    max_bytes: Int32
    entries: tuple[ReplicaFetchEntry, ...]


@dataclass(frozen=True, slots=True)
class ReplicaFetchResult:
    topic: str
    partition: Int32
    error_code: ErrorCode16
    leader_epoch: Int32  # the leader's epoch when it answered
    high_watermark: Int64
    log_start_offset: Int64
    log_end_offset: Int64  # the leader's log end (for lag)
    diverging_epoch: Int32 = NO_EPOCH  # set (with its end) instead of batches on divergence
    diverging_end_offset: Int64 = -1
    chunks: tuple[Buffer, ...] = ()
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class FetchResponseV1:
    API_KEY: ClassVar[ApiKey] = ApiKey.FETCH
    API_VERSION: ClassVar[int] = 1

    entries: tuple[ReplicaFetchResult, ...]


# ---------------------------------------------------------------------------------------------
# ListOffsets v0 (JSON; one topic per request).
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListOffsetsPartition:
    partition: Int32
    # -1 latest, -2 earliest, else a record time in ms; below -2 is neither (INVALID_REQUEST)
    timestamp: Annotated[int, AtLeast(EARLIEST_TIMESTAMP)]


@dataclass(frozen=True, slots=True)
class ListOffsetsRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.LIST_OFFSETS
    API_VERSION: ClassVar[int] = 0

    topic: str
    partitions: tuple[ListOffsetsPartition, ...]


@dataclass(frozen=True, slots=True)
class ListOffsetsResult:
    partition: Int32
    error_code: ErrorCode16
    error_message: Annotated[str, Absent("")]
    offset: int  # -1 when no record is that recent
    timestamp: int  # the found record's timestamp, -1 for the sentinels


@dataclass(frozen=True, slots=True)
class ListOffsetsResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.LIST_OFFSETS
    API_VERSION: ClassVar[int] = 0

    topic: str
    partitions: tuple[ListOffsetsResult, ...]


# ---------------------------------------------------------------------------------------------
# DeleteRecords v0 (JSON), answered by the partitions' leader.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeleteRecordsEntry:
    topic: str
    partition: Int32
    # records below this offset go; -1 (DELETE_TO_HIGH_WATERMARK): all below the high
    # watermark; any other negative offset, or one above the high watermark, is
    # OFFSET_OUT_OF_RANGE for that partition alone
    offset: Int64


@dataclass(frozen=True, slots=True)
class DeleteRecordsRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.DELETE_RECORDS
    API_VERSION: ClassVar[int] = 0

    # how long the answer may wait for the in-sync followers' log starts to reach the offsets
    # (Kafka's DeleteRecords timeout); a partition still waiting then is REQUEST_TIMED_OUT
    timeout_ms: Annotated[int, AtLeast(0)]
    entries: tuple[DeleteRecordsEntry, ...]


@dataclass(frozen=True, slots=True)
class DeleteRecordsResult:
    topic: str
    partition: Int32
    error_code: ErrorCode16
    error_message: Annotated[str, Absent("")]
    # the lowest log start of the leader and its in-sync followers once the deletion reached
    # them all (Kafka's low watermark); -1 on error
    low_watermark: Int64


@dataclass(frozen=True, slots=True)
class DeleteRecordsResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.DELETE_RECORDS
    API_VERSION: ClassVar[int] = 0

    results: tuple[DeleteRecordsResult, ...]
