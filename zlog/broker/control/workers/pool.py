"""Partition worker processes: start, watch, restart, and keep their partitions assigned.

The supervisor owns one WorkerPool. It starts `workers` processes, each of which binds its
own data endpoint and talks to the supervisor over one internal ROUTER; the messages, both
directions, are `zlog.broker.worker_protocol`'s. Workers are forked from a fork server that
imported the worker once (`fork_server.py`), so a killed worker is replaced in
milliseconds instead of an interpreter's start; without one they start as
`python -m zlog.broker.data.worker`.

Assignment is level-triggered: `reconcile(desired, deleting)` compares what the metadata says
this host should serve with what each worker confirmed, and sends only the difference. So one
code path handles a new topic, a deleted topic, a restart of the broker and a restarted worker
(whose confirmed set starts empty again): nothing needs an event to be delivered exactly once.

A worker that exits, or stays silent for `worker_heartbeat_timeout_ms`, is restarted after an
exponential backoff (logged); its partitions stay placed on it, and the restarted process gets
them back as soon as it says hello. Its shared-memory rings keep what it acknowledged, so the
new process recovers them on open.

Nothing here waits for a worker or the fork server (the supervisor's loop, the controller's
included, must keep turning): a silent worker is SIGKILLed and its end looked for at the next
checks; a start is asked of the fork server and its answer taken later. A killed worker that
has not ended after KILLED_EXIT_TIMEOUT_MS is stuck in uninterruptible I/O (a stuck disk): it
is not replaced while it lives (it could still write its partitions' files), and its
partitions are `offline`, as are those of a worker that crashed `WORKER_RESTART_LIMIT` times
in a row, so that the supervisor has their leadership moved to other brokers.

Threading: only the supervisor's loop thread calls into a WorkerPool (it owns the socket).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any, Final

import zmq

import zlog
from zlog import limits
from zlog.broker import worker_protocol as protocol
from zlog.broker.control.placement import place_on_workers
from zlog.broker.control.workers.fork_server import (
    ForkedWorker,
    ForkServerError,
    PendingStart,
    WorkerForkServer,
)
from zlog.broker.kafka_port_settings import KafkaPortOptions
from zlog.broker.log_lines import format_module_levels
from zlog.broker.replica_settings import REPLICA_DEFAULTS, ReplicaSettings
from zlog.broker.supervisor_lifeline import NO_FDS
from zlog.broker.worker_metrics import metrics_path
from zlog.clock import monotonic_ms
from zlog.transport.sockets import make_channel_router
from zlog.types import NO_TOPIC_ID, TopicPartition

log = logging.getLogger("zlog.broker.control.workers.pool")

REQUEST_TIMEOUT_MS: Final = 60_000  # an unanswered assign/unassign is sent again after this
STABLE_UPTIME_MS: Final = 60_000  # a worker up this long has its crash backoff reset
WORKER_START_TIMEOUT_MS: Final = 60_000
"""The longest a new worker may take to say hello. Its start (interpreter, imports, sockets)
takes under a second on an idle host but several on a starved one; judged by the heartbeat
timeout it was killed before it could say hello, again and again after each backoff."""
IPC_PATH_CHARS_MAX: Final = 100  # sockaddr_un holds 108 bytes; keep a margin
OPEN_RETRY_INITIAL_MS: Final = 1_000  # a partition that failed to open is tried again after
OPEN_RETRY_MAX_MS: Final = 30_000  # ... doubling up to this, so a bad one costs next to nothing
DEFAULT_WORKER_MODULE: Final = "zlog.broker.data.worker"
WORKER_ARGUMENTS_FROM: Final = 4
"""Where the worker's own arguments start in its command (after python -P -m module)."""
FORKSERVER_RETRY_MS: Final = 10_000
"""How long after a fork server could not be started (or died) the next one is tried."""
STARTUP_CRASHES_MAX: Final = 5  # a worker that dies this often before its first hello cannot start
WORKER_RESTART_LIMIT: Final = 5
"""Crashes in a row (none after STABLE_UPTIME_MS of service) after which a worker's partitions
are reported offline, so that other brokers lead them while it keeps failing."""
KILLED_EXIT_TIMEOUT_MS: Final = 2_000
"""A SIGKILLed process ends within milliseconds, unless it sleeps in uninterruptible I/O (a
stuck disk), where no signal reaches it: past this its partitions are offline until it ends."""


