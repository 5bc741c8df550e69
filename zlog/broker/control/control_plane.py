"""The control endpoint's requests: ApiVersions, Metadata, CreateTopics, DeleteTopics,
CreatePartitions, InitProducerId, DescribeConfigs, IncrementalAlterConfigs, DescribeCluster,
and the reassignment requests (`controller/reassignment_requests.py`) (docs/protocol.md,
"Control plane").

No sockets, threads or clocks here: the supervisor hands in what this needs as callables (the
current metadata, a way to propose a command, a way to reply, the data endpoint of a
partition, the Raft status, the time), so these rules can be tested without processes.

Requests that change metadata answer asynchronously:

* CreateTopics: validated here first (topic_configs.py; no Raft round trip for a bad request), then
  proposed; answered once the command committed AND the workers confirmed every local
  partition open, so a client may produce right after the reply.
* DeleteTopics: answered once the workers deleted the data and the deletion committed.
* CreatePartitions: a topic grows (never shrinks) by an AddPartitions command; answered as
  CreateTopics is, once the new local partitions are open.
* IncrementalAlterConfigs: validated here (topic_configs.py, as CreateTopics' configs), proposed as
  the change (AlterTopicConfigs), answered once it committed AND the workers confirmed the new
  configs on every local partition, so the next produce or fetch already runs under them.
* InitProducerId: ids come from the metadata log in blocks (`producer_ids.py`), so a restart
  never hands out an id twice, and one proposal serves a thousand producers.

A parked request waits in `_waiting` with a deadline; `settle()` (after any change of metadata
or worker state) answers those that are decided, `expire()` those whose time is up.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

import zlog
from zlog import limits
from zlog.broker.authorizer import refusal
from zlog.broker.config import BrokerConfig
from zlog.broker.control.controller.decisions import placeable
from zlog.broker.control.controller.reassignment_requests import ReassignmentRequests
from zlog.broker.control.metadata.commands import (
    AddPartitions,
    AlterTopicConfigs,
    Command,
    CreateTopic,
    DeleteTopic,
    Done,
    Propose,
    Result,
    encode_command,
)
from zlog.broker.control.metadata.state import ClusterState, PartitionInfo, TopicInfo
from zlog.broker.control.placement import place_replicas
from zlog.broker.control.producer_ids import ProducerIdBlocks
from zlog.broker.control.security_requests import SecurityRequests
from zlog.broker.topic_configs import (
    TOPIC_CONFIG_DEFAULTS,
    altered_topic_configs,
    check_no_collision,
    effective_topic_configs,
    validate_client_topic_name,
    validate_new_topic,
    validate_partitions,
)
from zlog.errors import ErrorCode, ZlogError
from zlog.groups.partitioning import OFFSETS_TOPIC, partition_for
from zlog.raft.status import NodeStatus
from zlog.shm_segments.log import FILE_NAME_BYTES_MAX
from zlog.shm_segments.ring_header import file_size_bytes as ring_file_size_bytes
from zlog.transport.api import CONTROL_APIS, SUPPORTED_VERSIONS, ApiKey
from zlog.transport.codec import RequestHeader
from zlog.transport.messages import (
    Request,
    Response,
)
from zlog.transport.messages.admin import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResourceResult,
    ApiVersionRange,
    ApiVersionsRequestV0,
    ApiVersionsResponseV0,
    BrokerMetadata,
    BrokerState,
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
    DescribeConfigsResult,
    DescribedConfig,
    IncrementalAlterConfigsRequestV0,
    IncrementalAlterConfigsResponseV0,
    InitProducerIdRequestV0,
    MetadataRequestV0,
    MetadataResponseV0,
    PartitionMetadata,
    PartitionsSpec,
    RaftStatus,
    TopicMetadata,
    TopicResult,
    TopicSpec,
    VoterStatus,
)
from zlog.transport.messages.groups import (
    GROUP_KEY_TYPE,
    FindCoordinatorRequestV0,
    FindCoordinatorResponseV0,
)
from zlog.transport.messages.reassignment import (
    AlterPartitionReassignmentsRequestV0,
    ListPartitionReassignmentsRequestV0,
    UnregisterBrokerRequestV0,
)
from zlog.transport.messages.security import (
    ANONYMOUS,
    CLUSTER_RESOURCE,
    AlterSecurityRequestV0,
    DescribeSecurityRequestV0,
)
from zlog.types import TopicPartition

log = logging.getLogger("zlog.broker.control.control_plane")

CONTROL_REQUEST_TIMEOUT_MS: Final = 30_000  # requests parked for commits and workers

@dataclass(frozen=True, slots=True)
class HostStorage:
    """What this host's file systems can hold: checked before a topic is created, so a topic
    that cannot exist here is refused with a reason instead of failing in its workers."""

    name_bytes_max: int = FILE_NAME_BYTES_MAX  # the data dir's longest file name (NAME_MAX)
    ring_free_bytes: int | None = None  # free space where rings are made; None: unknown


def _gib(size_bytes: int) -> str:
    return f"{size_bytes / 2**30:.2f} GiB"


Reply = Callable[[bytes, RequestHeader, Response], None]
CreateAtController = Callable[[TopicSpec, Done], bool]
"""Have the controller create a topic (`Done` hears how it went); False where this node is
the controller, or alone, and proposes it itself."""


@dataclass(slots=True)
class _Waiting:
    """A CreateTopics, DeleteTopics or IncrementalAlterConfigs request that waits for commits
    and workers, one result per topic."""

    identity: bytes
    header: RequestHeader
    api_key: ApiKey
    results: dict[str, TopicResult | None]  # in request order; None while undecided
    committed: set[str]  # names whose command committed; now waiting on the workers
    deadline_ms: int
    # IncrementalAlterConfigs: the resources that are not topics, answered as they came.
    others: list[AlterConfigsResourceResult] = field(default_factory=list)


class ControlPlane:
    """The request handlers. Called only from the supervisor's loop thread."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        state: Callable[[], ClusterState],
        propose: Propose,
        reply: Reply,
        endpoint_for: Callable[[TopicPartition], str | None],
        applied_configs: Callable[[TopicPartition], Mapping[str, str] | None],
        raft_status: Callable[[], NodeStatus | None],
        clock_ms: Callable[[], int],
        ring_path_for: Callable[[TopicPartition], str] | None = None,
        kafka_endpoint_for: Callable[[TopicPartition], str] | None = None,
        ring_dir: str = "",
        host_storage: Callable[[], HostStorage] = HostStorage,
        create_at_controller: CreateAtController | None = None,
    ) -> None:
        self.config = config
        # Auto-created topics where another node is the controller (None: never, alone).
        self._create_at_controller = create_at_controller
        self._host_storage = host_storage
        self._ring_path_for = ring_path_for  # a partition's ring file on this host
        self._kafka_endpoint_for = kafka_endpoint_for  # its worker's Kafka port on this host
        self._ring_dir = ring_dir  # where this broker's rings are, told to local consumers
        self._state = state  # the metadata as last applied (an immutable snapshot)
        self._propose = propose  # commit a command; Done runs later on the loop thread
        self._reply = reply  # send a response to a client
        self._endpoint_for = endpoint_for  # a partition's data endpoint once a worker has it
        self._applied_configs = applied_configs  # the configs its worker confirmed
        self._raft_status = raft_status
        self._clock_ms = clock_ms
        self._waiting: list[_Waiting] = []
        self._open_errors: dict[TopicPartition, tuple[int, str]] = {}
        self._auto_creating: set[str] = set()
        self._producer_ids = ProducerIdBlocks(propose, reply)
        self._reassignments = ReassignmentRequests(state, propose, reply)
        self.security = SecurityRequests(state, propose, reply,
                                         (config.security_principal, *config.super_users))

    @property
    def waiting_count(self) -> int:
        return len(self._waiting) + self._producer_ids.waiting_count

    def partition_assigned(self, topic_partition: TopicPartition, code: int, text: str) -> None:
        """A worker's answer to an assign: remembered so CreateTopics can report a failure."""
        if code == 0:
            self._open_errors.pop(topic_partition, None)
        else:
            self._open_errors[topic_partition] = (code, text)

    def settle(self) -> None:
        """Answer the parked requests that the metadata and the workers have decided."""
        state = self._state()
        for tp in [tp for tp in self._open_errors if tp[0] not in state.topics]:
            del self._open_errors[tp]  # a deleted topic's failures are no one's concern now
        self._settle_waiting(state)

    def expire(self, now_ms: int) -> None:
        self._expire_waiting(now_ms)

    def shut_down(self) -> None:
        """Answer everything still parked: the broker is going away."""
        for waiting in list(self._waiting):
            self._finish(waiting, ErrorCode.BROKER_NOT_AVAILABLE, "the broker is stopping")
        self._producer_ids.shut_down()

    def handle(self, identity: bytes, header: RequestHeader, request: Request,
               principal: str = ANONYMOUS) -> None:
        """Answer `request` now, or park it until the metadata log and the workers finish.
        `principal` may do what it asks (request_acls.py): only Metadata is still filtered."""
        assert header.api_key in CONTROL_APIS, "the supervisor routes only control requests"
        match request:
            case ApiVersionsRequestV0():
                self._reply(identity, header, self._api_versions())
            case MetadataRequestV0():
                self._reply(identity, header, self._metadata(request, principal))
            case AlterSecurityRequestV0():
                self.security.alter(identity, header, request)
            case DescribeSecurityRequestV0():
                self._reply(identity, header, self.security.describe(request))
            case CreateTopicsRequestV0():
                self._create_topics(identity, header, request)
            case DeleteTopicsRequestV0():
                self._delete_topics(identity, header, request)
            case CreatePartitionsRequestV0():
                self._create_partitions(identity, header, request)
            case InitProducerIdRequestV0():
                self._producer_ids.init_producer_id(identity, header, request)
            case DescribeConfigsRequestV0():
                self._reply(identity, header, self._describe_configs(request))
            case IncrementalAlterConfigsRequestV0():
                self._alter_configs(identity, header, request)
            case DescribeClusterRequestV0():
                self._reply(identity, header, self._describe_cluster())
            case AlterPartitionReassignmentsRequestV0():
                self._reassignments.alter(identity, header, request)
            case ListPartitionReassignmentsRequestV0():
                self._reply(identity, header, self._reassignments.ongoing())
            case UnregisterBrokerRequestV0():
                self._reassignments.unregister(identity, header, request)
            case FindCoordinatorRequestV0():
                self._reply(identity, header, self._find_coordinator(request))
            case _:
                raise ZlogError(ErrorCode.UNSUPPORTED_VERSION, "not a control request")

    def _api_versions(self) -> ApiVersionsResponseV0:
        versions = tuple(
            ApiVersionRange(int(key), *SUPPORTED_VERSIONS[key])
            for key in sorted(CONTROL_APIS)
        )
        return ApiVersionsResponseV0(versions, f"zlog {zlog.__version__}")

    def _brokers(self, state: ClusterState) -> tuple[BrokerMetadata, ...]:
        """Every registered broker; this one also says where its rings are, for consumers on
        its host that read a replica's ring (another broker's ring directory is not known)."""
        return tuple(
            BrokerMetadata(
                broker.node_id, broker.host, broker.control_endpoint, rack=broker.rack,
                ring_dir=self._ring_dir if broker.node_id == self.config.node_id else "")
            for broker in state.brokers.values())

    def _controller_id(self) -> int:
        status = self._raft_status()
        return -1 if status is None or status.leader is None else status.leader

    def _metadata(self, request: MetadataRequestV0,
                  principal: str = ANONYMOUS) -> MetadataResponseV0:
        """With security on, a topic the principal may not describe is left out of an answer
        about every topic, and answered TOPIC_AUTHORIZATION_FAILED when named (whether it
        exists or not, which is not the principal's to know); a missing topic is
        auto-created only for a principal that may create it."""
        state = self._state()
        authorizer = self.security.authorizer() if self.config.security else None
        names = list(state.topics) if request.topics is None else list(request.topics)
        if authorizer is not None and request.topics is None:
            names = [name for name in names
                     if authorizer.allowed(principal, "describe", "topic", name)]
        topics = []
        for name in names:
            topic = state.topics.get(name)
            if authorizer is not None and not authorizer.allowed(principal, "describe",
                                                                 "topic", name):
                denied = refusal(principal, "describe", "topic", name)
                topics.append(TopicMetadata(name, int(denied.code), denied.message))
            elif topic is not None:
                topics.append(self._topic_metadata(state, topic))
            else:
                may_create = authorizer is None or any(
                    authorizer.allowed(principal, "create", kind, resource)
                    for kind, resource in (("topic", name), ("cluster", CLUSTER_RESOURCE)))
                topics.append(self._missing_topic(name, state.topics, may_create=may_create))
        return MetadataResponseV0(
            state.cluster_id, self._controller_id(), self._brokers(state), tuple(topics)
        )

    def _topic_metadata(self, state: ClusterState, topic: TopicInfo) -> TopicMetadata:
        """Each partition's leader and where its worker listens: this host's workers as they
        answered, another broker's as its heartbeats told the controller."""
        partitions = []
        for partition in topic.partitions:
            ring_path = kafka_endpoint = ""
            key = TopicPartition(topic.name, partition.partition)
            endpoint = self._leader_endpoint(state, key, partition)
            here = bool(endpoint) and partition.leader == self.config.node_id
            if here and self._ring_path_for is not None:
                ring_path = self._ring_path_for(key)
            if here and self._kafka_endpoint_for is not None:
                kafka_endpoint = self._kafka_endpoint_for(key)
            elif endpoint and partition.leader in state.brokers:
                kafka_endpoint = state.brokers[partition.leader].worker_kafka_endpoint(
                    partition.worker_of(partition.leader))
            code = ErrorCode.NONE if endpoint else ErrorCode.LEADER_NOT_AVAILABLE
            if not endpoint and key in self._open_errors:
                # A worker could not open it (e.g. KAFKA_STORAGE_ERROR): say so, not "wait".
                code = ErrorCode(self._open_errors[key][0])
            partitions.append(PartitionMetadata(
                partition.partition, partition.leader, partition.leader_epoch,
                partition.replicas, partition.isr, endpoint or "", int(code), ring_path,
                kafka_endpoint,
            ))
        return TopicMetadata(topic.name, 0, "", dict(topic.configs), tuple(partitions),
                                  topic.topic_id)

    def _leader_endpoint(self, state: ClusterState, key: TopicPartition,
                         partition: PartitionInfo) -> str | None:
        """Where the partition's leading worker listens: this host's workers as they
        answered, another broker's as its heartbeats told the controller (None: not known)."""
        if partition.leader == self.config.node_id:
            return self._endpoint_for(key)
        leader = state.brokers.get(partition.leader)
        if leader is not None and not leader.fenced:
            return leader.worker_endpoint(partition.worker_of(partition.leader)) or None
        return None

    def _find_coordinator(self, request: FindCoordinatorRequestV0) -> FindCoordinatorResponseV0:
        """The worker leading the group's offsets partition; the first call creates the
        offsets topic, and until it has a leader the answer is COORDINATOR_NOT_AVAILABLE
        (retriable: the client asks again)."""
        if request.key_type != GROUP_KEY_TYPE:
            return FindCoordinatorResponseV0(
                int(ErrorCode.INVALID_REQUEST),
                f"key type {request.key_type} is not served, only consumer groups "
                f"({GROUP_KEY_TYPE})")
        state = self._state()
        topic = state.topics.get(OFFSETS_TOPIC)
        if topic is None:
            return self._create_offsets_topic(state)
        index = partition_for(request.key, len(topic.partitions))
        partition = topic.partitions[index]
        endpoint = self._leader_endpoint(state, TopicPartition(OFFSETS_TOPIC, index), partition)
        if not endpoint:
            return FindCoordinatorResponseV0(
                int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                f"partition {index} of {OFFSETS_TOPIC} has no leader yet")
        return FindCoordinatorResponseV0(0, "", partition.leader, endpoint)

    def _create_offsets_topic(self, state: ClusterState) -> FindCoordinatorResponseV0:
        """Propose `__consumer_offsets` (compacted; replicated as configured, at most on the
        brokers there are) once; say "not available" meanwhile."""
        factor = min(self.config.offsets_topic_replication_factor,
                     max(len(placeable(state)), 1))
        spec = TopicSpec(OFFSETS_TOPIC, self.config.offsets_topic_num_partitions,
                              factor, {"cleanup.policy": "compact"})
        refusal = self._auto_create(spec, state)
        if refusal is not None:
            return FindCoordinatorResponseV0(int(refusal.code), refusal.message)
        return FindCoordinatorResponseV0(int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                                         f"{OFFSETS_TOPIC} is being created")

    def _missing_topic(self, name: str, state_topics: Iterable[str], *,
                       may_create: bool = True) -> TopicMetadata:
        """UNKNOWN_TOPIC_OR_PARTITION, or (auto_create_topics) create it and say "soon"."""
        if not self.config.auto_create_topics or not may_create:
            return TopicMetadata(name, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                      f"no topic {name!r}")
        try:
            validate_client_topic_name(name)
            check_no_collision(name, state_topics)
        except ZlogError as error:
            return TopicMetadata(name, int(error.code), error.message)
        spec = TopicSpec(name, self.config.default_partitions,
                              self.config.default_replication_factor)
        refusal = self._auto_create(spec, self._state())
        if refusal is not None:  # e.g. a default replication factor above the live brokers
            return TopicMetadata(name, int(refusal.code), refusal.message)
        return TopicMetadata(name, int(ErrorCode.LEADER_NOT_AVAILABLE),
                                  f"topic {name!r} is being created")

    def _auto_create(self, spec: TopicSpec, state: ClusterState) -> ZlogError | None:
        """Have the topic created, once at a time: proposed here when this node may propose,
        else by the controller (as a client's CreateTopics is forwarded to it). The error that
        refuses it now, or None (being created)."""
        if spec.name in self._auto_creating:
            return None
        self._auto_creating.add(spec.name)  # before `done` may run, which takes it out
        done = functools.partial(self._auto_created, spec.name)
        if self._create_at_controller is not None and self._create_at_controller(spec, done):
            return None
        try:
            command = self._create_command(spec, state)
        except ZlogError as error:
            self._auto_creating.discard(spec.name)
            return error
        self._propose(command, done)
        return None

    def _auto_created(
        self, name: str, result: Result | None, error: ZlogError | None
    ) -> None:
        del result
        self._auto_creating.discard(name)
        if error is not None and error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.warning("auto-creating topic %r failed: %s", name, error)

    def _describe_cluster(self) -> DescribeClusterResponseV0:
        """The brokers with their state, and (from the metadata log's leader, where clustered
        brokers forward this request) how far each voter's copy of the log reaches."""
        state = self._state()
        status = self._raft_status()
        voters: list[VoterStatus] = []
        if status is None:
            raft = RaftStatus(None, 0, (0, 0))
        else:
            commit = (status.commit.term, status.commit.height)
            raft = RaftStatus(status.leader, status.term, commit)
            if status.leader == status.node_id:
                voters.append(VoterStatus(status.node_id, status.head.height, 0))
            voters += [VoterStatus(peer, match,
                                        max(status.head.height - match, 0) if match >= 0 else -1)
                       for peer, match in status.voter_match]
        states = tuple(
            BrokerState(broker.node_id, broker.broker_epoch,
                             "fenced" if broker.fenced
                             else "draining" if broker.shutting_down or broker.draining
                             else "live", broker.rack)
            for broker in state.brokers.values())
        return DescribeClusterResponseV0(
            state.cluster_id, self._controller_id(), self._brokers(state), raft, states,
            tuple(sorted(voters, key=lambda voter: voter.node_id)))

    # -- CreateTopics / DeleteTopics -------------------------------------------------------------

    def _create_topics(self, identity: bytes, header: RequestHeader,
                       request: CreateTopicsRequestV0) -> None:
        state = self._state()
        waiting = _Waiting(identity, header, ApiKey.CREATE_TOPICS, {}, set(),
                           self._clock_ms() + CONTROL_REQUEST_TIMEOUT_MS)
        specs: list[tuple[TopicSpec, CreateTopic]] = []
        accepted: list[TopicSpec] = []  # valid so far, validate_only or not
        name_counts = Counter(spec.name for spec in request.topics)
        for spec in request.topics:
            if name_counts[spec.name] > 1:  # as Kafka: neither copy is created
                waiting.results[spec.name] = TopicResult(
                    spec.name, int(ErrorCode.INVALID_REQUEST), "named twice in one request")
                continue
            waiting.results[spec.name] = None
            try:
                validate_new_topic(
                    spec.name, spec.partitions, spec.replication_factor, dict(spec.configs),
                    live_brokers=len(placeable(state)),
                    base=self.config.default_log_config,
                )
                if spec.name in state.topics or spec.name in state.deleting:
                    raise ZlogError(ErrorCode.TOPIC_ALREADY_EXISTS,
                                    f"topic {spec.name!r} already exists")
                check_no_collision(spec.name, [*state.topics, *(s.name for s in accepted)])
                command = self._create_command(spec, state)
            except ZlogError as error:
                waiting.results[spec.name] = TopicResult(spec.name, int(error.code),
                                                              error.message)
                continue
            accepted.append(spec)
            if request.validate_only:
                waiting.results[spec.name] = TopicResult(spec.name, 0, "")
            else:
                specs.append((spec, command))
        self._waiting.append(waiting)
        for spec, command in specs:
            self._propose(command, functools.partial(self._committed, waiting, spec.name))
        self._settle_waiting(state)

    def _create_command(self, spec: TopicSpec, state: ClusterState) -> CreateTopic:
        """The CreateTopic command for a valid spec, once this host can hold the topic.

        Refused up front, with the reason: partition directory names longer than the data
        dir's file system allows; rings that would not fit the free shared memory; a topic
        too large for one metadata command.
        """
        placed = place_replicas(spec.partitions, spec.replication_factor,
                                placeable(state), start_index=state.next_topic_seq,
                                racks=_racks(state))
        command = CreateTopic(spec.name, spec.partitions, spec.replication_factor,
                              dict(spec.configs), tuple(p.replicas for p in placed),
                              topic_id=uuid.uuid4().hex)
        self._check_host_can_hold(spec.name, spec.partitions, spec.replication_factor,
                                  [p.replicas for p in placed], command)
        return command

    def _check_host_can_hold(self, name: str, partitions: int, replication_factor: int,
                             new_replicas: list[tuple[int, ...]], command: Command) -> None:
        """Refuse, with the reason, a topic of `partitions` whose `new_replicas` (the ones
        this command adds) this host cannot hold: partition directory names longer than the
        data dir's file system allows; rings that would not fit the free shared memory; a
        command too large for the metadata log."""
        storage = self._host_storage()
        longest_name = f"{name}-{partitions - 1}"
        if len(longest_name.encode()) > storage.name_bytes_max:
            raise ZlogError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"topic name {name[:40]!r}... is too long for this broker's file system: "
                f"partition directories would be named with {len(longest_name.encode())} "
                f"bytes and it holds {storage.name_bytes_max}",
            )
        local = sum(1 for replicas in new_replicas if self.config.node_id in replicas)
        needed_bytes = local * ring_file_size_bytes(self.config.ring_bytes)
        free_bytes = storage.ring_free_bytes
        if free_bytes is not None and needed_bytes > free_bytes:
            raise ZlogError(
                ErrorCode.INVALID_PARTITIONS,
                f"{local} partition(s) on this broker need {_gib(needed_bytes)} of shared "
                f"memory for their rings (ring_bytes {_gib(self.config.ring_bytes)} each) and "
                f"{_gib(free_bytes)} is free: use fewer partitions or a smaller ring_bytes",
            )
        size_bytes = len(encode_command(command))
        if size_bytes > limits.RAFT_COMMAND_BYTES_MAX:
            raise ZlogError(
                ErrorCode.INVALID_PARTITIONS,
                f"{len(new_replicas)} partitions of {replication_factor} replicas do not "
                f"fit one metadata command ({size_bytes} bytes, "
                f"at most {limits.RAFT_COMMAND_BYTES_MAX})",
            )

    def _create_partitions(self, identity: bytes, header: RequestHeader,
                           request: CreatePartitionsRequestV0) -> None:
        """Grow topics (Kafka's CreatePartitions): each to `count` partitions in all, never
        fewer; the new ones placed round-robin where the topic's placement leaves off."""
        state = self._state()
        waiting = _Waiting(identity, header, ApiKey.CREATE_PARTITIONS, {}, set(),
                           self._clock_ms() + CONTROL_REQUEST_TIMEOUT_MS)
        commands: list[tuple[str, AddPartitions]] = []
        name_counts = Counter(spec.name for spec in request.topics)
        for spec in request.topics:
            if name_counts[spec.name] > 1:
                waiting.results[spec.name] = TopicResult(
                    spec.name, int(ErrorCode.INVALID_REQUEST), "named twice in one request")
                continue
            try:
                command = self._add_partitions_command(spec, state)
            except ZlogError as error:
                waiting.results[spec.name] = TopicResult(spec.name, int(error.code),
                                                              error.message)
                continue
            if request.validate_only:
                waiting.results[spec.name] = TopicResult(spec.name, 0, "")
            else:
                waiting.results[spec.name] = None
                commands.append((spec.name, command))
        self._waiting.append(waiting)
        for name, command in commands:
            self._propose(command, functools.partial(self._committed, waiting, name))
        self._settle_waiting(state)

    def _add_partitions_command(self, spec: PartitionsSpec,
                                state: ClusterState) -> AddPartitions:
        topic = state.topics.get(spec.name)
        if topic is None:
            raise ZlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {spec.name!r}")
        count = validate_partitions(spec.count)
        current = len(topic.partitions)
        if count <= current:
            raise ZlogError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic {spec.name!r} has {current} partitions: it can only grow, and "
                f"{count} is not more" if count < current else
                f"topic {spec.name!r} already has {count} partitions")
        placed = place_replicas(count, topic.replication_factor,
                                placeable(state), start_index=topic.topic_seq,
                                racks=_racks(state))
        new_replicas = [p.replicas for p in placed[current:]]
        command = AddPartitions(spec.name, current, tuple(new_replicas))
        self._check_host_can_hold(spec.name, count, topic.replication_factor, new_replicas,
                                  command)
        return command

    def _delete_topics(self, identity: bytes, header: RequestHeader,
                       request: DeleteTopicsRequestV0) -> None:
        state = self._state()
        waiting = _Waiting(identity, header, ApiKey.DELETE_TOPICS, {}, set(),
                           self._clock_ms() + CONTROL_REQUEST_TIMEOUT_MS)
        self._waiting.append(waiting)
        for name in request.topics:
            if name in waiting.results:
                continue  # named twice: one deletion, one answer
            if name not in state.topics:
                waiting.results[name] = TopicResult(
                    name, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"no topic {name!r}")
                continue
            waiting.results[name] = None
            self._propose(DeleteTopic(name),
                          functools.partial(self._committed, waiting, name))
        self._settle_waiting(state)

    def _committed(
        self, waiting: _Waiting, name: str, result: Result | None,
        error: ZlogError | None,
    ) -> None:
        del result
        if waiting not in self._waiting:
            return  # already answered (timed out)
        if error is not None:
            waiting.results[name] = TopicResult(name, int(error.code), error.message)
        else:
            waiting.committed.add(name)
        self._settle_waiting(self._state())

    def _settle_waiting(self, state: ClusterState) -> None:
        """Decide what the workers have finished; answer every request fully decided."""
        for waiting in list(self._waiting):
            for name in list(waiting.committed):
                result = self._settled_result(waiting.api_key, state, name)
                if result is not None:
                    waiting.results[name] = result
                    waiting.committed.discard(name)
            if all(result is not None for result in waiting.results.values()):
                self._finish(waiting, ErrorCode.NONE, "")

    def _settled_result(self, api_key: ApiKey, state: ClusterState,
                        name: str) -> TopicResult | None:
        if api_key == ApiKey.DELETE_TOPICS:
            gone = name not in state.topics and name not in state.deleting
            return TopicResult(name, 0, "") if gone else None
        topic = state.topics.get(name)
        altering = api_key == ApiKey.INCREMENTAL_ALTER_CONFIGS
        if topic is None:
            happening = "its configs changed" if altering else "being created"
            return TopicResult(name, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                    f"topic {name!r} was deleted while {happening}")
        local = [TopicPartition(name, p.partition) for p in topic.partitions
                 if self.config.node_id in p.replicas]
        for tp in local:
            if tp in self._open_errors:
                code, text = self._open_errors[tp]
                failed = "did not take the new configs" if altering else "failed to open"
                return TopicResult(name, code, f"partition {tp[1]} {failed}: {text}")
        if altering:
            wanted = effective_topic_configs(self.config.topic_defaults_map, topic.configs)
            done = all(self._applied_configs(tp) == wanted for tp in local)
        else:
            done = all(self._endpoint_for(tp) is not None for tp in local)
        return TopicResult(name, 0, "") if done else None

    def _expire_waiting(self, now_ms: int) -> None:
        for waiting in list(self._waiting):
            if now_ms >= waiting.deadline_ms:
                self._finish(waiting, ErrorCode.REQUEST_TIMED_OUT,
                             "committed in the metadata log, but the partition workers have "
                             "not finished yet")

    def _finish(self, waiting: _Waiting, code: ErrorCode, message: str) -> None:
        """Answer `waiting`; undecided topics get `code`."""
        results = tuple(
            result or TopicResult(name, int(code), message)
            for name, result in waiting.results.items()
        )
        response: Response
        if waiting.api_key == ApiKey.CREATE_TOPICS:
            response = CreateTopicsResponseV0(results)
        elif waiting.api_key == ApiKey.CREATE_PARTITIONS:
            response = CreatePartitionsResponseV0(results)
        elif waiting.api_key == ApiKey.DELETE_TOPICS:
            response = DeleteTopicsResponseV0(results)
        else:
            response = IncrementalAlterConfigsResponseV0((
                *(AlterConfigsResourceResult(result.error_code, result.error_message,
                                                  ConfigResourceType.TOPIC, result.name)
                  for result in results),
                *waiting.others,
            ))
        self._reply(waiting.identity, waiting.header, response)
        if waiting in self._waiting:
            self._waiting.remove(waiting)

    # -- DescribeConfigs / IncrementalAlterConfigs ------------------------------------------------

    def _describe_configs(
        self, request: DescribeConfigsRequestV0
    ) -> DescribeConfigsResponseV0:
        state = self._state()
        return DescribeConfigsResponseV0(
            tuple(self._describe_resource(state, resource) for resource in request.resources))

    def _describe_resource(
        self, state: ClusterState, resource: DescribeConfigsResource
    ) -> DescribeConfigsResult:
        """Every topic config (or those named) with its value and the layer it comes from."""
        kind, name = resource.resource_type, resource.resource_name
        try:
            _check_topic_resource(kind)
            topic = state.topics.get(name)
            if topic is None:
                raise ZlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
            keys = resource.configuration_keys
            unknown = [key for key in keys or () if key not in TOPIC_CONFIG_DEFAULTS]
            if unknown:
                raise ZlogError(ErrorCode.INVALID_CONFIG, f"unknown topic config {unknown[0]!r}")
        except ZlogError as error:
            return DescribeConfigsResult(int(error.code), error.message, kind, name)
        broker_defaults = self.config.topic_defaults_map
        configs = []
        for key in sorted(TOPIC_CONFIG_DEFAULTS if keys is None else set(keys)):
            if key in topic.configs:
                value, source = topic.configs[key], ConfigSource.TOPIC
            elif key in broker_defaults:
                value, source = broker_defaults[key], ConfigSource.BROKER
            else:
                value, source = TOPIC_CONFIG_DEFAULTS[key], ConfigSource.DEFAULT
            configs.append(DescribedConfig(key, value, int(source)))
        return DescribeConfigsResult(0, "", kind, name, tuple(configs))

    def _alter_configs(self, identity: bytes, header: RequestHeader,
                       request: IncrementalAlterConfigsRequestV0) -> None:
        """Check every topic's change against its current configs, then propose the valid ones
        (all of them, or none with validate_only); a refused change alters nothing."""
        state = self._state()
        waiting = _Waiting(identity, header, ApiKey.INCREMENTAL_ALTER_CONFIGS, {}, set(),
                           self._clock_ms() + CONTROL_REQUEST_TIMEOUT_MS)
        changes: list[tuple[str, dict[str, str], list[str]]] = []
        topic_counts = Counter(resource.resource_name for resource in request.resources
                               if resource.resource_type == ConfigResourceType.TOPIC)
        for resource in request.resources:
            name = resource.resource_name
            try:
                _check_topic_resource(resource.resource_type)
            except ZlogError as error:
                waiting.others.append(AlterConfigsResourceResult(
                    int(error.code), error.message, resource.resource_type, name))
                continue
            if topic_counts[name] > 1:  # as Kafka: neither change is made
                waiting.results[name] = TopicResult(
                    name, int(ErrorCode.INVALID_REQUEST), f"topic {name!r} is named twice")
                continue
            waiting.results[name] = None
            try:
                set_configs, deleted = _config_changes(resource.configs)
                topic = state.topics.get(name)
                if topic is None:
                    raise ZlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
                altered_topic_configs(topic.configs, set_configs, deleted,
                                      self.config.default_log_config)
            except ZlogError as error:
                waiting.results[name] = TopicResult(name, int(error.code), error.message)
                continue
            if request.validate_only:
                waiting.results[name] = TopicResult(name, 0, "")
            else:
                changes.append((name, set_configs, deleted))
        self._waiting.append(waiting)
        for name, set_configs, deleted in changes:
            self._propose(AlterTopicConfigs(name, set_configs, frozenset(deleted)),
                          functools.partial(self._committed, waiting, name))
        self._settle_waiting(state)


