"""zlog.Admin: topics, their configs, offsets and the cluster's state, one synchronous call at
a time.

Topic and cluster calls go to a control endpoint (the supervisor); `list_offsets` and
`delete_records` go to the workers that lead the partitions, as the data path does. Every
failure raises ZlogError with Kafka's code. Not thread-safe: one Admin per thread (it owns sockets).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final, TypeAlias, TypeVar

from zlog.client.cluster import Connections
from zlog.client.group.admin import GroupAdmin
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
from zlog.client.retries import (
    DefiniteError,
    Next,
    after_control_error,
    after_leader_error,
    retry_within,
)
from zlog.errors import ErrorCode, ZlogError, for_code, prefixed_once
from zlog.transport.messages import (
    Request,
    Response,
)
from zlog.transport.messages.admin import (
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
    MetadataRequestV0,
    MetadataResponseV0,
    PartitionsSpec,
    TopicResult,
    TopicSpec,
)
from zlog.transport.messages.data import (
    DeleteRecordsEntry,
    DeleteRecordsRequestV0,
    DeleteRecordsResponseV0,
    ListOffsetsPartition,
    ListOffsetsRequestV0,
    ListOffsetsResponseV0,
)
from zlog.transport.messages.reassignment import (
    AlterPartitionReassignmentsRequestV0,
    AlterPartitionReassignmentsResponseV0,
    ListPartitionReassignmentsRequestV0,
    ListPartitionReassignmentsResponseV0,
    ReassignmentSpec,
    UnregisterBrokerRequestV0,
    UnregisterBrokerResponseV0,
)
from zlog.transport.messages.security import (
    AlterSecurityRequestV0,
    AlterSecurityResponseV0,
    DescribeSecurityRequestV0,
    DescribeSecurityResponseV0,
)
from zlog.types import DEFAULT_BOOTSTRAP, TopicPartition

R = TypeVar("R", bound=Response)
T = TypeVar("T")
C = TypeVar("C", ElectLeadersResponseV0, AlterPartitionReassignmentsResponseV0,
            ListPartitionReassignmentsResponseV0, UnregisterBrokerResponseV0,
            AlterSecurityResponseV0)

_PartitionAnswer: TypeAlias = tuple[int, int, str, T]
"""One partition's answer from its leader: (partition, error code, error message, value)."""
_LeaderCall: TypeAlias = Callable[[str, str, list[tuple[int, int]], int],
                                  list[_PartitionAnswer[T]]]
