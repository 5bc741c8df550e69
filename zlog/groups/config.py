"""The coordinator's settings, with Kafka's names in the docstrings and zlog's defaults."""

from __future__ import annotations

from dataclasses import dataclass

MINUTE_MS = 60_000


@dataclass(frozen=True, slots=True)
class GroupConfig:
    min_session_timeout_ms: int = 1_000
    """`group.min.session.timeout.ms` (Kafka 6000; lower so tests on one machine are fast)."""
    max_session_timeout_ms: int = 1_800_000
    """`group.max.session.timeout.ms`."""
    max_rebalance_timeout_ms: int = 1_800_000
    """Longer rebalance timeouts are clamped to this (Kafka has no bound)."""
    initial_rebalance_delay_ms: int = 3_000
    """`group.initial.rebalance.delay.ms` (KIP-134): how long an Empty group waits for more
    members before its first generation; extended while members keep arriving."""
    new_member_join_timeout_ms: int = 300_000
    """A new member parked in JoinGroup cannot heartbeat; it is dropped after this."""
    max_group_size: int = 1_000
    """`group.max.size` (KIP-389)."""
    offsets_retention_ms: int = 10_080 * MINUTE_MS
    """`offsets.retention.minutes` (KIP-186: 7 days)."""
    offsets_retention_check_interval_ms: int = 600_000
    """`offsets.retention.check.interval.ms`."""
    offset_metadata_max_bytes: int = 4_096
    """`offset.metadata.max.bytes`."""
    consumer_session_timeout_ms: int = 10_000
    """`group.consumer.session.timeout.ms`: server-side members are fenced after this silence."""
    consumer_heartbeat_interval_ms: int = 1_000
    """`group.consumer.heartbeat.interval.ms`: told to server-side members in every reply."""
