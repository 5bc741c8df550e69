"""This supervisor's part in the cluster, in one place for the supervisor to drive.

* As a broker (every supervisor): its registration and heartbeats with the controller
  (`broker_lifecycle.py`), its workers' ISR changes taken to the controller, and what each of
  its workers should hold, derived from the metadata (`desired_partitions`): each replica's
  worker, role, leader epoch, ISR, and, for a follower, where its leader's worker listens.
* As the controller (the supervisor whose metadata-log node leads, caught up):
  `controller/service.py`, which answers the brokers' registration, heartbeat and
  AlterPartition requests that reach this control endpoint. Another supervisor answers them
  NOT_CONTROLLER with the controller it knows of.
* For brokers started with `--join` (`raft_join.py`): their AddRaftLearner request, which the
  controller answers by adding them to the metadata log as learners (docs/raft.md §4.16),
  and, for such a broker itself, asking for that until its copy of the log names it.
* For clients: a request that changes the metadata (CreateTopics, DeleteTopics,
  CreatePartitions, IncrementalAlterConfigs, InitProducerId) reaching a supervisor that is
  not the controller is forwarded to the controller and its answer passed back (as KIP-590
  does), so any broker's control endpoint serves every request. DescribeCluster goes too:
  only the metadata log's leader knows how far each voter's copy reaches. With no controller
  known it is NOT_CONTROLLER, which clients retry elsewhere.

A single node runs the same code: it is its own controller, and registers and heartbeats to
itself over its own control endpoint.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import zmq

from zlog.broker.config import BrokerConfig
from zlog.broker.control.broker_lifecycle import BrokerLifecycle, Identity
from zlog.broker.control.controller.broker_probes import BrokerProbes
from zlog.broker.control.controller.decisions import liveness
from zlog.broker.control.controller.service import (
    Answer,
    ControllerService,
    ControllerSettings,
)
from zlog.broker.control.controller_link import ControllerLink
from zlog.broker.control.disk_budget import NO_SHARE, broker_shares_bytes
from zlog.broker.control.metadata.commands import Propose
from zlog.broker.control.metadata.log import LearnerAdded
from zlog.broker.control.metadata.state import ClusterState
from zlog.broker.control.raft_join import RaftJoin
from zlog.broker.control.workers.pool import DesiredPartition
from zlog.broker.topic_configs import effective_topic_configs
from zlog.broker.worker_protocol import AlterIsr
from zlog.errors import ErrorCode, ZlogError
from zlog.raft.messages import DIR_ID_BYTES
from zlog.raft.status import NodeStatus
from zlog.shm_segments.durable_files import replace_durably
from zlog.transport.messages import (
    Request,
    Response,
)
from zlog.transport.messages.admin import (
    CreatePartitionsRequestV0,
    CreateTopicsRequestV0,
    DeleteTopicsRequestV0,
    DescribeClusterRequestV0,
    ElectLeadersRequestV0,
    ElectLeadersResponseV0,
    IncrementalAlterConfigsRequestV0,
    InitProducerIdRequestV0,
)
from zlog.transport.messages.cluster import (
    AddRaftLearnerRequestV0,
    AddRaftLearnerResponseV0,
    AlterPartitionRequestV0,
    AlterPartitionResponseV0,
    BrokerHeartbeatRequestV0,
    BrokerHeartbeatResponseV0,
    BrokerRegistrationRequestV0,
    BrokerRegistrationResponseV0,
)
from zlog.transport.messages.reassignment import (
    AlterPartitionReassignmentsRequestV0,
    ListPartitionReassignmentsRequestV0,
    UnregisterBrokerRequestV0,
)
from zlog.transport.messages.security import AlterSecurityRequestV0
from zlog.transport.rpc import RpcResult
from zlog.types import TopicPartition

log = logging.getLogger(__name__)

META_FILE: Final = "meta.json"  # the data directory's identity: its node and its own id
CONTROLLER_APIS: Final = (BrokerRegistrationRequestV0, BrokerHeartbeatRequestV0,
                          AlterPartitionRequestV0)
FORWARDED_APIS: Final = (CreateTopicsRequestV0, DeleteTopicsRequestV0,
                         CreatePartitionsRequestV0, ElectLeadersRequestV0,
                         IncrementalAlterConfigsRequestV0, InitProducerIdRequestV0,
                         AlterPartitionReassignmentsRequestV0,
                         ListPartitionReassignmentsRequestV0,
                         UnregisterBrokerRequestV0,
                         DescribeClusterRequestV0,  # for the voters' progress
                         AddRaftLearnerRequestV0,  # only the metadata log's leader adds one
                         AlterSecurityRequestV0)
FORWARD_TIMEOUT_MS: Final = 30_000  # as long as the controller may take to settle one

Forwarded = Callable[[Response | None, ZlogError | None], None]
AddLearner = Callable[[int, str, LearnerAdded], None]


class DataDirError(Exception):
    """The data directory belongs to another node."""


def data_dir_identity(data_dir: Path, node_id: int) -> str:
    """The directory's id, made once (uuid4) and kept in `meta.json` with the node id: a new
    id means a new (wiped) disk, which must catch up before it counts as a replica again."""
    path = data_dir / META_FILE
    try:
        meta = json.loads(path.read_text())
    except FileNotFoundError:
        meta = {"node_id": node_id, "dir_id": uuid.uuid4().hex}
        replace_durably(path, (json.dumps(meta) + "\n").encode())
    except (OSError, ValueError) as error:
        raise DataDirError(f"{path} is unreadable: {error}") from None
    if meta.get("node_id") != node_id:
        raise DataDirError(f"data dir {data_dir} belongs to node {meta.get('node_id')}, "
                           f"not {node_id}")
    dir_id = str(meta.get("dir_id", ""))
    if len(dir_id) != 2 * DIR_ID_BYTES or dir_id.strip("0123456789abcdef"):
        raise DataDirError(f"{path} holds no valid dir_id (32 lowercase hex digits)")
    return dir_id


class ClusterNode:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        state: Callable[[], ClusterState],
        raft_status: Callable[[], NodeStatus | None],
        propose: Propose,
        control_endpoint: str,
        worker_endpoints: Callable[[], tuple[str, ...]],
        worker_kafka_endpoints: Callable[[], tuple[str, ...]] = tuple,
        dir_id: str,
        context: zmq.Context[Any],
        leader_unreachable: Callable[[int], None] = lambda leader: None,
        add_learner: AddLearner | None = None,
        add_peers: Callable[[Mapping[int, str]], None] | None = None,
    ) -> None:
        self.config = config
        self.node_id = config.node_id
        self._state = state
        self._raft_status = raft_status
        self.control_endpoint = control_endpoint  # as others reach it
        self.controller = ControllerService(
            config.node_id,
            ControllerSettings(config.broker_session_timeout_ms,
                               config.leader_imbalance_check_interval_s * 1000,
                               config.auto_leader_rebalance, config.topic_defaults_map),
            state, propose)
        self._leader_unreachable = leader_unreachable  # tells the metadata log
        self.link = ControllerLink(self.controller_endpoint, context,
                                   on_gone=self._controller_gone)
        self.probes = BrokerProbes(config.node_id, context)
        self._add_learner = add_learner
        self.join: RaftJoin | None = None
        if config.join and add_peers is not None:
            self.join = RaftJoin(config.node_id, dir_id, control_endpoint, config.join,
                                 raft_status=raft_status, add_peers=add_peers, context=context)
        self._was_ready = False
        self.lifecycle = BrokerLifecycle(
            Identity(config.node_id, uuid.uuid4().hex, config.advertised_host,
                     control_endpoint, config.workers, config.rack, dir_id),
            heartbeat_interval_ms=config.broker_heartbeat_interval_ms,
            session_timeout_ms=config.broker_session_timeout_ms,
            lease_margin_ms=config.lease_margin_ms,
            link=self.link, worker_endpoints=worker_endpoints,
            worker_kafka_endpoints=worker_kafka_endpoints)

    # -- the loop's part --------------------------------------------------------------------

    def sockets(self) -> tuple[zmq.Socket[bytes], ...]:
        return (self.link.sockets() + self.probes.sockets()
                + (self.join.sockets() if self.join is not None else ()))

    def turn(self, now_ms: int) -> None:
        self.link.run()
        if self.join is not None:
            self.join.run(now_ms)
        self.controller.set_active(self._leads_caught_up(), now_ms)
        if self.controller.active:
            self.probes.run({node_id: broker.control_endpoint
                             for node_id, broker in self._state().brokers.items()}, now_ms)
            self.controller.set_unreachable(self.probes.down_since_ms(), self.probes.refused())
        else:
            self.probes.close()
        self.controller.tick(now_ms)
        self.lifecycle.run(now_ms)

    def close(self) -> None:
        self.link.close()
        self.probes.close()
        if self.join is not None:
            self.join.close()

    def ready(self) -> bool:
        """Registered, and this node's copy of the metadata holds that registration: until
        then it may be behind the cluster's (a restarted broker replays an old copy first),
        and nothing is answered or placed from it."""
        if not self.lifecycle.registered:
            return False
        broker = self._state().brokers.get(self.node_id)
        ready = broker is not None and broker.broker_epoch >= self.lifecycle.broker_epoch
        self._was_ready = self._was_ready or ready
        return ready

    def serves_clients(self) -> bool:
        """Ready once: a later re-registration (a session lost and renewed) does not hold
        clients' requests again, its metadata being no older than when it was ready."""
        return self._was_ready or self.ready()

    def _leads_caught_up(self) -> bool:
        status = self._raft_status()
        return (status is not None and status.leader == self.node_id
                and status.role == "leader" and status.applied == status.commit
                and status.commit.term == status.term)

    def controller_id(self) -> int:
        status = self._raft_status()
        return -1 if status is None or status.leader is None else status.leader

    def controller_endpoint(self) -> str | None:
        """Where the controller's control endpoint is, as this broker knows now."""
        leader = self.controller_id()
        if leader < 0:
            return None
        if leader == self.node_id:
            return self.control_endpoint
        voter = self.config.voter_map.get(leader)
        if voter is not None:
            return voter
        broker = self._state().brokers.get(leader)
        return None if broker is None else broker.control_endpoint

    def _controller_gone(self, endpoint: str) -> None:
        """The controller's port refused a connection: its process, this node's Raft leader,
        is gone, and the metadata log may elect another at once."""
        leader = self.controller_id()
        if leader >= 0 and leader != self.node_id and self.controller_endpoint() == endpoint:
            log.info("the controller (node %d) at %s is gone: electing another", leader,
                     endpoint)
            self._leader_unreachable(leader)

    # -- clients' metadata changes ------------------------------------------------------------

    def forwards(self, request: Request) -> bool:
        """Whether `request` goes to the controller rather than being served here: it changes
        the metadata and another node leads the metadata log (or none does yet)."""
        return isinstance(request, FORWARDED_APIS) and self.controller_id() != self.node_id

    def forward(self, request: Request, done: Forwarded) -> None:
        """Send `request` on to the controller; `done(response, error)` hears its answer."""
        if self.controller_id() < 0:
            raise ZlogError(ErrorCode.NOT_CONTROLLER, "the metadata log is electing a leader")

        def answered(result: RpcResult) -> None:
            done(result.response, result.error)

        if not self.link.send(request, FORWARD_TIMEOUT_MS, answered):
            raise ZlogError(ErrorCode.NOT_CONTROLLER,
                            f"cannot reach the controller: {self.link.last_error}")

    def elect_leaders(self, answer: Answer) -> None:
        """ElectLeaders reaching the controller (forwarded here by any other broker)."""
        if not self.controller.active:
            answer(ElectLeadersResponseV0(int(ErrorCode.NOT_CONTROLLER),
                                               "this node is not the controller"))
            return
        self.controller.elect_preferred(answer)

    def add_learner(self, request: AddRaftLearnerRequestV0, answer: Answer) -> None:
        """AddRaftLearner reaching the controller (forwarded here by any other broker)."""
        def refused(code: ErrorCode, text: str) -> None:
            answer(AddRaftLearnerResponseV0(int(code), text, self.controller_id()))

        if not self.controller.active or self._add_learner is None:
            refused(ErrorCode.NOT_CONTROLLER, "this node is not the controller")
            return
        if request.node_id < 0 or not request.raft_endpoint.startswith("tcp://"):
            refused(ErrorCode.INVALID_REQUEST,
                    "a learner needs a node id >= 0 and a tcp:// Raft endpoint")
            return

        def added(members: tuple[str, ...] | None, error: ZlogError | None) -> None:
            if error is not None:
                refused(error.code, error.message)
            else:
                answer(AddRaftLearnerResponseV0(int(ErrorCode.NONE), "", self.node_id,
                                                members or ()))

        self._add_learner(request.node_id, request.raft_endpoint, added)

    # -- the controller's requests ----------------------------------------------------------

    def handle(self, request: Request, answer: Answer, now_ms: int) -> None:
        """A BrokerRegistration, BrokerHeartbeat or AlterPartition that reached this node.
        Whether this node is the controller is asked now, not at the last turn: after a
        stalled loop its metadata-log node may have handed the controller off meanwhile,
        and the requests that waited must not be answered as by the controller."""
        self.controller.set_active(self._leads_caught_up(), now_ms)
        if not self.controller.active:
            answer(self._not_controller(request))
            return
        if isinstance(request, BrokerRegistrationRequestV0):
            self.controller.register(request, answer)
        elif isinstance(request, BrokerHeartbeatRequestV0):
            answer(self.controller.heartbeat(request, now_ms))
        elif isinstance(request, AlterPartitionRequestV0):
            self.controller.alter_partition(request, answer)

    def _not_controller(self, request: Request) -> Response:
        code, text, known = int(ErrorCode.NOT_CONTROLLER), "this node is not the controller", \
            self.controller_id()
        if isinstance(request, BrokerRegistrationRequestV0):
            return BrokerRegistrationResponseV0(code, text, "", -1, known)
        if isinstance(request, BrokerHeartbeatRequestV0):
            return BrokerHeartbeatResponseV0(code, text, False, False, known)
        return AlterPartitionResponseV0(code, text, known)

    # -- this broker's workers ----------------------------------------------------------------

    def alter_isr(self, message: AlterIsr, done: Callable[[int, str], None]) -> None:
        """A worker's ISR change, to the controller under this broker's current epoch."""
        if not self.lifecycle.registered:
            done(int(ErrorCode.BROKER_NOT_AVAILABLE), "this broker is not registered yet")
            return
        self.lifecycle.alter_isr(AlterPartitionRequestV0(
            self.node_id, self.lifecycle.broker_epoch, message.topic, message.partition,
            message.leader_epoch, message.partition_epoch, message.new_isr,
            dict(message.member_epochs)), done)

    def desired_partitions(
        self, state: ClusterState, topic_defaults: Mapping[str, str], disk_bytes: int
    ) -> dict[TopicPartition, DesiredPartition]:
        """What this broker's workers should hold: every replica placed here, with its role and
        its share of its topic's disk budget (`disk_bytes`: the size of the data disk)."""
        node_id = self.node_id
        shares = broker_shares_bytes(state.topics.values(), node_id, topic_defaults, disk_bytes)
        usable = liveness(state).usable
        desired: dict[TopicPartition, DesiredPartition] = {}
        for topic in state.topics.values():
            configs = effective_topic_configs(topic_defaults, topic.configs)
            for partition in topic.partitions:
                if node_id not in partition.replicas:
                    continue
                leader = partition.leader
                leader_endpoint = ""
                if leader >= 0 and leader != node_id and leader in state.brokers:
                    leader_endpoint = state.brokers[leader].worker_endpoint(
                        partition.worker_of(leader))
                desired[TopicPartition(topic.name, partition.partition)] = DesiredPartition(
                    configs, partition.leader_epoch, leader == node_id,
                    worker=partition.worker_of(node_id), broker_id=node_id,
                    broker_epoch=self.lifecycle.broker_epoch, leader=leader,
                    partition_epoch=partition.partition_epoch, replicas=partition.replicas,
                    isr=partition.isr, leader_endpoint=leader_endpoint,
                    disk_share_bytes=shares.get(topic.name, NO_SHARE), topic_id=topic.topic_id,
                    ineligible=tuple(r for r in partition.replicas if r not in usable)
                    if leader == node_id else ())
        return desired
