"""A produce quota holds a principal's rate to it by answering late (docs/security.md).

A real broker with security on: alice's produce quota is set with `zlog quota set`, then she
sends as fast as her producer can for a few seconds. Her acknowledged bytes per second, once
past the first burst the quota allows, stay within 10 % of the quota: the broker held her
answers back and her producer, waiting on them, slowed down. No request failed; the slowing is
the only sign. Another principal with no quota meanwhile is not slowed to her rate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.secure_broker import make_keys, secret_key, secure_broker, speaking_as
from zlog import cli
from zlog.client import Producer
from zlog.transport.messages.security import AclEntry
from zlog_testbed.broker_process import BrokerProcess

pytestmark = pytest.mark.slow

TOPIC: Final = "metered"
QUOTA_BYTES_PER_S: Final = 200_000
VALUE: Final = b"x" * 1_000  # big records: a batch's own header is ~2 % of its bytes
RECORDS_PER_BATCH: Final = 16
BURST_S: Final = 2.0  # the quota lets one second's bytes through at once: not measured
MEASURED_S: Final = 4.0
TIMEOUT_MS: Final = 30_000
BUFFER_BYTES: Final = 256 * 1024  # sends block once this much waits: the flush is short


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    return make_keys(tmp_path / "keys", ["admin", "alice", "bob"])


@pytest.fixture
def broker(keys: Path, tmp_path: Path) -> Iterator[BrokerProcess]:
    with secure_broker(keys, tmp_path, topics=[TOPIC], acls=[
            AclEntry(who, "topic", TOPIC, "write") for who in ("alice", "bob")]) as running:
        yield running


def _acked_rate(broker: BrokerProcess, seconds: float) -> float:
    """Send as fast as possible for `seconds`; bytes per second acknowledged after BURST_S."""
    acked: list[tuple[float, int]] = []
    lock = threading.Lock()
    with Producer(broker.endpoint, acks="1", linger_ms=5,
                  batch_size=RECORDS_PER_BATCH * (len(VALUE) + 64), compression=None,
                  buffer_memory=BUFFER_BYTES, request_timeout_ms=TIMEOUT_MS,
                  delivery_timeout_ms=120_000) as producer:
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            future = producer.send(TOPIC, VALUE, partition=0)

            def done(_future: object) -> None:
                with lock:
                    acked.append((time.monotonic() - started, len(VALUE)))

            future.add_done_callback(done)
        producer.flush()
    measured = [size for at, size in acked if BURST_S <= at < seconds]
    return sum(measured) / (seconds - BURST_S)


def test_a_throttled_producer_stays_within_ten_percent_of_its_quota(
        keys: Path, broker: BrokerProcess) -> None:
    with speaking_as(keys):
        assert cli.main(["--bootstrap", broker.endpoint, "--key-file",
                         str(secret_key(keys, "admin")), "--server-key-file",
                         str(keys / "server.key"), "quota", "set", "--principal", "alice",
                         "--produce-bytes-per-s", str(QUOTA_BYTES_PER_S)]) == 0
    with speaking_as(keys, "alice"):
        rate = _acked_rate(broker, BURST_S + MEASURED_S)
    assert abs(rate - QUOTA_BYTES_PER_S) <= 0.1 * QUOTA_BYTES_PER_S, rate
    with speaking_as(keys, "bob"):  # no quota of his own, and none for everyone
        assert _acked_rate(broker, BURST_S + 1.0) > 1.5 * QUOTA_BYTES_PER_S
