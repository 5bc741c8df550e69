"""The `zlog` command against a real broker: topics, produce lines, consume them back.

Spec: the CLI section of the client brief and docs/cli.md: every command takes --bootstrap
(before or after its name); errors print `error: <CODE NAME> (<n>): <sentence>` on stderr
and exit 1, never a traceback; consume prints kcat's --format, --print-key or --json, with a
tombstone distinct from an empty value; produce --json reads what consume --json writes;
topic alter changes configs on live partitions, and describe --configs shows their sources.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from zlog.broker.topic_configs import TOPIC_CONFIG_KEYS
from zlog.client import Producer
from zlog.record.header import Compression, scan_batches
from zlog.record.records import read_records
from zlog.transport.messages.data import (
    FetchEntry,
    FetchRequestV0,
    FetchResponseV0,
)
from zlog.transport.rpc import RpcClient
from zlog_testbed.broker_process import REPO_ROOT, BrokerProcess, broker_process
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

BROKER_SEGMENT_MS = "3600000"  # a broker topic default, so describe --configs shows "broker"


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    extra = ("--topic-config", f"segment.ms={BROKER_SEGMENT_MS}")
    with broker_process(workers=1, extra_args=extra) as instance:
        yield instance


def zlog(broker: BrokerProcess, *arguments: str, stdin: bytes = b"",
         bootstrap_by_env: bool = False) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "zlog.cli", *arguments]
    environ = dict(os.environ)
    if bootstrap_by_env:
        environ["ZLOG_BOOTSTRAP"] = broker.endpoint
    else:
        command += ["--bootstrap", broker.endpoint]
    return subprocess.run(command, input=stdin, capture_output=True, cwd=REPO_ROOT,
                          env=environ, timeout=60, check=False)


def ok(result: subprocess.CompletedProcess[bytes]) -> str:
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


def test_topic_lifecycle(broker: BrokerProcess) -> None:
    created = ok(zlog(broker, "topic", "create", "cli-topics", "--partitions", "2",
                      "--config", "retention.ms=3600000"))
    assert "cli-topics" in created
    assert "cli-topics" in ok(zlog(broker, "topic", "list", bootstrap_by_env=True)).split()
    described = ok(zlog(broker, "topic", "describe", "cli-topics"))
    assert "PartitionCount: 2" in described and "retention.ms=3600000" in described
    assert described.count("Partition: ") == 2
    status = ok(zlog(broker, "cluster", "status"))
    assert "raft: leader 1" in status and broker.endpoint in status
    assert "last commit: term " in status and ", height " in status
    ok(zlog(broker, "topic", "delete", "cli-topics"))


def test_produce_lines_then_consume_them_back(broker: BrokerProcess) -> None:
    ok(zlog(broker, "topic", "create", "cli-lines", "--partitions", "3"))
    lines = [f"line {i}" for i in range(300)]
    ok(zlog(broker, "produce", "cli-lines", "--acks", "all",
            stdin="\n".join(lines).encode() + b"\n"))
    consumed = ok(zlog(broker, "consume", "cli-lines", "--from-beginning",
                       "--max-messages", "300", "--timeout-ms", "10000"))
    assert sorted(consumed.splitlines()) == sorted(lines)
    offsets = ok(zlog(broker, "offsets", "cli-lines"))
    high_watermarks = [int(row.split()[2]) for row in offsets.splitlines()[1:]]
    assert sum(high_watermarks) == 300


def test_produce_local_goes_through_shared_memory(broker: BrokerProcess) -> None:
    ok(zlog(broker, "topic", "create", "cli-local-produce", "--partitions", "1"))
    lines = [f"local {i}" for i in range(100)]
    connected_before = broker.log_text().count("local producer (pid")
    ok(zlog(broker, "produce", "cli-local-produce", "--local",
            stdin="\n".join(lines).encode() + b"\n"))
    assert broker.log_text().count("local producer (pid") > connected_before
    consumed = ok(zlog(broker, "consume", "cli-local-produce", "--from-beginning", "--local",
                       "--max-messages", "100", "--timeout-ms", "10000"))
    assert consumed.splitlines() == lines


def test_keyed_lines_and_offsets(broker: BrokerProcess) -> None:
    ok(zlog(broker, "topic", "create", "cli-keys", "--partitions", "1"))
    ok(zlog(broker, "produce", "cli-keys", "--key-separator", ":",
            stdin=b"a:1\nb:2\nc:3\nno separator\n"))
    everything = ok(zlog(broker, "consume", "cli-keys", "--from-beginning", "--partition", "0",
                         "--max-messages", "4", "--timeout-ms", "10000"))
    assert everything.splitlines() == ["1", "2", "3", "no separator"]
    tail = ok(zlog(broker, "consume", "cli-keys", "--offset", "2", "--partition", "0",
                   "--max-messages", "2", "--timeout-ms", "10000"))
    assert tail.splitlines() == ["3", "no separator"]


@pytest.mark.parametrize(
    ("arguments", "code_text"),
    [
        (("topic", "create", "bad/name", "--partitions", "1"), "INVALID_TOPIC_EXCEPTION (17)"),
        (("topic", "create", "cli-zero", "--partitions", "0"), "INVALID_PARTITIONS (37)"),
        (("topic", "describe", "cli-missing"), "UNKNOWN_TOPIC_OR_PARTITION (3)"),
        (("consume", "cli-missing", "--timeout-ms", "500"), "UNKNOWN_TOPIC_OR_PARTITION (3)"),
        (("topic", "create", "cli-cfg", "--partitions", "1", "--config", "oops"),
         "INVALID_CONFIG (40)"),
    ],
)
def test_errors_are_one_line_without_traceback(broker: BrokerProcess, arguments: tuple[str, ...],
                                               code_text: str) -> None:
    result = zlog(broker, *arguments)
    assert result.returncode == 1
    stderr = result.stderr.decode()
    assert stderr.startswith(f"error: {code_text}: "), stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize(
    "arguments",
    [
        ("topic", "describe", "cli-nosuch"),
        ("topic", "describe", "cli-nosuch", "--configs"),
        ("topic", "alter", "cli-nosuch", "--config", "retention.ms=1"),
        ("topic", "delete", "cli-nosuch"),
        ("offsets", "cli-nosuch"),
        ("consume", "cli-nosuch", "--timeout-ms", "500"),
        ("consume", "cli-nosuch", "--partition", "0", "--timeout-ms", "500"),
    ],
)
def test_an_error_names_the_topic_once(broker: BrokerProcess, arguments: tuple[str, ...]) -> None:
    result = zlog(broker, *arguments)
    assert result.returncode == 1
    stderr = result.stderr.decode()
    assert stderr.startswith("error: UNKNOWN_TOPIC_OR_PARTITION (3): "), stderr
    assert stderr.count("cli-nosuch") == 1, stderr


def test_produce_to_unknown_topic_fails_cleanly(broker: BrokerProcess) -> None:
    result = zlog(broker, "produce", "cli-nowhere", stdin=b"x\n")
    assert result.returncode == 1
    assert result.stderr.decode().startswith("error: UNKNOWN_TOPIC_OR_PARTITION (3): ")


def test_unreachable_cluster_times_out_cleanly(broker: BrokerProcess) -> None:
    del broker
    command = [sys.executable, "-m", "zlog.cli", "topic", "list", "--bootstrap",
               "tcp://127.0.0.1:9", "--request-timeout-ms", "300"]
    result = subprocess.run(command, capture_output=True, cwd=REPO_ROOT, timeout=60, check=False)
    assert result.returncode == 1
    # A refused connection is seen at once (the client's connection monitor): the error
    # says so, rather than waiting out the request timeout.
    assert result.stderr.decode().startswith("error: NETWORK_EXCEPTION (13): ")
    assert "cannot connect to tcp://127.0.0.1:9" in result.stderr.decode()


# ---------------------------------------------------------------------------------------------
# Options and usage.
# ---------------------------------------------------------------------------------------------


def run_zlog(*arguments: str) -> subprocess.CompletedProcess[bytes]:
    """`zlog` exactly as given: no --bootstrap added."""
    environ = {k: v for k, v in os.environ.items() if k != "ZLOG_BOOTSTRAP"}
    return subprocess.run([sys.executable, "-m", "zlog.cli", *arguments], capture_output=True,
                          cwd=REPO_ROOT, env=environ, timeout=60, check=False)


def test_version_and_client_options_before_the_command(broker: BrokerProcess) -> None:
    version = run_zlog("--version")
    assert version.returncode == 0 and version.stdout.decode().startswith("zlog ")
    ok(zlog(broker, "topic", "create", "cli-options", "--partitions", "1"))
    before = run_zlog("--bootstrap", broker.endpoint, "--request-timeout-ms", "5000",
                      "topic", "list")
    after = run_zlog("topic", "list", "--bootstrap", broker.endpoint)
    assert "cli-options" in ok(before).split()
    assert ok(before) == ok(after)


def test_an_unknown_option_shows_the_commands_usage(broker: BrokerProcess) -> None:
    result = zlog(broker, "topic", "list", "--verbose")
    assert result.returncode == 2
    stderr = result.stderr.decode()
    assert stderr.startswith("usage: zlog topic list "), stderr
    assert "unrecognized arguments: --verbose" in stderr


# ---------------------------------------------------------------------------------------------
# Record formats.
# ---------------------------------------------------------------------------------------------

RECORDS_JSON: list[dict[str, Any]] = [
    {"key": "k0", "value": "v0", "headers": [{"key": "trace", "value": "t-1"}],
     "timestamp_ms": 1_700_000_000_000},
    {"key": "k1", "value": None, "timestamp_ms": 1_700_000_000_001},  # a tombstone
    {"key": None, "value": "", "timestamp_ms": 1_700_000_000_002},  # an empty value
    {"key": {"base64": "/wA="}, "value": {"base64": "gAE="},
     "headers": [{"key": "bin", "value": {"base64": "/w=="}}, {"key": "nil", "value": None}],
     "timestamp_ms": 1_700_000_000_003},
]


def _json_lines(documents: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(d).encode() + b"\n" for d in documents)


def _consume_all(broker: BrokerProcess, topic: str, count: int, *options: str) -> bytes:
    result = zlog(broker, "consume", topic, "--from-beginning", "--max-messages", str(count),
                  "--timeout-ms", "10000", *options)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


def test_consume_formats_tell_a_tombstone_from_an_empty_value(broker: BrokerProcess) -> None:
    ok(zlog(broker, "topic", "create", "cli-formats", "--partitions", "2"))
    ok(zlog(broker, "produce", "cli-formats", "--json", "--partition", "1",
            stdin=_json_lines(RECORDS_JSON)))
    kcat = _consume_all(broker, "cli-formats", 4, "--format", r"%t %p %o %T %k|%K|%s|%S|%h\n")
    assert kcat.splitlines() == [
        b"cli-formats 1 0 1700000000000 k0|2|v0|2|trace=t-1",
        b"cli-formats 1 1 1700000000001 k1|2|NULL|-1|",
        b"cli-formats 1 2 1700000000002 NULL|-1||0|",
        b"cli-formats 1 3 1700000000003 \xff\x00|2|\x80\x01|2|bin=\xff,nil=NULL",
    ]
    assert _consume_all(broker, "cli-formats", 4, "--print-key", "--null-text", "<nil>") == (
        b"k0\tv0\nk1\t<nil>\n<nil>\t\n\xff\x00\t\x80\x01\n")
    assert _consume_all(broker, "cli-formats", 3).splitlines() == [b"v0", b"NULL", b""]
    documents = [json.loads(line) for line in
                 _consume_all(broker, "cli-formats", 4, "--json").splitlines()]
    assert [(d["topic"], d["partition"], d["offset"]) for d in documents] == [
        ("cli-formats", 1, offset) for offset in range(4)]
    for document, sent in zip(documents, RECORDS_JSON, strict=True):
        assert document["key"] == sent["key"] and document["value"] == sent["value"]
        assert document["timestamp_ms"] == sent["timestamp_ms"]
        assert document["headers"] == sent.get("headers", [])


def test_consume_json_piped_into_produce_json_writes_the_same_records(
    broker: BrokerProcess,
) -> None:
    for name in ("cli-copy-from", "cli-copy-to"):
        ok(zlog(broker, "topic", "create", name, "--partitions", "3"))
    ok(zlog(broker, "produce", "cli-copy-from", "--json", stdin=_json_lines(
        [{**record, "partition": index % 3} for index, record in enumerate(RECORDS_JSON * 3)])))
    ok(zlog(broker, "produce", "cli-copy-from", "--key-separator", ":",
            stdin=b"a:1\nb:2\nno key\n"))
    copied = _consume_all(broker, "cli-copy-from", 15, "--json")
    ok(zlog(broker, "produce", "cli-copy-to", "--json", stdin=copied))
    again = _consume_all(broker, "cli-copy-to", 15, "--json")

    def by_position(output: bytes) -> list[dict[str, Any]]:
        documents: list[dict[str, Any]] = [json.loads(line) for line in output.splitlines()]
        for document in documents:
            del document["topic"]
        return sorted(documents, key=lambda d: (d["partition"], d["offset"]))

    assert by_position(again) == by_position(copied)


def test_produce_partition_and_headers(broker: BrokerProcess) -> None:
    ok(zlog(broker, "topic", "create", "cli-headers", "--partitions", "3"))
    ok(zlog(broker, "produce", "cli-headers", "--partition", "2", "--header", "app=cli",
            "--header", "empty=", "--key-separator", "=", stdin=b"k=v=1\nplain\n"))
    printed = _consume_all(broker, "cli-headers", 2, "--format", r"%p %k %s [%h]\n")
    assert printed.splitlines() == [b"2 k v=1 [app=cli,empty=]", b"2 NULL plain [app=cli,empty=]"]
    bad = zlog(broker, "produce", "cli-headers", "--json",
               stdin=b'{"value": "fine"}\n{"value": 5}\n')
    assert bad.returncode == 1
    assert bad.stderr.decode().startswith("error: INVALID_RECORD (87): line 2: value must be")
    assert _consume_all(broker, "cli-headers", 3, "--format", r"%s\n").count(b"fine") == 1


# ---------------------------------------------------------------------------------------------
# Topic configs.
# ---------------------------------------------------------------------------------------------


def _configs(broker: BrokerProcess, topic: str) -> dict[str, tuple[str, str]]:
    lines = ok(zlog(broker, "topic", "describe", topic, "--configs")).splitlines()
    assert lines[0].split() == ["CONFIG", "VALUE", "SOURCE"]
    return {name: (value, source) for name, value, source in (line.split() for line in lines[1:])}


def test_topic_alter_and_describe_configs_with_their_sources(broker: BrokerProcess) -> None:
    ok(zlog(broker, "topic", "create", "cli-alter", "--partitions", "2",
            "--config", "retention.ms=3600000"))
    configs = _configs(broker, "cli-alter")
    assert configs["retention.ms"] == ("3600000", "topic")
    assert configs["segment.ms"] == (BROKER_SEGMENT_MS, "broker")
    assert configs["max.message.bytes"] == ("1048588", "default")
    assert configs["compression.type"] == ("producer", "default")
    assert configs["unclean.leader.election.enable"] == ("false", "default")
    assert set(configs) == TOPIC_CONFIG_KEYS  # every topic config, each once
    altered = ok(zlog(broker, "topic", "alter", "cli-alter", "--config", "segment.ms=60000",
                      "--config", "flush.ms=1000", "--delete-config", "retention.ms"))
    assert altered.strip() == (
        "altered topic cli-alter: set segment.ms=60000, set flush.ms=1000, reset retention.ms")
    configs = _configs(broker, "cli-alter")
    assert configs["segment.ms"] == ("60000", "topic")
    assert configs["flush.ms"] == ("1000", "topic")
    assert configs["retention.ms"] == ("604800000", "default")
    described = ok(zlog(broker, "topic", "describe", "cli-alter"))
    assert "Configs: flush.ms=1000,segment.ms=60000" in described


@pytest.mark.parametrize(
    ("options", "sentence"),
    [
        (("--config", "segment.bytes=1"),
         "INVALID_CONFIG (40): topic 'cli-refused': segment.bytes must be at least 14, not 1"),
        (("--config", "compression.type=brotli"),
         "compression.type 'brotli' is not supported; zlog supports producer, none, "
         "uncompressed, gzip, snappy, lz4, zstd"),
        (("--config", "retention.ms=soon"), "retention.ms must be an integer, not 'soon'"),
        (("--config", "no.such=1"), "unknown topic config 'no.such'"),
        (("--delete-config", "no.such"), "unknown topic config 'no.such'"),
        (("--config", "flush.ms=1", "--config", "segment.ms=0"),
         "segment.ms must be at least 1, not 0"),
    ],
)
def test_a_refused_alteration_changes_nothing(broker: BrokerProcess, options: tuple[str, ...],
                                              sentence: str) -> None:
    if "cli-refused" not in ok(zlog(broker, "topic", "list")).split():
        ok(zlog(broker, "topic", "create", "cli-refused", "--partitions", "1",
                "--config", "retention.ms=3600000"))
    before = _configs(broker, "cli-refused")
    result = zlog(broker, "topic", "alter", "cli-refused", *options)
    assert result.returncode == 1
    stderr = result.stderr.decode()
    assert stderr.startswith("error: INVALID_CONFIG (40): ") and sentence in stderr, stderr
    assert _configs(broker, "cli-refused") == before


def test_an_altered_max_message_bytes_applies_to_the_live_partition(
    broker: BrokerProcess,
) -> None:
    ok(zlog(broker, "topic", "create", "cli-max-bytes", "--partitions", "1"))
    line = b"x" * 2000 + b"\n"
    ok(zlog(broker, "produce", "cli-max-bytes", "--compression", "none", stdin=line))
    ok(zlog(broker, "topic", "alter", "cli-max-bytes", "--config", "max.message.bytes=1000"))
    refused = zlog(broker, "produce", "cli-max-bytes", "--compression", "none", stdin=line)
    assert refused.returncode == 1
    assert refused.stderr.decode().startswith("error: MESSAGE_TOO_LARGE (10): ")
    ok(zlog(broker, "topic", "alter", "cli-max-bytes", "--delete-config", "max.message.bytes"))
    ok(zlog(broker, "produce", "cli-max-bytes", "--compression", "none", stdin=line))
    assert _consume_all(broker, "cli-max-bytes", 2) == line * 2


def _log_start_offset(broker: BrokerProcess, topic: str) -> int:
    rows = ok(zlog(broker, "offsets", topic)).splitlines()[1:]
    (row,) = rows
    return int(row.split()[1])


def test_an_altered_retention_ms_deletes_old_segments_of_the_live_partition(
    broker: BrokerProcess,
) -> None:
    ok(zlog(broker, "topic", "create", "cli-retention", "--partitions", "1",
            "--config", "segment.bytes=1024"))
    with Producer(broker.endpoint, linger_ms=0, compression=None) as producer:
        for index in range(30):  # one small batch each: about ten segments
            producer.send("cli-retention", b"%04d" % index + b"r" * 200).result(timeout=10)
    assert _log_start_offset(broker, "cli-retention") == 0  # a week's retention keeps all
    ok(zlog(broker, "topic", "alter", "cli-retention", "--config", "retention.ms=1"))
    wait_until(lambda: _log_start_offset(broker, "cli-retention") > 0, timeout_s=30,
               interval_s=0.5, what="retention to delete the sealed segments")
    remaining = _consume_all(broker, "cli-retention", 1).decode()
    assert remaining[:4].isdigit() and int(remaining[:4]) > 0


# ---------------------------------------------------------------------------------------------
# compression.type.
# ---------------------------------------------------------------------------------------------


def _stored_codecs(broker: BrokerProcess, topic: str) -> list[tuple[Compression, list[bytes]]]:
    """Each stored batch's codec and values, fetched as the worker serves them."""
    request = FetchRequestV0(-1, 0, 0, 1 << 20, (FetchEntry(topic, 0, 0, 1 << 20),))
    with RpcClient(broker.data_endpoint(topic, 0)) as rpc:
        response = rpc.call(request, 10_000)
    assert isinstance(response, FetchResponseV0)
    (entry,) = response.entries
    assert entry.error_code == 0
    stored = []
    for chunk in entry.chunks:
        found, end = scan_batches(chunk)
        assert end == len(chunk)
        for position, header in found:
            batch = bytes(chunk[position : position + header.size_bytes])
            stored.append((header.compression, [r.value or b"" for r in read_records(batch)]))
    return stored


