"""The broker's configuration: embedded defaults < zlog.toml < ZLOG_* environment < flags.

Every key has one name in three spellings: `data_dir` in the TOML file, `ZLOG_DATA_DIR` in the
environment, `--data-dir` on the command line. The embedded defaults run a single node in
./zlog-data with no file at all (DESIGN.md §6). A later layer overrides an earlier one key by
key. Default topic configs (Kafka names, e.g. `retention.ms`) sit in the file's
`[topic_defaults]` table, in `ZLOG_TOPIC_RETENTION_MS`-style variables, and in repeated
`--topic-config retention.ms=86400000` flags.

An unknown key or a bad value is a ConfigError naming where it came from; `zlog serve` prints
it and exits 2 (the usage-error status), so a typo never silently runs a default.

`resolve_config` is the pure merge (mappings in, frozen BrokerConfig out); `load_config` only
reads the file and the environment and calls it.
"""

from __future__ import annotations

import ast
import inspect
import ipaddress
import itertools
import os
import socket
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final

from zlog import limits
from zlog.broker.log_lines import LOG_FORMATS, LOG_LEVELS, parse_module_levels
from zlog.broker.replica_settings import REPLICA_DEFAULTS, ReplicaSettings
from zlog.broker.topic_configs import TOPIC_CONFIG_KEYS, validate_topic_configs
from zlog.errors import ZlogError
from zlog.groups.config import MINUTE_MS, GroupConfig
from zlog.groups.partitioning import OFFSETS_PARTITIONS_DEFAULT
from zlog.shm_segments.log_config import LogConfig

ENV_PREFIX: Final = "ZLOG_"
ENV_TOPIC_PREFIX: Final = "ZLOG_TOPIC_"
ENV_CONFIG_FILE: Final = "ZLOG_CONFIG"
METRICS_PORT_DEFAULT: Final = 9644  # the metrics endpoint's (docs/operations-metrics.md)
WILDCARD_HOSTS: Final = frozenset({"0.0.0.0", "::", ""})
"""Hosts that bind every interface and that no client can connect to."""
# A clustered metadata log's election timeout, in ticks: with 50 ms ticks a new leader
# within 0.5 to 1 s.
METADATA_ELECTION_TICKS: Final = 10


class ConfigError(Exception):
    """A configuration the broker refuses to start with; the message says which key and where."""


def _cpu_count() -> int:
    return os.cpu_count() or 1


_GROUP_DEFAULTS: Final = GroupConfig()