"""(endpoint, topic, [(partition, argument)], timeout_ms) -> each partition's answer."""

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
        """Partitions, leaders, replicas and configs; an unknown name raises its error. A
        topic still being created (LEADER_NOT_AVAILABLE) is asked about again within
        request_timeout_ms; a partition without a leader is described as such (leader -1)."""
        return self._retrying(
            lambda remaining_ms: self._describe_topics_once(names, remaining_ms),
            after_control_error)

    def _describe_topics_once(self, names: Sequence[str] | None, timeout_ms: int,
                              ) -> list[TopicDescription]:
        response = self._metadata(None if names is None else tuple(names), timeout_ms)
        descriptions: list[TopicDescription] = []
        for topic in response.topics:
            if topic.error_code != ErrorCode.NONE:
                raise topic_error(topic.error_code, topic.name, topic.error_message)
            partitions = tuple(
                PartitionDescription(p.partition, p.leader, p.leader_epoch, p.replicas, p.isr,
                                     p.endpoint)
                for p in sorted(topic.partitions, key=lambda p: p.partition)
            )
            descriptions.append(TopicDescription(topic.name, partitions, dict(topic.configs),
                                                 topic.topic_id))
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
        return self._retrying(
            lambda remaining_ms: self._describe_configs_once(resources, remaining_ms),
            after_control_error)

    def _describe_configs_once(self, resources: tuple[DescribeConfigsResource, ...],
                               timeout_ms: int) -> dict[str, list[ConfigEntry]]:
        response = _expect(
            self._connections.call_control(DescribeConfigsRequestV0(resources), timeout_ms),
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
        waited for (NOT_CONTROLLER, and any retriable error but the controller's "no such
        topic", is retried within request_timeout_ms)."""

        def attempt(remaining_ms: int) -> C:
            response = _expect(self._connections.call_control(request, remaining_ms), cls)
            if response.error_code != ErrorCode.NONE:
                raise for_code(response.error_code, response.error_message)
            return response

        return self._retrying(attempt, after_control_error)

    def alter_security(self, change: AlterSecurityRequestV0) -> None:
        """Add and remove ACLs, set and remove SASL users, set quotas: one change, committed
        whole in the metadata log (docs/security.md); the principal needs alter on the
        cluster (CLUSTER_AUTHORIZATION_FAILED otherwise)."""
        self._controller_call(change, AlterSecurityResponseV0)

    def describe_security(self) -> DescribeSecurityResponseV0:
        """The ACLs, the SASL users (names and mechanisms only) and the quotas."""
        return _expect(self._connections.call_control(DescribeSecurityRequestV0(),
                                                      self.request_timeout_ms),
                       DescribeSecurityResponseV0)

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
        after it; offset -1 if none is that recent).

        Asked of each partition's leader. A leader that moved, is not elected yet, cannot
        answer yet (OFFSET_NOT_AVAILABLE) or does not answer is asked again, its metadata
        first where it is stale, within request_timeout_ms; only then is the last cause
        raised. A partition or topic the cluster does not have raises at once."""
        wanted = {TopicPartition(*tp): spec for tp, spec in specs.items()}
        answers: dict[TopicPartition, OffsetAndTimestamp] = {}

        def attempt(remaining_ms: int) -> dict[TopicPartition, OffsetAndTimestamp]:
            pending = {tp: spec for tp, spec in wanted.items() if tp not in answers}
            answers.update(self._list_offsets_once(pending, remaining_ms))
            return {tp: answers[tp] for tp in wanted}

        return self._retrying(attempt, after_leader_error)

    def _list_offsets_once(self, wanted: Mapping[TopicPartition, int], timeout_ms: int,
                           ) -> dict[TopicPartition, OffsetAndTimestamp]:
        def ask(endpoint: str, topic: str, specs: list[tuple[int, int]], timeout_ms: int,
                ) -> list[_PartitionAnswer[OffsetAndTimestamp]]:
            request = ListOffsetsRequestV0(
                topic, tuple(ListOffsetsPartition(index, spec) for index, spec in specs))
            response = _expect(self._connections.call_endpoint(endpoint, request, timeout_ms),
                               ListOffsetsResponseV0)
            return [(r.partition, r.error_code, r.error_message,
                     OffsetAndTimestamp(r.offset, r.timestamp)) for r in response.partitions]

        return self._ask_leaders(wanted, timeout_ms, ask)

    def delete_records(
        self, offsets: Mapping[TopicPartition | tuple[str, int], int]
    ) -> dict[TopicPartition, int]:
        """Delete every record below each offset (Kafka's DeleteRecords); -1 deletes every
        record below the high watermark. Returns each partition's low watermark, the lowest
        log start of its leader and in-sync followers, once every one of them deleted the
        records: consumers can no longer read below it, whichever of those replicas leads, and
        ListOffsets earliest returns it.

        Asked of each partition's leader; a leader that moved, is not elected yet, does not
        answer, or whose followers have not caught up yet (REQUEST_TIMED_OUT) is asked again,
        within request_timeout_ms, as `list_offsets` does. An offset
        above the high watermark or negative other than -1 (OFFSET_OUT_OF_RANGE), a topic
        without the delete cleanup policy (POLICY_VIOLATION) or a partition the cluster does
        not have raises at once; those partitions keep every record."""
        wanted = {TopicPartition(*tp): offset for tp, offset in offsets.items()}
        answers: dict[TopicPartition, int] = {}

        def ask(endpoint: str, topic: str, specs: list[tuple[int, int]], timeout_ms: int,
                ) -> list[_PartitionAnswer[int]]:
            # The leader may wait half the time left for its in-sync followers: its answer
            # (REQUEST_TIMED_OUT, retried, at worst) still comes within the call's own bound.
            request = DeleteRecordsRequestV0(timeout_ms // 2, tuple(
                DeleteRecordsEntry(topic, index, offset) for index, offset in specs))
            response = _expect(self._connections.call_endpoint(endpoint, request, timeout_ms),
                               DeleteRecordsResponseV0)
            return [(r.partition, r.error_code, r.error_message, r.low_watermark)
                    for r in response.results]

        def attempt(remaining_ms: int) -> dict[TopicPartition, int]:
            pending = {tp: offset for tp, offset in wanted.items() if tp not in answers}
            answers.update(self._ask_leaders(pending, remaining_ms, ask))
            return {tp: answers[tp] for tp in wanted}

        return self._retrying(attempt, after_leader_error)

    def _ask_leaders(self, wanted: Mapping[TopicPartition, int], timeout_ms: int,
                     ask: _LeaderCall[T]) -> dict[TopicPartition, T]:
        """One round: every leader asked once, one request per (leader, topic). What answered
        is returned; the first failure (a definite one before any retriable one) is raised
        once every leader was asked, with the topics whose metadata it shows stale
        forgotten."""
        self._refresh_for(wanted, timeout_ms)
        answers: dict[TopicPartition, T] = {}
        failures: list[ZlogError] = []
        groups: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for tp, spec in wanted.items():
            try:
                endpoint = self._leader(tp)
            except ZlogError as error:
                self._note_failure(tp.topic, error, failures)
                continue
            groups.setdefault((endpoint, tp.topic), []).append((tp.partition, spec))
        for (endpoint, topic), specs in groups.items():
            try:
                results = ask(endpoint, topic, specs, timeout_ms)
            except ZlogError as error:
                self._note_failure(topic, error, failures)
                continue
            for index, code, message, value in results:
                if code != ErrorCode.NONE:
                    self._note_failure(topic, for_code(code, prefixed_once(
                        f"{topic}-{index}", message)), failures)
                    continue
                answers[TopicPartition(topic, index)] = value
        if failures:
            raise min(failures, key=lambda error: error.retriable)
        return answers

    def _note_failure(self, topic: str, error: ZlogError, failures: list[ZlogError]) -> None:
        if after_leader_error(error.code) is Next.RELEARN:
            self._connections.metadata.invalidate(topic)
        failures.append(error)

    # -- consumer groups (group/admin.py) -----------------------------------------------

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

    def _metadata(self, topics: tuple[str, ...] | None,
                  timeout_ms: int | None = None) -> MetadataResponseV0:
        response = _expect(
            self._connections.call_control(MetadataRequestV0(topics),
                                           timeout_ms or self.request_timeout_ms),
            MetadataResponseV0,
        )
        self._connections.metadata.update(response)
        return response

    def _refresh_for(self, wanted: Iterable[TopicPartition], timeout_ms: int) -> None:
        """Metadata for the topics of `wanted` not known, or known without one of the
        partitions or its leader: a partition added since, a leader elected since."""
        metadata = self._connections.metadata
        stale = sorted({tp.topic for tp in wanted if metadata.leader_endpoint(*tp) is None})
        if not stale:
            return
        errors = self._connections.refresh(stale, timeout_ms)
        for error in errors.values():
            raise error

    def _leader(self, tp: TopicPartition) -> str:
        """The endpoint of `tp`'s leader, from metadata just refreshed where it was stale: a
        partition past the topic's count is definite, no leader is LEADER_NOT_AVAILABLE."""
        metadata = self._connections.metadata
        count = metadata.partition_count(tp.topic)
        if count is not None and not 0 <= tp.partition < count:
            raise DefiniteError(ZlogError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"topic {tp.topic!r} has partitions 0..{count - 1}, not {tp.partition}"))
        endpoint = metadata.leader_endpoint(*tp)
        if endpoint is None:
            raise ZlogError(ErrorCode.LEADER_NOT_AVAILABLE,
                            f"{tp.topic}-{tp.partition} has no leader right now")
        return endpoint

    def _retrying(self, attempt: Callable[[int], T], next_step: Callable[[ErrorCode], Next],
                  ) -> T:
        """`attempt(remaining_ms)`, tried again within request_timeout_ms while `next_step`
        says a retry may help (each attempt forgets what it found stale itself)."""
        return retry_within(attempt, timeout_ms=self.request_timeout_ms,
                            backoff_ms=self._connections.retry_backoff_ms, next_step=next_step)

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
