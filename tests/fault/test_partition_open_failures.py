"""A partition that cannot be opened fails alone: it never wedges its worker or the data dir.

Spec: docs/reliability.md, "Failure model". A failed open is reported to the controller (the
CreateTopics answer and the partition's metadata carry the reason), tried again with a bounded
backoff, leaks no descriptor and no ring lock, and does not stop the worker serving its other
partitions; the topic can still be deleted, and the data dir still starts.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Final

import psutil
import pytest

from zlog.client import Admin, Consumer, NewTopic, Producer
from zlog.errors import ErrorCode, ZlogError
from zlog_testbed.broker_process import BrokerProcess, broker_process, process_exited
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TIMEOUT_MS: Final = 10_000


def _round_trip(endpoint: str, topic: str, partition: int = 0) -> None:
    """Produce one record and read it back: the partition serves."""
    value = f"hello {topic}-{partition}".encode()
    with Producer(endpoint, acks="all", request_timeout_ms=TIMEOUT_MS) as producer:
        offset = producer.send(topic, value, partition=partition).result(timeout=20).offset
    with Consumer(endpoint, request_timeout_ms=TIMEOUT_MS) as consumer:
        consumer.assign([(topic, partition)])
        consumer.seek((topic, partition), offset)
        records: list[bytes | None] = []
        wait_until(lambda: bool(records.extend(r.value for r in consumer.poll(200)) or records),
                   20, what=f"the record at {topic}-{partition}@{offset}")
    assert records[0] == value


def _refusals(broker: BrokerProcess, topic_partition: str) -> int:
    return broker.log_text().count(f"assign {topic_partition} refused")


def test_the_longest_topic_name_works(tmp_path: Path) -> None:
    """249 characters pass the name check, so they must also make a working partition (the
    ring's file name used to be 256 bytes: File name too long)."""
    name = "b" * 249
    with broker_process(tmp_path, workers=1) as broker:
        with Admin(broker.endpoint, request_timeout_ms=TIMEOUT_MS) as admin:
            admin.create_topics([NewTopic(name, 2)])
        _round_trip(broker.endpoint, name, 1)


def test_a_partition_that_cannot_open_fails_alone(tmp_path: Path) -> None:
    """The obstacle is a plain file named like the partition: the broker's sweep of stray
    partitions deletes only directories zlog created (docs/storage.md), so it stays until the
    test removes it, however the sweep's rounds fall."""
    with broker_process(tmp_path, workers=1) as broker:
        with Admin(broker.endpoint, request_timeout_ms=TIMEOUT_MS) as admin:
            admin.create_topics([NewTopic("healthy", 1)])
            broker.data_dir.joinpath("blocked-0").write_text("not a directory")
            with pytest.raises(ZlogError) as refused:
                admin.create_topics([NewTopic("blocked", 1)])
            assert refused.value.code == ErrorCode.KAFKA_STORAGE_ERROR
            assert "blocked-0" in refused.value.message
            (worker_pid,) = broker.worker_pids()

            # Tried again with a backoff, not in a tight loop; nothing leaks meanwhile.
            wait_until(lambda: _refusals(broker, "blocked-0") >= 2, 20,
                       what="a second attempt to open blocked-0")
            files_after_two = len(psutil.Process(worker_pid).open_files())
            wait_until(lambda: _refusals(broker, "blocked-0") >= 3, 20,
                       what="a third attempt to open blocked-0")
            assert _refusals(broker, "blocked-0") <= 4
            assert len(psutil.Process(worker_pid).open_files()) == files_after_two
            assert broker.data_dir.joinpath("blocked-0").read_text() == "not a directory"
            (description,) = admin.describe_topics(["blocked"])
            assert description.partitions[0].endpoint == ""

            _round_trip(broker.endpoint, "healthy")  # the worker's other partition serves
            assert broker.worker_pids() == [worker_pid]

            # Once the obstacle is gone, the partition opens by itself.
            broker.data_dir.joinpath("blocked-0").unlink()
            wait_until(lambda: bool(broker.served_endpoints("blocked")), 60,
                       what="blocked-0 opening after its obstacle went")
            _round_trip(broker.endpoint, "blocked")

            admin.delete_topics(["blocked"])  # answered, not timed out
            assert "blocked" not in admin.list_topics()
        assert broker.stop() == 0
        broker.start()  # the data dir starts again
        _round_trip(broker.endpoint, "healthy")


def test_a_topic_deleted_while_it_cannot_open_is_gone(tmp_path: Path) -> None:
    """Deleting must not need to open the partition it deletes."""
    with broker_process(tmp_path, workers=1) as broker:
        broker.data_dir.mkdir(parents=True, exist_ok=True)
        broker.data_dir.joinpath("stuck-0").write_text("not a directory")
        with Admin(broker.endpoint, request_timeout_ms=TIMEOUT_MS) as admin:
            with pytest.raises(ZlogError):
                admin.create_topics([NewTopic("stuck", 1)])
            admin.delete_topics(["stuck"])
            assert "stuck" not in admin.list_topics()
            admin.create_topics([NewTopic("stuck", 1)])  # the name is free again
        _round_trip(broker.endpoint, "stuck")


def test_more_partitions_than_open_files_allow(tmp_path: Path) -> None:
    """Under `ulimit -n 256`, 200 partitions cannot all open: those that cannot fail with the
    reason, the worker keeps serving, and deleting the topic works."""
    with broker_process(tmp_path, workers=1, open_files_max=256) as broker:
        with Admin(broker.endpoint, request_timeout_ms=30_000) as admin:
            admin.create_topics([NewTopic("small", 1)])
            with pytest.raises(ZlogError) as refused:
                admin.create_topics([NewTopic("wide", 200)])
            assert refused.value.code == ErrorCode.KAFKA_STORAGE_ERROR
            assert "open files" in refused.value.message
            _round_trip(broker.endpoint, "small")
            opened = broker.served_endpoints("wide")
            assert 0 < len(opened) < 200
            _round_trip(broker.endpoint, "wide", min(opened))
            admin.delete_topics(["wide"])
            assert admin.list_topics() == ["small"]
        _round_trip(broker.endpoint, "small")


def test_a_supervisor_killed_alone_restarts_on_its_data_dir(tmp_path: Path) -> None:
    """kill -9 of the supervisor only: its workers stop at once (they hold the rings), so the
    next supervisor's workers open every partition instead of meeting "locked by another
    writer" forever."""
    with broker_process(tmp_path, workers=2) as broker:
        with Admin(broker.endpoint, request_timeout_ms=TIMEOUT_MS) as admin:
            admin.create_topics([NewTopic("kept", 2)])
        _round_trip(broker.endpoint, "kept", 1)
        old_workers = broker.worker_pids()
        assert broker.process is not None
        os.kill(broker.process.pid, signal.SIGKILL)
        broker.process.wait(30)
        broker.process = None
        wait_until(lambda: not any(psutil.pid_exists(pid) and _alive(pid) for pid in old_workers),
                   20, what="the orphaned workers to stop")
        broker.start()
        _round_trip(broker.endpoint, "kept", 0)
        _round_trip(broker.endpoint, "kept", 1)
        assert "locked by another writer" not in broker.log_text()


def _alive(pid: int) -> bool:
    return not process_exited(pid)