class WorkerState(Enum):
    STARTING = "starting"  # asked of the fork server, or started; no hello yet
    READY = "ready"  # hello received: its data endpoint is known
    BACKOFF = "backoff"  # died; waiting to be started again
    KILLED = "killed"  # SIGKILLed, silent too long; its end not seen yet
    STOPPING = "stopping"  # asked to stop


@dataclass(frozen=True, slots=True)
class DesiredPartition:
    """What a worker should hold for one partition; a change means a new `assign`."""

    configs: Mapping[str, str]  # effective topic configs (broker defaults + topic overrides)
    leader_epoch: int
    is_leader: bool
    worker: int | None = None  # the worker the metadata placed it on; None: the pool picks
    broker_id: int = -1  # the rest: the partition's record, as worker_protocol.Assign says
    broker_epoch: int = -1
    leader: int = -1
    partition_epoch: int = 0
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    leader_endpoint: str = ""
    disk_share_bytes: int = -1  # the partition's part of its topic's disk budget (disk_budget.py)
    topic_id: str = NO_TOPIC_ID
    ineligible: tuple[int, ...] = ()


_DELETING: Final = DesiredPartition({}, 0, False)  # opened only to be deleted


@dataclass(slots=True)
class _Pending:
    kind: str  # "assign" or "unassign"
    topic_partition: TopicPartition
    desired: DesiredPartition | None  # what an assign asked for
    delete: bool
    sent_ms: int
    held: bool = True  # whether the worker held the partition when asked to unassign it


@dataclass(slots=True)
class OpenFailure:
    """A partition a worker could not open: why, and when to try again (bounded backoff)."""

    code: int
    message: str
    attempts: int
    retry_at_ms: int


@dataclass(slots=True)
class WorkerHandle:
    """The supervisor's view of one worker process."""

    worker_id: int
    state: WorkerState = WorkerState.BACKOFF
    process: subprocess.Popen[bytes] | ForkedWorker | None = None
    forking: PendingStart | None = None  # a start asked of the fork server, not answered yet
    early_hello: protocol.Hello | None = None  # a hello that came before the fork's answer
    killed_ms: int = 0  # when it was SIGKILLed (state KILLED)
    unkillable_told: bool = False  # the log said it outlived its SIGKILL
    endpoint: str = ""  # its data endpoint, from hello
    last_port: int = 0  # the port of its last endpoint: a restart binds it again if it can
    kafka_endpoint: str = ""  # its Kafka port, host:port, from hello ("": none)
    last_kafka_port: int = 0  # the same for its Kafka port
    started_ms: int = 0
    last_seen_ms: int = 0
    restart_at_ms: int = 0
    crashes_in_row: int = 0
    restarts: int = 0
    ever_ready: bool = False  # said hello at least once: its command line and imports work
    opened: dict[TopicPartition, DesiredPartition] = field(default_factory=dict)
    pending: dict[int, _Pending] = field(default_factory=dict)  # request id -> what it asked

    @property
    def identity(self) -> bytes:
        return f"worker-{self.worker_id}".encode()

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """What the pool needs from BrokerConfig (kept narrow so tests can build one)."""

    count: int
    data_dir: Path
    ring_dir: Path
    host: str  # advertised to clients
    port_range: tuple[int, int] | None
    log_level: str
    heartbeat_timeout_ms: int
    backoff_initial_ms: int
    backoff_max_ms: int
    worker_module: str = DEFAULT_WORKER_MODULE
    ring_bytes: int = limits.RING_SIZE_BYTES_DEFAULT
    ring_flush_bytes: int = 0
    replica: ReplicaSettings = REPLICA_DEFAULTS
    bind_host: str = ""  # where the data endpoints bind; empty: `host`
    lifeline_fds: tuple[int, ...] = NO_FDS  # the supervisor's lifeline: every worker gets it
    log_format: str = "logfmt"  # the worker's lines look like the supervisor's (log_lines.py)
    log_levels: tuple[tuple[str, str], ...] = ()
    metrics: bool = False  # each worker writes its metrics_path under ring_dir
    security_keys_dir: Path | None = None  # security on: every worker's sockets use CURVE
    security_principal: str = ""
    kafka: KafkaPortOptions | None = None  # each worker's Kafka port (None: workers have none)


def supervisor_endpoint(data_dir: Path) -> str:
    """ipc under the data dir; tcp on loopback when the path is too long for a unix socket."""
    path = data_dir.resolve() / ".zlog-supervisor.sock"
    if len(str(path)) <= IPC_PATH_CHARS_MAX:
        return f"ipc://{path}"
    return "tcp://127.0.0.1:*"


