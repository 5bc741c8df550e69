"""Per-partition log settings, under Kafka's topic config names.

Each field's docstring gives meaning, unit and default; `from_topic_configs` maps the dotted
Kafka names (`segment.bytes`, `retention.ms`, ...) onto fields and rejects anything else with
INVALID_CONFIG, so a typo in a topic config is an error and never silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Final

from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.shm_segments.retention import RetentionPolicy

CLEANUP_POLICIES: Final = frozenset({"delete", "compact", "compact,delete", "delete,compact"})
_NOT_TOPIC_CONFIGS: Final = frozenset({"ring_bytes", "ring_flush_bytes", "disk_share_bytes"})
"""Fields the broker sets (from its own settings and the metadata), never a topic config."""


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = limits.SEGMENT_BYTES_DEFAULT
    """segment.bytes: roll to a new segment file before it would grow past this many bytes."""
    segment_ms: int = limits.SEGMENT_MS_DEFAULT
    """segment.ms: roll once the active segment's first batch is this old (ms)."""
    index_interval_bytes: int = limits.INDEX_INTERVAL_BYTES_DEFAULT
    """index.interval.bytes: one sparse index entry per this many bytes of batches."""
    retention_ms: int = limits.RETENTION_MS_DEFAULT
    """retention.ms: delete sealed segments whose newest record is older (ms); -1 = forever."""
    retention_bytes: int = -1
    """retention.bytes: delete oldest sealed segments while the log is larger; -1 = no limit."""
    retention_disk_percent: float = -1.0
    """retention.disk.percent: the topic may take this % of the data disk on each broker, divided
    over the partitions the broker holds; -1 = no budget. The broker turns it into
    `disk_share_bytes` (docs/storage.md); the log itself acts on the share only."""
    cleanup_policy: str = "delete"
    """cleanup.policy: "delete", "compact", or "compact,delete"."""
    delete_retention_ms: int = limits.DELETE_RETENTION_MS_DEFAULT
    """delete.retention.ms: how long compaction keeps a tombstone (ms)."""
    min_compaction_lag_ms: int = 0
    """min.compaction.lag.ms: records younger than this are never compacted away (ms)."""
    flush_messages: int = -1
    """flush.messages: fsync after this many messages; -1 = never (Kafka's default: the ring covers
    a process crash, and replication, once built, a host crash)."""
    flush_ms: int = -1
    """flush.ms: fsync when the last fsync is this old (ms); -1 = never."""
    max_message_bytes: int = 1_048_588
    """max.message.bytes: the largest batch accepted (Kafka's default)."""
    ring_bytes: int = limits.RING_SIZE_BYTES_DEFAULT
    """Capacity of the partition's shared-memory ring (bytes)."""
    ring_flush_bytes: int = 0
    """Flush ring -> segment once this much is unflushed; 0 = after every append."""
    disk_share_bytes: int = -1
    """This partition's share of its topic's retention.disk.percent budget on this broker
    (bytes): retention deletes the oldest sealed segments until the log fits in it. Set by the
    broker from the metadata, never a topic config; -1 = no share."""

    def __post_init__(self) -> None:
        # Each refusal names the bound and the value given, so a user can fix it in one go.
        _at_least("segment.bytes", self.segment_bytes, limits.SEGMENT_BYTES_MIN)
        _at_most("segment.bytes", self.segment_bytes, limits.SEGMENT_BYTES_MAX)
        _at_least("segment.ms", self.segment_ms, 1)
        _at_least("index.interval.bytes", self.index_interval_bytes, 0)
        _at_least("retention.ms", self.retention_ms, -1, "(-1: keep forever)")
        _at_least("retention.bytes", self.retention_bytes, -1, "(-1: no limit)")
        _require(
            self.retention_disk_percent == -1 or 0 < self.retention_disk_percent <= 100,
            "retention.disk.percent must be above 0 and at most 100, or -1 (no limit), "
            f"not {self.retention_disk_percent:g}",
        )
        _require(
            self.cleanup_policy in CLEANUP_POLICIES,
            f"cleanup.policy must be delete, compact or compact,delete, not "
            f"{self.cleanup_policy!r}",
        )
        _at_least("delete.retention.ms", self.delete_retention_ms, 0)
        _at_least("min.compaction.lag.ms", self.min_compaction_lag_ms, 0)
        if self.flush_messages != -1:
            _at_least("flush.messages", self.flush_messages, 1, "or -1 (never)")
        if self.flush_ms != -1:
            _at_least("flush.ms", self.flush_ms, 0, "or -1 (never)")
        _at_least("max.message.bytes", self.max_message_bytes, 1)
        _at_least("ring_bytes", self.ring_bytes, limits.RING_SIZE_BYTES_MIN)
        _at_least("ring_flush_bytes", self.ring_flush_bytes, 0)
        _at_least("disk_share_bytes", self.disk_share_bytes, -1, "(-1: no share)")

    @property
    def fsyncs(self) -> bool:
        """Whether the topic asks for fsyncs at all (flush.messages or flush.ms)."""
        return self.flush_messages > 0 or self.flush_ms >= 0

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def deletes(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def retention(self) -> RetentionPolicy:
        if not self.deletes:
            return RetentionPolicy()
        return RetentionPolicy(self.retention_ms, self.retention_bytes, self.disk_share_bytes)

    @classmethod
    def from_topic_configs(
        cls, configs: Mapping[str, str], base: LogConfig | None = None
    ) -> LogConfig:
        """Kafka-named string settings -> a LogConfig; unknown keys are INVALID_CONFIG."""
        known = {field.name.replace("_", "."): field for field in fields(cls)}
        changes: dict[str, object] = {}
        for key, text in configs.items():
            field = known.get(key)
            if field is None or field.name in _NOT_TOPIC_CONFIGS:
                raise ZlogError(ErrorCode.INVALID_CONFIG, f"unknown topic config {key!r}")
            try:
                if field.type in ("int", int):
                    changes[field.name] = int(text)
                elif field.type in ("float", float):
                    changes[field.name] = float(text)
                else:
                    changes[field.name] = str(text).replace(" ", "")
            except ValueError:
                kind = "an integer" if field.type in ("int", int) else "a number"
                raise ZlogError(
                    ErrorCode.INVALID_CONFIG, f"{key} must be {kind}, not {text!r}"
                ) from None
        return replace(base or cls(), **changes)  # type: ignore[arg-type]


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ZlogError(ErrorCode.INVALID_CONFIG, message)


def _at_least(name: str, value: int, minimum: int, note: str = "") -> None:
    if value < minimum:
        suffix = f" {note}" if note else ""
        raise ZlogError(ErrorCode.INVALID_CONFIG,
                        f"{name} must be at least {minimum}{suffix}, not {value}")


def _at_most(name: str, value: int, maximum: int) -> None:
    if value > maximum:
        raise ZlogError(ErrorCode.INVALID_CONFIG, f"{name} must be at most {maximum}, not {value}")