@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """One broker's settings. Durations are in ms, sizes in bytes, as their names say."""

    node_id: int = 1
    """This broker's id in the cluster (>= 0); also its Raft voter id."""
    data_dir: Path = Path("./zlog-data")
    """Partition directories, the metadata log (`__raft/`) and the supervisor socket."""
    listen: str = "tcp://127.0.0.1:7400"
    """The control endpoint (ZeroMQ ROUTER): Metadata, CreateTopics, ... (docs/protocol.md)."""
    advertised_host: str = "127.0.0.1"
    """The host name or address clients use to reach this broker's partition workers."""
    advertised_listener: str = ""
    """The control endpoint as other brokers and clients reach it, when not at `listen` (a NAT,
    a proxy in between): registered as this broker's control endpoint, its Raft endpoint the
    next port; its workers then bind on listen's host and are advertised on advertised_host.
    Empty: `listen` itself (a wildcard host replaced by advertised_host)."""
    kafka_listen: str = "127.0.0.1:9092"
    """Where this broker's Kafka port (bootstrap, metadata, groups, admin) listens, host:port;
    each partition worker has a Kafka port of its own beside it (docs/kafka.md). A wildcard
    host (0.0.0.0, ::) listens on every interface. Empty: no Kafka listener."""
    kafka_advertised_listeners: str = ""
    """The host:port (or PLAINTEXT://host:port, SASL_SSL:// with security on) Kafka clients
    are told for kafka_listen.
    Empty: kafka_listen itself, a wildcard host replaced by advertised_host, or by this
    machine's host name while advertised_host is a loopback address. Never 0.0.0.0."""
    data_port_range: tuple[int, int] | None = None
    """Ports for the workers' data endpoints, "a-b" inclusive; empty: the OS picks free ports."""
    workers: int = field(default_factory=_cpu_count)
    """Partition worker processes (default: the CPU count); partitions are spread over them."""
    ring_dir: Path | None = None
    """Where the shared-memory rings live; empty: /dev/shm/zlog-<hash of the data dir>."""
    ring_bytes: int = limits.RING_SIZE_BYTES_DEFAULT
    """Capacity of each partition's shared-memory ring (bytes)."""
    ring_flush_bytes: int = 0
    """Flush a ring into its segment once this much is pending; 0: after every append."""
    auto_create_topics: bool = False
    """Create a topic that Metadata asks for and that does not exist (Kafka's auto.create)."""
    default_partitions: int = 1
    """Partitions of an auto-created topic."""
    default_replication_factor: int = 1
    """Replication factor of an auto-created topic."""
    offsets_topic_num_partitions: int = OFFSETS_PARTITIONS_DEFAULT
    """Partitions of `__consumer_offsets`, created on the first FindCoordinator; fixed once it
    exists, since the count decides which partition (and so which coordinator) owns a group."""
    offsets_topic_replication_factor: int = 3
    """Replication factor of `__consumer_offsets`, lowered to the brokers there are when it is
    created."""
    group_initial_rebalance_delay_ms: int = _GROUP_DEFAULTS.initial_rebalance_delay_ms
    """How long an empty classic group waits for more members before its first generation."""
    group_min_session_timeout_ms: int = _GROUP_DEFAULTS.min_session_timeout_ms
    """The shortest session a classic member may ask for."""
    group_consumer_session_timeout_ms: int = _GROUP_DEFAULTS.consumer_session_timeout_ms
    """A member of a server-side group silent this long is fenced."""
    group_consumer_heartbeat_interval_ms: int = _GROUP_DEFAULTS.consumer_heartbeat_interval_ms
    """How often a member of a server-side group is told to heartbeat."""
    offsets_retention_minutes: int = _GROUP_DEFAULTS.offsets_retention_ms // MINUTE_MS
    """How long a group's committed offsets outlive it (after it empties; for a simple
    group, after each commit) before the coordinator deletes them (docs/groups.md §5.2)."""
    offsets_retention_ms: int = 0
    """The same retention in milliseconds, which wins over offsets_retention_minutes when set
    (0: not set). Kafka counts it in whole minutes; this lets a test, or an operator who wants
    it, go below a minute without making the minutes fractional."""
    offsets_retention_check_interval_ms: int = _GROUP_DEFAULTS.offsets_retention_check_interval_ms
    """How often each coordinator looks for expired offsets."""
    raft_tick_ms: int = 50
    """Wall time of one metadata-log tick; elections and heartbeats count in ticks."""
    voters: tuple[tuple[int, str], ...] = ()
    """The metadata log's voters, "1@tcp://h1:7400,2@tcp://h2:7400,...": each voter's id and
    control endpoint (its Raft peers talk on the next port). Empty: this node alone."""
    join: str = ""
    """A member's control endpoint: start as a broker that holds data but does not vote (a
    learner of the metadata log), added to the cluster through that member (docs/raft.md
    §4.16). Exclusive with `voters`. Empty: this broker votes, or runs alone."""
    rack: str = ""
    """This broker's rack, for placing a partition's replicas on different racks."""
    broker_heartbeat_interval_ms: int = 250
    """How often this broker tells the controller it is alive."""
    broker_session_timeout_ms: int = 1_500
    """A broker silent this long is fenced: it leads nothing and leaves every ISR."""
    replica_lag_time_max_ms: int = REPLICA_DEFAULTS.lag_time_max_ms
    """A follower that has not caught up with its leader within this long leaves the ISR."""
    replica_fetch_wait_max_ms: int = REPLICA_DEFAULTS.fetch_wait_max_ms
    """The longest a follower's fetch waits at its leader for new batches."""
    replica_fetch_max_bytes: int = REPLICA_DEFAULTS.fetch_max_bytes
    """Bytes a follower asks for per partition and fetch (one batch always fits)."""
    replica_fetch_response_max_bytes: int = REPLICA_DEFAULTS.fetch_response_max_bytes
    """Bytes a follower asks for per fetch, over all its partitions."""
    replica_fetch_backoff_ms: int = REPLICA_DEFAULTS.fetch_backoff_ms
    """The pause after a follower's fetch failed, before it asks again."""
    replica_high_watermark_checkpoint_interval_ms: int = (
        REPLICA_DEFAULTS.high_watermark_checkpoint_interval_ms)
    """How often each partition's high watermark is written to its checkpoint file."""
    controlled_shutdown_enable: bool = True
    """On SIGTERM, move this broker's leaderships to other in-sync replicas before stopping."""
    controlled_shutdown_timeout_ms: int = 30_000
    """The longest a stop waits for its leaderships to move; then it stops anyway."""
    auto_leader_rebalance: bool = True
    """The controller moves leadership back to each partition's preferred replica."""
    leader_imbalance_check_interval_s: int = 60
    """How often the controller looks for partitions led by another than their preferred
    replica."""
    worker_restart_backoff_initial_ms: int = 100
    """Delay before restarting a worker that died; doubles at each crash in a row."""
    worker_restart_backoff_max_ms: int = 10_000
    """The longest delay between restarts of a worker that keeps dying."""
    worker_heartbeat_timeout_ms: int = 10_000
    """A worker silent this long is killed and restarted (workers beat every 500 ms)."""
    controller_stall_timeout_ms: int = 0
    """The supervisor's loop not turning for this long (a stuck disk under it) makes its
    metadata-log node hand off the controller and not campaign until the loop turns again;
    at least the metadata log's election timeout. 0: twice that timeout (raft_tick_ms x 20,
    1 s)."""
    shutdown_timeout_ms: int = 10_000
    """How long a graceful stop waits for the workers before killing them (rings survive)."""
    log_level: str = "info"
    """debug, info, warning or error."""
    log_format: str = "logfmt"
    """How each log line is written: "logfmt" (key=value pairs) or "json" (one object a line);
    under systemd both begin with the journald priority."""
    log_levels: tuple[tuple[str, str], ...] = ()
    """Levels per logger, over log_level: "zlog.raft=debug,zlog.broker.data=warning" (a
    logger's name is its module's, so a package prefix covers its modules). Empty: none."""
    topic_defaults: tuple[tuple[str, str], ...] = ()
    """Topic config defaults for this broker (Kafka names -> values) over LogConfig's own."""
    metrics_listen: str = f"127.0.0.1:{METRICS_PORT_DEFAULT}"
    """HOST:PORT of the HTTP endpoint serving /metrics (Prometheus), /healthz and /readyz;
    empty: none. Port 0 takes a free one (the log says which)."""
    security: bool = False
    """CURVE on every ZeroMQ socket (clients, workers, replication, the metadata log), only the
    principals in security_keys_dir let in, ACLs default-deny and quotas enforced
    (docs/security.md). Every broker of a cluster has the same setting."""
    security_keys_dir: Path | None = None
    """With security on: server.key_secret (the cluster's server key) and principals/ (each
    principal's NAME.key, and this broker's own NAME.key_secret); `zlog keys generate`."""
    security_principal: str = "broker"
    """The principal this broker presents to the others; always a super-user."""
    super_users: tuple[str, ...] = ()
    """Principals every ACL lets through, "admin,ops" (Kafka's super.users)."""
    kafka_tls_cert_file: Path | None = None
    """With security on: the PEM certificate chain the Kafka listener (its gateway and its
    workers' ports) presents; it then speaks SASL_SSL only. Without it and its key the Kafka
    listener stays shut when security is on."""
    kafka_tls_key_file: Path | None = None
    """The PEM private key of kafka_tls_cert_file (readable by the broker only)."""
    kafka_tls_ca_file: Path | None = None
    """PEM CA certificates a Kafka client's certificate must chain to: set, every client
    presents one (mutual TLS) and still logs in with SASL; empty: none asked for."""

    def __post_init__(self) -> None:
        assert self.node_id >= 0
        assert 1 <= self.workers <= limits.WORKERS_MAX
        if self.voters and self.node_id not in dict(self.voters):
            raise ConfigError(f"node_id {self.node_id} is not one of the voters "
                              f"{[node for node, _ in self.voters]}")
        if self.join and self.voters:
            raise ConfigError("a broker either votes (voters) or joins as a learner (join), "
                              "not both")
        if (self.voters or self.join) and self.listen.endswith(":0"):
            raise ConfigError("a clustered broker needs a fixed listen port: its peers derive "
                              "its Raft endpoint from it")
        if self.advertised_listener and not (self.advertised_listener.startswith("tcp://")
                                             and self.listen.startswith("tcp://")):
            raise ConfigError("advertised_listener and listen must both be tcp:// endpoints")
        if self.kafka_advertised_listeners and not self.kafka_listen:
            raise ConfigError("kafka_advertised_listeners is set but kafka_listen is empty "
                              "(no Kafka listener to advertise)")
        if self.broker_session_timeout_ms < 4 * self.broker_heartbeat_interval_ms:
            raise ConfigError("broker_session_timeout_ms must be at least 4 times "
                              "broker_heartbeat_interval_ms")
        if self.broker_session_timeout_ms < (self.lease_margin_ms
                                             + 2 * self.broker_heartbeat_interval_ms):
            raise ConfigError(
                "broker_session_timeout_ms must exceed the metadata log's election timeout "
                f"(raft_tick_ms x {METADATA_ELECTION_TICKS} = {self.lease_margin_ms} ms) by two "
                "broker_heartbeat_interval_ms: a leader's lease is the session less that "
                "timeout")
        if 0 < self.controller_stall_timeout_ms < self.election_timeout_ms:
            raise ConfigError(
                "controller_stall_timeout_ms must be 0 (twice the election timeout) or at least "
                f"the metadata log's election timeout (raft_tick_ms x {METADATA_ELECTION_TICKS}"
                f" = {self.election_timeout_ms} ms): a shorter stall is no reason to move the "
                "controller")
        if self.replica_lag_time_max_ms <= self.replica_fetch_wait_max_ms:
            raise ConfigError("replica_lag_time_max_ms must exceed replica_fetch_wait_max_ms")
        if self.ring_flush_bytes >= self.ring_bytes:
            raise ConfigError("ring_flush_bytes must be smaller than ring_bytes")
        if self.security and self.security_keys_dir is None:
            raise ConfigError("security needs security_keys_dir (zlog keys generate makes one)")
        if (self.kafka_tls_cert_file is None) != (self.kafka_tls_key_file is None):
            raise ConfigError("kafka_tls_cert_file and kafka_tls_key_file go together")
        scheme = self.kafka_advertised_listeners.partition("://")[0].upper() \
            if "://" in self.kafka_advertised_listeners else ""
        if scheme and scheme != ("SASL_SSL" if self.security else "PLAINTEXT"):
            raise ConfigError(f"kafka_advertised_listeners says {scheme} but the Kafka "
                              f"listener speaks {'SASL_SSL' if self.security else 'PLAINTEXT'}"
                              " (security decides)")
        if self.kafka_tls_cert_file is not None and not self.security:
            raise ConfigError("kafka_tls_cert_file is set but security is off: the Kafka "
                              "listener speaks TLS (SASL_SSL) only with security on")

    @property
    def offsets_retention_effective_ms(self) -> int:
        """offsets_retention_ms if set, else offsets_retention_minutes."""
        return self.offsets_retention_ms or self.offsets_retention_minutes * MINUTE_MS

    @property
    def voter_map(self) -> dict[int, str]:
        """Each voter's control endpoint; a single node votes alone, at its own endpoint."""
        return dict(self.voters)

    @property
    def election_timeout_ms(self) -> int:
        """The clustered metadata log's election timeout (a follower campaigns after 1 to 2 of
        them without hearing its leader)."""
        return self.raft_tick_ms * METADATA_ELECTION_TICKS

    @property
    def lease_margin_ms(self) -> int:
        """How much shorter than a session a leader's lease is: a controller cut off from the
        metadata log's quorum goes on answering heartbeats for up to an election timeout
        after the others may have elected another (docs/replication.md §4.1)."""
        return self.election_timeout_ms if self.clustered else 0

    @property
    def controller_stall_timeout_effective_ms(self) -> int:
        """controller_stall_timeout_ms if set, else twice the election timeout."""
        return self.controller_stall_timeout_ms or 2 * self.election_timeout_ms

    @property
    def data_bind_host(self) -> str:
        """Where the workers' data endpoints bind: advertised_host, unless others reach this
        broker through another address (advertised_listener), when they bind on listen's."""
        if not self.advertised_listener:
            return self.advertised_host
        return self.listen[len("tcp://"):].rpartition(":")[0]

    @property
    def kafka_advertised_address(self) -> tuple[str, int] | None:
        """The (host, port) Kafka clients are told for this broker's Kafka port; None when
        there is none. A wildcard is never advertised: clients could not connect to it."""
        if not self.kafka_listen:
            return None
        if self.kafka_advertised_listeners:
            return split_host_port(self.kafka_advertised_listeners)
        host, port = split_host_port(self.kafka_listen)
        return self.kafka_advertised_host if host in WILDCARD_HOSTS else host, port

    @property
    def kafka_advertised_host(self) -> str:
        """The host Kafka clients are told for this broker's Kafka ports (its workers' too)."""
        if self.kafka_advertised_listeners:
            return split_host_port(self.kafka_advertised_listeners)[0]
        host, _ = split_host_port(self.kafka_listen or "127.0.0.1:0")
        if host not in WILDCARD_HOSTS:
            return host
        if ipaddress_is_loopback(self.advertised_host):
            return socket.gethostname()
        return self.advertised_host

    @property
    def clustered(self) -> bool:
        return len(self.voters) > 1 or bool(self.join)

    @property
    def replica_settings(self) -> ReplicaSettings:
        return ReplicaSettings(self.replica_lag_time_max_ms, self.replica_fetch_wait_max_ms,
                               self.replica_fetch_max_bytes,
                               self.replica_fetch_response_max_bytes,
                               self.replica_fetch_backoff_ms,
                               self.replica_high_watermark_checkpoint_interval_ms)

    @property
    def topic_defaults_map(self) -> dict[str, str]:
        return dict(self.topic_defaults)

    @property
    def default_log_config(self) -> LogConfig:
        """LogConfig defaults with this broker's topic_defaults applied (validated at load)."""
        return validate_topic_configs(self.topic_defaults_map)


