"""A partition worker's Kafka port: Kafka clients produce to and fetch from the partitions this
worker leads directly, in the worker's own loop, beside its ZeroMQ data socket (docs/kafka.md,
docs/kafka-data-path.md).

Produce, Fetch, ListOffsets and OffsetForLeaderEpoch are served here; ApiVersions is answered
from the one table (zlog.kafka.api_versions); every other request (Metadata, the group and
admin APIs) is relayed as it came to this broker's Kafka gateway, the supervisor's port, whose
answer goes back with the client's correlation id, so a client that asks any node gets the
same cluster view.

Produce and Fetch become the data plane's own requests with a `TranslatedHeader` whose encoder
answers in Kafka's form at the request's version: appends, idempotence, acks=all waits, long
polls and wake-ups are the native path's, not a copy of it. What Kafka checks that zlog's own
protocol does not is checked here, before the data plane sees the partition: the client's
current leader epoch (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), zstd only from Produce 7 and
Fetch 10 (UNSUPPORTED_COMPRESSION_TYPE), the records field split into whole batches.

With security on the port speaks SASL_SSL: TLS in the worker's loop (kafka_sockets.py), then
the client's login (zlog/kafka/kafka_login.py) against the users the supervisor sent
(DataSecurity). Produce and Fetch go to the data plane under the logged-in principal, which
checks the ACLs and holds the answer for the quotas as for a native client; ListOffsets and
OffsetForLeaderEpoch need describe on each topic; a relayed request carries the principal to
the gateway (zlog/kafka/relay.py).
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import ssl
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import zmq

from zlog.broker.data.data_plane import DataPlane
from zlog.broker.data.kafka_delete_records import serve_delete_records
from zlog.broker.data.kafka_sockets import (
    KafkaConnection,
    TlsKafkaConnection,
    accept_all,
    connect,
    listen,
)
from zlog.broker.data.partition import Partition
from zlog.broker.data.replica_requests import epoch_answers
from zlog.broker.kafka_port_settings import KafkaPortOptions
from zlog.errors import ErrorCode, ZlogError
from zlog.kafka.api_versions import list_offsets_timestamp_served
from zlog.kafka.data_responses import (
    FetchPartition,
    ProducePartition,
    encode_fetch_response,
    encode_produce_response,
    with_throttle_time,
)
from zlog.kafka.framing import FrameReader, FrameSizeError
from zlog.kafka.kafka_login import KafkaLogin
from zlog.kafka.relay import relayed_frame
from zlog.kafka.requests import BadRequest, KafkaRequest, parse_request
from zlog.kafka.responses import api_versions_response, error_response, respond
from zlog.kafka.tls import server_context
from zlog.record.header import (
    BATCH_LENGTH_AT,
    CODEC_MASK,
    LOG_OVERHEAD_BYTES,
    MAGIC,
    MAGIC_AT,
    Compression,
)
from zlog.transport.api import ApiKey
from zlog.transport.codec import TranslatedHeader
from zlog.transport.messages import Response
from zlog.transport.messages.cluster import EpochQuery, OffsetForLeaderEpochRequestV0
from zlog.transport.messages.data import (
    FetchEntry,
    FetchRequestV0,
    FetchResponseV0,
    ProduceEntry,
    ProduceRequestV0,
    ProduceResponseV0,
)
from zlog.transport.messages.security import ANONYMOUS
from zlog.transport.server import Reply
from zlog.transport.wire import Buffer
from zlog.types import TopicPartition

log = logging.getLogger(__name__)

IDENTITY_PREFIX: Final = b"\xffkafka:"
"""The data plane's peer identity of a Kafka connection: a ROUTER's own identities start with
a zero byte, so a reply is routed to the right door by its identity alone."""
_CONN_ID: Final = struct.Struct(">Q")
EPOLL_EVENTS_MAX: Final = 1024  # sockets taken from the epoll set per loop turn at most
_READABLE: Final = select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR
RESPONSE_BYTES_MIN: Final = 4  # a response's correlation id, its only fixed part
_ATTRIBUTES_LOW_AT: Final = 22  # the low byte of the attributes: the codec bits
ZSTD_PRODUCE_MIN: Final = 7
ZSTD_FETCH_MIN: Final = 10
NO_EPOCH: Final = -1
_DATA_KEYS: Final = frozenset({ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS,
                               ApiKey.OFFSET_FOR_LEADER_EPOCH, ApiKey.API_VERSIONS,
                               ApiKey.DELETE_RECORDS})


def epoch_refusal(partition: Partition | None, tp: TopicPartition,
                  current_leader_epoch: int) -> tuple[ErrorCode, str] | None:
    """Kafka's check of a client's leader epoch (KIP-320), or None when the request may go on.

    -1 is a client that does not know the epoch and skips the check, as in Kafka.
    """
    where = f"{tp.topic}-{tp.partition}"
    if partition is None or not partition.is_leader:
        return (ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"{where} is not led by this worker; refresh metadata")
    if current_leader_epoch in (NO_EPOCH, partition.leader_epoch):
        return None
    if current_leader_epoch < partition.leader_epoch:
        return (ErrorCode.FENCED_LEADER_EPOCH,
                f"{where}: leader epoch {current_leader_epoch} is older than "
                f"{partition.leader_epoch}; refresh metadata")
    return (ErrorCode.UNKNOWN_LEADER_EPOCH,
            f"{where}: leader epoch {current_leader_epoch} is newer than this leader's "
            f"{partition.leader_epoch}")


def split_batches(records: bytes | None, produce_version: int) -> tuple[memoryview, ...]:
    """A Produce partition's records field as whole RecordBatch v2 views, uncopied.

    Raises ZlogError: UNSUPPORTED_VERSION for a message set of magic 0 or 1 (the formats
    before RecordBatch v2 are not stored, as for Produce 0-2), CORRUPT_MESSAGE for framing that
    does not add up or a magic above 2, UNSUPPORTED_COMPRESSION_TYPE for zstd before Produce 7.
    The batches themselves are validated by the partition.
    """
    if not records:
        raise ZlogError(ErrorCode.CORRUPT_MESSAGE, "the partition's records are empty")
    view = memoryview(records)
    batches: list[memoryview] = []
    pos = 0
    while pos < view.nbytes:
        if view.nbytes - pos < LOG_OVERHEAD_BYTES + 1 + MAGIC_AT - LOG_OVERHEAD_BYTES:
            raise ZlogError(ErrorCode.CORRUPT_MESSAGE,
                            f"{view.nbytes - pos} bytes at {pos} cannot hold a batch header")
        (length,) = struct.unpack_from(">i", view, pos + BATCH_LENGTH_AT)
        end = pos + LOG_OVERHEAD_BYTES + length
        if length <= 0 or end > view.nbytes:
            raise ZlogError(ErrorCode.CORRUPT_MESSAGE,
                            f"a batch at byte {pos} claims {length} bytes, "
                            f"{view.nbytes - pos - LOG_OVERHEAD_BYTES} remain")
        magic = view[pos + MAGIC_AT]
        if magic < MAGIC:
            raise ZlogError(ErrorCode.UNSUPPORTED_VERSION,
                            f"a message set of magic {magic} at byte {pos}: zlog stores "
                            f"RecordBatch v2 (magic {MAGIC}) only")
        if magic != MAGIC:
            raise ZlogError(ErrorCode.CORRUPT_MESSAGE,
                            f"magic {magic} at byte {pos}: no such RecordBatch format")
        if (end - pos > _ATTRIBUTES_LOW_AT and produce_version < ZSTD_PRODUCE_MIN
                and view[pos + _ATTRIBUTES_LOW_AT] & CODEC_MASK == Compression.ZSTD):
            raise ZlogError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                            f"zstd batches need Produce {ZSTD_PRODUCE_MIN} or later, "
                            f"not {produce_version}")
        batches.append(view[pos:end])
        pos = end
    return tuple(batches)


def holds_zstd(chunks: Sequence[Buffer]) -> bool:
    """Whether any stored batch in `chunks` (whole batches back to back) is zstd."""
    for chunk in chunks:
        view = memoryview(chunk)
        pos = 0
        while pos + _ATTRIBUTES_LOW_AT < view.nbytes:
            if view[pos + _ATTRIBUTES_LOW_AT] & CODEC_MASK == Compression.ZSTD:
                return True
            (length,) = struct.unpack_from(">i", view, pos + BATCH_LENGTH_AT)
            pos += LOG_OVERHEAD_BYTES + length
    return False


@dataclass(frozen=True, slots=True)
class _Slot:
    """One partition of a Kafka request, in the request's order: answered by the data plane
    (refusal None) or refused here first."""

    topic: str
    partition: int
    refusal: tuple[ErrorCode, str] | None = None


def _grouped(slots: Sequence[_Slot], answers: Sequence[Any]) -> list[tuple[str, list[Any]]]:
    """Answers (one per slot) regrouped by topic in the request's order."""
    topics: list[tuple[str, list[Any]]] = []
    for slot, answer in zip(slots, answers, strict=True):
        if not topics or topics[-1][0] != slot.topic:
            topics.append((slot.topic, []))
        topics[-1][1].append(answer)
    return topics