@pytest.mark.parametrize(
    ("topic_codec", "sent", "stored"),
    [("none", "lz4", Compression.NONE), ("lz4", "none", Compression.LZ4),
     ("producer", "lz4", Compression.LZ4), ("producer", "none", Compression.NONE)],
)
def test_a_topic_stores_batches_in_its_compression_type(
    broker: BrokerProcess, topic_codec: str, sent: str, stored: Compression
) -> None:
    topic = f"cli-codec-{topic_codec}-{sent}"
    ok(zlog(broker, "topic", "create", topic, "--partitions", "1",
            "--config", f"compression.type={topic_codec}"))
    lines = [b"line %03d " % index + b"z" * 50 for index in range(100)]
    ok(zlog(broker, "produce", topic, "--compression", sent, stdin=b"\n".join(lines) + b"\n"))
    assert _consume_all(broker, topic, 100).splitlines() == lines
    batches = _stored_codecs(broker, topic)
    assert {codec for codec, _ in batches} == {stored}
    assert [value for _, values in batches for value in values] == lines


def test_an_altered_compression_type_applies_to_the_next_batch(broker: BrokerProcess) -> None:
    # Records big enough to be compressed: a producer sends batches under
    # compression_policy.SMALL_BATCH_BYTES_MAX plain whatever its codec.
    one, two = b"one" * 200, b"two" * 200
    ok(zlog(broker, "topic", "create", "cli-codec-alter", "--partitions", "1"))
    ok(zlog(broker, "produce", "cli-codec-alter", "--compression", "lz4", stdin=one + b"\n"))
    ok(zlog(broker, "topic", "alter", "cli-codec-alter", "--config", "compression.type=none"))
    ok(zlog(broker, "produce", "cli-codec-alter", "--compression", "lz4", stdin=two + b"\n"))
    assert _stored_codecs(broker, "cli-codec-alter") == [
        (Compression.LZ4, [one]), (Compression.NONE, [two])]