# -- value parsers: each takes a TOML value or a string from the environment or a flag -------


def _to_int(minimum: int, maximum: int | None = None) -> Callable[[object], int]:
    def parse(value: object) -> int:
        if isinstance(value, bool):
            raise ValueError("must be an integer, not a boolean")
        if isinstance(value, str):
            text = value.strip().replace("_", "")
            if not text.lstrip("-").isdigit():
                raise ValueError(f"must be an integer, not {value!r}")
            value = int(text)
        if not isinstance(value, int):
            raise ValueError(f"must be an integer, not {value!r}")
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
            raise ValueError(f"must be {bound}, not {value}")
        return value

    return parse


def _to_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"1", "true", "yes", "on"}:
        return True
    if isinstance(value, str) and value.strip().lower() in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"must be true or false, not {value!r}")


def _to_str(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a non-empty string, not {value!r}")
    return value.strip()


def _to_path(value: object) -> Path:
    return Path(_to_str(value)).expanduser()


def _to_optional_path(value: object) -> Path | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in {"", "none"}):
        return None
    return _to_path(value)


def _to_endpoint(value: object) -> str:
    text = _to_str(value)
    if text.startswith("tcp://"):
        host, _, port = text[len("tcp://") :].rpartition(":")
        if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(f"must be tcp://host:port with a port in 1..65535, not {text!r}")
        return text
    if text.startswith("ipc://") and len(text) > len("ipc://"):
        return text
    raise ValueError(f"must be tcp://host:port or ipc://path, not {text!r}")


