"""Clients against brokers that are not there, go away and come back: they carry on.

Spec: docs/reliability.md, "Clients". A bootstrap list is tried address by address within one
call; a dropped connection fails what waits on it at once (no waiting out the request
timeout), metadata is asked again and the client carries on once the broker is back; a
retriable error never reaches the caller; `send` never blocks on metadata and `close` of an
idle producer returns at once; records still queued at interpreter exit are delivered.

Every request timeout here is ten minutes: a client that waited one out instead of noticing the
broken connection would fail these tests by their own deadlines, far shorter.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Final

import pytest

from zlog.client import Admin, Consumer, NewTopic, Producer
from zlog.errors import ErrorCode, ZlogError
from zlog_testbed.broker_process import REPO_ROOT, BrokerProcess, broker_process
from zlog_testbed.free_ports import free_port
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

PATIENT_MS: Final = 600_000  # far longer than any deadline below
DEADLINE_S: Final = 60.0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with broker_process(tmp_path, workers=1) as instance:
        with Admin(instance.endpoint) as admin:
            admin.create_topics([NewTopic("t", 2)])
        yield instance


def _dead_endpoint() -> str:
    return f"tcp://127.0.0.1:{free_port()}"


def _poll_until(consumer: Consumer, count: int) -> list[bytes | None]:
    values: list[bytes | None] = []
    wait_until(lambda: bool(values.extend(r.value for r in consumer.poll(200)))
               or len(values) >= count, DEADLINE_S, what=f"{count} records")
    return values


def test_a_dead_first_bootstrap_address_is_passed_over_within_one_call(
    broker: BrokerProcess,
) -> None:
    bootstrap = f"{_dead_endpoint()},{broker.endpoint}"
    with Admin(bootstrap, request_timeout_ms=PATIENT_MS) as admin:
        assert admin.list_topics() == ["t"]  # the first call, not the second
    with Producer(bootstrap, request_timeout_ms=PATIENT_MS) as producer:
        producer.send("t", b"via the second address", partition=0).result(DEADLINE_S)
    with Consumer(bootstrap, auto_offset_reset="earliest",
                  request_timeout_ms=PATIENT_MS) as consumer:
        consumer.assign([("t", 0)])
        assert _poll_until(consumer, 1) == [b"via the second address"]
    listed = subprocess.run(
        [sys.executable, "-m", "zlog.cli", "topic", "list", "--bootstrap", bootstrap],
        capture_output=True, text=True, timeout=DEADLINE_S, check=False, cwd=REPO_ROOT)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["t"]


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_producer_and_consumer_carry_on_across_a_broker_restart(
    broker: BrokerProcess, how: str
) -> None:
    with Producer(broker.endpoint, acks="all", request_timeout_ms=PATIENT_MS,
                  linger_ms=0) as producer, Consumer(
        broker.endpoint, auto_offset_reset="earliest", request_timeout_ms=PATIENT_MS
    ) as consumer:
        consumer.assign([("t", 1)])
        producer.send("t", b"before", partition=1).result(DEADLINE_S)
        assert _poll_until(consumer, 1) == [b"before"]
        if how == "sigterm":
            assert broker.stop() == 0
        else:
            broker.kill_all()
        broker.start()
        # Neither the producer nor the consumer waits out its (ten-minute) request timeout,
        # and no retriable error (LEADER_NOT_AVAILABLE, NETWORK_EXCEPTION) reaches us.
        producer.send("t", b"after", partition=1).result(DEADLINE_S)
        assert _poll_until(consumer, 1) == [b"after"]


def test_an_unreachable_bootstrap_never_blocks_send_or_close() -> None:
    producer = Producer(_dead_endpoint(), request_timeout_ms=PATIENT_MS,
                        max_block_ms=PATIENT_MS)
    future = producer.send("t", b"nowhere to go")  # returns: metadata is never waited for
    with pytest.raises(FutureTimeout):
        future.result(timeout=0.5)  # the caller's own timeout applies
    producer.close(timeout_ms=500)  # bounded, though the record is still waiting
    error = future.exception(timeout=DEADLINE_S)
    assert isinstance(error, ZlogError) and error.retriable

    idle = Producer(_dead_endpoint(), request_timeout_ms=PATIENT_MS)
    idle.close()  # at once: nothing to deliver, whatever its I/O thread was asking


def test_the_last_retriable_cause_is_named_when_delivery_gives_up(
    broker: BrokerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """min.insync.replicas above the in-sync replicas: acks=all fails with
    NOT_ENOUGH_REPLICAS and its sentence, not a bare timeout; each retry cause is logged
    once."""
    with Admin(broker.endpoint) as admin:
        admin.create_topics([NewTopic("strict", 1, configs={"min.insync.replicas": "2"})])
    caplog.set_level(logging.WARNING, logger="zlog.client")
    with Producer(broker.endpoint, acks="all", delivery_timeout_ms=1500,
                  retry_backoff_ms=50) as producer:
        error = producer.send("strict", b"v").exception(timeout=DEADLINE_S)
    assert isinstance(error, ZlogError) and error.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert "min.insync.replicas is 2" in error.message
    causes = [r.getMessage() for r in caplog.records if "NOT_ENOUGH_REPLICAS" in r.getMessage()]
    assert len(causes) == 1, causes


def test_a_negative_timestamp_is_refused_at_the_call(broker: BrokerProcess) -> None:
    with Producer(broker.endpoint) as producer:
        with pytest.raises(ZlogError) as refused:
            producer.send("t", b"v", timestamp_ms=-5)
        assert refused.value.code == ErrorCode.INVALID_TIMESTAMP
        with pytest.raises(ZlogError):
            producer.send_many("t", [b"v"], timestamp_ms=-5)


def test_a_topic_deleted_under_a_producer_fails_its_records_with_a_reason(
    broker: BrokerProcess,
) -> None:
    with Admin(broker.endpoint) as admin:
        admin.create_topics([NewTopic("doomed", 1)])
        with Producer(broker.endpoint, linger_ms=0, request_timeout_ms=PATIENT_MS) as producer:
            producer.send("doomed", b"first").result(DEADLINE_S)
            admin.delete_topics(["doomed"])
            error = producer.send("doomed", b"after the delete").exception(DEADLINE_S)
    assert isinstance(error, ZlogError)
    assert error.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "doomed" in error.message


def test_a_reset_past_the_end_is_said(
    broker: BrokerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    with Producer(broker.endpoint) as producer:
        producer.send("t", b"only", partition=0).result(DEADLINE_S)
    caplog.set_level(logging.WARNING, logger="zlog.client")
    with Consumer(broker.endpoint, auto_offset_reset="latest") as consumer:
        consumer.assign([("t", 0)])
        consumer.seek(("t", 0), 999)
        wait_until(lambda: consumer.poll(100) == [] and consumer.position(("t", 0)) < 999,
                   DEADLINE_S, what="the reset to the end")
    said = [r.getMessage() for r in caplog.records if "auto_offset_reset" in r.getMessage()]
    assert said and "999" in said[0] and "latest" in said[0]


_EXIT_WITHOUT_FLUSH = textwrap.dedent("""
    import sys
    import zlog
    producer = zlog.Producer(sys.argv[1], linger_ms=1000)
    for index in range(100):
        producer.send("t", b"%d" % index, partition=0)
    # no flush, no close: the interpreter exits here
""")


def test_records_still_queued_at_exit_are_delivered(broker: BrokerProcess) -> None:
    result = subprocess.run([sys.executable, "-c", _EXIT_WITHOUT_FLUSH, broker.endpoint],
                            capture_output=True, text=True, timeout=DEADLINE_S, check=False,
                            cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    with Consumer(broker.endpoint, auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0)])
        assert _poll_until(consumer, 100) == [b"%d" % i for i in range(100)]


def test_records_that_cannot_be_delivered_at_exit_are_counted_aloud() -> None:
    result = subprocess.run([sys.executable, "-c", _EXIT_WITHOUT_FLUSH, _dead_endpoint()],
                            capture_output=True, text=True, timeout=DEADLINE_S, check=False,
                            cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    assert "100 records" in result.stderr and "not delivered" in result.stderr