def restart_backoff_ms(crashes_in_row: int, initial_ms: int, max_ms: int) -> int:
    """initial, 2x, 4x, ... capped at max: a crash loop costs little and is visible in logs."""
    assert crashes_in_row >= 1 and 1 <= initial_ms <= max_ms
    return min(max_ms, initial_ms << min(crashes_in_row - 1, 30))


def worker_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The workers' environment: the supervisor's, minus systemd's notify variables (only
    the supervisor is the service), with the zlog package the supervisor runs first on the
    module path, so workers import exactly that package whatever the working directory."""
    package_root = str(Path(zlog.__file__).resolve().parent.parent)
    inherited = environ.get("PYTHONPATH", "")
    child = {key: value for key, value in environ.items()
             if key not in {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"}}
    child["PYTHONPATH"] = package_root + (os.pathsep + inherited if inherited else "")
    return child


class WorkerPool:
    """The worker processes, their channel, and which partitions each holds."""

    def __init__(
        self,
        settings: WorkerSettings,
        context: zmq.Context[Any],
        *,
        on_assigned: Callable[[TopicPartition, int, str], None],
        on_alter_isr: Callable[[protocol.AlterIsr, Callable[[int, str], None]], None]
        | None = None,
    ) -> None:
        assert settings.count >= 1
        self.settings = settings
        self.workers = [WorkerHandle(worker_id) for worker_id in range(settings.count)]
        self.placement: dict[TopicPartition, int] = {}
        self.deleted: set[TopicPartition] = set()  # data confirmed gone (topic still deleting)
        self._open_to_delete: set[TopicPartition] = set()  # worker deletes only what it holds
        self.open_failures: dict[TopicPartition, OpenFailure] = {}
        self._desired: Mapping[TopicPartition, DesiredPartition] = {}
        self.changed = True  # something a reconcile or a waiting request should look at
        self._on_assigned = on_assigned  # (partition, error code, message) after an assign
        self._on_alter_isr = on_alter_isr  # a leader's ISR change, and how to answer it
        self._next_request_id = 1
        self._lease_until_ms = -1  # sent to every worker (worker_protocol.Lease); -1: none
        self._group_settings: protocol.GroupSettings | None = None
        self._security_settings: protocol.SecuritySettings | None = None
        self._forkserver: WorkerForkServer | None = None
        self._forkserver_retry_at_ms = 0
        self.router, self.endpoint = make_channel_router(
            supervisor_endpoint(settings.data_dir), context=context,
            frame_bytes_max=limits.WORKER_MESSAGE_BYTES_MAX,
        )

    # -- processes --------------------------------------------------------------------------------

    def start_all(self) -> None:
        now_ms = monotonic_ms()
        for worker in self.workers:
            self._spawn(worker, now_ms)

    def _fork_server(self, now_ms: int) -> WorkerForkServer | None:
        """The fork server, started (again) when it is not running; None where workers start
        as new interpreters (another worker module, or no server could be started lately)."""
        if self.settings.worker_module != DEFAULT_WORKER_MODULE:
            return None
        server = self._forkserver
        if server is not None and server.alive:
            return server
        if server is not None:
            server.close(0)
            self._forkserver = None
        if now_ms < self._forkserver_retry_at_ms:
            return None
        self._forkserver_retry_at_ms = now_ms + FORKSERVER_RETRY_MS
        try:
            self._forkserver = WorkerForkServer(worker_environ(os.environ),
                                                inherited_fds=self.settings.lifeline_fds)
        except OSError as error:
            log.warning("cannot start the worker fork server (%s): workers start as new "
                        "processes", error)
        return self._forkserver

    def exit_fd(self) -> int | None:
        """Readable when the fork server reports a worker's exit: the loop wakes at once."""
        server = self._forkserver
        return server.fileno() if server is not None and server.alive else None

    def _command(self, worker: WorkerHandle) -> list[str]:
        settings = self.settings
        command = [
            # -P: the working directory is not put on the module path, so a `zlog/` folder
            # there (the parent of a clone, say) cannot shadow the package (see worker_environ).
            sys.executable, "-P", "-m", settings.worker_module,
            "--worker-id", str(worker.worker_id),
            "--supervisor", self.endpoint,
            "--data-dir", str(settings.data_dir),
            "--ring-dir", str(settings.ring_dir),
            "--host", settings.host,
            "--log-level", settings.log_level,
            "--log-format", settings.log_format,
            "--log-levels", format_module_levels(settings.log_levels),
            "--ring-bytes", str(settings.ring_bytes),
            "--ring-flush-bytes", str(settings.ring_flush_bytes),
            *settings.replica.as_flags(),
        ]
        if settings.bind_host and settings.bind_host != settings.host:
            command += ["--bind-host", settings.bind_host]
        if settings.port_range is not None:
            command += ["--port-range", f"{settings.port_range[0]}-{settings.port_range[1]}"]
        if worker.last_port:
            command += ["--preferred-port", str(worker.last_port)]
        for fd in settings.lifeline_fds:
            command += ["--supervisor-fd", str(fd)]
        if settings.metrics:
            command += ["--metrics-file", str(metrics_path(settings.ring_dir, worker.worker_id))]
        if settings.security_keys_dir is not None:
            command += ["--security-keys-dir", str(settings.security_keys_dir),
                        "--security-principal", settings.security_principal]
        if settings.kafka is not None:
            command += replace(settings.kafka, preferred_port=worker.last_kafka_port).as_flags()
        return command

    def _spawn(self, worker: WorkerHandle, now_ms: int) -> None:
        """Start the worker: asked of the fork server (answered in a later turn), or, without
        one, as a new interpreter now."""
        self._forget(worker)
        worker.process = None
        worker.state = WorkerState.STARTING
        worker.started_ms = worker.last_seen_ms = now_ms
        server = self._fork_server(now_ms)
        if server is not None:
            try:
                worker.forking = server.start(
                    self._command(worker)[WORKER_ARGUMENTS_FROM:], worker_environ(os.environ),
                    now_ms)
                return
            except ForkServerError as error:
                log.warning("worker %d not forked (%s): starting it as a new process",
                            worker.worker_id, error)
        self._start_process(worker, now_ms)

    def _start_process(self, worker: WorkerHandle, now_ms: int) -> None:
        try:
            # Own process group: a terminal's Ctrl-C reaches only the supervisor, which
            # then stops the workers in order (rings flushed) instead of all dying at once.
            worker.process = subprocess.Popen(
                self._command(worker), env=worker_environ(os.environ),
                stdin=subprocess.DEVNULL, process_group=0, pass_fds=self.settings.lifeline_fds)
        except OSError as error:
            log.error("cannot start worker %d: %s", worker.worker_id, error)
            self._schedule_restart(worker, now_ms)
            return
        log.info("started worker %d (pid %d)", worker.worker_id, worker.process.pid)

    def _take_forks(self, now_ms: int) -> None:
        """The fork server's answers to starts: the process, or a start made another way."""
        for worker in self.workers:
            pending = worker.forking
            if pending is None or not pending.answered:
                continue
            worker.forking = None
            if pending.worker is None:
                log.warning("worker %d not forked (%s): starting it as a new process",
                            worker.worker_id, pending.failure)
                self._start_process(worker, now_ms)
                continue
            worker.process = pending.worker
            log.info("started worker %d (pid %d)", worker.worker_id, pending.worker.pid)
            hello, worker.early_hello = worker.early_hello, None
            if hello is not None:
                self._hello(worker, hello)

    def _forget(self, worker: WorkerHandle) -> None:
        """What the process held: gone with it."""
        worker.forking = None
        worker.early_hello = None
        worker.endpoint = worker.kafka_endpoint = ""
        worker.opened.clear()
        worker.pending.clear()
        self.changed = True

    def _schedule_restart(self, worker: WorkerHandle, now_ms: int) -> None:
        if now_ms - worker.started_ms >= STABLE_UPTIME_MS:
            worker.crashes_in_row = 0
        worker.crashes_in_row += 1
        delay_ms = restart_backoff_ms(
            worker.crashes_in_row, self.settings.backoff_initial_ms, self.settings.backoff_max_ms
        )
        worker.state = WorkerState.BACKOFF
        worker.restart_at_ms = now_ms + delay_ms
        self._forget(worker)
        worker.process = None
        log.warning("restarting worker %d in %d ms (crash %d in a row)",
                    worker.worker_id, delay_ms, worker.crashes_in_row)

    def check(self, now_ms: int) -> None:
        """Reap dead workers, kill silent ones, start those whose backoff is over; replace a
        fork server that stopped answering. Never waits for any of them."""
        server = self._forkserver
        if server is not None:
            server.collect(0.0)  # the exits it reported (its socket woke the loop)
            stuck = server.stuck(now_ms) if server.alive else None
            if stuck is not None:
                server.kill(f"stuck: {stuck}")
        self._take_forks(now_ms)
        for worker in self.workers:
            process = worker.process
            if (process is not None and worker.state != WorkerState.KILLED
                    and now_ms - worker.last_seen_ms > self._silence_allowed_ms(worker)):
                log.warning("worker %d (pid %d) silent for %d ms: killing it",
                            worker.worker_id, process.pid, now_ms - worker.last_seen_ms)
                process.kill()
                self._forget(worker)
                worker.state = WorkerState.KILLED
                worker.killed_ms = now_ms
                worker.unkillable_told = False
            if process is not None and process.poll() is not None:
                log.warning("worker %d (pid %d) exited with status %s",
                            worker.worker_id, process.pid, process.returncode)
                worker.restarts += 1
                self._schedule_restart(worker, now_ms)
            elif worker.state == WorkerState.KILLED:
                self._warn_unkillable(worker, now_ms)
            elif worker.state == WorkerState.BACKOFF and now_ms >= worker.restart_at_ms:
                self._spawn(worker, now_ms)

    def _warn_unkillable(self, worker: WorkerHandle, now_ms: int) -> None:
        """Once, when a killed worker outlives KILLED_EXIT_TIMEOUT_MS."""
        if self._out(worker, now_ms) and not worker.unkillable_told:
            worker.unkillable_told = True
            killed_for_ms = now_ms - worker.killed_ms
            log.error("worker %d (pid %s) has not ended %d ms after SIGKILL: stuck in "
                      "uninterruptible I/O (a stuck disk?); its partitions are offline, led "
                      "elsewhere, until it ends", worker.worker_id, worker.pid, killed_for_ms)

    def offline(self, now_ms: int) -> frozenset[TopicPartition]:
        """The partitions placed on a worker that cannot serve them for a while: killed but
        not ended (no replacement may open its files while it lives), or crashing again and
        again. Their leadership belongs on another broker meanwhile."""
        workers = {worker.worker_id for worker in self.workers if self._out(worker, now_ms)}
        if not workers:
            return frozenset()
        return frozenset(tp for tp, worker_id in self.placement.items() if worker_id in workers)

    def _out(self, worker: WorkerHandle, now_ms: int) -> bool:
        if worker.state == WorkerState.KILLED:
            process = worker.process
            lives = (process.lives() if isinstance(process, ForkedWorker)
                     else process is not None and process.poll() is None)
            return lives and now_ms - worker.killed_ms > KILLED_EXIT_TIMEOUT_MS
        return worker.state != WorkerState.READY and worker.crashes_in_row >= WORKER_RESTART_LIMIT

    def _silence_allowed_ms(self, worker: WorkerHandle) -> int:
        """The heartbeat timeout once the worker said hello; before, its start timeout."""
        if worker.state == WorkerState.STARTING:
            return max(self.settings.heartbeat_timeout_ms, WORKER_START_TIMEOUT_MS)
        return self.settings.heartbeat_timeout_ms

    def ready_count(self) -> int:
        return sum(1 for worker in self.workers if worker.state == WorkerState.READY)

    def stop_all(self, timeout_ms: int) -> None:
        """Ask every worker to stop (rings flushed), then kill whatever is left at the deadline."""
        for worker in self.workers:
            if worker.process is None:
                continue
            if worker.state != WorkerState.READY or not self._send(worker, protocol.Stop()):
                worker.process.send_signal(signal.SIGTERM)  # not connected: the signal asks
            worker.state = WorkerState.STOPPING
        deadline_ms = monotonic_ms() + timeout_ms
        for worker in self.workers:
            if worker.process is None:
                continue
            remaining_s = max(0.0, (deadline_ms - monotonic_ms()) / 1000)
            try:
                status = worker.process.wait(remaining_s)
            except subprocess.TimeoutExpired:
                log.warning("worker %d did not stop in time: killing it", worker.worker_id)
                worker.process.kill()
                try:
                    status = worker.process.wait(KILLED_EXIT_TIMEOUT_MS / 1000)
                except subprocess.TimeoutExpired:  # uninterruptible I/O: it ends when that does
                    log.error("worker %d (pid %d) does not end after SIGKILL: leaving it",
                              worker.worker_id, worker.process.pid)
                    status = None
            log.info("worker %d stopped (status %s)", worker.worker_id, status)
            worker.process = None

    def close(self) -> None:
        self.router.close(linger=0)
        if self._forkserver is not None:
            self._forkserver.close()
            self._forkserver = None

    # -- the channel ------------------------------------------------------------------------------

    def _send(self, worker: WorkerHandle, message: protocol.ToWorker) -> bool:
        try:
            self.router.send_multipart([worker.identity, protocol.encode(message)], zmq.NOBLOCK)
        except zmq.Again:
            return False
        except zmq.ZMQError as error:
            if error.errno == zmq.EHOSTUNREACH:  # not connected (yet, or any more)
                return False
            raise
        return True

    def set_group_settings(self, settings: protocol.GroupSettings) -> None:
        """Topic partition counts and group configs changed: every ready worker hears it now
        (one that says hello later hears it then)."""
        if settings != self._group_settings:
            self._group_settings = settings
            self._send_ready(settings)

    def set_security_settings(self, settings: protocol.SecuritySettings) -> None:
        """ACLs, quotas or super-users changed: as `set_group_settings`."""
        if settings != self._security_settings:
            self._security_settings = settings
            self._send_ready(settings)

    def _send_ready(self, message: protocol.ToWorker) -> None:
        for worker in self.workers:
            if worker.state == WorkerState.READY:
                self._send(worker, message)

    def set_lease(self, until_ms: int) -> None:
        """Until when this broker's leaderships stand; every ready worker hears it now."""
        if until_ms == self._lease_until_ms:
            return
        self._lease_until_ms = until_ms
        for worker in self.workers:
            if worker.state == WorkerState.READY:
                self._send(worker, protocol.Lease(until_ms))

    def receive(self, now_ms: int) -> None:
        """Handle what the workers sent since the last turn."""
        for _ in range(limits.WORKER_CHANNEL_BATCH_MESSAGES_MAX):
            try:
                frames = self.router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            worker = self._worker_for(frames[0])
            if worker is None or len(frames) != 2:
                log.warning("dropped a message from unknown peer %r", frames[0][:32])
                continue
            try:
                message = protocol.decode_from_worker(frames[1])
            except protocol.WorkerProtocolError as error:
                log.warning("worker %d sent a message refused: %s", worker.worker_id, error)
                continue
            worker.last_seen_ms = now_ms
            self._handle(worker, message)

    def _worker_for(self, identity: bytes) -> WorkerHandle | None:
        prefix, _, number = identity.decode("ascii", "replace").partition("-")
        if prefix != "worker" or not number.isdigit() or int(number) >= len(self.workers):
            return None
        return self.workers[int(number)]

    def _handle(self, worker: WorkerHandle, message: protocol.FromWorker) -> None:
        if isinstance(message, protocol.Hello):
            self._hello(worker, message)
        elif isinstance(message, protocol.Assigned | protocol.Unassigned):
            self._reply(worker, message)
        elif isinstance(message, protocol.AlterIsr):
            self._alter_isr(worker, message)

    def _alter_isr(self, worker: WorkerHandle, message: protocol.AlterIsr) -> None:
        """Take a leader's ISR change on; its answer goes back to the same process."""
        pid = worker.pid

        def done(code: int, text: str) -> None:
            if worker.pid == pid:  # a restarted worker forgot the change: no answer for it
                self._send(worker, protocol.AlterIsrAnswer(message.request_id, code, text))

        if self._on_alter_isr is None:
            done(-1, "this broker takes no ISR changes")
            return
        self._on_alter_isr(message, done)

    def _hello(self, worker: WorkerHandle, message: protocol.Hello) -> None:
        if worker.state in (WorkerState.STOPPING, WorkerState.KILLED):
            return
        if worker.process is None:
            if worker.forking is not None:  # the fork's answer is still on its way
                worker.early_hello = message
            return
        if message.pid != worker.process.pid:
            log.warning("hello from pid %d, expected %d", message.pid, worker.process.pid)
            return
        # A hello starts a fresh process view: whatever it held before is gone.
        worker.state = WorkerState.READY
        worker.ever_ready = True
        worker.endpoint = message.endpoint
        worker.kafka_endpoint = message.kafka_endpoint
        with contextlib.suppress(ValueError):
            worker.last_port = int(message.endpoint.rsplit(":", 1)[1])
        if message.kafka_endpoint:
            with contextlib.suppress(ValueError):
                worker.last_kafka_port = int(message.kafka_endpoint.rsplit(":", 1)[1])
        worker.opened.clear()
        worker.pending.clear()
        self.changed = True
        if self._group_settings is not None:
            self._send(worker, self._group_settings)
        if self._security_settings is not None:
            self._send(worker, self._security_settings)
        if self._lease_until_ms >= 0:  # before any assign: it leads nothing without one
            self._send(worker, protocol.Lease(self._lease_until_ms))
        log.info("worker %d (pid %d) serving at %s", worker.worker_id, message.pid,
                 message.endpoint)

    def _reply(
        self, worker: WorkerHandle, message: protocol.Assigned | protocol.Unassigned
    ) -> None:
        pending = worker.pending.pop(message.request_id, None)
        if pending is None:
            return  # an answer to a request from before a restart or a timeout: stale
        code, text = message.error_code, message.error_message
        topic_partition = pending.topic_partition
        self.changed = True
        if pending.kind == "assign":
            if code == 0 and pending.desired is not None:
                worker.opened[topic_partition] = pending.desired
                self._opened(topic_partition)
            else:
                self._open_failed(worker, topic_partition, code, text, monotonic_ms())
            self._on_assigned(topic_partition, code, text)
        elif code == 0:
            worker.opened.pop(topic_partition, None)
            if pending.delete:
                self.deleted.add(topic_partition)
                self._open_to_delete.discard(topic_partition)
        elif pending.delete and not pending.held:
            # This worker deletes only partitions it holds: open it first, then delete.
            self._open_to_delete.add(topic_partition)
        else:
            log.warning("worker %d could not close %s-%d: error %d", worker.worker_id,
                        *topic_partition, code)

    def _open_failed(
        self, worker: WorkerHandle, tp: TopicPartition, code: int, text: str, now_ms: int
    ) -> None:
        """Back off before the next try; log the first failure and any change of reason."""
        previous = self.open_failures.get(tp)
        attempts = 1 if previous is None else previous.attempts + 1
        delay_ms = restart_backoff_ms(attempts, OPEN_RETRY_INITIAL_MS, OPEN_RETRY_MAX_MS)
        self.open_failures[tp] = OpenFailure(code, text, attempts, now_ms + delay_ms)
        if previous is None or previous.message != text:
            log.warning("worker %d could not open %s-%d: error %d %s (trying again in %d ms, "
                        "backing off to %d s)", worker.worker_id, *tp, code, text, delay_ms,
                        OPEN_RETRY_MAX_MS // 1000)
        else:
            log.debug("worker %d still cannot open %s-%d (attempt %d)", worker.worker_id, *tp,
                      attempts)

    def _opened(self, tp: TopicPartition) -> None:
        failure = self.open_failures.pop(tp, None)
        if failure is not None:
            log.info("%s-%d opened after %d failed attempts", *tp, failure.attempts)

    def _retry_due(self, tp: TopicPartition, now_ms: int) -> bool:
        failure = self.open_failures.get(tp)
        return failure is None or now_ms >= failure.retry_at_ms

    def startup_failure(self) -> str | None:
        """Why the workers cannot start at all (each crashed repeatedly before any hello)."""
        for worker in self.workers:
            if not worker.ever_ready and worker.crashes_in_row >= STARTUP_CRASHES_MAX:
                return (f"worker {worker.worker_id} exited {worker.crashes_in_row} times in a "
                        "row before it could serve; its own messages above say why")
        return None

    def settled(self) -> bool:
        """Every worker serves and has answered for every partition placed on it: each is
        open, or has failed to open with a reason the controller knows."""
        if self.ready_count() != len(self.workers):
            return False
        for tp in self._desired:
            worker = self.workers[self.placement[tp]]
            if worker.pending or (tp not in worker.opened and tp not in self.open_failures):
                return False
        return True

    def _request(self, worker: WorkerHandle, pending: _Pending) -> None:
        request_id = self._next_request_id
        self._next_request_id += 1
        topic, partition = pending.topic_partition
        message: protocol.ToWorker
        if pending.kind == "unassign":
            message = protocol.Unassign(request_id, topic, partition, pending.delete)
        else:
            desired = pending.desired
            assert desired is not None
            message = protocol.Assign(
                request_id, topic, partition, desired.configs, desired.leader_epoch,
                desired.is_leader, desired.broker_id, desired.broker_epoch, desired.leader,
                desired.partition_epoch, desired.replicas, desired.isr, desired.leader_endpoint,
                desired.disk_share_bytes, desired.topic_id, desired.ineligible)
        if self._send(worker, message):
            worker.pending[request_id] = pending

    # -- assignment -------------------------------------------------------------------------------

    def reconcile(
        self,
        desired: Mapping[TopicPartition, DesiredPartition],
        deleting: Sequence[TopicPartition],
        now_ms: int,
    ) -> None:
        """Send each ready worker the assigns and unassigns that close the gap to `desired`.

        `desired` is in creation order (placement follows it); `deleting` are partitions of
        deleted topics whose data must go, whether or not a worker holds them now.
        """
        deleting_set = set(deleting)
        self.deleted &= deleting_set
        self._open_to_delete &= deleting_set
        self._desired = desired
        for tp in [tp for tp in self.open_failures if tp not in desired]:
            if tp not in self._open_to_delete:
                del self.open_failures[tp]
        wanted = list(desired) + [
            tp for tp in deleting if tp not in desired and tp not in self.deleted
        ]
        count = len(self.workers)
        fixed = {tp: want.worker % count for tp, want in desired.items()
                 if want.worker is not None}
        flexible = [tp for tp in wanted if tp not in fixed]
        self.placement = {**place_on_workers(flexible, count, self.placement), **fixed}
        for worker in self.workers:
            if worker.state != WorkerState.READY:
                continue
            self._expire_pending(worker, now_ms)
            busy = {pending.topic_partition for pending in worker.pending.values()}
            for tp in list(worker.opened):
                if tp in busy:
                    continue
                if desired.get(tp) is None or self.placement.get(tp) != worker.worker_id:
                    delete = tp in deleting_set
                    self._request(worker, _Pending("unassign", tp, None, delete, now_ms))
            for tp, worker_id in self.placement.items():
                if worker_id != worker.worker_id or tp in busy:
                    continue
                want = desired.get(tp)
                if not self._retry_due(tp, now_ms):
                    continue
                if want is None and tp in self._open_to_delete and tp not in worker.opened:
                    self._request(worker, _Pending("assign", tp, _DELETING, False, now_ms))
                elif want is None and tp not in worker.opened:
                    # Deleted while nobody held it: the worker removes whatever is on disk.
                    self._request(worker, _Pending("unassign", tp, None, True, now_ms, False))
                elif want is not None and worker.opened.get(tp) != want:
                    self._request(worker, _Pending("assign", tp, want, False, now_ms))
        self.changed = False

    def _expire_pending(self, worker: WorkerHandle, now_ms: int) -> None:
        for request_id, pending in list(worker.pending.items()):
            if now_ms - pending.sent_ms > REQUEST_TIMEOUT_MS:
                log.warning("worker %d never answered %s of %s-%d; asking again",
                            worker.worker_id, pending.kind, *pending.topic_partition)
                del worker.pending[request_id]

    # -- lookups for the control plane ----------------------------------------------------------

    def endpoint_for(self, topic_partition: TopicPartition) -> str | None:
        """The data endpoint serving this partition, once its worker confirmed it open."""
        worker_id = self.placement.get(topic_partition)
        if worker_id is None:
            return None
        worker = self.workers[worker_id]
        if worker.state != WorkerState.READY or topic_partition not in worker.opened:
            return None
        return worker.endpoint

    def kafka_endpoint_for(self, topic_partition: TopicPartition) -> str:
        """The Kafka port of the worker serving this partition ("": none, or not open yet)."""
        if self.endpoint_for(topic_partition) is None:
            return ""
        return self.workers[self.placement[topic_partition]].kafka_endpoint

    def applied_configs(self, topic_partition: TopicPartition) -> Mapping[str, str] | None:
        """The configs the worker serving this partition confirmed, once it confirmed any."""
        if self.endpoint_for(topic_partition) is None:
            return None
        worker = self.workers[self.placement[topic_partition]]
        return worker.opened[topic_partition].configs

    def worker_endpoints(self) -> tuple[str, ...]:
        """Each worker's data endpoint, "" for one not serving now."""
        return tuple(worker.endpoint if worker.state == WorkerState.READY else ""
                     for worker in self.workers)

    def worker_kafka_endpoints(self) -> tuple[str, ...]:
        """Each worker's Kafka port, "" for one not serving now; () when workers have none."""
        if self.settings.kafka is None:
            return ()
        return tuple(worker.kafka_endpoint if worker.state == WorkerState.READY else ""
                     for worker in self.workers)

    def is_open(self, topic_partition: TopicPartition) -> bool:
        return self.endpoint_for(topic_partition) is not None