def _to_port_range(value: object) -> tuple[int, int] | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in {"", "none"}):
        return None
    text = _to_str(value)
    first, dash, last = text.partition("-")
    if not dash or not first.strip().isdigit() or not last.strip().isdigit():
        raise ValueError(f"must be a range like 7401-7499, not {text!r}")
    low, high = int(first), int(last)
    if not 1 <= low <= high <= 65535:
        raise ValueError(f"must satisfy 1 <= first <= last <= 65535, not {text!r}")
    return low, high


def _to_optional_endpoint(value: object) -> str:
    text = _to_optional_str(value)
    return _to_endpoint(text) if text else ""


def _to_optional_str(value: object) -> str:
    return value.strip() if isinstance(value, str) else _to_str(value)


def _to_voters(value: object) -> tuple[tuple[int, str], ...]:
    """"1@tcp://h1:7400,2@tcp://h2:7400" -> ((1, "tcp://h1:7400"), (2, "tcp://h2:7400"))."""
    text = value.strip() if isinstance(value, str) else _to_str(value)
    if not text:
        return ()
    voters: dict[int, str] = {}
    for item in text.split(","):
        node, at, endpoint = item.strip().partition("@")
        if not at or not node.isdigit():
            raise ValueError(f"must be id@tcp://host:port[,...], not {item.strip()!r}")
        endpoint = _to_endpoint(endpoint)
        if not endpoint.startswith("tcp://"):
            raise ValueError(f"a voter is reached over tcp://, not {endpoint!r}")
        if int(node) in voters:
            raise ValueError(f"voter {node} is listed twice")
        voters[int(node)] = endpoint
    return tuple(sorted(voters.items()))


