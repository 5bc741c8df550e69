"""The high watermark clients see never goes back (docs/replication.md §2.3).

Three brokers, one partition with three replicas. 20,000 records are acknowledged with
acks=all, so ListOffsets(LATEST) answers 20,000; then the worker that leads the partition is
killed with SIGKILL and its supervisor starts another in its place, at the same leader epoch.
The followers cannot reach the new worker until the check is over (its broker's data port is
cut off from theirs, zlog_testbed/cluster_network.py): what it answers is its own, not what their
fetches taught it. Every answer the partition's leader gives from then on (ListOffsets, and
the high watermark in a consumer's fetch) must be at least 20,000: a new worker may say "not
yet" (OFFSET_NOT_AVAILABLE, retriable) but never an offset below one it already gave, which
would send a consumer with auto_offset_reset=latest back over records it had passed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from zlog.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages.data import (
    FetchEntry,
    FetchRequestV0,
    FetchResponseV0,
    ListOffsetsPartition,
    ListOffsetsRequestV0,
    ListOffsetsResponseV0,
)
from zlog.transport.rpc import RpcClient
from zlog.types import LATEST_TIMESTAMP
from zlog_testbed.cluster_network import ProxiedCluster, proxied_cluster
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC: Final = "hw"
RECORDS: Final = 20_000
CALL_TIMEOUT_MS: Final = 500  # a call to the killed worker fails fast and is made again
RESTART_TIMEOUT_S: Final = 30.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ProxiedCluster]:
    with proxied_cluster(3, tmp_path) as running:
        yield running


def _latest(endpoint: str) -> tuple[int, int]:
    """(error code, offset) of ListOffsets(LATEST) straight from a worker."""
    with RpcClient(endpoint) as client:
        response = client.call(ListOffsetsRequestV0(TOPIC, (
            ListOffsetsPartition(0, LATEST_TIMESTAMP),)), CALL_TIMEOUT_MS)
    assert isinstance(response, ListOffsetsResponseV0), response
    (result,) = response.partitions
    return result.error_code, result.offset


def _fetched_high_watermark(endpoint: str) -> tuple[int, int]:
    """(error code, high watermark) of a consumer's fetch from the log start."""
    with RpcClient(endpoint) as client:
        response = client.call(FetchRequestV0(-1, 0, 0, 1 << 16, (
            FetchEntry(TOPIC, 0, 0, 1 << 16),)), CALL_TIMEOUT_MS)
    assert isinstance(response, FetchResponseV0), response
    (entry,) = response.entries
    return entry.error_code, entry.high_watermark


def test_a_restarted_leader_worker_never_answers_a_lower_high_watermark(
        cluster: ProxiedCluster) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, replication_factor=3,
                                      configs={"min.insync.replicas": "2"})])
    cluster.wait_isr(TOPIC, 0, {1, 2, 3})
    with Producer(cluster.bootstrap, acks="all", linger_ms=5) as producer:
        for index in range(RECORDS):
            producer.send(TOPIC, b"%d" % index, partition=0)
        producer.flush(timeout_ms=60_000)
    leader = cluster.partition(TOPIC, 0)
    assert _latest(leader.endpoint) == (ErrorCode.NONE, RECORDS)

    broker = cluster.broker(leader.leader)
    cluster.isolate(leader.leader, ("data",))
    killed = broker.worker_pid_for(leader.endpoint)
    broker.kill_worker(killed)
    answers: list[tuple[str, int, int]] = []

    def served_again() -> bool:
        """Asks the partition's leader, wherever it is now, until a worker other than the
        killed one answers ListOffsets without an error."""
        with contextlib.suppress(ZlogError, AssertionError):
            endpoint = cluster.partition(TOPIC, 0).endpoint
            if not endpoint:  # the supervisor has not reported the new worker yet
                return False
            answers.append(("list_offsets", *_latest(endpoint)))
            answers.append(("fetch", *_fetched_high_watermark(endpoint)))
            return answers[-2][1] == ErrorCode.NONE and broker.worker_pid_for(endpoint) != killed
        return False

    wait_until(served_again, RESTART_TIMEOUT_S, interval_s=0,
               what="the partition served by a restarted worker")
    for kind, code, offset in answers:
        if code == ErrorCode.NONE and offset >= 0:
            assert offset >= RECORDS, (f"{kind} answered {offset} after {RECORDS} were "
                                       f"acknowledged; all answers: {answers}")
        else:
            assert code in (ErrorCode.NONE, ErrorCode.OFFSET_NOT_AVAILABLE,
                            ErrorCode.NOT_LEADER_OR_FOLLOWER), answers
    cluster.heal()
    cluster.wait_isr(TOPIC, 0, {1, 2, 3})
    with Consumer(cluster.bootstrap, auto_offset_reset="latest") as consumer:
        consumer.assign([TopicPartition(TOPIC, 0)])
        assert consumer.position(TopicPartition(TOPIC, 0)) >= RECORDS
