"""Control requests without processes: a real metadata state machine behind a fake log.

Spec: docs/protocol.md "Control plane". CreateTopics is answered once the command committed
AND every local partition is open on a worker; DeleteTopics once the data is gone; producer
ids come from the metadata log in blocks and are never handed out twice.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from zlog.broker.config import BrokerConfig
from zlog.broker.control.control_plane import (
    CONTROL_REQUEST_TIMEOUT_MS,
    ControlPlane,
    HostStorage,
)
from zlog.broker.control.metadata.commands import (
    Command,
    DeleteTopic,
    Done,
    RegisterBroker,
    TopicDeleted,
    decode_result,
    encode_command,
)
from zlog.broker.control.metadata.state_machine import MetadataStateMachine
from zlog.broker.topic_configs import TOPIC_CONFIG_DEFAULTS
from zlog.errors import ErrorCode, ZlogError
from zlog.raft.messages import BlockId
from zlog.raft.status import NodeStatus
from zlog.transport.api import ApiKey
from zlog.transport.codec import RequestHeader
from zlog.transport.messages import (
    Request,
    Response,
)
from zlog.transport.messages.admin import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    ApiVersionsRequestV0,
    ApiVersionsResponseV0,
    BrokerMetadata,
    BrokerState,
    ConfigResourceType,
    ConfigSource,
    CreateTopicsRequestV0,
    CreateTopicsResponseV0,
    DeleteTopicsRequestV0,
    DeleteTopicsResponseV0,
    DescribeClusterRequestV0,
    DescribeClusterResponseV0,
    DescribeConfigsRequestV0,
    DescribeConfigsResource,
    DescribeConfigsResponseV0,
    DescribeConfigsResult,
    IncrementalAlterConfigsRequestV0,
    IncrementalAlterConfigsResponseV0,
    InitProducerIdRequestV0,
    InitProducerIdResponseV0,
    MetadataRequestV0,
    MetadataResponseV0,
    RaftStatus,
    TopicResult,
    TopicSpec,
)
from zlog.transport.messages.reassignment import (
    ListPartitionReassignmentsRequestV0,
    ListPartitionReassignmentsResponseV0,
    UnregisterBrokerRequestV0,
    UnregisterBrokerResponseV0,
)
from zlog.types import TopicPartition


def raft_status(leader: int | None) -> NodeStatus:
    """What the Raft runner would report: term 3, committed up to (3, 9)."""
    block = BlockId(3, 9)
    return NodeStatus(1, "leader" if leader == 1 else "follower", 3, leader, block, block,
                      block, BlockId(0, 0), 0, 0, 0, 0.0, 0.0, 0, 0, 0, 0, 0)


class FakeBroker:
    """The supervisor as ControlPlane sees it: proposals wait until `commit()`."""

    def __init__(self, storage: HostStorage | None = None, **config: Any) -> None:
        self.fsm = MetadataStateMachine()
        self.fsm.apply(encode_command(RegisterBroker(1, "127.0.0.1", "tcp://127.0.0.1:7400", "c1")))
        self.proposed: list[tuple[Command, Done]] = []
        self.replies: list[tuple[bytes, RequestHeader, Response]] = []
        self.endpoints: dict[TopicPartition, str] = {}
        self.applied: dict[TopicPartition, Mapping[str, str]] = {}  # configs workers confirmed
        self.now_ms = 1_000
        self.leader: int | None = 1
        self.control = ControlPlane(
            BrokerConfig(workers=2, **config),
            state=lambda: self.fsm.state,
            propose=lambda command, done: self.proposed.append((command, done)),
            reply=lambda identity, header, response: self.replies.append(
                (identity, header, response)),
            endpoint_for=self.endpoints.get,
            applied_configs=self.applied.get,
            raft_status=lambda: raft_status(self.leader),
            clock_ms=lambda: self.now_ms,
            host_storage=lambda: storage or HostStorage(),
        )
        self._correlation_ids: Iterator[int] = iter(range(1, 1_000_000))

    def request(self, request: Request) -> RequestHeader:
        header = RequestHeader(int(request.API_KEY), 0, next(self._correlation_ids))
        self.control.handle(b"client", header, request)
        return header

    def commit(self, *, error: ZlogError | None = None) -> None:
        """Apply every queued proposal in order, as the log would, and tell the proposers."""
        proposed, self.proposed = self.proposed, []
        for command, done in proposed:
            if error is not None:
                done(None, error)
                continue
            try:
                result = decode_result(command.RESULT, self.fsm.apply(encode_command(command)))
            except ZlogError as refused:
                done(None, refused)
            else:
                done(result, None)

    def open_all(self) -> None:
        """Every worker confirmed every partition open."""
        for topic in self.fsm.state.topics.values():
            for partition in topic.partitions:
                self.endpoints[(topic.name, partition.partition)] = "tcp://127.0.0.1:9"
                self.control.partition_assigned((topic.name, partition.partition), 0, "")
        self.control.settle()

    def reply_to(self, header: RequestHeader) -> Response:
        found = [response for _, h, response in self.replies
                 if h.correlation_id == header.correlation_id]
        assert len(found) == 1, f"{len(found)} replies to {header}"
        return found[0]

    def answered(self, header: RequestHeader) -> bool:
        return header.correlation_id in {h.correlation_id for _, h, _ in self.replies}


@pytest.fixture
def broker() -> FakeBroker:
    return FakeBroker()


def _codes(response: Response) -> list[tuple[str, int]]:
    assert isinstance(response, CreateTopicsResponseV0 | DeleteTopicsResponseV0)
    return [(topic.name, topic.error_code) for topic in response.topics]


def test_create_topics_answers_after_commit_and_open(broker: FakeBroker) -> None:
    header = broker.request(CreateTopicsRequestV0((TopicSpec("t", 2),)))
    assert not broker.answered(header) and len(broker.proposed) == 1
    broker.commit()
    broker.control.settle()
    assert not broker.answered(header)  # committed, but no worker has the partitions yet
    broker.endpoints[("t", 0)] = "tcp://127.0.0.1:9"
    broker.control.settle()
    assert not broker.answered(header)  # one of two
    broker.open_all()
    assert _codes(broker.reply_to(header)) == [("t", 0)]


def test_create_topics_checks_before_proposing(broker: FakeBroker) -> None:
    broker.request(CreateTopicsRequestV0((TopicSpec("t", 1),)))
    broker.commit()
    broker.open_all()
    header = broker.request(CreateTopicsRequestV0((
        TopicSpec("t", 1), TopicSpec("..", 1), TopicSpec("n", -1),
        TopicSpec("rf", 1, 2), TopicSpec("c", 1, 1, {"flush.ms": "soon"}),
        TopicSpec("d", 1), TopicSpec("d", 2),
    )))
    assert broker.proposed == []  # nothing here needed the log
    assert _codes(broker.reply_to(header)) == [
        ("t", ErrorCode.TOPIC_ALREADY_EXISTS), ("..", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("n", ErrorCode.INVALID_PARTITIONS), ("rf", ErrorCode.INVALID_REPLICATION_FACTOR),
        ("c", ErrorCode.INVALID_CONFIG), ("d", ErrorCode.INVALID_REQUEST),
    ]


def test_validate_only_proposes_nothing(broker: FakeBroker) -> None:
    header = broker.request(
        CreateTopicsRequestV0((TopicSpec("t", 3),), validate_only=True))
    assert broker.proposed == []
    assert _codes(broker.reply_to(header)) == [("t", 0)]
    assert broker.fsm.state.topics == {}


def test_a_race_to_create_is_decided_by_the_log(broker: FakeBroker) -> None:
    first = broker.request(CreateTopicsRequestV0((TopicSpec("t", 1),)))
    second = broker.request(CreateTopicsRequestV0((TopicSpec("t", 1),)))
    broker.commit()
    broker.open_all()
    assert _codes(broker.reply_to(first)) == [("t", 0)]
    assert _codes(broker.reply_to(second)) == [("t", ErrorCode.TOPIC_ALREADY_EXISTS)]


def test_a_partition_that_fails_to_open_fails_the_topic(broker: FakeBroker) -> None:
    header = broker.request(CreateTopicsRequestV0((TopicSpec("t", 1),)))
    broker.commit()
    broker.control.partition_assigned(("t", 0), int(ErrorCode.KAFKA_STORAGE_ERROR), "disk full")
    broker.control.settle()
    (result,) = broker.reply_to(header).topics  # type: ignore[union-attr]
    assert result.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert "disk full" in result.error_message


def test_a_partition_that_failed_to_open_is_reported_in_metadata(broker: FakeBroker) -> None:
    """Clients see the worker's reason (a retriable storage error), not an endless "wait"."""
    broker.request(CreateTopicsRequestV0((TopicSpec("t", 2),)))
    broker.commit()
    broker.endpoints[("t", 1)] = "tcp://127.0.0.1:9"
    broker.control.partition_assigned(("t", 0), int(ErrorCode.KAFKA_STORAGE_ERROR), "disk full")
    response = broker.control._metadata(MetadataRequestV0(("t",)))
    codes = {p.partition: p.error_code for p in response.topics[0].partitions}
    assert codes == {0: ErrorCode.KAFKA_STORAGE_ERROR, 1: ErrorCode.NONE}
    broker.control.partition_assigned(("t", 0), 0, "")
    response = broker.control._metadata(MetadataRequestV0(("t",)))
    assert response.topics[0].partitions[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE


def test_a_name_the_file_system_cannot_hold_is_refused_before_proposing() -> None:
    """Partition directories are named `<topic>-<partition>`: checked against NAME_MAX."""
    broker = FakeBroker(HostStorage(name_bytes_max=143))
    fits, too_long = "a" * 138, "b" * 142
    header = broker.request(CreateTopicsRequestV0(
        (TopicSpec(fits, 10), TopicSpec(too_long, 1))))
    assert len(broker.proposed) == 1
    broker.commit()
    broker.open_all()
    (ok, refused) = broker.reply_to(header).topics  # type: ignore[union-attr]
    assert ok.error_code == ErrorCode.NONE
    assert refused.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert "143" in refused.error_message and "file system" in refused.error_message


def test_rings_that_do_not_fit_shared_memory_are_refused_up_front() -> None:
    """Each partition reserves its ring in full; a topic that cannot fit says why at once."""
    ring_bytes = 1 << 20
    broker = FakeBroker(HostStorage(ring_free_bytes=10 * ring_bytes + 65536), ring_bytes=ring_bytes)
    header = broker.request(CreateTopicsRequestV0(
        (TopicSpec("big", 20000), TopicSpec("small", 5))))
    assert len(broker.proposed) == 1
    broker.commit()
    broker.open_all()
    codes = dict(_codes(broker.reply_to(header)))
    assert codes == {"big": ErrorCode.INVALID_PARTITIONS, "small": ErrorCode.NONE}
    assert "big" not in broker.fsm.state.topics


def test_twenty_thousand_partitions_fit_one_command(broker: FakeBroker) -> None:
    """A big topic is one metadata command (replica lists only), not an assertion failure."""
    header = broker.request(CreateTopicsRequestV0((TopicSpec("wide", 20000),)))
    ((command, _done),) = broker.proposed
    assert len(encode_command(command)) < 200_000
    broker.commit()
    broker.open_all()
    assert _codes(broker.reply_to(header)) == [("wide", ErrorCode.NONE)]
    assert len(broker.fsm.state.topics["wide"].partitions) == 20000


def test_requests_time_out_and_shutdown_answers_the_rest(broker: FakeBroker) -> None:
    late = broker.request(CreateTopicsRequestV0((TopicSpec("t", 1),)))
    broker.commit()
    broker.now_ms += CONTROL_REQUEST_TIMEOUT_MS
    broker.control.expire(broker.now_ms)
    assert _codes(broker.reply_to(late)) == [("t", ErrorCode.REQUEST_TIMED_OUT)]
    parked = broker.request(CreateTopicsRequestV0((TopicSpec("u", 1),)))
    ids = broker.request(InitProducerIdRequestV0())
    broker.control.shut_down()
    assert _codes(broker.reply_to(parked)) == [("u", ErrorCode.BROKER_NOT_AVAILABLE)]
    assert broker.reply_to(ids) == InitProducerIdResponseV0(
        int(ErrorCode.BROKER_NOT_AVAILABLE), -1, -1)


def test_a_failed_proposal_is_the_topics_error(broker: FakeBroker) -> None:
    header = broker.request(CreateTopicsRequestV0((TopicSpec("t", 1),)))
    broker.commit(error=ZlogError(ErrorCode.NOT_CONTROLLER, "not the leader"))
    assert _codes(broker.reply_to(header)) == [("t", ErrorCode.NOT_CONTROLLER)]


def test_delete_topics_answers_once_the_data_is_gone(broker: FakeBroker) -> None:
    broker.request(CreateTopicsRequestV0((TopicSpec("t", 2),)))
    broker.commit()
    broker.open_all()
    header = broker.request(DeleteTopicsRequestV0(("t", "missing", "t")))
    broker.commit()
    broker.control.settle()
    assert not broker.answered(header)  # committed; the workers still have to delete
    assert broker.fsm.state.deleting == {"t": 2}
    broker.fsm.apply(encode_command(TopicDeleted("t")))  # the supervisor proposes this
    broker.control.settle()
    assert _codes(broker.reply_to(header)) == [
        ("t", 0), ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


def test_producer_ids_come_in_blocks_from_the_log(broker: FakeBroker) -> None:
    headers = [broker.request(InitProducerIdRequestV0()) for _ in range(3)]
    assert len(broker.proposed) == 1  # one block for all three
    broker.commit()
    assert [broker.reply_to(h) for h in headers] == [
        InitProducerIdResponseV0(0, producer_id, 0) for producer_id in (0, 1, 2)]
    more = [broker.request(InitProducerIdRequestV0()) for _ in range(997)]
    answered = {h.correlation_id for _, h, _ in broker.replies}
    assert broker.proposed == [] and all(h.correlation_id in answered for h in more)
    last = broker.request(InitProducerIdRequestV0())
    assert not broker.answered(last) and len(broker.proposed) == 1  # the block ran out
    broker.commit()
    assert broker.reply_to(last) == InitProducerIdResponseV0(0, 1000, 0)
    transactional = broker.request(InitProducerIdRequestV0("tx"))
    assert broker.reply_to(transactional).error_code == ErrorCode.INVALID_REQUEST  # type: ignore[union-attr]


def test_metadata_reports_endpoints_only_for_open_partitions(broker: FakeBroker) -> None:
    broker.request(CreateTopicsRequestV0((TopicSpec("t", 2),)))
    broker.commit()
    broker.endpoints[("t", 1)] = "tcp://127.0.0.1:9"
    response = broker.reply_to(broker.request(MetadataRequestV0(("t", "nope"))))
    assert isinstance(response, MetadataResponseV0)
    assert (response.cluster_id, response.controller_id) == ("c1", 1)
    assert response.brokers == (BrokerMetadata(1, "127.0.0.1", "tcp://127.0.0.1:7400"),)
    topic, missing = response.topics
    assert [(p.partition, p.error_code, p.endpoint, p.leader, p.isr) for p in topic.partitions] \
        == [(0, ErrorCode.LEADER_NOT_AVAILABLE, "", 1, (1,)), (1, 0, "tcp://127.0.0.1:9", 1, (1,))]
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.proposed == []  # no auto-creation unless configured


def test_auto_create_topics_creates_on_first_metadata_request() -> None:
    broker = FakeBroker(auto_create_topics=True, default_partitions=3)
    first = broker.reply_to(broker.request(MetadataRequestV0(("auto",))))
    assert first.topics[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE  # type: ignore[union-attr]
    broker.request(MetadataRequestV0(("auto",)))
    assert len(broker.proposed) == 1  # asked twice, created once
    bad = broker.reply_to(broker.request(MetadataRequestV0(("bad name",))))
    assert bad.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION  # type: ignore[union-attr]
    broker.commit()
    broker.open_all()
    created = broker.reply_to(broker.request(MetadataRequestV0(("auto",))))
    assert [p.error_code for p in created.topics[0].partitions] == [0, 0, 0]  # type: ignore[union-attr]


def test_api_versions_and_describe_cluster(broker: FakeBroker) -> None:
    versions = broker.reply_to(broker.request(ApiVersionsRequestV0()))
    assert isinstance(versions, ApiVersionsResponseV0)
    assert sorted(v.api_key for v in versions.api_versions) == sorted(
        int(key) for key in (ApiKey.METADATA, ApiKey.API_VERSIONS, ApiKey.CREATE_TOPICS,
                             ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS,
                             ApiKey.ELECT_LEADERS,
                             ApiKey.INIT_PRODUCER_ID, ApiKey.DESCRIBE_CONFIGS,
                             ApiKey.INCREMENTAL_ALTER_CONFIGS,
                             ApiKey.ALTER_PARTITION_REASSIGNMENTS,
                             ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.UNREGISTER_BROKER,
                             ApiKey.DESCRIBE_CLUSTER, ApiKey.BROKER_REGISTRATION,
                             ApiKey.FIND_COORDINATOR,
                             ApiKey.BROKER_HEARTBEAT, ApiKey.ALTER_PARTITION,
                             ApiKey.ADD_RAFT_LEARNER, ApiKey.ALTER_SECURITY,
                             ApiKey.DESCRIBE_SECURITY))
    broker.leader = None
    described = broker.reply_to(broker.request(DescribeClusterRequestV0()))
    assert described == DescribeClusterResponseV0(
        "c1", -1, (BrokerMetadata(1, "127.0.0.1", "tcp://127.0.0.1:7400"),),
        RaftStatus(None, 3, (3, 9)), (BrokerState(1, 0, "live"),),
        ())  # no voter progress: this node does not lead the metadata log


# -- DescribeConfigs / IncrementalAlterConfigs --------------------------------------------------

TOPIC = ConfigResourceType.TOPIC
SET, DELETE = AlterConfigOp.SET, AlterConfigOp.DELETE


def _with_topic(**config: Any) -> FakeBroker:
    broker = FakeBroker(**config)
    broker.request(CreateTopicsRequestV0((TopicSpec("t", 2, 1, {"segment.ms": "9"}),)))
    broker.commit()
    broker.open_all()
    return broker


def _alter(broker: FakeBroker, *configs: AlterableConfig, name: str = "t",
           validate_only: bool = False) -> RequestHeader:
    return broker.request(IncrementalAlterConfigsRequestV0(
        (AlterConfigsResource(TOPIC, name, configs),), validate_only))


def _alter_results(response: Response) -> list[tuple[str, int]]:
    assert isinstance(response, IncrementalAlterConfigsResponseV0)
    return [(result.resource_name, result.error_code) for result in response.responses]


def _described(broker: FakeBroker, *resources: DescribeConfigsResource) -> (
    tuple[DescribeConfigsResult, ...]
):
    response = broker.reply_to(broker.request(DescribeConfigsRequestV0(resources)))
    assert isinstance(response, DescribeConfigsResponseV0)
    return response.results


def test_describe_configs_gives_every_config_with_its_source() -> None:
    broker = _with_topic(topic_defaults=(("retention.ms", "5000"),))
    (result,) = _described(broker, DescribeConfigsResource(TOPIC, "t"))
    assert result.error_code == 0
    configs = {c.name: (c.value, ConfigSource(c.config_source)) for c in result.configs}
    assert set(configs) == set(TOPIC_CONFIG_DEFAULTS)
    assert [c.name for c in result.configs] == sorted(configs)
    assert configs["segment.ms"] == ("9", ConfigSource.TOPIC)
    assert configs["retention.ms"] == ("5000", ConfigSource.BROKER)
    assert configs["max.message.bytes"] == ("1048588", ConfigSource.DEFAULT)
    assert configs["compression.type"] == ("producer", ConfigSource.DEFAULT)
    (named,) = _described(broker, DescribeConfigsResource(TOPIC, "t", ("segment.ms",)))
    assert [(c.name, c.value) for c in named.configs] == [("segment.ms", "9")]


def test_describe_configs_errors_are_per_resource() -> None:
    results = _described(
        _with_topic(), DescribeConfigsResource(TOPIC, "nosuch"),
        DescribeConfigsResource(TOPIC, "t", ("retention.mss",)),
        DescribeConfigsResource(ConfigResourceType.BROKER, "1"),
        DescribeConfigsResource(TOPIC, "t"),
    )
    assert [(r.resource_name, r.error_code) for r in results] == [
        ("nosuch", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("t", ErrorCode.INVALID_CONFIG),
        ("1", ErrorCode.INVALID_REQUEST), ("t", 0)]
    assert results[0].error_message == "no topic 'nosuch'"


def test_alter_configs_answers_once_committed_and_every_partition_runs_them() -> None:
    broker = _with_topic(topic_defaults=(("retention.ms", "5000"),))
    header = _alter(broker, AlterableConfig("max.message.bytes", SET, "2000"),
                    AlterableConfig("segment.ms", DELETE))
    assert not broker.answered(header) and len(broker.proposed) == 1
    broker.commit()
    broker.control.settle()
    assert dict(broker.fsm.state.topics["t"].configs) == {"max.message.bytes": "2000"}
    assert not broker.answered(header), "committed, but no worker runs the new configs yet"
    wanted = {"retention.ms": "5000", "max.message.bytes": "2000"}  # with the broker's defaults
    broker.applied[("t", 0)] = wanted
    broker.control.settle()
    assert not broker.answered(header), "one partition of two"
    broker.applied[("t", 1)] = wanted
    broker.control.settle()
    assert _alter_results(broker.reply_to(header)) == [("t", 0)]


def test_a_refused_alteration_proposes_nothing_and_changes_nothing() -> None:
    broker = _with_topic()
    before = dict(broker.fsm.state.topics["t"].configs)
    config = AlterableConfig
    cases = [
        ((config("segment.bytes", SET, "1"),), "t", ErrorCode.INVALID_CONFIG),
        ((config("compression.type", SET, "brotli"),), "t", ErrorCode.INVALID_CONFIG),
        ((config("retention.mss", SET, "1"),), "t", ErrorCode.INVALID_CONFIG),
        ((config("retention.mss", DELETE),), "t", ErrorCode.INVALID_CONFIG),
        ((config("retention.ms", SET, None),), "t", ErrorCode.INVALID_CONFIG),
        ((config("cleanup.policy", AlterConfigOp.APPEND, "compact"),), "t",
         ErrorCode.INVALID_CONFIG),
        ((config("retention.ms", 9, "1"),), "t", ErrorCode.INVALID_REQUEST),
        ((config("retention.ms", SET, "1"), config("retention.ms", DELETE)), "t",
         ErrorCode.INVALID_REQUEST),
        ((config("retention.ms", SET, "1"),), "nosuch", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    for configs, name, code in cases:
        response = broker.reply_to(_alter(broker, *configs, name=name))
        assert _alter_results(response) == [(name, code)], (configs, name)
    header = broker.request(IncrementalAlterConfigsRequestV0((
        AlterConfigsResource(TOPIC, "t", (config("retention.ms", SET, "1"),)),
        AlterConfigsResource(TOPIC, "t", (config("segment.ms", SET, "1"),)),
        AlterConfigsResource(ConfigResourceType.BROKER, "1", ()),
    )))
    assert sorted(_alter_results(broker.reply_to(header))) == [
        ("1", ErrorCode.INVALID_REQUEST), ("t", ErrorCode.INVALID_REQUEST)]
    assert broker.proposed == []
    assert dict(broker.fsm.state.topics["t"].configs) == before


def test_alter_configs_validate_only_proposes_nothing() -> None:
    broker = _with_topic()
    header = _alter(broker, AlterableConfig("retention.ms", SET, "1"), validate_only=True)
    assert _alter_results(broker.reply_to(header)) == [("t", 0)]
    assert broker.proposed == [] and "retention.ms" not in broker.fsm.state.topics["t"].configs


def test_a_topic_deleted_before_its_alteration_committed_is_unknown() -> None:
    broker = _with_topic()
    header = _alter(broker, AlterableConfig("retention.ms", SET, "1"))
    broker.fsm.apply(encode_command(DeleteTopic("t")))  # committed first
    broker.commit()
    assert _alter_results(broker.reply_to(header)) == [
        ("t", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


def test_a_broker_being_removed_shows_draining_and_its_moves_are_listed() -> None:
    broker = FakeBroker()
    for node in (2, 3):
        broker.fsm.apply(encode_command(RegisterBroker(
            node, f"127.0.0.{node}", f"tcp://127.0.0.{node}:7400", "c1")))
    header = broker.request(CreateTopicsRequestV0((TopicSpec("t", 3, 2),)))
    broker.commit()
    broker.open_all()
    assert broker.reply_to(header) == CreateTopicsResponseV0((TopicResult("t", 0),))
    refused = broker.request(UnregisterBrokerRequestV0(9))
    assert broker.reply_to(refused) == UnregisterBrokerResponseV0(
        int(ErrorCode.BROKER_ID_NOT_REGISTERED), "broker 9 is not registered")
    drain = broker.request(UnregisterBrokerRequestV0(3))
    broker.commit()
    holding = sum(3 in p.original for p in broker.fsm.state.topics["t"].partitions)
    assert broker.reply_to(drain) == UnregisterBrokerResponseV0(
        0, "", holding)
    described = broker.reply_to(broker.request(DescribeClusterRequestV0()))
    assert isinstance(described, DescribeClusterResponseV0)
    assert {s.node_id: s.state for s in described.broker_states} == {
        1: "live", 2: "live", 3: "draining"}
    listed = broker.reply_to(broker.request(
        ListPartitionReassignmentsRequestV0()))
    assert isinstance(listed, ListPartitionReassignmentsResponseV0)
    assert len(listed.reassignments) == holding > 0
    assert all(r.removing == (3,) and 3 not in r.adding for r in listed.reassignments)
    # No new replica goes to a draining broker: two brokers are left for a new topic.
    grow = broker.request(CreateTopicsRequestV0((TopicSpec("u", 1, 3),)))
    reply = broker.reply_to(grow)
    assert isinstance(reply, CreateTopicsResponseV0)
    assert reply.topics[0].error_code == ErrorCode.INVALID_REPLICATION_FACTOR