def split_host_port(address: str) -> tuple[str, int]:
    """"h:9092", "[::1]:9092" or "PLAINTEXT://h:9092" (SASL_SSL://, as validated) ->
    ("h", 9092)."""
    text = address.partition("://")[2] if "://" in address else address
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def ipaddress_is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _to_kafka_address(advertised: bool) -> Callable[[object], str]:
    """host:port, or "" for none; an advertised address may carry Kafka's PLAINTEXT:// or
    SASL_SSL:// (the one the security setting gives, __post_init__ checks) and
    never names a wildcard host."""

    def parse(value: object) -> str:
        text = _to_optional_str(value)
        if not text:
            return ""
        scheme, separator, rest = text.partition("://")
        if separator and not (advertised and scheme.upper() in ("PLAINTEXT", "SASL_SSL")):
            raise ValueError(f"must be host:port"
                             f"{' or PLAINTEXT://host:port or SASL_SSL://host:port' * advertised}"
                             f", not {text!r}")
        if "," in text:
            raise ValueError(f"must be one address, not a list: {text!r}")
        host, _, port = (rest if separator else text).rpartition(":")
        if not host.strip("[]") or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"must be host:port with a port in 0..65535, not {text!r}")
        if advertised and (host.strip("[]") in WILDCARD_HOSTS or int(port) == 0):
            raise ValueError(f"must name a host and port clients can connect to, not {text!r}")
        return text

    return parse


