"""The Kafka gateways of a 3-broker cluster: any broker's gateway changes the cluster (the
controller may be elsewhere), and a Kafka consumer group goes on by itself when the broker
it was talking to is killed with -9."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kafka.kafka_clients import WORKER_PORTS
from zlog import Admin
from zlog.kafka_gateway.topology import PORTS_PER_BROKER
from zlog.transport.messages.groups import FindCoordinatorRequestV0, FindCoordinatorResponseV0
from zlog.transport.rpc import RpcClient
from zlog.types import TopicPartition
from zlog_testbed.cluster_processes import ClusterProcesses, cluster_processes
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC = "kafka-replicated"


CLUSTER_ARGS = ["--offsets-topic-num-partitions", "3", "--group-initial-rebalance-delay-ms", "0",
                "--group-min-session-timeout-ms", "1000"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterProcesses]:
    with cluster_processes(3, extra_args=CLUSTER_ARGS) as running:
        yield running


@pytest.fixture
def cluster_to_kill() -> Iterator[ClusterProcesses]:
    """A cluster of the test's own, since the test kills one of its brokers."""
    with cluster_processes(3, extra_args=CLUSTER_ARGS) as running:
        admin = AdminClient({"bootstrap.servers": running.broker(1).kafka_bootstrap})
        admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(60)
        running.wait_for(lambda partition: len(partition.isr) == 3, TOPIC, 0,
                         what="the topic replicated on every broker")
        yield running


def _kafka_bootstrap(cluster: ClusterProcesses) -> str:
    return ",".join(broker.kafka_bootstrap for broker in cluster.brokers.values())


def test_each_brokers_gateway_serves_the_whole_cluster(cluster: ClusterProcesses) -> None:
    """A topic made through broker 2's gateway alone exists on every broker, and each
    gateway lists it with its leaders, on whichever broker they are."""
    admin = AdminClient({"bootstrap.servers": cluster.broker(2).kafka_bootstrap})
    admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(60)
    cluster.wait_for(lambda partition: len(partition.isr) == 3, TOPIC, 0,
                     what="the topic replicated on every broker")
    for broker in cluster.brokers.values():
        client = AdminClient({"bootstrap.servers": broker.kafka_bootstrap})

        def led_everywhere(client: AdminClient = client) -> bool:
            """Every partition listed with its leader's worker port: a gateway learns the
            ports of workers on other brokers as their heartbeats reach the controller."""
            partitions = client.list_topics(timeout=30).topics[TOPIC].partitions
            return len(partitions) == 3 and (not WORKER_PORTS or all(
                p.leader >= PORTS_PER_BROKER for p in partitions.values()))

        wait_until(led_everywhere, 60, what=f"broker {broker} listing every partition's leader")
        listing = client.list_topics(timeout=30)
        assert listing.controller_id in cluster.brokers  # the gateway that answered
        partitions = listing.topics[TOPIC].partitions
        if WORKER_PORTS:  # each leader, wherever it is, as the worker port it listens on
            assert {listing.brokers[p.leader].host for p in partitions.values()} <= {
                b.kafka_bootstrap.split(":")[0] for b in cluster.brokers.values()}


def _coordinator_node(cluster: ClusterProcesses, group: str) -> int:
    """The broker whose worker coordinates `group` (zlog's coordinator, behind the gateways)."""
    answers: list[FindCoordinatorResponseV0] = []

    def found() -> bool:  # the first ask creates __consumer_offsets
        with RpcClient(cluster.broker(2).endpoint) as client:
            answer = client.call(FindCoordinatorRequestV0(group), 30_000)
        assert isinstance(answer, FindCoordinatorResponseV0)
        answers.append(answer)
        return bool(answer.endpoint)

    wait_until(found, 60, interval_s=0.1, what=f"a coordinator for {group}")
    host = answers[-1].endpoint.partition("//")[2].rpartition(":")[0]
    return int(host.rsplit(".", 1)[1])  # broker N listens on 127.0.0.N


def _wait_assigned_every_partition(consumer: ConfluentConsumer) -> None:
    def assigned() -> bool:
        consumer.poll(0.05)
        return len(consumer.assignment()) == 3

    wait_until(assigned, 60, what="the member assigned every partition")


def test_a_kip848_member_reaches_its_groups_coordinator_on_another_broker(
        cluster: ClusterProcesses) -> None:
    """ConsumerGroupHeartbeat and the commits of a `group.protocol=consumer` member, sent to
    broker 1's gateway, go on to the coordinator zlog placed on another broker."""
    group = next(g for g in (f"kip848-remote-{i}" for i in range(100))
                 if _coordinator_node(cluster, g) != 1)
    consumer = ConfluentConsumer({"bootstrap.servers": cluster.broker(1).kafka_bootstrap,
                                  "group.id": group, "group.protocol": "consumer",
                                  "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    try:
        _wait_assigned_every_partition(consumer)
        consumer.commit(offsets=[ConfluentTopicPartition(TOPIC, 1, 21)], asynchronous=False)
    finally:
        consumer.close()
    with Admin(cluster.broker(1).endpoint) as admin:
        assert admin.list_group_offsets(group) == {TopicPartition(TOPIC, 1): 21}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_kafka_group_commits_on_after_its_broker_is_killed(cluster_to_kill: ClusterProcesses,
                                                             protocol: str) -> None:
    """The broker killed is the one coordinating the group, and, where the workers have Kafka
    ports, the only one the client was given: it goes on through the other brokers' ports,
    which its metadata named; with either group protocol (KIP-848's `consumer` has the
    broker's session, not the client's)."""
    cluster = cluster_to_kill
    group = "survivors"
    victim = _coordinator_node(cluster, group)
    bootstrap = (cluster.broker(victim).kafka_bootstrap if WORKER_PORTS
                 else _kafka_bootstrap(cluster))
    session: dict[str, int] = {"session.timeout.ms": 6_000} if protocol == "classic" else {}
    consumer = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "group.protocol": protocol, "enable.auto.commit": False,
                                  **session})
    consumer.subscribe([TOPIC])
    try:
        _wait_assigned_every_partition(consumer)

        def commits(offset: int) -> bool:
            consumer.poll(0.05)
            try:
                consumer.commit(offsets=[ConfluentTopicPartition(TOPIC, 0, offset)],
                                asynchronous=False)
            except KafkaException:
                return False  # retriable while the group's coordinator moves
            return True

        wait_until(lambda: commits(11), 60, what="a first commit")
        cluster.broker(victim).kill_all()
        wait_until(lambda: commits(12), 90, what=f"a commit after broker {victim} was killed")
    finally:
        consumer.close()
    survivors = [broker.endpoint for node, broker in cluster.brokers.items() if node != victim]
    with Admin(survivors) as admin:
        assert admin.list_group_offsets(group)[TopicPartition(TOPIC, 0)] == 12
