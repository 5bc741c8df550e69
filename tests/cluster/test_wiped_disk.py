"""A broker back on an empty disk is never elected over replicas that hold the data (KIP-858).

Three brokers behind fault proxies (`zlog_testbed/cluster_network.py`), a topic of three
replicas with min.insync.replicas=1. Every replica takes 1,000 acks=all records; then the
leader's data port is cut off from the other brokers and the leader takes a few acks=1 batches,
so the followers leave the ISR still holding the 1,000 records, and the leader is alone in it.
The leader's broker is killed, its data directory (and rings) wiped, and it is started again
under its node id; the links heal. It used to be elected again (a restarted broker keeps its
place as the ISR's last member), and the two others then truncated their logs to its empty one:
the partition's log was [0, 0) on every replica. Now its registration names a new data
directory, which is not the one the partition record holds for its replica, so it is not an
acceptable leader: the partition stays without one rather than erase what the live replicas
hold. The operator's way out is unclean election for the topic, which elects a replica that
holds the records (never the wiped one while another is usable); every record is read back.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.cluster.test_membership import wipe
from tests.cluster.test_replication import _consume_all, _produce, _values
from tests.cluster_fixtures import produce_to_worker
from zlog.client import Admin, NewTopic
from zlog.transport.messages.admin import PartitionMetadata
from zlog_testbed.cluster_network import ProxiedCluster, proxied_cluster
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC: Final = "wiped"
RECORDS: Final = 1_000
DEADLINE_S: Final = 60.0
LAG_TIME_MS: Final = 2_000  # cut-off followers leave the ISR this soon


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ProxiedCluster]:
    with proxied_cluster(3, tmp_path,
                         extra_args=("--replica-lag-time-max-ms", str(LAG_TIME_MS))) as running:
        yield running


def _seen_by_controller(cluster: ProxiedCluster, admin: Admin) -> PartitionMetadata:
    """The partition as the controller has it (it applied every change it reported)."""
    controller = admin.describe_cluster().controller_id
    (topic,) = cluster.broker(controller).metadata([TOPIC], timeout_ms=2_000).topics
    return topic.partitions[0]


def test_a_sole_isr_leader_back_on_an_empty_disk_is_not_elected_and_erases_nothing(
        cluster: ProxiedCluster) -> None:
    with Admin(cluster.bootstrap, request_timeout_ms=5_000) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, replication_factor=3,
                                      configs={"min.insync.replicas": "1"})])
        cluster.wait_isr(TOPIC, 0, {1, 2, 3})
        values = _values("kept", RECORDS)
        _produce(cluster.bootstrap, TOPIC, values)
        cluster.wait_isr(TOPIC, 0, {1, 2, 3})  # every replica holds every record
        leader = cluster.partition(TOPIC, 0).leader
        cluster.isolate(leader, ("data",))  # its followers' fetches no longer reach it
        endpoint = cluster.partition(TOPIC, 0).endpoint

        def alone_in_the_isr() -> bool:
            """A follower that fetches nothing falls behind only as the log grows: acks=1
            batches (the leader alone holds them) until the ISR shrinks."""
            produce_to_worker(endpoint, TOPIC, 0, acks=1)
            seen = cluster.partition(TOPIC, 0)
            return seen.leader == leader and seen.isr == (leader,)

        wait_until(alone_in_the_isr, DEADLINE_S, interval_s=0.2,
                   what="the leader alone in the ISR")

        wipe(cluster.broker(leader))
        cluster.heal()
        cluster.broker(leader).start()
        wait_until(lambda: all(b.state == "live" for b in admin.describe_cluster().brokers)
                   and len(admin.describe_cluster().brokers) == 3, DEADLINE_S,
                   what="every broker registered and unfenced")
        seen = _seen_by_controller(cluster, admin)
        assert (seen.leader, seen.isr) == (-1, (leader,)), \
            f"the wiped broker must not lead: {seen}"

        admin.incremental_alter_configs({TOPIC: {"unclean.leader.election.enable": "true"}})
        cluster.wait_for(lambda p: p.leader not in (-1, leader) and bool(p.endpoint),
                         TOPIC, 0, "a replica holding the records elected")
        assert _consume_all(cluster.bootstrap, TOPIC, 0, RECORDS) == values
        cluster.wait_isr(TOPIC, 0, {1, 2, 3})  # the wiped broker copies them and rejoins