def test_a_produce_that_cannot_succeed_names_its_cause_within_the_timeout(
    broker: BrokerProcess,
) -> None:
    """min.insync.replicas above the in-sync replicas: --request-timeout-ms bounds the whole
    command, each retry's cause is said once, and the error is NOT_ENOUGH_REPLICAS with its
    sentence, not REQUEST_TIMED_OUT."""
    ok(zlog(broker, "topic", "create", "cli-strict", "--partitions", "1",
            "--config", "min.insync.replicas=2"))
    result = zlog(broker, "produce", "cli-strict", "--acks", "all", "--request-timeout-ms",
                  "2000", stdin=b"one\n")
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert stderr.splitlines()[-1].startswith("error: NOT_ENOUGH_REPLICAS (19): "), stderr
    assert "min.insync.replicas is 2" in stderr.splitlines()[-1]
    retries = [line for line in stderr.splitlines() if "retrying" in line]
    assert len(retries) == 1, stderr


def test_consume_from_past_the_end_says_where_it_starts(broker: BrokerProcess) -> None:
    ok(zlog(broker, "topic", "create", "cli-past-end", "--partitions", "1"))
    ok(zlog(broker, "produce", "cli-past-end", stdin=b"a\nb\n"))
    result = zlog(broker, "consume", "cli-past-end", "--offset", "999", "--timeout-ms", "1500")
    assert result.returncode == 0, result.stderr.decode()
    stderr = result.stderr.decode()
    assert "999" in stderr and "latest" in stderr, stderr
    assert result.stdout == b""