def raft_endpoint(control_endpoint: str) -> str:
    """A voter's Raft endpoint: its control endpoint's host, the next port."""
    host, _, port = control_endpoint.rpartition(":")
    assert port.isdigit(), control_endpoint
    return f"{host}:{int(port) + 1}"


def _to_log_format(value: object) -> str:
    text = _to_str(value).lower()
    if text not in LOG_FORMATS:
        raise ValueError(f"must be one of {', '.join(LOG_FORMATS)}, not {value!r}")
    return text


def _to_log_levels(value: object) -> tuple[tuple[str, str], ...]:
    return parse_module_levels(_to_optional_str(value))
def _to_names(value: object) -> tuple[str, ...]:
    """"admin, ops" or a TOML list -> ("admin", "ops")."""
    items = value if isinstance(value, list) else _to_optional_str(value).split(",")
    names = tuple(str(item).strip() for item in items if str(item).strip())
    return tuple(dict.fromkeys(names))


def _to_log_level(value: object) -> str:
    text = _to_str(value).lower()
    if text not in LOG_LEVELS:
        raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}, not {value!r}")
    return text


def _to_http_listen(value: object) -> str:
    """HOST:PORT, or empty for none."""
    text = value.strip() if isinstance(value, str) else _to_str(value)
    if not text:
        return ""
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"must be HOST:PORT with a port in 0..65535, or empty, not {text!r}")
    return text


