"""Topic names, partition counts, replication factors and topic configs: what CreateTopics accepts.

Pure: the supervisor checks a request here before proposing it to the metadata log, so a bad
request costs no Raft round trip and gets Kafka's error code with a readable message:

    INVALID_TOPIC_EXCEPTION (17)     name outside [a-zA-Z0-9._-], empty, too long, "." or "..";
                                     for a client also the reserved "__" prefix, and a name
                                     that differs from an existing one only by "." versus "_"
    INVALID_PARTITIONS (37)          fewer than 1 partition, or more than we bound
    INVALID_REPLICATION_FACTOR (38)  fewer than 1, or more than the live brokers
    INVALID_CONFIG (40)              a key outside TOPIC_CONFIG_KEYS, or a value LogConfig refuses

Topic configs keep Kafka's dotted names and string values end to end (request, metadata log,
worker assignment), so the Kafka-protocol listener can pass them through unchanged. A topic's
effective configs are three layers, as Kafka's: zlog's built-in defaults
(TOPIC_CONFIG_DEFAULTS), the broker's `topic_defaults`, and the topic's own overrides.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.record.header import Compression
from zlog.shm_segments.log_config import LogConfig

TOPIC_CONFIG_KEYS: Final = frozenset(
    {
        "retention.ms",
        "retention.bytes",
        "retention.disk.percent",
        "segment.bytes",
        "segment.ms",
        "cleanup.policy",
        "max.message.bytes",
        "flush.messages",
        "flush.ms",
        "min.insync.replicas",
        "delete.retention.ms",
        "index.interval.bytes",
        "message.timestamp.difference.max.ms",
        "compression.type",
        "unclean.leader.election.enable",
    }
)
"""The topic configs a client may set. Four are not LogConfig fields and are checked here:
min.insync.replicas and unclean.leader.election.enable belong to replication (acks=all and
the controller's elections), message.timestamp.difference.max.ms and compression.type to the
produce path."""

RETENTION_DISK_PERCENT: Final = "retention.disk.percent"  # a budget per broker: disk_budget.py
MIN_INSYNC_REPLICAS: Final = "min.insync.replicas"
TIMESTAMP_DIFFERENCE_MAX_MS: Final = "message.timestamp.difference.max.ms"
COMPRESSION_TYPE: Final = "compression.type"
UNCLEAN_LEADER_ELECTION: Final = "unclean.leader.election.enable"
_BROKER_ONLY_CONFIGS: Final = frozenset(
    {MIN_INSYNC_REPLICAS, TIMESTAMP_DIFFERENCE_MAX_MS, COMPRESSION_TYPE, UNCLEAN_LEADER_ELECTION}
)

PRODUCER_COMPRESSION: Final = "producer"
"""compression.type's default, as Kafka's: store each batch in the codec its producer chose."""
TOPIC_CODECS: Final[Mapping[str, Compression]] = {
    "none": Compression.NONE,
    "uncompressed": Compression.NONE,  # Kafka's spelling
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}
"""compression.type values that name a codec: Kafka's, each read and written by zlog."""
INTERNAL_TOPIC_PREFIX: Final = "__"
"""Names zlog keeps for its own topics (`__consumer_offsets`); clients may not create them."""

_NAME_PATTERN: Final = re.compile(r"[a-zA-Z0-9._-]+")


def _config_text(value: object) -> str:
    """A LogConfig field as the string a topic config would spell it (-1.0 reads as -1)."""
    return f"{value:g}" if isinstance(value, float) else str(value)


_BUILTIN_LOG_CONFIG: Final = LogConfig()
TOPIC_CONFIG_DEFAULTS: Final[Mapping[str, str]] = {
    **{key: _config_text(getattr(_BUILTIN_LOG_CONFIG, key.replace(".", "_")))
       for key in sorted(TOPIC_CONFIG_KEYS - _BROKER_ONLY_CONFIGS)},
    MIN_INSYNC_REPLICAS: "1",
    TIMESTAMP_DIFFERENCE_MAX_MS: str(2**63 - 1),  # Kafka's: no bound
    COMPRESSION_TYPE: PRODUCER_COMPRESSION,
    UNCLEAN_LEADER_ELECTION: "false",  # Kafka's: never elect a replica that was out of sync
}
"""Each topic config's value when neither the broker's topic_defaults nor the topic sets it."""
assert set(TOPIC_CONFIG_DEFAULTS) == TOPIC_CONFIG_KEYS


def effective_topic_configs(
    broker_defaults: Mapping[str, str], overrides: Mapping[str, str]
) -> dict[str, str]:
    """What a partition worker is assigned: the topic's overrides over the broker's defaults
    (the built-in defaults are the worker's own)."""
    return {**broker_defaults, **overrides}


def validate_topic_name(name: object) -> str:
    """The name, if it is one Kafka would accept; it also names directories on disk."""
    if not isinstance(name, str) or not name:
        raise ZlogError(ErrorCode.INVALID_TOPIC_EXCEPTION, "a topic name is a non-empty string")
    if len(name) > limits.TOPIC_NAME_CHARS_MAX:
        raise ZlogError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name is {len(name)} characters; at most {limits.TOPIC_NAME_CHARS_MAX}",
        )
    if name in {".", ".."}:
        raise ZlogError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name cannot be {name!r}")
    if _NAME_PATTERN.fullmatch(name) is None:
        raise ZlogError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} has characters outside [a-zA-Z0-9._-]",
        )
    return name


