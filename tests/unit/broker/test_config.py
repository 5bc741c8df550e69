"""Broker configuration: defaults < zlog.toml < ZLOG_* environment < flags (DESIGN.md §6)."""

from __future__ import annotations

import argparse
import os
import re
import socket
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from zlog.broker import serve
from zlog.broker.config import (
    KEYS,
    BrokerConfig,
    ConfigError,
    ConfigLayer,
    environment_layer,
    field_docs,
    file_layer,
    flags_layer,
    load_config,
    resolve_config,
)
from zlog.broker.topic_configs import (
    TIMESTAMP_DIFFERENCE_MAX_MS,
    TOPIC_CONFIG_KEYS,
    validate_timestamp_difference_max_ms,
)

EXAMPLE = Path(__file__).resolve().parents[3] / "systemd" / "zlog.toml.example"
EXAMPLE_SETTING = re.compile(r'^# (?P<key>[a-z_]+|"[a-z.]+") = (?P<value>.+)$')

TOML = """
node_id = 3
data_dir = "/var/lib/zlog"
listen = "tcp://0.0.0.0:7500"
workers = 4
auto_create_topics = true

[topic_defaults]
"retention.ms" = 86400000
"""


def test_embedded_defaults_run_a_single_node_without_any_file() -> None:
    config = resolve_config([])
    assert config == BrokerConfig()
    assert (config.node_id, config.data_dir, config.listen) == (
        1, Path("./zlog-data"), "tcp://127.0.0.1:7400")
    assert config.workers >= 1
    assert config.data_port_range is None and config.ring_dir is None
    assert config.default_log_config.retention_ms == 7 * 24 * 3600 * 1000


def test_each_layer_overrides_the_one_before_key_by_key() -> None:
    config = resolve_config([
        file_layer(TOML, "zlog.toml"),
        environment_layer({"ZLOG_WORKERS": "6", "ZLOG_DATA_DIR": "/env",
                           "ZLOG_TOPIC_RETENTION_MS": "1000"}),
        flags_layer({"data_dir": "/flag", "workers": None}, ["segment.bytes=4096"]),
    ])
    assert config.node_id == 3  # file only
    assert config.listen == "tcp://0.0.0.0:7500"  # file only
    assert config.workers == 6  # env over file; the flag was not given
    assert config.data_dir == Path("/flag")  # flag over env over file
    assert config.auto_create_topics is True
    assert config.topic_defaults_map == {"retention.ms": "1000", "segment.bytes": "4096"}
    assert config.default_log_config.segment_bytes == 4096


def test_load_config_reads_the_file_named_by_flag_or_environment(tmp_path: Path) -> None:
    path = tmp_path / "zlog.toml"
    path.write_text(TOML)
    assert load_config({}, config_file=path, environ={}).node_id == 3
    assert load_config({}, environ={"ZLOG_CONFIG": str(path)}).node_id == 3
    assert load_config({"node_id": "9"}, environ={"ZLOG_CONFIG": str(path)}).node_id == 9
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config({}, config_file=tmp_path / "missing.toml", environ={})