_PARSERS: Final[dict[str, Callable[[object], Any]]] = {
    "node_id": _to_int(0, 2**31 - 1),
    "data_dir": _to_path,
    "listen": _to_endpoint,
    "advertised_host": _to_str,
    "advertised_listener": _to_optional_endpoint,
    "kafka_listen": _to_kafka_address(advertised=False),
    "kafka_advertised_listeners": _to_kafka_address(advertised=True),
    "data_port_range": _to_port_range,
    "workers": _to_int(1, limits.WORKERS_MAX),
    "ring_dir": _to_optional_path,
    "ring_bytes": _to_int(limits.RING_SIZE_BYTES_MIN, 2**31 - 1),
    "ring_flush_bytes": _to_int(0, 2**31 - 1),
    "auto_create_topics": _to_bool,
    "default_partitions": _to_int(1, 65_536),
    "default_replication_factor": _to_int(1, 32),
    "offsets_topic_num_partitions": _to_int(1, 65_536),
    "offsets_topic_replication_factor": _to_int(1, 32),
    "group_initial_rebalance_delay_ms": _to_int(0, 3_600_000),
    "group_min_session_timeout_ms": _to_int(1, 3_600_000),
    "group_consumer_session_timeout_ms": _to_int(1, 3_600_000),
    "group_consumer_heartbeat_interval_ms": _to_int(1, 3_600_000),
    "offsets_retention_minutes": _to_int(1, 2**31 - 1),
    "offsets_retention_ms": _to_int(0, 2**53 - 1),
    "offsets_retention_check_interval_ms": _to_int(1, 2**31 - 1),
    "raft_tick_ms": _to_int(1, 10_000),
    "voters": _to_voters,
    "join": _to_optional_endpoint,
    "rack": _to_optional_str,
    "broker_heartbeat_interval_ms": _to_int(10, 60_000),
    "broker_session_timeout_ms": _to_int(40, 3_600_000),
    "replica_lag_time_max_ms": _to_int(100, 3_600_000),
    "replica_fetch_wait_max_ms": _to_int(1, 60_000),
    "replica_fetch_max_bytes": _to_int(1024, limits.BATCH_SIZE_BYTES_MAX),
    "replica_fetch_response_max_bytes": _to_int(1024, 2**31 - 1),
    "replica_fetch_backoff_ms": _to_int(1, 60_000),
    "replica_high_watermark_checkpoint_interval_ms": _to_int(1, 3_600_000),
    "controlled_shutdown_enable": _to_bool,
    "controlled_shutdown_timeout_ms": _to_int(0, 3_600_000),
    "auto_leader_rebalance": _to_bool,
    "leader_imbalance_check_interval_s": _to_int(1, 86_400),
    "worker_restart_backoff_initial_ms": _to_int(1, 3_600_000),
    "worker_restart_backoff_max_ms": _to_int(1, 3_600_000),
    "worker_heartbeat_timeout_ms": _to_int(1_000, 3_600_000),
    "controller_stall_timeout_ms": _to_int(0, 3_600_000),
    "shutdown_timeout_ms": _to_int(0, 3_600_000),
    "log_level": _to_log_level,
    "log_format": _to_log_format,
    "log_levels": _to_log_levels,
    "metrics_listen": _to_http_listen,
    "security": _to_bool,
    "security_keys_dir": _to_optional_path,
    "security_principal": _to_str,
    "super_users": _to_names,
    "kafka_tls_cert_file": _to_optional_path,
    "kafka_tls_key_file": _to_optional_path,
    "kafka_tls_ca_file": _to_optional_path,
}
assert set(_PARSERS) | {"topic_defaults"} == {f.name for f in fields(BrokerConfig)}

KEYS: Final = tuple(_PARSERS)
BOOLEAN_KEYS: Final = frozenset(key for key, parse in _PARSERS.items() if parse is _to_bool)
"""Every scalar key; `topic_defaults` is the one table."""


def env_name(key: str) -> str:
    return ENV_PREFIX + key.upper()


def flag_name(key: str) -> str:
    return "--" + key.replace("_", "-")


@dataclass(frozen=True, slots=True)
class ConfigLayer:
    """One source of settings: where it came from (for error messages) and what it sets."""

    source: str  # the file's path, "environment" or "command line"
    values: Mapping[str, object]  # key -> raw value (TOML-typed or a string)
    topic_defaults: Mapping[str, object] = field(default_factory=dict)
    spelling: Callable[[str], str] = str  # how this source spells a key, for messages

    def name(self, key: str) -> str:
        return f"{self.source}: {self.spelling(key)}"


def resolve_config(layers: Sequence[ConfigLayer]) -> BrokerConfig:
    """Apply the layers in order over the embedded defaults (pure)."""
    changes: dict[str, object] = {}
    topic_defaults: dict[str, str] = {}
    for layer in layers:
        for key, raw in layer.values.items():
            parser = _PARSERS.get(key)
            if parser is None:
                raise ConfigError(f"{layer.source}: unknown key {key!r}")
            try:
                changes[key] = parser(raw)
            except ValueError as error:
                raise ConfigError(f"{layer.name(key)} {error}") from None
        for name, raw in layer.topic_defaults.items():
            if name not in TOPIC_CONFIG_KEYS:
                raise ConfigError(f"{layer.source}: unknown topic config {name!r}")
            if isinstance(raw, bool) or not isinstance(raw, str | int | float):
                raise ConfigError(f"{layer.source}: topic config {name} must be a string")
            topic_defaults[name] = str(raw)
    try:
        validate_topic_configs(topic_defaults)
    except ZlogError as error:
        raise ConfigError(f"topic_defaults: {error.message}") from None
    changes["topic_defaults"] = tuple(sorted(topic_defaults.items()))
    config = replace(BrokerConfig(), **changes)  # type: ignore[arg-type]
    if config.worker_restart_backoff_initial_ms > config.worker_restart_backoff_max_ms:
        raise ConfigError(
            "worker_restart_backoff_initial_ms must not exceed worker_restart_backoff_max_ms"
        )
    return config


