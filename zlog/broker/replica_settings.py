"""How followers copy their leaders, when a replica leaves the ISR and how often its high
watermark is checkpointed: one home for the six settings, which the supervisor reads from its
config and hands its workers as flags."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Final

FLAG_PREFIX: Final = "--replica-"


@dataclass(frozen=True, slots=True)
class ReplicaSettings:
    lag_time_max_ms: int = 10_000
    """A follower that has not caught up with its leader within this long leaves the ISR."""
    fetch_wait_max_ms: int = 250
    """The longest a follower's fetch waits at its leader for new batches."""
    fetch_max_bytes: int = 1024 * 1024
    """Bytes a follower asks for per partition and fetch (one batch always fits)."""
    fetch_response_max_bytes: int = 10 * 1024 * 1024
    """Bytes a follower asks for per fetch, over all its partitions."""
    fetch_backoff_ms: int = 100
    """The pause after a follower's fetch failed, before it asks again."""
    high_watermark_checkpoint_interval_ms: int = 5_000
    """How often each partition's high watermark is written to its checkpoint file (where a
    replica reopened after a reboot starts; not a safety setting)."""

    def as_flags(self) -> list[str]:
        """`--replica-lag-time-max-ms 10000 ...`, as `flag_names()` spells them."""
        flags: list[str] = []
        for item in fields(self):
            flags += [FLAG_PREFIX + item.name.replace("_", "-"), str(getattr(self, item.name))]
        return flags


REPLICA_DEFAULTS: Final = ReplicaSettings()


def flag_names() -> dict[str, str]:
    """Each setting's flag, by field name."""
    return {item.name: FLAG_PREFIX + item.name.replace("_", "-")
            for item in fields(ReplicaSettings)}
