"""A topic deleted and created again under the same name is another topic (KIP-516).

Three brokers behind fault proxies (`zlog_testbed/cluster_network.py`). Broker 3 holds a replica of
every partition of a topic with old records when it is cut off from the metadata log and from
the partition workers (its heartbeats still pass, so it stays a live, placeable broker), so it
never learns that the topic is deleted; the topic is then created again, with broker 3 among
the replicas of each partition, and takes other records. Broker 3 is stopped, the network
healed, and it is restarted on its data directory: its partition directories name the old topic
id (partition.metadata), so it deletes them and copies the new topic's log from the leader.
It must never serve or replicate the old records under the new topic: its replicas end byte
for byte equal to the leader's. (A broker simply stopped across the deletion is fenced, so no
replica of the new topic is placed on it; and what is placed elsewhere only is a stray, which
the broker deletes: docs/storage.md.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.cluster.test_replication import _produce, _values
from tests.cluster_fixtures import log_bytes
from zlog.client import Admin, NewTopic
from zlog.errors import ErrorCode, ZlogError
from zlog.record.header import scan_batches
from zlog.types import valid_topic_id
from zlog_testbed.cluster_network import ProxiedCluster, proxied_cluster
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC: Final = "reborn"
PARTITIONS: Final = 3
OLD_RECORDS: Final = 300  # per partition, more than the new topic gets: a cut keeps old ones
NEW_RECORDS: Final = 100
DEADLINE_S: Final = 60.0
LAG_TIME_MS: Final = 2_000  # the cut-off replica leaves the new topic's ISRs this soon


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ProxiedCluster]:
    with proxied_cluster(3, tmp_path,
                         extra_args=("--replica-lag-time-max-ms", str(LAG_TIME_MS))) as running:
        yield running


def _create(admin: Admin) -> None:
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, replication_factor=3,
                                  configs={"min.insync.replicas": "1"})])


def _created_again(admin: Admin) -> None:
    """Once the deletion finished (the name is free again), the topic is created anew."""
    def created() -> bool:
        try:
            _create(admin)
        except ZlogError as error:
            if error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
            return False
        return True

    wait_until(created, DEADLINE_S, interval_s=0.1, what=f"{TOPIC} deleted and created again")


def test_a_restarted_broker_never_serves_a_deleted_topics_data_as_the_new_ones(
        cluster: ProxiedCluster) -> None:
    with Admin(cluster.endpoints[1]) as admin:
        _create(admin)
        for p in range(PARTITIONS):
            cluster.wait_isr(TOPIC, p, {1, 2, 3})
            # In two rounds, so a batch ends where the new topic's log will (a follower cut
            # there by epoch keeps whole old batches below it).
            old = _values(f"old-{p}", OLD_RECORDS)
            _produce(cluster.bootstrap, TOPIC, old[:NEW_RECORDS], partition=p)
            _produce(cluster.bootstrap, TOPIC, old[NEW_RECORDS:], partition=p)
            cluster.wait_isr(TOPIC, p, {1, 2, 3})  # broker 3 holds every old record
        (old_topic,) = admin.describe_topics([TOPIC])
        cluster.isolate(3, ("raft", "data"))
        wait_until(lambda: cluster.broker(1).metadata(None).controller_id in (1, 2),
                   DEADLINE_S, what="a controller among the brokers that see the deletion")
        admin.delete_topics([TOPIC])
        _created_again(admin)
        (new_topic,) = admin.describe_topics([TOPIC])
        assert valid_topic_id(new_topic.topic_id) and valid_topic_id(old_topic.topic_id)
        assert new_topic.topic_id != old_topic.topic_id
    # Broker 3 is a replica of every new partition; those it does not lead take new records
    # once it has left their ISRs (it fetches nothing while cut off).
    served = [p for p in range(PARTITIONS) if cluster.partition(TOPIC, p).leader != 3]
    assert served, "placement rotates leaders: two of three partitions are led elsewhere"
    for p in served:
        cluster.wait_for(lambda m: 3 in m.replicas and 3 not in m.isr and bool(m.endpoint),
                         TOPIC, p, "broker 3 a replica out of the ISR")
        _produce(cluster.bootstrap, TOPIC, _values(f"new-{p}", NEW_RECORDS), partition=p)

    cluster.broker(3).kill_all()
    cluster.heal()
    cluster.broker(3).start()
    for p in served:
        cluster.wait_for(lambda m: 3 in m.isr and bool(m.endpoint), TOPIC, p,
                         "broker 3 back in the ISR")
    leaders = {p: cluster.partition(TOPIC, p).leader for p in served}
    for broker in cluster.brokers.values():
        broker.kill_all()
    for p in served:
        copied, reference = log_bytes(cluster.broker(3), TOPIC, p), \
            log_bytes(cluster.broker(leaders[p]), TOPIC, p)
        assert copied == reference, f"{TOPIC}-{p} on broker 3 is not the leader's log"
        batches, _ = scan_batches(reference)
        assert batches[-1][1].last_offset + 1 == NEW_RECORDS and b"new-" in reference