def validate_client_topic_name(name: object) -> str:
    """A name a client may create: valid, and outside the internal topics' `__` namespace."""
    checked = validate_topic_name(name)
    if checked.startswith(INTERNAL_TOPIC_PREFIX):
        raise ZlogError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {checked!r} starts with {INTERNAL_TOPIC_PREFIX!r}, which is reserved "
            "for zlog's internal topics",
        )
    return checked


def colliding_topic(name: str, existing: Iterable[str]) -> str | None:
    """An existing topic whose name differs from `name` only by "." versus "_" (Kafka's rule:
    such names would share metric names), or None."""
    key = name.replace(".", "_")
    for other in existing:
        if other != name and other.replace(".", "_") == key:
            return other
    return None


def check_no_collision(name: str, existing: Iterable[str]) -> None:
    """INVALID_TOPIC_EXCEPTION if `name` collides with one of `existing`."""
    other = colliding_topic(name, existing)
    if other is not None:
        raise ZlogError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic {name!r} collides with the existing topic {other!r}: names may not differ "
            "only by '.' versus '_'",
        )


def validate_partitions(partitions: object) -> int:
    """A partition count between 1 and limits.PARTITIONS_PER_TOPIC_MAX."""
    if not isinstance(partitions, int) or isinstance(partitions, bool):
        raise ZlogError(ErrorCode.INVALID_PARTITIONS, "partitions must be an integer")
    if partitions < 1:
        raise ZlogError(ErrorCode.INVALID_PARTITIONS, f"partitions must be >= 1, not {partitions}")
    if partitions > limits.PARTITIONS_PER_TOPIC_MAX:
        raise ZlogError(
            ErrorCode.INVALID_PARTITIONS,
            f"partitions must be <= {limits.PARTITIONS_PER_TOPIC_MAX}, not {partitions}",
        )
    return partitions


def validate_replication_factor(replication_factor: object, live_brokers: int) -> int:
    """Between 1 and the live brokers: a replica needs a broker of its own."""
    assert live_brokers >= 0
    if not isinstance(replication_factor, int) or isinstance(replication_factor, bool):
        raise ZlogError(ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor is an integer")
    if replication_factor < 1:
        raise ZlogError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor must be >= 1, not {replication_factor}",
        )
    if replication_factor > min(live_brokers, limits.REPLICATION_FACTOR_MAX):
        raise ZlogError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor {replication_factor} is larger than the {live_brokers} "
            "live broker(s)",
        )
    return replication_factor


def normalize_topic_configs(configs: object) -> dict[str, str]:
    """Configs as {Kafka name: string}: numbers become strings, anything else is refused."""
    if configs is None:
        return {}
    if not isinstance(configs, Mapping):
        raise ZlogError(ErrorCode.INVALID_CONFIG, "configs must be an object of name -> value")
    normalized: dict[str, str] = {}
    for key, value in configs.items():
        if not isinstance(key, str) or key not in TOPIC_CONFIG_KEYS:
            raise ZlogError(ErrorCode.INVALID_CONFIG, f"unknown topic config {key!r}")
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ZlogError(ErrorCode.INVALID_CONFIG, f"{key} must be a string, not {value!r}")
        normalized[key] = str(value)
    return normalized


def validate_topic_configs(
    configs: Mapping[str, str], base: LogConfig | None = None
) -> LogConfig:
    """The partition log settings these configs give over `base` (the broker's defaults)."""
    for key in configs:
        if key not in TOPIC_CONFIG_KEYS:
            raise ZlogError(ErrorCode.INVALID_CONFIG, f"unknown topic config {key!r}")
    log_configs = {k: v for k, v in configs.items() if k not in _BROKER_ONLY_CONFIGS}
    if MIN_INSYNC_REPLICAS in configs:
        validate_min_insync_replicas(configs[MIN_INSYNC_REPLICAS])
    if TIMESTAMP_DIFFERENCE_MAX_MS in configs:
        validate_timestamp_difference_max_ms(configs[TIMESTAMP_DIFFERENCE_MAX_MS])
    if COMPRESSION_TYPE in configs:
        validate_compression_type(configs[COMPRESSION_TYPE])
    if UNCLEAN_LEADER_ELECTION in configs:
        validate_unclean_leader_election(configs[UNCLEAN_LEADER_ELECTION])
    return LogConfig.from_topic_configs(log_configs, base)