@pytest.mark.parametrize(("address", "said"), [
    ("tcp://nosuchhost.invalid:1", "cannot resolve host 'nosuchhost.invalid'"),
    ("tcp://127.0.0.1:99999", "a port in 1-65535"),
    ("udp://127.0.0.1:7400", "expected tcp://host:port"),
])
def test_a_bad_bootstrap_address_fails_at_once_with_its_reason(address: str, said: str) -> None:
    """Refused before any connection is tried: the request timeout (here ten minutes) never
    comes into it."""
    result = subprocess.run(
        [sys.executable, "-m", "zlog.cli", "topic", "list", "--bootstrap", address,
         "--request-timeout-ms", "600000"],
        capture_output=True, cwd=REPO_ROOT, timeout=60, check=False)
    stderr = result.stderr.decode()
    assert result.returncode == 1
    assert stderr.startswith("error: INVALID_CONFIG (40): ") and said in stderr, stderr
    assert len(stderr.splitlines()) == 1, stderr  # said once


def test_consume_local_reads_the_ring_and_follower_flags_need_it(broker: BrokerProcess) -> None:
    """`--local` prints the same records (read from the leader's ring on this host); the
    follower-read flags without it are refused with INVALID_CONFIG, before anything is read."""
    ok(zlog(broker, "topic", "create", "cli-local", "--partitions", "1"))
    lines = [f"local {i}" for i in range(50)]
    ok(zlog(broker, "produce", "cli-local", "--acks", "all",
            stdin="\n".join(lines).encode() + b"\n"))
    consumed = ok(zlog(broker, "consume", "cli-local", "--from-beginning", "--local",
                       "--prefer-local-replica", "--ring-dir", str(broker.ring_dir),
                       "--max-messages", "50", "--timeout-ms", "10000"))
    assert consumed.splitlines() == lines
    for flags in (("--prefer-local-replica",), ("--client-rack", "r1"),
                  ("--ring-dir", str(broker.ring_dir))):
        result = zlog(broker, "consume", "cli-local", "--timeout-ms", "500", *flags)
        assert result.returncode == 1
        stderr = result.stderr.decode()
        assert stderr.startswith("error: INVALID_CONFIG (40): "), stderr
        assert "--local" in stderr


def test_delete_records_moves_the_log_start_that_offsets_shows(broker: BrokerProcess) -> None:
    ok(zlog(broker, "topic", "create", "cli-delete", "--partitions", "2"))
    ok(zlog(broker, "produce", "cli-delete", "--partition", "0", "--acks", "all",
            stdin=b"".join(b"%d\n" % i for i in range(5))))
    assert ok(zlog(broker, "delete-records", "cli-delete", "--before", "3",
                   "--partition", "0")).splitlines() == ["partition\tlog_start_offset", "0\t3"]
    assert ok(zlog(broker, "offsets", "cli-delete")).splitlines()[1:] == ["0\t3\t5", "1\t0\t0"]
    refused = zlog(broker, "delete-records", "cli-delete", "--before", "6")
    assert refused.returncode == 1
    assert refused.stderr.decode().startswith("error: OFFSET_OUT_OF_RANGE (1): cli-delete-0")
    assert "Traceback" not in refused.stderr.decode()
    assert ok(zlog(broker, "delete-records", "cli-delete", "--before", "hw")).splitlines()[1:] == [
        "0\t5", "1\t0"]
    consumed = ok(zlog(broker, "consume", "cli-delete", "--from-beginning", "--timeout-ms", "500"))
    assert consumed == ""
