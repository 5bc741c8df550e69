"""zlog.Admin: topics, their configs, offsets and the cluster's state, one synchronous call at
a time.

Topic and cluster calls go to a control endpoint (the supervisor); `list_offsets` goes to the
workers that lead the partitions, as the data path does. Every failure raises ZlogError with
Kafka's code. Not thread-safe: one Admin per thread (it owns sockets).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, TypeVar

from zlog.client.admin_groups import GroupAdmin
from zlog.client.cluster import Connections
from zlog.client.records import (
    BrokerDescription,
    ClusterDescription,
    ConfigEntry,
    GroupDescription,
    GroupListing,
    NewTopic,
    OffsetAndTimestamp,
    PartitionDescription,
    PartitionReassignment,
    TopicDescription,
)
from zlog.clock import monotonic_ms
from zlog.errors import ErrorCode, ZlogError, for_code, prefixed_once
from zlog.transport.messages import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    ConfigResourceType,
    ConfigSource,
    CreatePartitionsRequestV0,
    CreatePartitionsResponseV0,
    CreateTopicsRequestV0,
    CreateTopicsResponseV0,
    DeleteTopicsRequestV0,
    DeleteTopicsResponseV0,
    DescribeClusterRequestV0,
    DescribeClusterResponseV0,
    DescribeConfigsRequestV0,
    DescribeConfigsResource,
    DescribeConfigsResponseV0,
    ElectLeadersRequestV0,
    ElectLeadersResponseV0,
    IncrementalAlterConfigsRequestV0,
    IncrementalAlterConfigsResponseV0,
    ListOffsetsPartition,
    ListOffsetsRequestV0,
    ListOffsetsResponseV0,
    MetadataRequestV0,
    MetadataResponseV0,
    PartitionsSpec,
    Request,
    Response,
    TopicResult,
    TopicSpec,
)
from zlog.transport.reassignment_messages import (
    AlterPartitionReassignmentsRequestV0,
    AlterPartitionReassignmentsResponseV0,
    ListPartitionReassignmentsRequestV0,
    ListPartitionReassignmentsResponseV0,
    ReassignmentSpec,
    UnregisterBrokerRequestV0,
    UnregisterBrokerResponseV0,
)
from zlog.types import DEFAULT_BOOTSTRAP, TopicPartition

R = TypeVar("R", bound=Response)
C = TypeVar("C", ElectLeadersResponseV0, AlterPartitionReassignmentsResponseV0,
            ListPartitionReassignmentsResponseV0, UnregisterBrokerResponseV0)

CONTROLLER_RETRY_BACKOFF_MS: Final = 100  # between controller requests while none is known
RETRY_BACKOFF_MS: Final = 100  # before asking again after a retriable error
CONFIG_SOURCE_NAMES: Final = {
    ConfigSource.TOPIC: "topic",
    ConfigSource.BROKER: "broker",
    ConfigSource.DEFAULT: "default",
}


def _expect(response: Response, cls: type[R]) -> R:
    if not isinstance(response, cls):
        raise ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR,
                        f"expected {cls.__name__}, the server sent {type(response).__name__}")
    return response


def topic_error(code: int, name: str, message: str) -> ZlogError:
    """The broker's sentence about a topic, naming the topic once."""
    return for_code(code, prefixed_once(f"topic {name!r}", message, repr(name)))


def _topic_results(results: Iterable[TopicResult], *, raise_on_error: bool) -> (
    dict[str, ZlogError | None]
):
    outcome: dict[str, ZlogError | None] = {}
    for result in results:
        outcome[result.name] = (
            None if result.error_code == ErrorCode.NONE
            else topic_error(result.error_code, result.name, result.error_message)
        )
    return _raise_first(outcome, raise_on_error=raise_on_error)


def _raise_first(outcome: dict[str, ZlogError | None], *, raise_on_error: bool) -> (
    dict[str, ZlogError | None]
):
    if raise_on_error:
        for error in outcome.values():
            if error is not None:
                raise error
    return outcome