def _check_topic_resource(resource_type: int) -> None:
    if resource_type != ConfigResourceType.TOPIC:
        raise ZlogError(
            ErrorCode.INVALID_REQUEST,
            f"zlog keeps configs for topics only (resource type "
            f"{int(ConfigResourceType.TOPIC)}), not for resource type {resource_type}",
        )


def _config_changes(
    configs: Iterable[AlterableConfig],
) -> tuple[dict[str, str], list[str]]:
    """(configs to set, configs to delete) from one resource's operations."""
    set_configs: dict[str, str] = {}
    deleted: list[str] = []
    seen: set[str] = set()
    for config in configs:
        if config.name in seen:
            raise ZlogError(ErrorCode.INVALID_REQUEST, f"{config.name} is named twice")
        seen.add(config.name)
        if config.config_operation == AlterConfigOp.SET:
            if config.value is None:
                raise ZlogError(ErrorCode.INVALID_CONFIG,
                                f"{config.name}: SET needs a value (DELETE resets to the default)")
            set_configs[config.name] = config.value
        elif config.config_operation == AlterConfigOp.DELETE:
            deleted.append(config.name)
        elif config.config_operation in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
            operation = AlterConfigOp(config.config_operation).name
            raise ZlogError(ErrorCode.INVALID_CONFIG,
                            f"{config.name}: {operation} applies to list configs; use SET (0)")
        else:
            raise ZlogError(ErrorCode.INVALID_REQUEST,
                            f"{config.name}: unknown config operation {config.config_operation}; "
                            "SET (0), DELETE (1), APPEND (2) and SUBTRACT (3) exist")
    return set_configs, deleted


def _racks(state: ClusterState) -> dict[int, str]:
    """Each registered broker's rack, as placement reads it."""
    return {node_id: broker.rack for node_id, broker in state.brokers.items()}