def validate_compression_type(text: str | None) -> Compression | None:
    """The codec the topic stores batches in; None for "producer" (kept as sent, the default).

    Any other name is refused: Kafka's five codecs are all zlog's record codec knows.
    """
    if text is None or text == PRODUCER_COMPRESSION:
        return None
    codec = TOPIC_CODECS.get(text)
    if codec is None:
        supported = ", ".join([PRODUCER_COMPRESSION, *TOPIC_CODECS])
        raise ZlogError(
            ErrorCode.INVALID_CONFIG,
            f"compression.type {text!r} is not supported; zlog supports {supported}",
        )
    return codec


def validate_timestamp_difference_max_ms(text: str | None) -> int:
    """How far a record's CreateTime may be from the broker's clock; -1 (unset): any."""
    if text is None:
        return -1
    try:
        value = int(text)
    except ValueError:
        raise ZlogError(
            ErrorCode.INVALID_CONFIG,
            f"{TIMESTAMP_DIFFERENCE_MAX_MS} must be an integer, not {text!r}",
        ) from None
    if value < 0:
        raise ZlogError(
            ErrorCode.INVALID_CONFIG,
            f"{TIMESTAMP_DIFFERENCE_MAX_MS} must be at least 0, not {value}",
        )
    return value


def validate_unclean_leader_election(text: str) -> bool:
    """`true` or `false`, as Kafka spells them."""
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ZlogError(ErrorCode.INVALID_CONFIG,
                        f"unclean.leader.election.enable must be true or false, not {text!r}")
    return value == "true"


def unclean_election_enabled(configs: Mapping[str, str]) -> bool:
    """Whether a topic with these effective configs may elect an out-of-sync replica; a
    value that does not parse (validated before it was stored) counts as false."""
    try:
        return validate_unclean_leader_election(configs.get(UNCLEAN_LEADER_ELECTION, "false"))
    except ZlogError:
        return False


def validate_min_insync_replicas(text: str) -> int:
    """At least 1; Kafka allows more than the replication factor (acks=all then fails)."""
    try:
        value = int(text)
    except ValueError:
        raise ZlogError(
            ErrorCode.INVALID_CONFIG, f"min.insync.replicas must be an integer, not {text!r}"
        ) from None
    if not 1 <= value <= limits.REPLICATION_FACTOR_MAX:
        raise ZlogError(
            ErrorCode.INVALID_CONFIG,
            f"min.insync.replicas must be between 1 and {limits.REPLICATION_FACTOR_MAX}, "
            f"not {value}",
        )
    return value


def validate_new_topic(
    name: object,
    partitions: object,
    replication_factor: object,
    configs: object,
    *,
    live_brokers: int,
    base: LogConfig | None = None,
) -> tuple[str, int, int, dict[str, str]]:
    """One CreateTopics entry, checked in Kafka's order: name, partitions, RF, configs."""
    checked_name = validate_client_topic_name(name)
    checked_partitions = validate_partitions(partitions)
    checked_factor = validate_replication_factor(replication_factor, live_brokers)
    checked_configs = normalize_topic_configs(configs)
    validate_topic_configs(checked_configs, base)
    return checked_name, checked_partitions, checked_factor, checked_configs


def altered_topic_configs(
    current: Mapping[str, str],
    set_configs: Mapping[str, str],
    delete_configs: Iterable[str],
    base: LogConfig | None = None,
) -> dict[str, str]:
    """A topic's overrides after an IncrementalAlterConfigs: `set_configs` set, then
    `delete_configs` back to their defaults; checked as CreateTopics checks configs, so a
    refused change leaves the topic as it was."""
    deleted = list(delete_configs)
    for key in [*set_configs, *deleted]:
        if key not in TOPIC_CONFIG_KEYS:
            raise ZlogError(ErrorCode.INVALID_CONFIG, f"unknown topic config {key!r}")
    both = sorted(set(set_configs) & set(deleted))
    if both:
        raise ZlogError(ErrorCode.INVALID_REQUEST,
                        f"{', '.join(both)} is both set and deleted in one request")
    altered = {**current, **normalize_topic_configs(set_configs)}
    for key in deleted:
        altered.pop(key, None)
    validate_topic_configs(altered, base)
    return dict(sorted(altered.items()))