class Admin:
    """Administrative calls; `request_timeout_ms` bounds each one."""

    def __init__(self, bootstrap: str | Sequence[str] = DEFAULT_BOOTSTRAP, *,
                 request_timeout_ms: int = 30_000) -> None:
        self.request_timeout_ms = request_timeout_ms
        self._connections = Connections(bootstrap)
        self._groups = GroupAdmin(self._connections, request_timeout_ms)

    def create_topics(self, topics: Sequence[NewTopic], *, validate_only: bool = False,
                      raise_on_error: bool = True) -> dict[str, ZlogError | None]:
        """Create topics; the answer comes once they are committed and their partitions open.

        Returns each name's error (None: created). With raise_on_error (the default) the first
        error is raised instead.
        """
        specs = tuple(TopicSpec(t.name, t.partitions, t.replication_factor, dict(t.configs))
                      for t in topics)
        response = self._connections.call_control(
            CreateTopicsRequestV0(specs, validate_only), self.request_timeout_ms)
        results = _expect(response, CreateTopicsResponseV0).topics
        return _topic_results(results, raise_on_error=raise_on_error)

    def create_partitions(self, new_counts: Mapping[str, int], *, validate_only: bool = False,
                          raise_on_error: bool = True) -> dict[str, ZlogError | None]:
        """Grow each topic to the given number of partitions in all (never fewer: Kafka's
        CreatePartitions); the answer comes once the new partitions are open. Records with a
        key may map to another partition afterwards, as in Kafka."""
        specs = tuple(PartitionsSpec(name, count) for name, count in new_counts.items())
        response = self._connections.call_control(
            CreatePartitionsRequestV0(specs, validate_only), self.request_timeout_ms)
        results = _expect(response, CreatePartitionsResponseV0).topics
        for name in new_counts:
            self._connections.metadata.invalidate(name)
        return _topic_results(results, raise_on_error=raise_on_error)

    def delete_topics(self, names: Sequence[str], *, raise_on_error: bool = True) -> (
        dict[str, ZlogError | None]
    ):
        response = self._connections.call_control(
            DeleteTopicsRequestV0(tuple(names)), self.request_timeout_ms)
        results = _expect(response, DeleteTopicsResponseV0).topics
        for name in names:
            self._connections.metadata.invalidate(name)
        return _topic_results(results, raise_on_error=raise_on_error)

    def list_topics(self) -> list[str]:
        """Every topic's name, sorted."""
        response = self._metadata(None)
        return sorted(t.name for t in response.topics if t.error_code == ErrorCode.NONE)

    def describe_topics(self, names: Sequence[str] | None = None) -> list[TopicDescription]:
        """Partitions, leaders, replicas and configs; an unknown name raises its error."""
        response = self._metadata(None if names is None else tuple(names))
        descriptions: list[TopicDescription] = []
        for topic in response.topics:
            if topic.error_code != ErrorCode.NONE:
                raise topic_error(topic.error_code, topic.name, topic.error_message)
            partitions = tuple(
                PartitionDescription(p.partition, p.leader, p.leader_epoch, p.replicas, p.isr,
                                     p.endpoint)
                for p in sorted(topic.partitions, key=lambda p: p.partition)
            )
            descriptions.append(TopicDescription(topic.name, partitions, dict(topic.configs)))
        return descriptions

    def describe_configs(
        self, topics: Sequence[str], names: Sequence[str] | None = None
    ) -> dict[str, list[ConfigEntry]]:
        """Every config of each topic (or only `names`), sorted by name, with its value and
        where it comes from (ConfigEntry.source). An unknown topic or config raises its error."""
        resources = tuple(
            DescribeConfigsResource(ConfigResourceType.TOPIC, topic,
                                    None if names is None else tuple(names))
            for topic in topics)
        response = _expect(
            self._connections.call_control(DescribeConfigsRequestV0(resources),
                                           self.request_timeout_ms),
            DescribeConfigsResponseV0,
        )
        described: dict[str, list[ConfigEntry]] = {}
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                raise topic_error(result.error_code, result.resource_name, result.error_message)
            described[result.resource_name] = [
                ConfigEntry(c.name, c.value, _source_name(c.config_source))
                for c in result.configs]
        return described

    def incremental_alter_configs(
        self, changes: Mapping[str, Mapping[str, str | None]], *, validate_only: bool = False,
        raise_on_error: bool = True,
    ) -> dict[str, ZlogError | None]:
        """Change topic configs: {topic: {config: value}}, where a value of None resets the
        config to its default (broker topic_defaults, else zlog's). Configs not named keep
        their values (Kafka's IncrementalAlterConfigs).

        Returns once each change committed and the partitions run under it; a refused change
        (INVALID_CONFIG, UNKNOWN_TOPIC_OR_PARTITION, ...) alters nothing of that topic. Each
        topic's error (None: altered); with raise_on_error (the default) the first is raised.
        """
        resources = tuple(
            AlterConfigsResource(ConfigResourceType.TOPIC, topic, tuple(
                AlterableConfig(name, AlterConfigOp.DELETE, None) if value is None
                else AlterableConfig(name, AlterConfigOp.SET, value)
                for name, value in configs.items()))
            for topic, configs in changes.items())
        response = _expect(
            self._connections.call_control(
                IncrementalAlterConfigsRequestV0(resources, validate_only),
                self.request_timeout_ms),
            IncrementalAlterConfigsResponseV0,
        )
        outcome: dict[str, ZlogError | None] = {
            result.resource_name: None if result.error_code == ErrorCode.NONE
            else topic_error(result.error_code, result.resource_name, result.error_message)
            for result in response.responses
        }
        return _raise_first(outcome, raise_on_error=raise_on_error)

    def elect_preferred_leaders(self) -> int:
        """Give every partition's leadership back to its first (preferred) replica where
        that replica is usable and in sync; how many moved. A controller that is moving or
        electing is waited for (NOT_CONTROLLER is retried within request_timeout_ms)."""
        return self._controller_call(ElectLeadersRequestV0(), ElectLeadersResponseV0).moved

    def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None]
    ) -> None:
        """Start moving each partition to its new replica list (preferred leader first), or
        cancel its move in progress (None). All or nothing: one bad entry refuses the request
        with its Kafka code (INVALID_REPLICA_ASSIGNMENT, UNKNOWN_TOPIC_OR_PARTITION, ...).
        Returns once the moves started; `list_partition_reassignments` shows them until done."""
        specs = tuple(ReassignmentSpec(topic, partition,
                                       None if replicas is None else tuple(replicas))
                      for (topic, partition), replicas in targets.items())
        self._controller_call(AlterPartitionReassignmentsRequestV0(specs),
                              AlterPartitionReassignmentsResponseV0)

    def list_partition_reassignments(self) -> dict[TopicPartition, PartitionReassignment]:
        """Every reassignment in progress."""
        response = self._controller_call(ListPartitionReassignmentsRequestV0(),
                                         ListPartitionReassignmentsResponseV0)
        return {TopicPartition(r.topic, r.partition):
                PartitionReassignment(r.replicas, r.adding, r.removing)
                for r in response.reassignments}

    def remove_broker(self, broker_id: int) -> int:
        """Drain `broker_id`: every partition with a replica on it starts moving to the other
        live brokers, and the broker is deregistered once it holds none (then it is gone from
        `describe_cluster`). How many partitions started moving. INVALID_REPLICATION_FACTOR
        when the other live brokers cannot keep some topic's replication factor."""
        return self._controller_call(UnregisterBrokerRequestV0(broker_id),
                                     UnregisterBrokerResponseV0).moved

    def _controller_call(self, request: Request, cls: type[C]) -> C:
        """`request` answered by the controller; a controller that is moving or electing is
        waited for (NOT_CONTROLLER is retried within request_timeout_ms)."""
        deadline_ms = monotonic_ms() + self.request_timeout_ms
        while True:
            response = _expect(
                self._connections.call_control(request, self.request_timeout_ms), cls)
            if response.error_code == ErrorCode.NONE:
                return response
            error = for_code(response.error_code, response.error_message)
            if error.code != ErrorCode.NOT_CONTROLLER or monotonic_ms() >= deadline_ms:
                raise error
            time.sleep(CONTROLLER_RETRY_BACKOFF_MS / 1000)

    def describe_cluster(self) -> ClusterDescription:
        response = _expect(
            self._connections.call_control(DescribeClusterRequestV0(), self.request_timeout_ms),
            DescribeClusterResponseV0,
        )
        states = {state.node_id: state for state in response.broker_states}
        brokers = tuple(
            BrokerDescription(b.node_id, b.host, b.control_endpoint)
            if (state := states.get(b.node_id)) is None
            else BrokerDescription(b.node_id, b.host, b.control_endpoint, state.state,
                                   state.broker_epoch, state.rack)
            for b in response.brokers)
        raft = response.raft
        lag = {voter.node_id: voter.lag_blocks for voter in response.voters} or None
        return ClusterDescription(response.cluster_id, response.controller_id, brokers,
                                  raft.leader, raft.term, raft.commit, lag)

    def list_offsets(
        self, specs: Mapping[TopicPartition | tuple[str, int], int]
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Offsets by spec: LATEST (-1), EARLIEST (-2) or a timestamp in ms (first record at or
        after it; offset -1 if none is that recent). Retriable errors (a leader moving, a new
        leader whose high watermark is not settled yet: OFFSET_NOT_AVAILABLE) are retried,
        with fresh metadata, within request_timeout_ms."""
        wanted = {TopicPartition(*tp): spec for tp, spec in specs.items()}
        deadline_ms = monotonic_ms() + self.request_timeout_ms
        while True:
            try:
                return self._list_offsets_once(wanted)
            except ZlogError as error:
                if not error.retriable or monotonic_ms() >= deadline_ms:
                    raise
            for topic in {tp.topic for tp in wanted}:
                self._connections.metadata.invalidate(topic)
            time.sleep(RETRY_BACKOFF_MS / 1000)

    def _list_offsets_once(
        self, wanted: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        self._refresh_for(t.topic for t in wanted)
        groups: dict[tuple[str, str], list[ListOffsetsPartition]] = {}
        for tp, spec in wanted.items():
            endpoint = self._leader(tp)
            groups.setdefault((endpoint, tp.topic), []).append(
                ListOffsetsPartition(tp.partition, spec))
        answers: dict[TopicPartition, OffsetAndTimestamp] = {}
        for (endpoint, topic), partitions in groups.items():
            response = _expect(
                self._connections.client(endpoint).call(
                    ListOffsetsRequestV0(topic, tuple(partitions)), self.request_timeout_ms),
                ListOffsetsResponseV0,
            )
            for result in response.partitions:
                if result.error_code != ErrorCode.NONE:
                    if result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                        self._connections.metadata.invalidate(topic)
                    raise for_code(result.error_code, prefixed_once(
                        f"{topic}-{result.partition}", result.error_message))
                answers[TopicPartition(topic, result.partition)] = OffsetAndTimestamp(
                    result.offset, result.timestamp)
        return answers

    # -- consumer groups (admin_groups.py) ----------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        """Every consumer group, sorted by id."""
        return self._groups.list_groups()

    def describe_groups(self, group_ids: Sequence[str]) -> list[GroupDescription]:
        """State, protocol and members with their assignments; an unknown group is "Dead"."""
        return self._groups.describe_groups(group_ids)

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ZlogError | None]:
        """Delete groups without members (and their offsets); each one's error or None."""
        return self._groups.delete_groups(group_ids)

    def list_group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """The group's committed offset of every partition it committed."""
        return self._groups.list_group_offsets(group_id)

    def alter_group_offsets(self, group_id: str,
                            offsets: Mapping[TopicPartition, int]) -> None:
        """Set committed offsets; NON_EMPTY_GROUP while the group has members."""
        self._groups.alter_group_offsets(
            group_id, {TopicPartition(*tp): offset for tp, offset in offsets.items()})

    # -- helpers --------------------------------------------------------------------------

    def _metadata(self, topics: tuple[str, ...] | None) -> MetadataResponseV0:
        response = _expect(
            self._connections.call_control(MetadataRequestV0(topics), self.request_timeout_ms),
            MetadataResponseV0,
        )
        self._connections.metadata.update(response)
        return response

    def _refresh_for(self, topics: Iterable[str]) -> None:
        missing = sorted({t for t in topics if self._connections.metadata.topic(t) is None})
        if not missing:
            return
        errors = self._connections.refresh(missing, self.request_timeout_ms)
        for error in errors.values():
            raise error

    def _leader(self, tp: TopicPartition) -> str:
        metadata = self._connections.metadata
        count = metadata.partition_count(tp.topic)
        if count is not None and not 0 <= tp.partition < count:
            raise ZlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            f"topic {tp.topic!r} has partitions 0..{count - 1}, not {tp.partition}")
        endpoint = metadata.leader_endpoint(*tp)
        if endpoint is None:
            raise ZlogError(ErrorCode.LEADER_NOT_AVAILABLE,
                            f"{tp.topic}-{tp.partition} has no leader right now")
        return endpoint

    def close(self) -> None:
        self._connections.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _source_name(config_source: int) -> str:
    try:
        return CONFIG_SOURCE_NAMES[ConfigSource(config_source)]
    except ValueError:
        return f"source {config_source}"