class KafkaPort:
    """The worker's Kafka listener and its connections, served from the worker's poll loop."""

    def __init__(self, data_plane: DataPlane, listener: socket.socket, host: str,
                 gateway: str, tls: ssl.SSLContext | None = None) -> None:
        self.data_plane = data_plane
        self._tls = tls  # security on: SASL_SSL
        self._listener = listener
        self.endpoint = f"{host}:{listener.getsockname()[1]}"
        self._gateway = gateway
        self._connections: dict[int, KafkaConnection] = {}
        self._next_conn_id = 1
        # Every socket of the port is watched by one epoll set, and the worker's zmq.Poller
        # watches that set's one fd: a loop turn costs the sockets that are ready, not the
        # thousands that may be idle (zmq.Poller walks its whole list on every poll).
        self._epoll = select.epoll()
        self._registered: dict[int, int] = {}  # fd -> the epoll events it is watched for
        self._by_fd: dict[int, KafkaConnection] = {}
        # Only the connections something happened to are looked at in a loop turn, so
        # thousands of idle ones cost nothing: those with frames to serve, and those whose
        # output or state changed (their poll flags may change).
        self._ready: set[KafkaConnection] = set()
        self._touched: set[KafkaConnection] = set()
        self._in_poller = False
        self._upstream: socket.socket | None = None
        self._upstream_reader = FrameReader(min_bytes=RESPONSE_BYTES_MIN)
        self._upstream_out: KafkaConnection | None = None
        self._relayed: dict[int, tuple[int, int]] = {}  # upstream correlation -> (conn, own)
        self._next_relay_id = 1
        self.requests = 0

    @classmethod
    def open(cls, options: KafkaPortOptions, data_plane: DataPlane) -> KafkaPort:
        """Listen on the replaced worker's port if it is free (clients reconnect to the
        address they knew), else on one the OS picks."""
        bind_host = options.bind_host or options.host
        listener: socket.socket | None = None
        if options.preferred_port:
            try:
                listener = listen(bind_host, options.preferred_port)
            except OSError as error:
                log.info("kafka port %d of the worker replaced does not bind (%s): binding "
                         "another", options.preferred_port, error)
        tls = None
        if data_plane.security is not None and options.tls_cert_file is None:
            raise ZlogError(ErrorCode.INVALID_CONFIG, "security is on and the Kafka port has "
                                                      "no certificate: it speaks SASL_SSL only")
        if options.tls_cert_file is not None:
            assert options.tls_key_file is not None
            tls = server_context(options.tls_cert_file, options.tls_key_file,
                                 options.tls_ca_file)
        if listener is None:
            listener = listen(bind_host, 0)
        return cls(data_plane, listener, options.host, options.gateway, tls)

    # ------------------------------------------------------------------ the loop's side

    def sync(self, poller: zmq.Poller) -> None:
        """Before the loop sleeps: write what this turn answered, then make `poller` watch
        the listener, each connection (for output too while some is left) and the gateway
        connection."""
        if not self._in_poller:
            poller.register(self._epoll.fileno(), zmq.POLLIN)
            self._in_poller = True
            self._watch(self._listener.fileno(), select.EPOLLIN)
        touched, self._touched = self._touched, set()
        for conn in touched:
            if conn.closed and conn.conn_id not in self._connections:
                continue  # dropped already
            if conn.out:
                conn.flush()
            if conn.done():
                self._drop(conn)
                continue
            self._watch(conn.fileno(), select.EPOLLIN | (select.EPOLLOUT if conn.out else 0))
        out = self._upstream_out
        if out is not None:
            if out.out:
                out.flush()
            if out.closed:
                self._lose_upstream()
            else:
                self._watch(out.fileno(), select.EPOLLIN | (select.EPOLLOUT if out.out else 0))

    def _watch(self, fd: int, events: int) -> None:
        known = self._registered.get(fd)
        if known == events:
            return
        if known is None:
            self._epoll.register(fd, events)
        else:
            self._epoll.modify(fd, events)
        self._registered[fd] = events

    def _unwatch(self, fd: int) -> None:
        """Before the socket closes (a closed fd leaves the set by itself)."""
        if self._registered.pop(fd, None) is not None:
            with contextlib.suppress(OSError, ValueError):
                self._epoll.unregister(fd)

    def has_work(self) -> bool:
        """A connection has frames to serve now (the loop must not sleep)."""
        return any(c.frames and not c.busy for c in self._ready)

    def _send(self, conn: KafkaConnection, buffers: Sequence[Buffer]) -> None:
        conn.send(buffers)
        self._touched.add(conn)

    def owns(self, identity: bytes) -> bool:
        return identity.startswith(IDENTITY_PREFIX)

    def deliver(self, identity: bytes, frames: Sequence[Buffer]) -> None:
        """A data plane answer for one of our connections (now or after a wait)."""
        (conn_id,) = _CONN_ID.unpack_from(identity, len(IDENTITY_PREFIX))
        conn = self._connections.get(conn_id)
        if conn is None:
            return  # the client went away meanwhile
        conn.busy = False
        self._send(conn, frames)

    def serve(self, polled_events: Mapping[Any, int], now_ms: int) -> list[Reply]:
        """Accept, read, write and serve; returns the data plane's replies for others (the
        ZeroMQ peers whose long polls a Kafka produce woke)."""
        events: dict[int, int] = {}
        if polled_events.get(self._epoll.fileno()):
            events = dict(self._epoll.poll(0, EPOLL_EVENTS_MAX))
        if events.get(self._listener.fileno()):
            for sock in accept_all(self._listener):
                conn = self._accepted(sock)
                self._connections[conn.conn_id] = conn
                self._by_fd[conn.fileno()] = conn
                self._touched.add(conn)
                self._next_conn_id += 1
        for key, flags in events.items():
            polled = self._by_fd.get(key)
            if polled is None:
                continue
            if flags & select.EPOLLOUT:
                polled.flush()
                self._touched.add(polled)
            if (flags & _READABLE and not polled.read()) or polled.closed:
                self._drop(polled)
            elif polled.frames:
                self._ready.add(polled)
            if polled.closing or polled.out:  # a TLS handshake's answer to write
                self._touched.add(polled)
        if self._upstream_out is not None:
            flags = events.get(self._upstream_out.fileno(), 0)
            if flags:
                self._serve_upstream(flags)
        return self.serve_pending(now_ms)

    def _accepted(self, sock: socket.socket) -> KafkaConnection:
        if self._tls is None:
            return KafkaConnection(sock, self._next_conn_id)
        conn = TlsKafkaConnection(sock, self._next_conn_id, self._tls)
        security = self.data_plane.security
        assert security is not None, "TLS is security on"
        conn.login = KafkaLogin(security.user, f"connection {conn.conn_id}")
        return conn

    def serve_pending(self, now_ms: int) -> list[Reply]:
        replies: list[Reply] = []
        for conn in list(self._ready):
            while conn.frames and not conn.busy and not conn.closed:
                replies.extend(self._serve_frame(conn, conn.frames.popleft(), now_ms))
            if not conn.frames or conn.closed:
                self._ready.discard(conn)
                self._touched.add(conn)  # a closing one may be done now
        return self._route(replies)

    def close(self) -> None:
        """Shutdown: the last answers (parked fetches answered empty) go out, then all closes."""
        for conn in self._connections.values():
            conn.flush()
            conn.close()
        self._connections.clear()
        if self._upstream_out is not None:
            self._upstream_out.close()
        self._listener.close()
        self._epoll.close()

    def _drop(self, conn: KafkaConnection) -> None:
        if conn.conn_id in self._connections:
            fd = conn.fileno()
            self._unwatch(fd)
            self._by_fd.pop(fd, None)
            del self._connections[conn.conn_id]
        self._ready.discard(conn)
        conn.close()

    def _route(self, replies: list[Reply]) -> list[Reply]:
        others: list[Reply] = []
        for identity, frames in replies:
            if self.owns(identity):
                self.deliver(identity, frames)
            else:
                others.append((identity, frames))
        return others

    # ------------------------------------------------------------------ requests

    def _serve_frame(self, conn: KafkaConnection, frame: bytes, now_ms: int) -> list[Reply]:
        if conn.login is not None and conn.login.closed:
            return []  # refused: the connection closes once its answer is out
        self.requests += 1
        try:
            request = parse_request(frame)
        except BadRequest as bad:
            self._send(conn, [error_response(bad.api_key, bad.api_version, bad.correlation_id,
                                      bad.error, request=bad.body, message=bad.reason)])
            return []
        key = request.api_key
        login = conn.login
        principal = ANONYMOUS
        if login is not None:
            step = login.step(request)
            if step is not None:
                if step.reply is not None:
                    self._send(conn, [step.reply])
                if step.close:
                    conn.frames.clear()
                    conn.closing = True
                return []
            principal = login.principal or ANONYMOUS
        if key not in _DATA_KEYS:
            self._relay(conn, frame, request, principal)
            return []
        identity = IDENTITY_PREFIX + _CONN_ID.pack(conn.conn_id)
        try:
            if key == ApiKey.PRODUCE:
                return self._produce(conn, identity, request, now_ms, principal)
            if key == ApiKey.FETCH:
                return self._fetch(conn, identity, request, now_ms, principal)
            if key == ApiKey.DELETE_RECORDS:
                return serve_delete_records(self.data_plane, conn, identity, request, now_ms,
                                            principal=principal)
            if key == ApiKey.LIST_OFFSETS:
                self._send(conn, [self._list_offsets(request, principal)])
            elif key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
                self._send(conn, [self._offset_for_leader_epoch(request, principal)])
            else:
                self._send(conn, [api_versions_response(request.api_version,
                                                        request.correlation_id,
                                                        sasl=login is not None)])
        except Exception:
            log.exception("kafka request %d v%d failed", key, request.api_version)
            conn.busy = False
            self._send(conn, [error_response(key, request.api_version, request.correlation_id,
                                      ErrorCode.UNKNOWN_SERVER_ERROR, request=request.body,
                                      message="internal error in the partition worker")])
        return []

    def _translated(self, request: KafkaRequest, native_key: int,
                    answer: Callable[[Response], list[Buffer]]) -> TranslatedHeader:
        def answer_error(code: ErrorCode, message: str) -> list[Buffer]:
            return [error_response(request.api_key, request.api_version,
                                   request.correlation_id, code, request=request.body,
                                   message=message)]

        def throttled(frames: Sequence[Buffer], throttle_ms: int) -> list[Buffer]:
            return with_throttle_time(request.api_key == ApiKey.PRODUCE, request.api_version,
                                      frames, throttle_ms)

        return TranslatedHeader(native_key, 0, request.correlation_id, 0, answer, answer_error,
                                throttled)

    def _produce(self, conn: KafkaConnection, identity: bytes, request: KafkaRequest,
                 now_ms: int, principal: str) -> list[Reply]:
        body = request.body
        version = request.api_version
        slots: list[_Slot] = []
        entries: list[ProduceEntry] = []
        for topic in body.topic_data:
            for data in topic.partition_data:
                try:
                    batches = split_batches(data.records, version)
                except ZlogError as error:
                    slots.append(_Slot(topic.name, data.index, (error.code, error.message)))
                    continue
                slots.append(_Slot(topic.name, data.index))
                entries.append(ProduceEntry(topic.name, data.index, batches))
        acks = int(body.acks)

        def answer(response: Response) -> list[Buffer]:
            assert isinstance(response, ProduceResponseV0)
            results = iter(response.entries)
            answers: list[ProducePartition] = []
            for slot in slots:
                if slot.refusal is not None:
                    code, message = slot.refusal
                    answers.append(ProducePartition(slot.partition, int(code), -1, -1, message))
                    continue
                result = next(results)
                answers.append(ProducePartition(
                    slot.partition, int(result.error_code), result.base_offset,
                    result.log_start_offset, result.error_message or None))
            return [encode_produce_response(version, request.correlation_id,
                                            _grouped(slots, answers))]

        if not entries:
            if acks != 0:
                self._send(conn, answer(ProduceResponseV0(())))
            return []
        timeout_ms = max(int(body.timeout.total_seconds() * 1000), 0)
        header = self._translated(request, int(ApiKey.PRODUCE), answer)
        conn.busy = acks != 0
        replies = self.data_plane.handle_translated(
            identity, header, ProduceRequestV0(acks, timeout_ms, tuple(entries)), now_ms,
            principal)
        if acks == 0:
            conn.busy = False
        return replies

    def _fetch(self, conn: KafkaConnection, identity: bytes, request: KafkaRequest,
               now_ms: int, principal: str) -> list[Reply]:
        body = request.body
        version = request.api_version
        partitions = self.data_plane.partitions
        slots: list[_Slot] = []
        entries: list[FetchEntry] = []
        for topic in body.topics:
            for wanted in topic.partitions:
                tp = TopicPartition(topic.topic, wanted.partition)
                current = getattr(wanted, "current_leader_epoch", NO_EPOCH)
                refusal = epoch_refusal(partitions.get(tp), tp, current)
                slots.append(_Slot(topic.topic, wanted.partition, refusal))
                if refusal is None:
                    entries.append(FetchEntry(topic.topic, wanted.partition,
                                              wanted.fetch_offset,
                                              max(wanted.partition_max_bytes, 0)))

        def answer(response: Response) -> list[Buffer]:
            assert isinstance(response, FetchResponseV0)
            results = iter(response.entries)
            answers: list[FetchPartition] = []
            for slot in slots:
                if slot.refusal is not None:
                    answers.append(FetchPartition(slot.partition, int(slot.refusal[0]), -1, -1))
                    continue
                result = next(results)
                code = int(result.error_code)
                chunks = result.chunks
                if version < ZSTD_FETCH_MIN and chunks and holds_zstd(chunks):
                    code, chunks = int(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE), ()
                answers.append(FetchPartition(slot.partition, code, result.high_watermark,
                                              result.log_start_offset, chunks))
            return encode_fetch_response(version, request.correlation_id,
                                         _grouped(slots, answers))

        max_wait_ms = max(int(body.max_wait.total_seconds() * 1000), 0)
        native = FetchRequestV0(-1, max_wait_ms if entries else 0, max(body.min_bytes, 0),
                                max(getattr(body, "max_bytes", 2**31 - 1), 0), tuple(entries))
        header = self._translated(request, int(ApiKey.FETCH), answer)
        conn.busy = True
        return self.data_plane.handle_translated(identity, header, native, now_ms, principal)

    def _described(self, principal: str, topic: str) -> tuple[ErrorCode, str] | None:
        """TOPIC_AUTHORIZATION_FAILED unless `principal` may describe `topic` (security on)."""
        security = self.data_plane.security
        if security is None or security.authorizer.allowed(principal, "describe", "topic",
                                                           topic):
            return None
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"principal {principal!r} may not " \
                                                     f"describe topic {topic!r}"

    def _list_offsets(self, request: KafkaRequest, principal: str) -> bytes:
        partitions = self.data_plane.partitions
        topics = []
        for topic in request.body.topics:
            answers = []
            refused = self._described(principal, topic.name)
            for wanted in topic.partitions:
                tp = TopicPartition(topic.name, wanted.partition_index)
                partition = partitions.get(tp)
                answer: dict[str, Any] = {"partition_index": wanted.partition_index,
                                          "timestamp": -1, "offset": -1, "leader_epoch": -1}
                refusal = refused or epoch_refusal(partition, tp, getattr(
                    wanted, "current_leader_epoch", NO_EPOCH))
                if refusal is not None or partition is None:
                    assert refusal is not None, "no partition is NOT_LEADER_OR_FOLLOWER"
                    answer["error_code"] = int(refusal[0])
                    answers.append(answer)
                    continue
                if not list_offsets_timestamp_served(int(wanted.timestamp),
                                                     request.api_version):
                    answer["error_code"] = int(ErrorCode.UNSUPPORTED_VERSION)
                    answers.append(answer)
                    continue
                try:
                    offset, timestamp_ms = partition.list_offset(int(wanted.timestamp))
                except ZlogError as error:
                    answer["error_code"] = int(error.code)
                    answers.append(answer)
                    continue
                epoch = -1
                if offset >= 0:
                    epoch = (partition.leader_epoch if offset >= partition.high_watermark
                             else partition.epochs.epoch_at(offset))
                answer.update(error_code=0, offset=offset, timestamp=timestamp_ms,
                              leader_epoch=epoch)
                answers.append(answer)
            topics.append({"name": topic.name, "partitions": answers})
        return respond(ApiKey.LIST_OFFSETS, request.api_version, request.correlation_id,
                       {"throttle_time_ms": 0, "topics": topics})

    def _offset_for_leader_epoch(self, request: KafkaRequest, principal: str) -> bytes:
        partitions = self.data_plane.partitions
        queries = []
        refused: dict[tuple[str, int], int] = {}
        for topic in request.body.topics:
            refusal = self._described(principal, topic.topic)
            for wanted in topic.partitions:
                if refusal is not None:
                    refused[(topic.topic, wanted.partition)] = int(refusal[0])
                    continue
                current = wanted.current_leader_epoch
                partition = partitions.get(TopicPartition(topic.topic, wanted.partition))
                if current == NO_EPOCH and partition is not None:
                    current = partition.leader_epoch  # a client that skips the check
                queries.append(EpochQuery(topic.topic, wanted.partition, current,
                                          wanted.leader_epoch))
        answers = epoch_answers(partitions, OffsetForLeaderEpochRequestV0(-1, tuple(queries)))
        topics: list[dict[str, Any]] = []
        for answer in answers.answers:
            if not topics or topics[-1]["topic"] != answer.topic:
                topics.append({"topic": answer.topic, "partitions": []})
            topics[-1]["partitions"].append({
                "error_code": answer.error_code, "partition": answer.partition,
                "leader_epoch": answer.leader_epoch, "end_offset": answer.end_offset})
        for (name, index), code in refused.items():
            topics.append({"topic": name, "partitions": [{
                "error_code": code, "partition": index, "leader_epoch": NO_EPOCH,
                "end_offset": -1}]})
        return respond(ApiKey.OFFSET_FOR_LEADER_EPOCH, request.api_version,
                       request.correlation_id, {"throttle_time_ms": 0, "topics": topics})

    # ------------------------------------------------------------------ the gateway relay

    def _relay(self, conn: KafkaConnection, frame: bytes, request: KafkaRequest,
               principal: str) -> None:
        """Pass a request this port does not serve to the broker's Kafka gateway, as it came
        but for the correlation id (and, with security on, behind the client's principal),
        and the gateway's answer back the same way."""
        upstream = self._upstream_connection()
        if upstream is None:
            self._send(conn, [error_response(request.api_key, request.api_version,
                                      request.correlation_id, ErrorCode.REQUEST_TIMED_OUT,
                                      request=request.body,
                                      message="this broker's Kafka gateway is not reachable")])
            return
        relay_id = self._next_relay_id
        self._next_relay_id = relay_id % 0x7FFFFFFF + 1
        self._relayed[relay_id] = (conn.conn_id, request.correlation_id)
        conn.busy = True
        rewritten = bytearray(frame)
        struct.pack_into(">i", rewritten, 4, relay_id)
        upstream.send(relayed_frame(principal, rewritten) if conn.login is not None
                      else [struct.pack(">i", len(rewritten)), rewritten])

    def _upstream_connection(self) -> KafkaConnection | None:
        if self._upstream_out is not None and not self._upstream_out.closed:
            return self._upstream_out
        if not self._gateway:
            return None
        try:
            sock = connect(self._gateway)
        except (OSError, ValueError) as error:
            log.warning("kafka gateway %s: %s", self._gateway, error)
            return None
        self._upstream_out = KafkaConnection(sock, 0)
        self._upstream_reader = FrameReader(min_bytes=RESPONSE_BYTES_MIN)
        return self._upstream_out

    def _serve_upstream(self, flags: int) -> None:
        upstream = self._upstream_out
        assert upstream is not None
        if flags & select.EPOLLOUT:
            upstream.flush()
        if not flags & _READABLE:
            return
        try:
            data = upstream.sock.recv(1 << 20)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._lose_upstream()
            return
        try:
            frames = self._upstream_reader.feed(data)
        except FrameSizeError:
            self._lose_upstream()
            return
        for frame in frames:
            (relay_id,) = struct.unpack_from(">i", frame)
            waiting = self._relayed.pop(relay_id, None)
            if waiting is None:
                continue
            conn = self._connections.get(waiting[0])
            if conn is None:
                continue
            answer = bytearray(frame)
            struct.pack_into(">i", answer, 0, waiting[1])
            conn.busy = False
            self._send(conn, [struct.pack(">i", len(answer)), answer])

    def _lose_upstream(self) -> None:
        """The gateway went away: every relayed request's client is cut off (it reconnects
        and asks again), as a broker that restarts would cut it off."""
        if self._upstream_out is not None:
            self._unwatch(self._upstream_out.fd)
            self._upstream_out.close()
            self._upstream_out = None
        for conn_id, _ in self._relayed.values():
            conn = self._connections.get(conn_id)
            if conn is not None:
                self._drop(conn)
        self._relayed.clear()
