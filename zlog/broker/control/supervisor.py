"""The supervisor: one per host. Control endpoint, metadata log, worker processes, systemd.

DESIGN.md §1: the supervisor runs the control plane and never sits on the data path. It

* runs a Chained-Raft node (`metadata/log.py`: this node alone, or one of the `voters`) whose
  state machine is `metadata/state_machine.py`; every topic and cluster change is a committed
  command (`metadata/commands.py`), so the metadata survives restarts (`<data_dir>/__raft/`);
* takes its part in the cluster (`cluster_node.py`): registers with the controller and
  heartbeats, and, while its Raft node leads, is the controller; until it registered and its
  metadata holds that registration it holds no partitions and keeps clients' requests waiting
  (its metadata may be behind until then);
* forks the partition workers (`workers/pool.py`), restarts those that die, and keeps each of this
  host's replicas open on the worker the metadata placed it on, as leader or follower;
* answers the control ROUTER (docs/protocol.md, "Control plane"): ApiVersions, Metadata,
  CreateTopics, DeleteTopics, InitProducerId, DescribeConfigs, IncrementalAlterConfigs,
  DescribeCluster, and the brokers' BrokerRegistration, BrokerHeartbeat and AlterPartition;
  metadata changes reaching a broker that is not the controller are forwarded to it;
* on SIGTERM in a cluster, first has the controller move its leaderships away (a controlled
  shutdown), then stops;
* tells systemd READY=1 once serving, WATCHDOG=1 from its loop, STOPPING=1 on the way out.

Threads: the loop below owns every socket and every piece of mutable state here. The Raft
runner applies commands on its own thread; `MetadataLog` only queues each proposal's
completion there and wakes the loop through a pipe. The loop reads the
metadata through `MetadataStateMachine.state`, an immutable snapshot swapped in by each apply.

The requests themselves are `control_plane.py`'s and `cluster_node.py`'s (no sockets there);
this module decodes frames, routes them, and sends the replies. Bad requests get error
replies; nothing a client sends can make the loop raise.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import resource
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import zmq

import zlog
from zlog import limits
from zlog.broker.config import BrokerConfig
from zlog.broker.control.cluster_node import (
    CONTROLLER_APIS,
    ClusterNode,
    DataDirError,
    data_dir_identity,
)
from zlog.broker.control.control_plane import ControlPlane, HostStorage
from zlog.broker.control.kafka_gateway_process import KafkaGatewayError, KafkaGatewayProcess
from zlog.broker.control.loop_view import LoopView, MetadataChanges, WorkerView, listen_port
from zlog.broker.control.loop_watch import LoopWatch
from zlog.broker.control.metadata.commands import (
    Command,
    Done,
    Result,
    TopicDeleted,
)
from zlog.broker.control.metadata.log import MetadataLog
from zlog.broker.control.metadata.state import ClusterState
from zlog.broker.control.metadata.state_machine import MetadataStateMachine
from zlog.broker.control.stray_partitions import stray_partitions
from zlog.broker.control.supervisor_metrics import SupervisorMetrics
from zlog.broker.control.workers.offline_leaderships import resignations
from zlog.broker.control.workers.pool import WorkerPool, WorkerSettings
from zlog.broker.kafka_port_settings import worker_kafka_options
from zlog.broker.log_lines import log_failure
from zlog.broker.request_acls import check_request
from zlog.broker.sdnotify import SystemdNotifier
from zlog.broker.supervisor_lifeline import Lifeline
from zlog.broker.worker_protocol import AlterIsr, GroupSettings, SecuritySettings
from zlog.clock import monotonic_ms
from zlog.errors import ErrorCode, ZlogError, for_code
from zlog.groups.partitioning import OFFSETS_TOPIC
from zlog.kafka.tls import server_context
from zlog.shm_segments.log import FILE_NAME_BYTES_MAX, default_ring_dir, ring_path_for
from zlog.shm_segments.partition_metadata import read_topic_id
from zlog.transport import curve
from zlog.transport.api import CONTROL_APIS
from zlog.transport.codec import (
    RequestHeader,
    encode_error_response,
    encode_response,
)
from zlog.transport.curve import principal_of
from zlog.transport.curve_keys import broker_security
from zlog.transport.messages import (
    Request,
    Response,
)
from zlog.transport.messages.admin import (
    ApiVersionsRequestV0,
    CreateTopicsRequestV0,
    CreateTopicsResponseV0,
    ElectLeadersRequestV0,
    TopicSpec,
)
from zlog.transport.messages.cluster import AddRaftLearnerRequestV0
from zlog.transport.messages.groups import FindCoordinatorRequestV0
from zlog.transport.messages.security import ANONYMOUS
from zlog.transport.server import Reply, RequestPath, ServerStats
from zlog.transport.sockets import make_router, recv_routed, send_routed, sync_polled
from zlog.transport.wire import Buffer
from zlog.types import TopicPartition

log = logging.getLogger("zlog.broker.control.supervisor")

CONTROL_REQUEST_PATH: Final = RequestPath(
    apis=CONTROL_APIS,
    served_elsewhere="the partition workers, not here",
    internal_error_message="internal error in the supervisor; see its log",
    log=log,
    crash_on_assertion=False,  # one broken request must not take the host's broker down
)

RECONCILE_INTERVAL_MS: Final = 1_000  # re-check assignments even when nothing signalled
LOOP_POLL_MS_MAX: Final = 100  # the loop wakes at least this often (checks, deadlines)
CONTROL_CLOSE_LINGER_MS: Final = 200  # how long the last replies may take to leave on stop
OPEN_FILES_TARGET: Final = 1_048_576  # the soft limit asked for when the hard one is unlimited
OPEN_FILES_WARN_BELOW: Final = 4_096
LOCK_FILE: Final = ".zlog.lock"
HELD_REQUEST_TIMEOUT_MS: Final = 10_000  # a request held before registration, at most
UNREGISTERED_WARN_INTERVAL_MS: Final = 5_000  # how often a broker not yet registered says why


@dataclass(frozen=True, slots=True)
class _Held:
    """A client's request that arrived before this broker registered."""

    identity: bytes
    header: RequestHeader
    request: Request
    deadline_ms: int
    principal: str = ANONYMOUS


