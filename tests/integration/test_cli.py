"""The `zlog` command against a real broker: topics, produce lines, consume them back.

Spec: the CLI section of the client brief: every command takes --bootstrap; errors print
`error: <CODE NAME> (<n>): <sentence>` on stderr and exit 1, never a traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.broker_fixtures import REPO_ROOT, BrokerProcess, broker_process

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with broker_process(workers=1) as instance:
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
