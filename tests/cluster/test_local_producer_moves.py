"""A local producer while its partition's leader moves between brokers on this host.

Spec: zlog/client/local_produce.py ("Falling back to the network"), docs/local-path.md. Three
brokers on loopback, so every leader is local: through each move of tests/leader_moves.py (the
leader's worker killed, the leader's broker killed and restarted, a preferred election) the
producer keeps sending with acks=all; each send succeeds (retries stay inside the client), the
producer ends on the shared-memory queue of whichever worker leads now, and the log holds every
acknowledged record exactly once, in order.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.leader_moves import MOVES, call_until, serving
from zlog.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from zlog.transport.shm_queue import QUEUE_NAME_PREFIX
from zlog_testbed.cluster_processes import ClusterProcesses, cluster_processes
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC: Final = "local-moving"
WAIT_S: Final = 60.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    with cluster_processes(3, tmp_path, extra_args=("--auto-leader-rebalance", "false")
                           ) as running:
        yield running


def queues_mapped(pid: int) -> int:
    maps = Path(f"/proc/{pid}/maps").read_text()
    return len({line.split()[-2] for line in maps.splitlines() if QUEUE_NAME_PREFIX in line})


def leader_worker(cluster: ClusterProcesses) -> int:
    now = cluster.partition(TOPIC, 0)
    return cluster.broker(now.leader).worker_pid_for(now.endpoint)


def test_a_local_producer_follows_the_leader_and_loses_nothing(
        cluster: ClusterProcesses) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, replication_factor=3)])
    cluster.wait_for(lambda p: serving(p) and len(p.isr) == 3, TOPIC, 0, "every replica in sync")
    offsets: list[int] = []
    with Producer(cluster.bootstrap, local=True, linger_ms=0, acks="all",
                  retry_backoff_ms=20) as producer:

        def send() -> None:
            index = len(offsets)
            offsets.append(producer.send(TOPIC, b"%d" % index, partition=0).result(WAIT_S)
                           .offset)

        for _ in range(20):
            send()
        assert queues_mapped(leader_worker(cluster)) == 1
        for move in MOVES:
            made = move(cluster, TOPIC, 0)
            call_until(made.settled, send, f"local sends through: {made.what}")
            send()
            wait_until(lambda: queues_mapped(leader_worker(cluster)) == 1, WAIT_S,
                       what=f"the producer on the new leader's queue after: {made.what}")
    assert offsets == list(range(len(offsets)))
    values: list[bytes] = []
    with Consumer(cluster.bootstrap, auto_offset_reset="earliest",
                  fetch_max_wait_ms=100) as consumer:
        consumer.assign([TopicPartition(TOPIC, 0)])

        def enough() -> bool:
            values.extend(r.value or b"" for r in consumer.poll(timeout_ms=200))
            return len(values) >= len(offsets)

        wait_until(enough, WAIT_S, interval_s=0, what="every record")
        assert consumer.poll(timeout_ms=200) == []
    assert values == [b"%d" % index for index in range(len(offsets))]
