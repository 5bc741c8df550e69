"""The metrics of a real three-broker cluster: each broker's endpoint, and what their sum says.

Spec: docs/operations-metrics.md §2.1. The cluster-wide figures come from the active controller
only and the under-replicated ones from each partition's leader only, so that summing the
brokers' series (as the alert rules in deploy/ do) counts the cluster once: one active
controller, and a follower's death shows as exactly its partitions under-replicated.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from zlog.cli_top import Scrape, scrape
from zlog.client import Admin, NewTopic, Producer
from zlog.errors import ZlogError
from zlog_testbed.cluster_processes import ClusterProcesses, running
from zlog_testbed.free_ports import free_port
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC = "metered"
PARTITIONS = 3


@pytest.fixture
def metered(tmp_path: Path) -> Iterator[tuple[ClusterProcesses, dict[int, str]]]:
    cluster = ClusterProcesses(3)
    port = free_port()  # each broker on its own loopback address (127.0.0.<node>)
    urls = {}
    for node, broker in cluster.brokers.items():
        broker.extra_args += ("--metrics-listen", f"127.0.0.{node}:{port}")
        urls[node] = f"http://127.0.0.{node}:{port}"
    with running(cluster, tmp_path) as started:
        yield started, urls


def _scrapes(urls: dict[int, str]) -> dict[int, Scrape]:
    return {node: scrape(url) for node, url in urls.items()}


def _sum(scrapes: dict[int, Scrape], name: str) -> float:
    return sum(value for one in scrapes.values() for _, value in one.series(name))


def test_one_active_controller_and_a_dead_followers_partitions_counted_once(
        metered: tuple[ClusterProcesses, dict[int, str]]) -> None:
    cluster, urls = metered
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])
    for partition in range(PARTITIONS):
        cluster.wait_isr(TOPIC, partition, {1, 2, 3})
    with Producer(cluster.bootstrap) as producer:
        for index in range(30):
            producer.send(TOPIC, b"x", partition=index % PARTITIONS)
        producer.flush()

    def settled() -> bool:
        try:
            scrapes = _scrapes(urls)
        except ZlogError:  # an endpoint opens once its broker serves
            return False
        led = sum(value for one in scrapes.values()
                  for labels, value in one.series("zlog_partition_leader")
                  if labels["topic"] == TOPIC)
        # Followers copy as they fetch, and each worker's gauges are published with its
        # heartbeat: every replica's log end shows its ten records a moment after the leader's.
        replicas = [value for one in scrapes.values()
                    for labels, value in one.series("zlog_partition_log_end_offset")
                    if labels["topic"] == TOPIC]
        return (_sum(scrapes, "zlog_controller_active") == 1 and led == PARTITIONS
                and _sum(scrapes, "zlog_under_replicated_partitions") == 0
                and replicas == [10] * (PARTITIONS * 3))

    wait_until(settled, timeout_s=30,
               what="one controller, every partition led once, every replica its ten records")
    scrapes = _scrapes(urls)
    assert _sum(scrapes, "zlog_offline_partitions") == 0
    assert sum(value for one in scrapes.values()
               for labels, value in one.series("zlog_cluster_brokers")
               if labels["state"] == "serving") == 3

    # A broker other than the controller dies: every partition (all have it as a replica)
    # loses it from its ISR, led by one of the two others, and the controller fences it.
    controller = next(node for node, one in scrapes.items()
                      if one.value("zlog_controller_active") == 1)
    victim = next(node for node in (1, 2, 3) if node != controller)
    cluster.broker(victim).kill_all()
    alive = {node: url for node, url in urls.items() if node != victim}

    def shrunk() -> bool:
        now = _scrapes(alive)
        return (_sum(now, "zlog_under_replicated_partitions") == PARTITIONS
                and _sum(now, "zlog_controller_active") == 1
                and sum(value for one in now.values() for labels, value in
                        one.series("zlog_cluster_brokers") if labels["state"] == "fenced") == 1)

    wait_until(shrunk, timeout_s=30, what="the dead broker's partitions under-replicated")
    now = _scrapes(alive)
    assert _sum(now, "zlog_cluster_partitions") == PARTITIONS  # no other topic to count
    assert _sum(now, "zlog_offline_partitions") == 0
    assert _sum(now, "zlog_under_min_isr_partitions") == 0  # min.insync.replicas 1
    assert max(one.value("zlog_isr_shrinks_total") for one in now.values()) >= PARTITIONS