@pytest.mark.parametrize(
    ("make_layer", "message"),
    [
        (lambda: ConfigLayer("zlog.toml", {"wrokers": 2}), "unknown key 'wrokers'"),
        (lambda: file_layer("[cluster]\nx = 1\n", "zlog.toml"), r"unknown table \[cluster\]"),
        (lambda: file_layer("workers = [", "zlog.toml"), "not valid TOML"),
        (lambda: file_layer('workers = "many"', "zlog.toml"), "workers must be an integer"),
        (lambda: file_layer("workers = 0", "zlog.toml"), "between 1 and"),
        (lambda: file_layer("workers = true", "zlog.toml"), "not a boolean"),
        (lambda: environment_layer({"ZLOG_NODE_ID": "-1"}), "ZLOG_NODE_ID must be between"),
        (lambda: environment_layer({"ZLOG_LISTEN": "udp://x:1"}), "ZLOG_LISTEN must be tcp://"),
        (lambda: environment_layer({"ZLOG_LISTEN": "tcp://x:99999"}), "port in 1..65535"),
        (lambda: environment_layer({"ZLOG_AUTO_CREATE_TOPICS": "maybe"}), "true or false"),
        (lambda: flags_layer({"data_port_range": "9-1"}, []), "--data-port-range must satisfy"),
        (lambda: flags_layer({"data_port_range": "abc"}, []), "must be a range"),
        (lambda: flags_layer({"log_level": "loud"}, []), "--log-level must be one of"),
        (lambda: flags_layer({}, ["retention.ms"]), "not name=value"),
        (lambda: flags_layer({}, ["retention.mss=1"]), "unknown topic config"),
        (lambda: flags_layer({}, ["segment.bytes=1"]), "segment.bytes must be at least 14, not 1"),
    ],
)
def test_bad_configuration_is_a_clear_error(
    make_layer: Callable[[], ConfigLayer], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_config([make_layer()])


def test_backoff_bounds_must_be_ordered() -> None:
    layer = flags_layer({"worker_restart_backoff_initial_ms": "500",
                         "worker_restart_backoff_max_ms": "100"}, [])
    with pytest.raises(ConfigError, match="must not exceed"):
        resolve_config([layer])


def test_unknown_zlog_environment_variables_are_warned_about_not_fatal() -> None:
    warnings: list[str] = []
    config = load_config({}, environ={"ZLOG_WORKRS": "3", "ZLOG_WORKERS": "2"},
                         warnings=warnings)
    assert config.workers == 2
    assert warnings == ["environment: ignoring ZLOG_WORKRS, which is no broker setting"]


def test_values_parse_from_strings_and_toml_types() -> None:
    config = resolve_config([
        flags_layer({"data_port_range": "7401-7499", "ring_dir": "/dev/shm/z",
                     "auto_create_topics": "yes", "raft_tick_ms": "1_000",
                     "log_level": "DEBUG"}, []),
    ])
    assert config.data_port_range == (7401, 7499)
    assert config.ring_dir == Path("/dev/shm/z")
    assert config.auto_create_topics is True
    assert config.raft_tick_ms == 1000
    assert config.log_level == "debug"


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    serve.add_arguments(parser)
    return parser.parse_args(argv)


def test_every_key_has_a_flag_an_env_variable_and_a_documented_field() -> None:
    docs = field_docs()
    assert set(docs) == {*KEYS, "topic_defaults"}
    arguments = _parse([])
    assert all(getattr(arguments, key) is None for key in KEYS)
    arguments = _parse(["--auto-create-topics", "--workers", "3", "--topic-config", "flush.ms=5"])
    assert (arguments.auto_create_topics, arguments.workers, arguments.topic_config) == (
        "true", "3", ["flush.ms=5"])


def test_run_exits_2_on_a_bad_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    assert serve.run(_parse(["--workers", "none"])) == 2
    assert "configuration error" in capsys.readouterr().err


def test_the_example_file_lists_every_key_with_its_default() -> None:
    """Each key appears once, commented out, and uncommenting them all changes nothing.

    The file says so to its readers, who copy it to /etc/zlog/zlog.toml. A default no value can
    spell is described in angle brackets instead; those are listed here with what the code
    does without the key.
    """
    uncommented: list[str] = []
    described: dict[str, str] = {}
    for line in EXAMPLE.read_text().splitlines():
        setting = EXAMPLE_SETTING.match(line)
        if setting is None:
            uncommented.append(line)  # prose and the [topic_defaults] header
        elif setting["value"].startswith("<"):
            described[setting["key"]] = setting["value"]
        else:
            uncommented.append(f"{setting['key']} = {setting['value']}")
    assert described == {"workers": "<number of CPUs>",
                         '"message.timestamp.difference.max.ms"': "<unset: any timestamp>"}
    assert BrokerConfig().workers == (os.cpu_count() or 1)
    assert validate_timestamp_difference_max_ms(None) == -1  # -1: no bound

    layer = file_layer("\n".join(uncommented), "example")
    assert sorted([*layer.values, "workers"]) == sorted(KEYS)
    assert sorted([*layer.topic_defaults, TIMESTAMP_DIFFERENCE_MAX_MS]) == sorted(
        TOPIC_CONFIG_KEYS)
    config = resolve_config([layer])
    assert replace(config, topic_defaults=()) == BrokerConfig()
    assert config.default_log_config == BrokerConfig().default_log_config


def test_join_comes_from_the_environment_and_makes_the_broker_clustered() -> None:
    config = load_config({"listen": "tcp://127.0.0.4:7400"},
                         environ={"ZLOG_JOIN": "tcp://127.0.0.1:7400", "ZLOG_NODE_ID": "4"})
    assert config.join == "tcp://127.0.0.1:7400"
    assert config.clustered
    assert not config.voters


@pytest.mark.parametrize(("values", "message"), [
    ({"join": "tcp://127.0.0.1:7400", "voters": "1@tcp://127.0.0.1:7400",
      "listen": "tcp://127.0.0.1:7400"}, "not both"),
    ({"join": "udp://127.0.0.1:7400"}, "tcp://host:port"),
])
def test_a_bad_join_is_refused(values: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_config([ConfigLayer("command line", values)])


def test_a_joining_broker_needs_a_fixed_port() -> None:
    with pytest.raises(ConfigError, match="fixed listen port"):
        BrokerConfig(join="tcp://127.0.0.1:7400", listen="tcp://127.0.0.4:0")


def test_an_advertised_listener_splits_where_a_broker_binds_from_where_it_is_reached() -> None:
    """Behind a proxy: control and Raft bind `listen`, others are told advertised_listener,
    and the workers bind on listen's host while advertised on advertised_host."""
    config = load_config({"listen": "tcp://127.0.0.1:7400", "advertised_host": "127.0.1.1"},
                         environ={"ZLOG_ADVERTISED_LISTENER": "tcp://127.0.1.1:7400"})
    assert config.advertised_listener == "tcp://127.0.1.1:7400"
    assert config.data_bind_host == "127.0.0.1"
    plain = BrokerConfig(listen="tcp://0.0.0.0:7400", advertised_host="broker1.example")
    assert plain.data_bind_host == "broker1.example"  # unset: bound where advertised, as before


@pytest.mark.parametrize(("values", "message"), [
    ({"advertised_listener": "ipc:///tmp/zlog"}, "tcp://"),
    ({"advertised_listener": "tcp://127.0.1.1"}, "tcp://host:port"),
    ({"advertised_listener": "tcp://127.0.1.1:7400", "listen": "ipc:///tmp/zlog"}, "tcp://"),
])
def test_a_bad_advertised_listener_is_refused(values: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_config([ConfigLayer("command line", values)])


def test_a_clustered_leaders_lease_is_a_session_less_the_metadata_election_timeout() -> None:
    voters = ((1, "tcp://127.0.0.1:7400"), (2, "tcp://127.0.0.2:7400"))
    assert BrokerConfig(voters=voters, raft_tick_ms=50).lease_margin_ms == 500
    assert BrokerConfig().lease_margin_ms == 0  # alone, it is its own controller
    with pytest.raises(ConfigError, match="election timeout"):
        BrokerConfig(voters=voters, raft_tick_ms=100, broker_session_timeout_ms=1_400)


def test_offsets_retention_ms_wins_over_the_minutes_when_set() -> None:
    """Kafka's unit is minutes; the finer key lets a retention go below one."""
    assert BrokerConfig().offsets_retention_effective_ms == 10_080 * 60_000
    minutes = resolve_config([ConfigLayer("t", {"offsets_retention_minutes": "2"})])
    assert minutes.offsets_retention_effective_ms == 120_000
    both = resolve_config([ConfigLayer("t", {"offsets_retention_minutes": 2,
                                             "offsets_retention_ms": "1500"})])
    assert both.offsets_retention_effective_ms == 1_500
    with pytest.raises(ConfigError, match="offsets_retention_ms"):
        resolve_config([ConfigLayer("t", {"offsets_retention_ms": -1})])


def test_the_kafka_listener_is_on_by_default_and_set_in_each_spelling() -> None:
    assert BrokerConfig().kafka_advertised_address == ("127.0.0.1", 9092)
    from_file = resolve_config([file_layer('kafka_listen = "127.0.0.2:19092"', "zlog.toml")])
    from_environment = load_config({}, environ={"ZLOG_KAFKA_LISTEN": "127.0.0.3:29092"})
    from_flag = resolve_config([flags_layer({"kafka_listen": "127.0.0.4:39092"}, [])])
    assert [config.kafka_advertised_address for config in (
        from_file, from_environment, from_flag)] == [
        ("127.0.0.2", 19092), ("127.0.0.3", 29092), ("127.0.0.4", 39092)]
    off = load_config({}, environ={"ZLOG_KAFKA_LISTEN": ""})
    assert (off.kafka_listen, off.kafka_advertised_address) == ("", None)


def test_a_wildcard_kafka_listener_is_never_advertised() -> None:
    """Clients told 0.0.0.0 could not connect: the configured address, else the host's name."""
    configured = BrokerConfig(kafka_listen="0.0.0.0:9092", advertised_host="broker1.example")
    assert configured.kafka_advertised_address == ("broker1.example", 9092)
    named = BrokerConfig(kafka_listen="[::]:9092")
    assert named.kafka_advertised_address == (socket.gethostname(), 9092)
    told = resolve_config([flags_layer({
        "kafka_listen": "0.0.0.0:9092",
        "kafka_advertised_listeners": "PLAINTEXT://kafka.example:19092"}, [])])
    assert told.kafka_advertised_address == ("kafka.example", 19092)
    assert told.kafka_advertised_host == "kafka.example"


@pytest.mark.parametrize(("values", "message"), [
    ({"kafka_advertised_listeners": "0.0.0.0:9092"}, "clients can connect to"),
    ({"kafka_advertised_listeners": "PLAINTEXT://[::]:9092"}, "clients can connect to"),
    ({"kafka_advertised_listeners": "h:0"}, "clients can connect to"),
    ({"kafka_advertised_listeners": "SSL://h:9093"}, "or SASL_SSL://host:port, not"),
    ({"kafka_advertised_listeners": "a:1,b:2"}, "one address"),
    ({"kafka_listen": "PLAINTEXT://h:9092"}, "must be host:port,"),
    ({"kafka_listen": "h"}, "host:port with a port"),
    ({"kafka_listen": "h:65536"}, "host:port with a port"),
    ({"kafka_listen": "", "kafka_advertised_listeners": "h:9092"}, "kafka_listen is empty"),
])
def test_a_bad_kafka_address_is_refused(values: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_config([ConfigLayer("command line", values)])


@pytest.mark.parametrize(("values", "message"), [
    ({"security": "true", "security_keys_dir": "/k", "kafka_tls_cert_file": "/c.pem"},
     "go together"),
    ({"kafka_tls_cert_file": "/c.pem", "kafka_tls_key_file": "/k.pem"}, "security is off"),
])
def test_the_kafka_tls_files_come_together_and_with_security(values: dict[str, object],
                                                             message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_config([ConfigLayer("command line", values)])


def test_the_kafka_listener_is_advertised_with_the_protocol_it_speaks() -> None:
    config = resolve_config([ConfigLayer("command line", {
        "security": "true", "security_keys_dir": "/k",
        "kafka_advertised_listeners": "SASL_SSL://kafka.example:9093"})])
    assert config.kafka_advertised_address == ("kafka.example", 9093)
    with pytest.raises(ConfigError, match="says SASL_SSL but the Kafka listener speaks "
                                          "PLAINTEXT"):
        resolve_config([ConfigLayer("command line", {
            "kafka_advertised_listeners": "SASL_SSL://kafka.example:9093"})])
    with pytest.raises(ConfigError, match="says PLAINTEXT but the Kafka listener speaks "
                                          "SASL_SSL"):
        resolve_config([ConfigLayer("command line", {
            "security": "true", "security_keys_dir": "/k",
            "kafka_advertised_listeners": "PLAINTEXT://kafka.example:9093"})])
