"""The partition worker process: owns partitions and serves their data path.

Concurrency: **single writer per partition, no locks.** One thread runs this whole loop: the
data ROUTER (produce, fetch, list offsets), the supervisor DEALER (assign, unassign, stop), the
appends and reads of every partition, the timers (long-poll deadlines, flush.ms ticks,
retention). So each partition has exactly one writer and nothing here takes a lock. The one
other thread is key compaction, which only reads and swaps sealed segments under the log's own
lock (`partition_host.py`). Processes, not threads, give the host its parallelism: one worker
per core, partitions spread over them (DESIGN.md section 1).

Supervisor contract: `zlog.broker.worker_protocol` (Hello, Heartbeat, Assign/Assigned,
Unassign/Unassigned, Stop), over a DEALER whose identity is `worker-N`. Stop (or SIGTERM)
answers parked requests, flushes every ring and exits 0.

A worker whose supervisor is gone takes no write from that moment: before each append it
checks the supervisor's lifeline (`--supervisor-fd`, zlog/broker/supervisor_lifeline.py),
pipes the kernel closes as the supervisor dies, however it dies, and it then stops the same
way. So a supervisor killed with SIGKILL and started again finds its partitions' rings free
within a moment. The kernel also sends it SIGTERM when its parent dies (PR_SET_PDEATHSIG);
without either, a parent pid that changed plus --supervisor-silence-ms of silence does it.

A worker killed with SIGKILL loses nothing it acknowledged: the partition's shared-memory ring
outlives it, and the next worker to open the partition replays it.

    python -m zlog.broker.data.worker --worker-id N --supervisor ENDPOINT --data-dir D --ring-dir R
                                 --host H [--port-range A-B] [--ring-bytes B]
                                 [--ring-flush-bytes B] [--supervisor-silence-ms MS]
                                 [--supervisor-fd FD ...] [--metrics-file F] [--log-level L]
                                 [--log-format logfmt|json] [--log-levels LOGGER=L,...]
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Final

import zmq

from zlog import limits
from zlog.broker import worker_protocol as protocol
from zlog.broker.data.data_plane import DataPlane
from zlog.broker.data.data_security import DataSecurity
from zlog.broker.data.fetcher import Fetchers, FetcherSettings
from zlog.broker.data.group_host import GroupHost
from zlog.broker.data.isr_change_file import IsrChangeFiles
from zlog.broker.data.isr_proposals import ISR_CHECK_INTERVAL_MS, IsrProposals
from zlog.broker.data.kafka_port import KafkaPort
from zlog.broker.data.local_producers import LocalProducers
from zlog.broker.data.metrics_publish import open_worker_metrics, publish
from zlog.broker.data.partition_host import PartitionHost
from zlog.broker.kafka_port_settings import KafkaPortOptions, add_kafka_arguments
from zlog.broker.log_lines import (
    LOG_FORMATS,
    LogSettings,
    log_failure,
    parse_module_levels,
    setup_logging,
)
from zlog.broker.replica_settings import REPLICA_DEFAULTS, ReplicaSettings, flag_names
from zlog.broker.supervisor_lifeline import NO_FDS, LifelineWatch
from zlog.broker.topic_configs import validate_topic_name
from zlog.clock import Clock, SystemClock
from zlog.errors import ErrorCode, ZlogError
from zlog.shm_segments.log import PartitionLog
from zlog.shm_segments.log_config import LogConfig
from zlog.transport import curve
from zlog.transport.curve import principal_of
from zlog.transport.curve_keys import broker_security
from zlog.transport.messages.security import ANONYMOUS
from zlog.transport.server import Reply
from zlog.transport.sockets import (
    has_message,
    make_channel_dealer,
    make_router,
    recv_routed,
    send_routed,
    shared_context,
    sync_polled,
)
from zlog.types import TopicPartition

log = logging.getLogger("zlog.broker.data.worker")

RETENTION_INTERVAL_MS: Final = 5_000
"""How often retention runs (Kafka's log.retention.check.interval.ms, shortened) and the
producer tables that changed are snapshotted."""
COMPACTION_INTERVAL_MS: Final = 30_000
"""How often compacted logs get a compaction pass on the background thread."""
SUPERVISOR_SILENCE_MS_MAX: Final = 15_000
"""With the parent gone, this much silence from the supervisor means it is not coming back."""
SHUTDOWN_LINGER_MS: Final = 500
"""How long closing a socket may wait to deliver the last replies and the unassign answers."""
CONTROL_TURN_BUDGET_MS: Final = 20
"""How long one loop turn may spend on the supervisor's messages before serving clients
again. A restarted worker is assigned all its partitions at once (40 on a broker that leads
offsets partitions), each open taking milliseconds to tens of them on a busy host; opened in
one go, the first partitions' clients and followers waited for the last one's open."""


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """The command line, checked."""

    worker_id: int
    supervisor_endpoint: str
    data_dir: Path
    ring_dir: Path
    host: str
    port_range: tuple[int, int] | None = None
    ring_bytes: int = limits.RING_SIZE_BYTES_DEFAULT
    ring_flush_bytes: int = 0
    supervisor_silence_ms: int = SUPERVISOR_SILENCE_MS_MAX
    replica: ReplicaSettings = REPLICA_DEFAULTS
    bind_host: str = ""  # where the data ROUTER binds when others reach it elsewhere ("": host)
    preferred_port: int = 0
    """The port of the worker this one replaces (0: none), tried first: clients and followers
    then reconnect to the address they knew, with no metadata change to wait for."""
    supervisor_fds: tuple[int, ...] = NO_FDS  # the read ends of the supervisor's lifeline
    metrics_file: Path | None = None  # where its metrics go (worker_metrics.py); None: off
    security_keys_dir: Path | None = None  # security on: the broker's keys (curve_keys.py)
    security_principal: str = ""
    kafka: KafkaPortOptions | None = None  # the worker's Kafka port (None: it has none)


class Worker:
    """One partition worker: a poll loop over the data ROUTER and the supervisor DEALER."""

    def __init__(self, options: WorkerOptions, clock: Clock | None = None) -> None:
        self.options = options
        self.clock = clock or SystemClock()
        base_config = replace(
            LogConfig(), ring_bytes=options.ring_bytes, ring_flush_bytes=options.ring_flush_bytes
        )
        self.host = PartitionHost(
            options.data_dir, options.ring_dir, base_config=base_config, clock=self.clock
        )
        self.lifeline = LifelineWatch(options.supervisor_fds) if options.supervisor_fds else None
        self.data_plane = DataPlane(self.host.partitions, clock=self.clock)
        if options.security_keys_dir is not None:
            self.data_plane.security = DataSecurity.before_settings(options.security_principal)
        if self.lifeline is not None:
            self.data_plane.supervisor_gone = self.lifeline.cut
        self.metrics = open_worker_metrics(options.metrics_file)
        if self.metrics is not None:
            self.data_plane.metrics = self.metrics
            self.data_plane.stats.observe = self.metrics
        self.groups = GroupHost(self.host.partitions, self.data_plane.append_batch,
                                self.clock.wall_ms,
                                lease_remaining_ms=self.data_plane.lease_remaining_ms)
        self.data_plane.group_requests = self.groups.handle
        self._broker_id = -1
        self._broker_epoch = -1  # learnt from the assigns
        self.fetchers = Fetchers(
            self.host.partitions,
            FetcherSettings(-1, options.replica.fetch_wait_max_ms,
                            options.replica.fetch_max_bytes,
                            options.replica.fetch_response_max_bytes,
                            options.replica.fetch_backoff_ms),
            broker_epoch=lambda: self._broker_epoch,
            rebuild_producers=self.host.rebuilt_producers,
            context=shared_context(),
        )
        self.isr_proposals = IsrProposals(self.host.partitions,
                                          lag_time_max_ms=options.replica.lag_time_max_ms,
                                          store=IsrChangeFiles(self.host.directory_of))
        self._polled: set[zmq.Socket[bytes]] = set()
        self.unsent_replies = 0
        self._stopping = False
        self.parent_pid = os.getppid()
        self._context = shared_context()
        self._data, self.endpoint = self._bind_data()
        # With security on every request names its principal, which a shared-memory queue
        # cannot prove: local clients then go over the network, with their keys.
        self.local_producers = (
            LocalProducers(None, self.host.partitions) if options.security_keys_dir is not None
            else LocalProducers.serving(self.endpoint, self.host.partitions))
        self.kafka = (KafkaPort.open(options.kafka, self.data_plane)
                      if options.kafka is not None else None)
        self._control = self._connect_control()
        now_ms = self.clock.monotonic_ms()
        self._last_supervisor_ms = now_ms
        self._next_heartbeat_ms = now_ms
        self._next_tick_ms = now_ms
        self._next_retention_ms = now_ms + RETENTION_INTERVAL_MS
        self._next_compaction_ms = now_ms + COMPACTION_INTERVAL_MS
        self._next_isr_check_ms = now_ms + ISR_CHECK_INTERVAL_MS
        self._next_hw_checkpoint_ms = (
            now_ms + options.replica.high_watermark_checkpoint_interval_ms)

    # ------------------------------------------------------------------ sockets

    def _bind_data(self) -> tuple[zmq.Socket[bytes], str]:
        """The data ROUTER on the first free port of the range (or one the OS picks), bound
        on `bind_host` and advertised on `host`."""
        host = self.options.host
        bind_host = self.options.bind_host or host
        preferred = self.options.preferred_port
        if preferred and (self.options.port_range is None
                          or self.options.port_range[0] <= preferred
                          <= self.options.port_range[1]):
            try:
                sock, _bound = make_router(f"tcp://{bind_host}:{preferred}",
                                           context=self._context)
                return sock, f"tcp://{host}:{preferred}"
            except zmq.ZMQError as error:  # taken meanwhile, most likely: any other will do
                log.info("port %d of the worker replaced does not bind (%s): binding another",
                         preferred, error)
        if self.options.port_range is None:
            sock, bound = make_router(f"tcp://{bind_host}:*", context=self._context)
            return sock, f"tcp://{host}:{bound.rsplit(':', 1)[1]}"
        first, last = self.options.port_range
        for port in range(first, last + 1):
            try:
                sock, _bound = make_router(f"tcp://{bind_host}:{port}", context=self._context)
            except zmq.ZMQError as error:
                if error.errno == zmq.EADDRINUSE:
                    continue
                raise
            return sock, f"tcp://{host}:{port}"
        raise ZlogError(ErrorCode.NETWORK_EXCEPTION,
                        f"no free port in {first}-{last} on {bind_host}")

    def _connect_control(self) -> zmq.Socket[bytes]:
        return make_channel_dealer(
            self.options.supervisor_endpoint, f"worker-{self.options.worker_id}".encode(),
            context=self._context, frame_bytes_max=limits.WORKER_MESSAGE_BYTES_MAX,
            hwm_messages=limits.WORKER_CHANNEL_HWM_MESSAGES,
        )

    def _send_control(self, message: protocol.FromWorker) -> None:
        """One frame to the supervisor; dropped (and logged) if its queue is full."""
        try:
            self._control.send(protocol.encode(message), flags=zmq.NOBLOCK)
        except zmq.Again:
            log.warning("supervisor queue full; dropped %s", message.TYPE)

    def _send_replies(self, replies: Sequence[Reply]) -> None:
        for identity, frames in self.local_producers.deliver(replies):
            if self.kafka is not None and self.kafka.owns(identity):
                self.kafka.deliver(identity, frames)
                continue
            try:
                sent = send_routed(self._data, identity, frames)
            except zmq.ZMQError as error:
                log.warning("reply to %r not sent: %s", identity, error)
                sent = False
            if not sent:
                self.unsent_replies += 1  # the client is gone or not reading: it will retry

    # ------------------------------------------------------------------ the loop

    def request_stop(self) -> None:
        """Stop after the current round (SIGTERM, a stop message, a vanished supervisor)."""
        self._stopping = True

    def run(self) -> int:
        """Serve until told to stop; returns the process exit status."""
        poller = zmq.Poller()
        poller.register(self._data, zmq.POLLIN)
        poller.register(self._control, zmq.POLLIN)
        for fd in self.lifeline.fds if self.lifeline is not None else ():
            poller.register(fd, zmq.POLLIN)
        kafka_endpoint = self.kafka.endpoint if self.kafka is not None else ""
        self._send_control(protocol.Hello(self.options.worker_id, os.getpid(), self.endpoint,
                                          kafka_endpoint))
        log.info("worker %d serving on %s", self.options.worker_id, self.endpoint)
        try:
            while not self._stopping:
                self._poll_fetchers(poller)
                self.local_producers.watch(poller)
                if self.kafka is not None:
                    self.kafka.sync(poller)  # this turn's Kafka answers go out before the wait
                events = dict(poller.poll(
                    self.local_producers.poll_timeout_ms(self._poll_timeout_ms())))
                if self.lifeline is not None and self.lifeline.cut():
                    log.info("the supervisor's lifeline is cut (it stops, or it died): "
                             "stopping")
                    self.request_stop()
                    break
                if self._data in events:
                    self._serve_data()
                if self._control in events:
                    self._serve_control()
                self._send_replies(self.local_producers.serve(
                    events, self.data_plane.handle, self.clock.monotonic_ms()))
                if self.kafka is not None:
                    self._send_replies(self.kafka.serve(events, self.clock.monotonic_ms()))
                self._run_fetchers()
                self._run_timers()
        finally:
            self._shutdown()
        return 0

    def _poll_timeout_ms(self) -> int:
        """Until the earliest timer: the worker's own, a long poll's or an acks=all wait's."""
        deadline_ms = min(self._next_heartbeat_ms, self._next_tick_ms, self._next_retention_ms,
                          self._next_compaction_ms)
        deadline_ms = min(deadline_ms, self._next_isr_check_ms, self._next_hw_checkpoint_ms)
        for other_ms in (self.data_plane.next_deadline_ms(), self.fetchers.next_deadline_ms()):
            if other_ms is not None and other_ms < deadline_ms:
                deadline_ms = other_ms
        wait_ms = max(deadline_ms - self.clock.monotonic_ms(), 0)
        if self.kafka is not None and self.kafka.has_work():
            return 0
        group_wait_ms = self.groups.ms_to_next_timer()
        return wait_ms if group_wait_ms is None else min(wait_ms, group_wait_ms)

    def _poll_fetchers(self, poller: zmq.Poller) -> None:
        """The poller watches exactly the follower fetchers' current sockets."""
        self._polled = sync_polled(poller, self._polled, self.fetchers.sockets())

    def _run_fetchers(self) -> None:
        """Followers: take in the leaders' answers, send the next fetches."""
        if not self.fetchers.followed():
            return
        try:
            self.fetchers.run(self.clock.monotonic_ms())
        except AssertionError:
            raise
        except Exception as error:
            log_failure(log, error, "follower fetch failed")

    def _serve_data(self) -> None:
        """Up to DRAIN_MESSAGES_MAX requests, so the supervisor and timers are never starved;
        the group coordinators' records of the whole drain are one append per partition."""
        self.groups.defer_appends()
        try:
            self._drain_data()
        finally:
            self._send_replies(self.groups.flush())

    def _drain_data(self) -> None:
        for _ in range(limits.DRAIN_MESSAGES_MAX):
            routed = recv_routed(self._data, block=False)
            if routed is None:
                return
            identity, frames = routed
            self._send_replies(self.data_plane.handle(
                identity, frames, self.clock.monotonic_ms(),
                principal_of(frames[0]) if frames else ANONYMOUS))
            if not has_message(self._data):
                return

    def _run_timers(self) -> None:
        now_ms = self.clock.monotonic_ms()
        try:
            self._send_replies(self.data_plane.on_timer(now_ms))
            self._send_replies(self.groups.on_timer())
        except AssertionError:
            raise
        except Exception as error:
            log_failure(log, error, "answering expired requests failed")
        if now_ms >= self._next_heartbeat_ms:
            self._send_control(protocol.Heartbeat(self.options.worker_id))
            self._next_heartbeat_ms = now_ms + protocol.HEARTBEAT_INTERVAL_MS
            self._check_supervisor(now_ms)
            if self.metrics is not None:
                publish(self.metrics, self.host.partitions, self.groups)
        if now_ms >= self._next_tick_ms:
            self.host.tick()
            self._next_tick_ms = now_ms + self.host.tick_interval_ms()
        if now_ms >= self._next_retention_ms:
            self.host.enforce_retention()
            self.host.save_producer_states()
            self._next_retention_ms = now_ms + RETENTION_INTERVAL_MS
        if now_ms >= self._next_compaction_ms:
            self.host.start_compactions()
            self._next_compaction_ms = now_ms + COMPACTION_INTERVAL_MS
        if now_ms >= self._next_isr_check_ms:
            for change in self.isr_proposals.due(now_ms):
                self._send_control(change)
            self._send_replies(self.data_plane.refresh_high_watermarks())
            self._next_isr_check_ms = now_ms + ISR_CHECK_INTERVAL_MS
        if now_ms >= self._next_hw_checkpoint_ms:
            self.host.checkpoint_high_watermarks()
            self._next_hw_checkpoint_ms = (
                now_ms + self.options.replica.high_watermark_checkpoint_interval_ms)

    def _check_supervisor(self, now_ms: int) -> None:
        silent_ms = now_ms - self._last_supervisor_ms
        if os.getppid() != self.parent_pid and silent_ms > self.options.supervisor_silence_ms:
            log.warning("supervisor gone (parent changed, silent %d ms); stopping", silent_ms)
            self.request_stop()

    def _shutdown(self) -> None:
        """Answer what waits, flush every ring into its segment, close the sockets."""
        try:
            self._send_replies(self.data_plane.drain())
            self._send_replies(self.groups.drain())
        finally:
            self.local_producers.close()
            self.fetchers.close()
            self.host.close_all()
            self._data.close(linger=SHUTDOWN_LINGER_MS)
            if self.kafka is not None:
                self.kafka.close()
            self._control.close(linger=SHUTDOWN_LINGER_MS)
            log.info("worker %d stopped", self.options.worker_id)

    # ------------------------------------------------------------------ supervisor messages

    def _serve_control(self) -> None:
        deadline_ms = self.clock.monotonic_ms() + CONTROL_TURN_BUDGET_MS
        for _ in range(limits.DRAIN_MESSAGES_MAX):
            if self.clock.monotonic_ms() > deadline_ms:
                return  # the rest next turn, after the data socket's requests
            try:
                frames = self._control.recv_multipart(flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            self._last_supervisor_ms = self.clock.monotonic_ms()
            if len(frames) != 1:
                log.warning("supervisor message with %d frames ignored", len(frames))
                continue
            try:
                message = protocol.decode_to_worker(frames[0])
            except protocol.WorkerProtocolError as error:
                self._refuse_control(error)
                continue
            self._on_control(message)

    def _refuse_control(self, error: protocol.WorkerProtocolError) -> None:
        """A request that does not decode is answered with its error when its id could be
        read (so the supervisor does not wait for it); anything else is only logged."""
        log.warning("supervisor message refused: %s", error)
        if error.request_id is None:
            return
        answer = protocol.Unassigned if error.kind == protocol.Unassign.TYPE else protocol.Assigned
        self._send_control(answer(error.request_id, int(error.code), error.message))

    def _on_control(self, message: protocol.ToWorker) -> None:
        if isinstance(message, protocol.Assign):
            self._on_assign(message)
        elif isinstance(message, protocol.Unassign):
            self._on_unassign(message)
        elif isinstance(message, protocol.AlterIsrAnswer):
            self.isr_proposals.answered(message)
        elif isinstance(message, protocol.Lease):
            self.data_plane.lease_until_ms = None if message.until_ms < 0 else message.until_ms
            self._send_replies(self.groups.check_lease())
        elif isinstance(message, protocol.GroupSettings):
            self._send_replies(self.groups.configure(message))
        elif isinstance(message, protocol.SecuritySettings):
            if self.data_plane.security is not None:
                self.data_plane.security.configure(message)
        else:
            log.info("stop requested by the supervisor")
            self.request_stop()

    def _on_assign(self, message: protocol.Assign) -> None:
        code, text = ErrorCode.NONE, ""
        try:
            if self.host.holds_other_topic(message):
                log.warning("%s-%d is open as another topic id than %s: deleting it",
                            message.topic, message.partition, message.topic_id)
                self._unassign(protocol.Unassign(message.request_id, message.topic,
                                                 message.partition, delete=True))
            outcome = self.host.assign(message)
            self._follow_or_lead(message)
            tp = TopicPartition(message.topic, message.partition)
            # Even with no byte committed and no new role: a shrunk ISR may settle a
            # DeleteRecords that waited for the follower it removed.
            self._send_replies(self.data_plane.partition_changed(
                tp, outcome.committed_bytes, outcome.role_changed))
            self._send_replies(self.groups.partition_changed(tp))
        except ZlogError as error:
            code, text = error.code, error.message
            log.warning("assign %s-%d refused: %s", message.topic, message.partition, error)
        except Exception as error:
            log_failure(log, error, "assign %s-%d failed", message.topic, message.partition)
            code, text = ErrorCode.UNKNOWN_SERVER_ERROR, f"assign failed: {error!r}"
        self._send_control(protocol.Assigned(message.request_id, int(code), text))

    def _follow_or_lead(self, message: protocol.Assign) -> None:
        """A follower fetches from its leader's worker; a leader (or a leaderless replica)
        fetches from nobody."""
        if message.broker_id >= 0:
            self._broker_id = message.broker_id
            self.fetchers.settings = replace(self.fetchers.settings,
                                             replica_id=message.broker_id)
        self._broker_epoch = max(self._broker_epoch, message.broker_epoch)
        tp = TopicPartition(message.topic, message.partition)
        if not message.is_leader and message.leader >= 0 and message.leader_endpoint:
            self.fetchers.follow(tp, message.leader_endpoint)
        else:
            self.fetchers.unfollow(tp)

    def _on_unassign(self, message: protocol.Unassign) -> None:
        code, text = ErrorCode.NONE, ""
        try:
            self._unassign(message)
        except ZlogError as error:
            code, text = error.code, error.message
        except Exception as error:
            log_failure(log, error, "unassign %s-%d failed", message.topic, message.partition)
            code, text = ErrorCode.UNKNOWN_SERVER_ERROR, f"unassign failed: {error!r}"
        self._send_control(protocol.Unassigned(message.request_id, int(code), text))

    def _unassign(self, message: protocol.Unassign) -> None:
        topic = validate_topic_name(message.topic)
        tp = TopicPartition(topic, message.partition)
        self.fetchers.unfollow(tp)
        if self.host.unassign(tp, delete=message.delete):
            self._send_replies(self.data_plane.partition_removed(tp))
            self._send_replies(self.groups.partition_changed(tp))
        elif message.delete:
            self._delete_unowned(topic, message.partition)

    def _delete_unowned(self, topic: str, partition: int) -> None:
        """A deleted topic's data left behind by an earlier owner (or never opened) goes too."""
        PartitionLog.remove(self.options.data_dir, topic, partition, self.options.ring_dir)


# ---------------------------------------------------------------------------------- command


def _port_range(text: str) -> tuple[int, int]:
    first_text, _, last_text = text.partition("-")
    try:
        first, last = int(first_text), int(last_text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"port range must be A-B, not {text!r}") from None
    if not 1 <= first <= last <= 65_535:
        raise argparse.ArgumentTypeError(f"port range {text!r} is outside 1-65535 or reversed")
    return first, last


def parse_arguments(argv: Sequence[str] | None = None) -> tuple[WorkerOptions, LogSettings]:
    parser = argparse.ArgumentParser(prog="python -m zlog.broker.data.worker", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker-id", type=int, required=True)
    parser.add_argument("--supervisor", required=True, help="the supervisor's worker endpoint")
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--ring-dir", type=Path, required=True)
    parser.add_argument("--host", required=True, help="address to advertise (and bind)")
    parser.add_argument("--bind-host", default="",
                        help="address to bind, when others reach this one at --host")
    parser.add_argument("--port-range", type=_port_range, default=None, help="A-B inclusive")
    parser.add_argument("--preferred-port", type=int, default=0,
                        help="the replaced worker's port, tried first (0: none)")
    parser.add_argument("--ring-bytes", type=int, default=limits.RING_SIZE_BYTES_DEFAULT,
                        help="shared-memory ring per partition (bytes)")
    parser.add_argument("--ring-flush-bytes", type=int, default=0,
                        help="flush ring -> segment once this much is pending; 0: every append")
    parser.add_argument("--supervisor-silence-ms", type=int, default=SUPERVISOR_SILENCE_MS_MAX,
                        help="stop after this much silence once the parent process is gone")
    parser.add_argument("--supervisor-fd", type=int, action="append", dest="supervisor_fds",
                        default=[], help="a read end of the supervisor's lifeline (repeated)")
    parser.add_argument("--metrics-file", type=Path, default=None,
                        help="the file its supervisor reads its metrics from (none: off)")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--log-format", choices=LOG_FORMATS, default=LOG_FORMATS[0])
    parser.add_argument("--log-levels", default="", help="levels per logger, logger=level,...")
    parser.add_argument("--security-keys-dir", type=Path, default=None,
                        help="CURVE on every socket, with the broker's keys from here")
    parser.add_argument("--security-principal", default="broker",
                        help="the principal this worker presents to its peers")
    add_kafka_arguments(parser)
    for name, flag in flag_names().items():
        default = getattr(REPLICA_DEFAULTS, name)
        parser.add_argument(flag, dest="replica_" + name, type=int, default=default,
                            help=f"follower and ISR setting (default {default})")
    args = parser.parse_args(argv)
    if args.worker_id < 0:
        parser.error("--worker-id must be >= 0")
    if args.ring_bytes < limits.RING_SIZE_BYTES_MIN:
        parser.error(f"--ring-bytes must be >= {limits.RING_SIZE_BYTES_MIN}")
    if not 0 <= args.preferred_port <= 65_535:
        parser.error("--preferred-port must be a port number (0: none)")
    if args.supervisor_silence_ms < 0:
        parser.error("--supervisor-silence-ms must be >= 0")
    if any(fd < 0 for fd in args.supervisor_fds):
        parser.error("--supervisor-fd must be a file descriptor (>= 0)")
    if not 0 <= args.ring_flush_bytes < args.ring_bytes:
        parser.error("--ring-flush-bytes must be >= 0 and below --ring-bytes")
    for name, flag in flag_names().items():
        if getattr(args, "replica_" + name) < 1:
            parser.error(f"{flag} must be >= 1")
    options = WorkerOptions(
        args.worker_id, args.supervisor, args.data_dir, args.ring_dir, args.host,
        args.port_range, args.ring_bytes, args.ring_flush_bytes, args.supervisor_silence_ms,
        ReplicaSettings(**{name: getattr(args, "replica_" + name) for name in flag_names()}),
        args.bind_host, args.preferred_port, tuple(args.supervisor_fds), args.metrics_file,
        args.security_keys_dir, args.security_principal, KafkaPortOptions.from_arguments(args),
    )
    try:
        module_levels = parse_module_levels(args.log_levels)
    except ValueError as error:
        parser.error(f"--log-levels {error}")
    return options, LogSettings(str(args.log_level), args.log_format, module_levels)



_PR_SET_PDEATHSIG: Final = 1  # <linux/prctl.h>


def stop_with_parent() -> None:
    """Ask the kernel for SIGTERM when the supervisor dies (Linux; elsewhere a no-op).

    The signal follows the death of the thread that forked this process: the supervisor
    forks workers from its main thread only. A supervisor that died before this call leaves
    the worker with another parent already; its lifeline, or else the silence check in the
    loop, covers that case.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        log.debug("no PR_SET_PDEATHSIG here; relying on the supervisor-silence check")


def main(argv: Sequence[str] | None = None) -> int:
    options, logs = parse_arguments(argv)
    setup_logging(logs.level, logs.log_format, logs.module_levels, f"worker-{options.worker_id}")
    stop_with_parent()
    try:
        options.data_dir.mkdir(parents=True, exist_ok=True)
        options.ring_dir.mkdir(parents=True, exist_ok=True)
        if options.security_keys_dir is not None:  # before any socket is made
            curve.install(broker_security(options.security_keys_dir,
                                          options.security_principal))
        worker = Worker(options)
    except (ZlogError, zmq.ZMQError, OSError) as error:
        log.error("worker %d cannot start: %s", options.worker_id, error)
        return 1

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if os.getppid() != worker.parent_pid:  # the parent-death signal (stop_with_parent)
            log.warning("supervisor gone (its process died); stopping")
        else:
            log.info("signal %d: stopping", signum)
        worker.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return worker.run()


if __name__ == "__main__":
    sys.exit(main())