class StartupError(Exception):
    """The broker cannot start (data dir in use, address taken, metadata log unavailable)."""


def raise_open_files_limit() -> int:
    """Lift the soft limit on open files to the hard one (workers inherit it); the result.

    Every partition holds a few descriptors (segment, ring, their mappings) and every client a
    socket, so the usual soft limit of 1024 runs out at a few hundred partitions while the
    hard limit allows far more (the JVM does the same for Kafka). A partition that still
    cannot be opened fails alone, with the reason, and is tried again later.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = OPEN_FILES_TARGET if hard == resource.RLIM_INFINITY else hard
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, target), hard))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft < OPEN_FILES_WARN_BELOW:
        log.warning("only %d open files allowed (ulimit -n): each partition needs a few", soft)
    return int(soft)


class Supervisor:
    """One broker host's control plane. `start()`, then `serve()` until `request_stop()`."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        notifier: SystemdNotifier | None = None,
        worker_module: str = "zlog.broker.data.worker",
    ) -> None:
        self.config = config
        self.data_dir = config.data_dir.resolve()
        self.ring_dir = (config.ring_dir or default_ring_dir(self.data_dir)).resolve()
        self.notifier = notifier or SystemdNotifier({})
        self.worker_module = worker_module
        self.fsm = MetadataStateMachine()
        self.control_endpoint = ""
        self.request_stats = ServerStats()
        self._context: zmq.Context[Any] = zmq.Context.instance()
        self._stop_requested = False
        self._serving = False
        self._startup_failure: str | None = None
        self._lock_fd: int | None = None
        self._metadata_log: MetadataLog | None = None
        self._pool: WorkerPool | None = None
        self._cluster: ClusterNode | None = None
        self._metrics: SupervisorMetrics | None = None
        self._polled_cluster_sockets: set[zmq.Socket[bytes]] = set()
        self._polled_exit_fd: int | None = None
        self._stop_deadline_ms: int | None = None  # a controlled shutdown's end
        self._next_unregistered_warning_ms = 0
        self._held: list[_Held] = []
        self._control_socket: zmq.Socket[Any] | None = None
        self.kafka_gateway: KafkaGatewayProcess | None = None
        self._wake_read_fd, self._wake_write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._lifeline = Lifeline()  # before any socket (supervisor_lifeline.py)
        self._seen_state: ClusterState | None = None
        self._next_reconcile_ms = 0
        self._finishing_deletes: set[str] = set()
        self._resigning: set[tuple[str, int, int]] = set()  # (topic, partition, its epoch)
        self.control = ControlPlane(
            config,
            state=lambda: self.fsm.state,
            propose=self._propose,
            reply=self._reply,
            endpoint_for=self._endpoint_for,
            applied_configs=self._applied_configs,
            raft_status=lambda: None if self._metadata_log is None else self._metadata_log.status(),
            clock_ms=monotonic_ms,
            ring_path_for=self._ring_path_for,
            kafka_endpoint_for=self._kafka_endpoint_for,
            ring_dir=str(self.ring_dir),
            host_storage=self._host_storage,
            create_at_controller=self._create_at_controller,
        )
        self._started_ms = 0
        self._next_watchdog_ms = 0
        self._loop_watch = LoopWatch(config.controller_stall_timeout_effective_ms, monotonic_ms())

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Lock the data dir, bind, start the workers and the metadata log; registration with
        the controller follows from the loop."""
        self._started_ms = monotonic_ms()
        raise_open_files_limit()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock_data_dir()
        config = self.config
        try:
            dir_id = data_dir_identity(self.data_dir, config.node_id)
        except DataDirError as error:
            raise StartupError(str(error)) from None
        keys_dir = config.security_keys_dir if config.security else None
        if keys_dir is not None:  # before the first socket: none is ever made in the clear
            try:
                curve.install(broker_security(keys_dir, config.security_principal,
                                              config.super_users))
            except ZlogError as error:
                raise StartupError(error.message) from None
        try:
            self._control_socket, self.control_endpoint = make_router(
                config.listen, context=self._context
            )
        except zmq.ZMQError as error:
            raise StartupError(f"cannot listen on {config.listen}: {error}") from None
        self._lifeline.bracket()
        self._metrics = SupervisorMetrics.start(config.metrics_listen, ring_dir=self.ring_dir,
                                                data_dir=self.data_dir, workers=config.workers,
                                                now_ms=monotonic_ms())
        if self._metrics is not None:
            self.request_stats.observe = self._metrics.observe_control
        if config.kafka_listen and config.security and config.kafka_tls_cert_file is None:
            # Security promises encrypted and authenticated: no SASL_PLAINTEXT (docs/security.md).
            log.warning("security is on and kafka_tls_cert_file is not set: no Kafka listener "
                        "(kafka_listen %s ignored; it speaks SASL_SSL only)", config.kafka_listen)
        elif config.kafka_listen:
            if config.security:
                try:  # a certificate that cannot be used stops the start, saying which
                    assert config.kafka_tls_cert_file and config.kafka_tls_key_file
                    server_context(config.kafka_tls_cert_file, config.kafka_tls_key_file,
                                   config.kafka_tls_ca_file)
                except ZlogError as error:
                    raise StartupError(error.message) from None
            self.kafka_gateway = KafkaGatewayProcess(config, self.control_endpoint,
                                                     self._lifeline.read_fds)
            try:
                self.kafka_gateway.start()
            except KafkaGatewayError as error:
                raise StartupError(str(error)) from None
        self._pool = WorkerPool(
            WorkerSettings(
                count=config.workers, data_dir=self.data_dir, ring_dir=self.ring_dir,
                host=config.advertised_host, bind_host=config.data_bind_host,
                port_range=config.data_port_range,
                log_level=config.log_level, log_format=config.log_format,
                log_levels=config.log_levels,
                heartbeat_timeout_ms=config.worker_heartbeat_timeout_ms,
                backoff_initial_ms=config.worker_restart_backoff_initial_ms,
                backoff_max_ms=config.worker_restart_backoff_max_ms,
                worker_module=self.worker_module,
                ring_bytes=config.ring_bytes, ring_flush_bytes=config.ring_flush_bytes,
                replica=config.replica_settings, lifeline_fds=self._lifeline.read_fds,
                metrics=self._metrics is not None,
                security_keys_dir=keys_dir, security_principal=config.security_principal,
                kafka=(None if self.kafka_gateway is None else
                       worker_kafka_options(config, self.kafka_gateway.local_address)),
            ),
            self._context,
            on_assigned=self.control.partition_assigned,
            on_alter_isr=self._alter_isr,
        )
        self._pool.start_all()  # workers boot while the metadata log elects and replays
        self._loop_watch.turned(monotonic_ms())  # the loop starts right after
        try:
            self._metadata_log = MetadataLog(
                config.node_id, self.data_dir, self.fsm, tick_ms=config.raft_tick_ms,
                wake=self._wake, context=self._context, voters=config.voter_map,
                listen=config.listen, dir_id=bytes.fromhex(dir_id), join=bool(config.join),
                may_lead=self._loop_turns,
            )
            self._metadata_log.start()
        except zmq.ZMQError as error:
            raise StartupError(f"cannot start the metadata log: {error}") from None
        self._cluster = ClusterNode(
            config, state=lambda: self.fsm.state, raft_status=self._metadata_log.status,
            propose=self._propose, control_endpoint=self._advertised_control(),
            worker_endpoints=self._pool.worker_endpoints, dir_id=dir_id,
            worker_kafka_endpoints=self._pool.worker_kafka_endpoints,
            context=self._context, add_learner=self._metadata_log.add_learner,
            add_peers=self._metadata_log.add_peers,
            leader_unreachable=self._metadata_log.leader_unreachable,
        )

    def _lock_data_dir(self) -> None:
        """One broker per data dir: two would both write the same partitions and Raft log."""
        fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise StartupError(
                f"data dir {self.data_dir} is in use by another zlog serve (pid {holder})"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def _advertised_control(self) -> str:
        """The control endpoint as clients elsewhere must spell it."""
        if self.config.advertised_listener:
            return self.config.advertised_listener
        endpoint = self.control_endpoint
        for wildcard in ("tcp://0.0.0.0:", "tcp://*:", "tcp://[::]:"):
            if endpoint.startswith(wildcard):
                return f"tcp://{self.config.advertised_host}:{endpoint[len(wildcard):]}"
        return endpoint

    def request_stop(self) -> None:
        """Safe from a signal handler: the loop notices at its next turn."""
        self._stop_requested = True
        self._wake()

    def _loop_turns(self) -> bool:
        """On the Raft thread: whether this loop, where the controller works, turns."""
        return not self._loop_watch.stalled(monotonic_ms())

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_write_fd, b"\x01")

    def serve(self) -> int:
        """The loop, until request_stop(); then a graceful shutdown. Never raises on input.

        Returns the exit status: 0 after a stop that was asked for, 1 when the workers could
        not start at all (a broker that never serves must not look like one that does).
        """
        assert self._control_socket is not None and self._pool is not None
        poller = zmq.Poller()
        poller.register(self._control_socket, zmq.POLLIN)
        poller.register(self._pool.router, zmq.POLLIN)
        poller.register(self._wake_read_fd, zmq.POLLIN)
        while not self._may_stop():
            try:
                self._sync_poller(poller)
                poller.poll(self._poll_timeout_ms())
                self._turn()
            except Exception as error:  # a bug or a disk, not input: log it, keep serving
                log_failure(log, error, "supervisor loop turn failed")
        self._shut_down()
        return 0 if self._startup_failure is None else 1

    def _sync_poller(self, poller: zmq.Poller) -> None:
        """Poll the cluster node's connection to the controller, which follows the controller,
        and the worker fork server's socket, which reports a worker's death at once."""
        self._polled_cluster_sockets = sync_polled(
            poller, self._polled_cluster_sockets,
            self._cluster.sockets() if self._cluster is not None else ())
        assert self._pool is not None
        exit_fd = self._pool.exit_fd()
        if exit_fd != self._polled_exit_fd:
            if self._polled_exit_fd is not None:
                poller.unregister(self._polled_exit_fd)
            if exit_fd is not None:
                poller.register(exit_fd, zmq.POLLIN)
            self._polled_exit_fd = exit_fd

    def _may_stop(self) -> bool:
        """After a stop was asked for: at once, or (a broker of a cluster, serving) once the
        controller moved its leaderships to the other in-sync replicas (a controlled
        shutdown, so clients never wait out a session timeout), or when that takes too long."""
        if not self._stop_requested:
            return False
        cluster = self._cluster
        if (cluster is None or not self.config.clustered or not self._serving
                or not self.config.controlled_shutdown_enable
                or self._startup_failure is not None or not cluster.lifecycle.registered):
            return True
        now_ms = monotonic_ms()
        if self._stop_deadline_ms is None:
            log.info("controlled shutdown: asking the controller to move this broker's "
                     "leaderships")
            self._stop_deadline_ms = now_ms + self.config.controlled_shutdown_timeout_ms
            cluster.lifecycle.want_shutdown = True
        if cluster.lifecycle.shutdown_ready:
            log.info("controlled shutdown: leaderships moved")
            return True
        silent_ms = now_ms - cluster.lifecycle.last_answer_ms
        if cluster.controller_id() < 0 or silent_ms > self.config.broker_session_timeout_ms:
            log.warning("controlled shutdown: no controller answers (the metadata log has no "
                        "quorum?); stopping without moving leaderships")
            return True
        if now_ms >= self._stop_deadline_ms:
            log.warning("controlled shutdown did not finish within %d ms: stopping anyway",
                        self.config.controlled_shutdown_timeout_ms)
            return True
        return False

    def _poll_timeout_ms(self) -> int:
        timeout_ms = LOOP_POLL_MS_MAX
        if self.notifier.watchdog_interval_ms is not None:
            timeout_ms = min(timeout_ms, max(0, self._next_watchdog_ms - monotonic_ms()))
        return timeout_ms

    def _turn(self) -> None:
        assert self._pool is not None
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_read_fd, 4096):
                pass
        if self._metadata_log is not None:
            self._metadata_log.run_completions()
        now_ms = monotonic_ms()
        self._loop_watch.turned(now_ms)
        self._pool.receive(now_ms)
        self._receive_control()
        if self._cluster is not None:
            self._cluster.turn(now_ms)
            if self.config.clustered:
                self._pool.set_lease(self._cluster.lifecycle.lease_until_ms)
        self._release_held(now_ms)
        self._pool.check(now_ms)
        if self.kafka_gateway is not None:
            self.kafka_gateway.check(now_ms)
        state = self.fsm.state
        due = (state is not self._seen_state or self._pool.changed
               or now_ms >= self._next_reconcile_ms)
        if due and self._registered(now_ms):
            self._seen_state = state
            self._reconcile(state, now_ms)
            self._next_reconcile_ms = now_ms + RECONCILE_INTERVAL_MS
            self.control.settle()
        self.control.expire(now_ms)
        if not self._serving:
            self._maybe_ready(now_ms)
        if self.notifier.watchdog_interval_ms is not None and now_ms >= self._next_watchdog_ms:
            self.notifier.watchdog()
            self._next_watchdog_ms = now_ms + self.notifier.watchdog_interval_ms
        if self._metrics is not None:
            self._metrics.publish(now_ms, self._loop_view, serving=self._serving)

    def _loop_view(self, changes: MetadataChanges) -> LoopView:
        """What the metrics endpoint shows of this loop (supervisor_metrics.py)."""
        assert self._pool is not None
        state = self.fsm.state
        raft = None if self._metadata_log is None else self._metadata_log.status()
        changes.observe(state, raft)
        registration = state.brokers.get(self.config.node_id)
        cluster = self._cluster
        why = ("not registered with the controller (none elected yet?), or its metadata "
               "not caught up" if cluster is None or not cluster.ready()
               else "fenced by the controller" if registration is None or registration.fenced
               else "starting: the workers are not all serving yet" if not self._serving
               else "stopping" if self._stop_requested else "")
        ports = [listen_port(self.control_endpoint)]
        ports += [listen_port(worker.endpoint) for worker in self._pool.workers]
        return LoopView(
            node_id=self.config.node_id, serving=self._serving, ready=not why,
            not_ready_why=why, state=state, raft=raft,
            workers=tuple(WorkerView(worker.worker_id, worker.state.value, worker.restarts,
                                     worker.endpoint) for worker in self._pool.workers),
            ports=tuple(port for port in ports if port is not None),
            raft_leader_changes=changes.raft_leader_changes,
            leader_elections=changes.leader_elections, isr_shrinks=changes.isr_shrinks,
            isr_expands=changes.isr_expands,
        )

    def _maybe_ready(self, now_ms: int) -> None:
        """READY=1, with a banner, once the workers serve: every one said hello and answered
        for each partition placed on it (opened, or failed with a reason clients are told).

        Workers that cannot start at all (each dies before its first hello, again and again)
        stop the broker with status 1 instead: a READY that means nothing would hide that.
        """
        assert self._pool is not None
        failure = self._pool.startup_failure()
        if failure is not None:
            log.error("cannot start: %s", failure)
            self._startup_failure = failure
            self.request_stop()
            return
        if not self._registered(now_ms) or not self._pool.settled():
            return
        self._serving = True
        workers = ", ".join(
            f"{worker.worker_id}={worker.endpoint or worker.state.value}"
            for worker in self._pool.workers
        )
        banner = (f"zlog {zlog.__version__} serving: control {self.control_endpoint}, "
                  f"data dir {self.data_dir}, workers {workers}")
        print(banner, flush=True)
        log.info("ready in %d ms", now_ms - self._started_ms)
        self.notifier.ready(f"serving on {self.control_endpoint}")

    def _registered(self, now_ms: int) -> bool:
        """Whether this broker is registered with the controller and its metadata holds that
        registration: until then it holds no partitions (it may have been replaced in their
        ISRs meanwhile, and its copy of the metadata may be old) and is not ready."""
        cluster = self._cluster
        if cluster is not None and cluster.ready():
            return True
        if now_ms >= self._next_unregistered_warning_ms:
            if self._next_unregistered_warning_ms:
                why = ("no controller yet" if cluster is None
                       else "catching up with the metadata log" if cluster.lifecycle.registered
                       else cluster.lifecycle.last_error)
                log.warning("not registered with the controller yet: %s", why or "waiting")
            self._next_unregistered_warning_ms = now_ms + UNREGISTERED_WARN_INTERVAL_MS
        return False

    def _shut_down(self) -> None:
        """Stop accepting, answer what waits, stop the workers (rings flushed), stop Raft."""
        log.info("stopping")
        self.notifier.stopping("stopping")
        self._release_held(monotonic_ms())
        self.control.shut_down()
        self.close()

    def close(self) -> None:
        """Release everything; safe after a failed start()."""
        # The workers' leaderships end before the control port closes: a controller finding
        # it refused elects other leaders at once (docs/replication.md §4.1).
        self._lifeline.cut()
        if self._control_socket is not None:
            # A short linger lets the last answers (BROKER_NOT_AVAILABLE to parked requests) out.
            self._control_socket.close(linger=CONTROL_CLOSE_LINGER_MS)
            self._control_socket = None
        if self.kafka_gateway is not None:
            self.kafka_gateway.stop()
            self.kafka_gateway = None
        if self._pool is not None:
            self._pool.stop_all(self.config.shutdown_timeout_ms)
            self._pool.close()
            self._pool = None
        if self._metrics is not None:
            self._metrics.close()
            self._metrics = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
        if self._metadata_log is not None:
            self._metadata_log.stop()
            self._metadata_log = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        for fd in (self._wake_read_fd, self._wake_write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._lifeline.close()
        self.notifier.close()
        log.info("stopped")

    # -- assignments ------------------------------------------------------------------------------

    def _group_settings(self, state: ClusterState) -> GroupSettings:
        config = self.config
        return GroupSettings(
            {name: len(topic.partitions) for name, topic in sorted(state.topics.items())},
            config.group_initial_rebalance_delay_ms, config.group_min_session_timeout_ms,
            config.group_consumer_session_timeout_ms, config.group_consumer_heartbeat_interval_ms,
            config.offsets_retention_effective_ms,
            config.offsets_retention_check_interval_ms)

    def _reconcile(self, state: ClusterState, now_ms: int) -> None:
        """Tell the workers what this host serves; finish deletions whose data is gone."""
        assert self._pool is not None and self._cluster is not None
        # The disk's size, read at each reconcile: a file system grown in place gives the
        # topics' disk budgets (retention.disk.percent) more bytes without a restart.
        disk_bytes = shutil.disk_usage(self.data_dir).total
        desired = self._cluster.desired_partitions(
            state, self.config.topic_defaults_map, disk_bytes
        )
        deleting = [TopicPartition(name, index) for name, count in state.deleting.items()
                    for index in range(count)]
        strays = stray_partitions(os.listdir(self.data_dir), state, self.config.node_id,
                                  lambda name: read_topic_id(self.data_dir / name))
        self._pool.set_group_settings(self._group_settings(state))
        if self.config.security:
            self._pool.set_security_settings(SecuritySettings(
                state.security.acls, self.control.security.super_users, state.security.quotas,
                state.security.users))
        self._pool.reconcile(desired, deleting + strays, now_ms)
        self._resign_offline(state, now_ms)
        for name, count in state.deleting.items():
            done = all((name, index) in self._pool.deleted for index in range(count))
            if done and name not in self._finishing_deletes:
                self._finishing_deletes.add(name)
                self._propose(TopicDeleted(name),
                              functools.partial(self._deletion_finished, name))

    def _resign_offline(self, state: ClusterState, now_ms: int) -> None:
        """Hand the leaderships of partitions no worker here can serve to their other in-sync
        replicas (workers/offline_leaderships.py); each once per partition record."""
        assert self._pool is not None and self._cluster is not None
        offline = self._pool.offline(now_ms)
        if not offline:
            return
        for change in resignations(state, self.config.node_id, offline):
            key = (change.topic, change.partition, change.partition_epoch)
            if key in self._resigning:
                continue
            self._resigning.add(key)
            log.warning("%s-%d: no worker here can serve it: handing its leadership to ISR %s",
                        change.topic, change.partition, list(change.new_isr))
            self._cluster.alter_isr(change, functools.partial(self._resigned, key))

    def _resigned(self, key: tuple[str, int, int], code: int, text: str) -> None:
        self._resigning.discard(key)  # refused: asked again at a later reconcile if need be
        if code:
            log.warning("%s-%d: leadership not handed off: error %d %s", key[0], key[1], code,
                        text)

    def _deletion_finished(
        self, name: str, result: Result | None, error: ZlogError | None
    ) -> None:
        del result  # success or not, a later reconcile proposes again if still needed
        if error is not None:
            log.warning("could not finish deleting topic %r: %s", name, error)
        self._finishing_deletes.discard(name)

    def _host_storage(self) -> HostStorage:
        """The data dir's NAME_MAX and the ring directory's free bytes, read now."""
        try:
            name_bytes_max = int(os.pathconf(self.data_dir, "PC_NAME_MAX"))
        except (OSError, ValueError):
            name_bytes_max = FILE_NAME_BYTES_MAX
        try:
            where = self.ring_dir if self.ring_dir.exists() else self.ring_dir.parent
            ring_stat = os.statvfs(where)
            ring_free_bytes: int | None = ring_stat.f_bavail * ring_stat.f_frsize
        except OSError:
            ring_free_bytes = None
        return HostStorage(min(name_bytes_max, FILE_NAME_BYTES_MAX), ring_free_bytes)

    def _alter_isr(self, message: AlterIsr, done: Callable[[int, str], None]) -> None:
        if self._cluster is None:
            done(int(ErrorCode.BROKER_NOT_AVAILABLE), "the broker is stopping")
            return
        self._cluster.alter_isr(message, done)

    def _endpoint_for(self, topic_partition: TopicPartition) -> str | None:
        return None if self._pool is None else self._pool.endpoint_for(topic_partition)

    def _kafka_endpoint_for(self, topic_partition: TopicPartition) -> str:
        return "" if self._pool is None else self._pool.kafka_endpoint_for(topic_partition)

    def _applied_configs(self, topic_partition: TopicPartition) -> Mapping[str, str] | None:
        return None if self._pool is None else self._pool.applied_configs(topic_partition)

    def _ring_path_for(self, topic_partition: TopicPartition) -> str:
        """Where the leading worker keeps the partition's ring (for local consumers)."""
        return str(ring_path_for(self.ring_dir, *topic_partition))

    # -- proposals --------------------------------------------------------------------------------

    def _propose(self, command: Command, done: Done) -> None:
        """Propose `command`; `done(result, error)` runs later on the loop thread."""
        assert self._metadata_log is not None
        self._metadata_log.propose(command, done)

    def _create_at_controller(self, spec: TopicSpec, done: Done) -> bool:
        """A topic this broker creates by itself, when another node is the controller: the
        controller creates it. An auto-created topic goes as a client's CreateTopics would
        (KIP-590's forwarding); `__consumer_offsets`, whose name CreateTopics refuses to
        clients, as the FindCoordinator that asked for it, which the controller answers by
        creating it. False: this node proposes it itself."""
        cluster = self._cluster
        request: Request = (
            FindCoordinatorRequestV0(OFFSETS_TOPIC) if spec.name == OFFSETS_TOPIC
            else CreateTopicsRequestV0((spec,)))
        if (cluster is None or not self.config.clustered
                or cluster.controller_id() in (-1, self.config.node_id)):
            return False

        def answered(response: Response | None, error: ZlogError | None) -> None:
            if error is None and isinstance(response, CreateTopicsResponseV0):
                refused = next((t for t in response.topics if t.error_code), None)
                if refused is not None:
                    error = for_code(refused.error_code, refused.error_message)
            done(None, error)  # a FindCoordinator's answer: the controller is creating it

        try:
            cluster.forward(request, answered)
        except ZlogError as error:
            done(None, error)
        return True

    # -- the control endpoint ---------------------------------------------------------------------

    def _receive_control(self) -> None:
        assert self._control_socket is not None
        for _ in range(limits.CONTROL_BATCH_MESSAGES_MAX):
            routed = recv_routed(self._control_socket, block=False)
            if routed is None:
                return
            identity, frames = routed
            dispatch = functools.partial(self._dispatch,
                                         principal=principal_of(frames[0]) if frames else ANONYMOUS)
            for peer, reply in CONTROL_REQUEST_PATH.serve(identity, frames, dispatch,
                                                          self.request_stats):
                self._send(peer, reply)

    def _dispatch(
        self, identity: bytes, header: RequestHeader, request: Request, *,
        principal: str = ANONYMOUS,
    ) -> list[Reply]:
        """The control plane answers through `_reply`, now or once a request settles; the
        cluster node answers the brokers' requests, and forwards clients' metadata changes
        when another node is the controller. With security on, `principal` must be allowed
        what the request asks first (request_acls.py), here, before any forward; a request
        held until this broker registered is checked once released, against ACLs that are
        then caught up."""
        cluster = self._cluster
        if (cluster is None or not cluster.serves_clients()) and not isinstance(
                request, (*CONTROLLER_APIS, ApiVersionsRequestV0)):
            self._hold(identity, header, request, principal)
            return []
        if self.config.security:
            check_request(self.control.security.authorizer(), principal, request)
        if cluster is not None and isinstance(request, CONTROLLER_APIS):
            cluster.handle(request, functools.partial(self._reply, identity, header),
                           monotonic_ms())
        elif cluster is not None and self.config.clustered and cluster.forwards(request):
            cluster.forward(request, functools.partial(self._forwarded, identity, header))
        elif cluster is not None and isinstance(request, ElectLeadersRequestV0):
            cluster.elect_leaders(functools.partial(self._reply, identity, header))
        elif cluster is not None and isinstance(request, AddRaftLearnerRequestV0):
            cluster.add_learner(request, functools.partial(self._reply, identity, header))
        else:
            self.control.handle(identity, header, request, principal)
        return []

    def _hold(self, identity: bytes, header: RequestHeader, request: Request,
              principal: str) -> None:
        """Keep a client's request until this broker registered: its metadata may be behind the
        cluster's until then, so it answers nothing from it (as a Kafka broker opens its client
        listener only once registered)."""
        if len(self._held) >= limits.CONTROL_BATCH_MESSAGES_MAX * 10:
            raise ZlogError(ErrorCode.BROKER_NOT_AVAILABLE,
                            "the broker is starting: not registered with the controller yet")
        self._held.append(_Held(identity, header, request,
                                monotonic_ms() + HELD_REQUEST_TIMEOUT_MS, principal))

    def _release_held(self, now_ms: int) -> None:
        """Serve the held requests once registered; answer those held too long."""
        if not self._held:
            return
        registered = self._cluster is not None and self._cluster.serves_clients()
        held, self._held = self._held, []
        for item in held:
            if registered:
                replies = CONTROL_REQUEST_PATH.call(
                    item.identity, item.header, item.request,
                    functools.partial(self._dispatch, principal=item.principal),
                    self.request_stats)
            elif now_ms >= item.deadline_ms or self._stop_requested:
                replies = [(item.identity, encode_error_response(
                    item.header, ErrorCode.BROKER_NOT_AVAILABLE,
                    "the broker is not registered with the controller yet"))]
            else:
                self._held.append(item)
                continue
            for peer, reply in replies:
                self._send(peer, reply)

    def _forwarded(self, identity: bytes, header: RequestHeader,
                   response: Response | None, error: ZlogError | None) -> None:
        if response is not None:
            self._reply(identity, header, response)
        else:
            failure = error or ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR, "no answer")
            self._send(identity, encode_error_response(header, failure.code, failure.message))

    def _send(self, identity: bytes, frames: list[Buffer]) -> None:
        sock = self._control_socket
        if sock is not None and not send_routed(sock, identity, frames):
            log.debug("reply to a client that is gone or not reading: dropped")

    def _reply(self, identity: bytes, header: RequestHeader, response: Response) -> None:
        self._send(identity, encode_response(header, response))