def file_layer(text: str, source: str) -> ConfigLayer:
    """A zlog.toml: top-level keys plus an optional [topic_defaults] table."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{source}: not valid TOML: {error}") from None
    values = dict(document)
    topic_defaults = values.pop("topic_defaults", {})
    if not isinstance(topic_defaults, dict):
        raise ConfigError(f"{source}: topic_defaults must be a table")
    for key, value in values.items():
        if isinstance(value, dict):
            raise ConfigError(f"{source}: unknown table [{key}]")
    return ConfigLayer(source, values, topic_defaults)


def environment_layer(
    environ: Mapping[str, str], warnings: list[str] | None = None
) -> ConfigLayer:
    """ZLOG_<KEY> and ZLOG_TOPIC_<NAME> variables.

    Another ZLOG_* name is reported in `warnings`, not refused: the environment is shared with
    other zlog tools (the client CLI), whose variables are not the broker's to judge.
    """
    values: dict[str, object] = {}
    topic_defaults: dict[str, object] = {}
    topic_names = {env_topic_name(name): name for name in TOPIC_CONFIG_KEYS}
    for variable, value in sorted(environ.items()):
        if not variable.startswith(ENV_PREFIX) or variable == ENV_CONFIG_FILE:
            continue
        if variable in topic_names:
            topic_defaults[topic_names[variable]] = value
            continue
        key = variable[len(ENV_PREFIX) :].lower()
        if key in _PARSERS:
            values[key] = value
        elif warnings is not None:
            warnings.append(f"environment: ignoring {variable}, which is no broker setting")
    return ConfigLayer("environment", values, topic_defaults, env_name)


def env_topic_name(topic_config: str) -> str:
    """retention.ms -> ZLOG_TOPIC_RETENTION_MS."""
    return ENV_TOPIC_PREFIX + topic_config.replace(".", "_").upper()


def flags_layer(flags: Mapping[str, object], topic_configs: Sequence[str]) -> ConfigLayer:
    """Flags the user gave (None = not given); `topic_configs` are "name=value" strings."""
    topic_defaults: dict[str, object] = {}
    for item in topic_configs:
        name, equals, value = item.partition("=")
        if not equals:
            raise ConfigError(f"command line: --topic-config {item!r} is not name=value")
        topic_defaults[name.strip()] = value.strip()
    values = {key: value for key, value in flags.items() if value is not None}
    return ConfigLayer("command line", values, topic_defaults, flag_name)


def load_config(
    flags: Mapping[str, object],
    topic_configs: Sequence[str] = (),
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    warnings: list[str] | None = None,
) -> BrokerConfig:
    """Read the file (flag, else $ZLOG_CONFIG, else none) and the environment; merge all."""
    environ = os.environ if environ is None else environ
    layers: list[ConfigLayer] = []
    if config_file is None and environ.get(ENV_CONFIG_FILE):
        config_file = Path(environ[ENV_CONFIG_FILE])
    if config_file is not None:
        try:
            text = config_file.read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"cannot read config file {config_file}: {error.strerror}") from None
        layers.append(file_layer(text, str(config_file)))
    layers.append(environment_layer(environ, warnings))
    layers.append(flags_layer(flags, topic_configs))
    return resolve_config(layers)


def field_docs() -> dict[str, str]:
    """Each BrokerConfig field's docstring (the one description, reused as --help text)."""
    try:
        source = inspect.getsource(BrokerConfig)
    except (OSError, TypeError):
        return {}
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    docs: dict[str, str] = {}
    for statement, following in itertools.pairwise(body.body):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[statement.target.id] = " ".join(following.value.value.split())
    return docs
