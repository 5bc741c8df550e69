"""Every row of the bad-input catalogue that one broker can meet, against a real `zlog serve`.

Spec: the "Bad-input catalogue" of docs/reliability.md §4 (rows 1-19), docs/protocol.md
for the codes each endpoint answers (a worker answers NOT_LEADER_OR_FOLLOWER for a partition it
does not own, unknown topics included; the control endpoint answers UNKNOWN_TOPIC_OR_PARTITION)
and DESIGN.md section 5: bad input gets a clear error code, the process keeps serving, nothing
stored changes.

One broker (two workers) serves the whole module. Each case runs its bad input between two
snapshots of everything stored (log start and end offsets, high watermarks, the bytes of a full
fetch of every partition, the topic list, the files in the data and ring directories), which
must be identical; then fresh clients must still produce and fetch on both workers and the
supervisor must answer, with no process restarted.
"""

from __future__ import annotations

import contextlib
import os
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import crc32c
import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from zlog import limits
from zlog.broker.data.producer_snapshots import SNAPSHOT_SUFFIX
from zlog.broker.topic_configs import TOPIC_CONFIG_KEYS
from zlog.client import Producer
from zlog.errors import ErrorCode, ZlogError
from zlog.record.arrays import parse_batch
from zlog.record.header import Compression, read_header
from zlog.record.records import NewRecord, build_batch
from zlog.transport.codec import decode_response, encode_request
from zlog.transport.messages import (
    ErrorBody,
    Request,
)
from zlog.transport.messages.admin import (
    ApiVersionsRequestV0,
    ApiVersionsResponseV0,
    CreateTopicsRequestV0,
    CreateTopicsResponseV0,
    TopicSpec,
)
from zlog.transport.messages.data import (
    FetchEntry,
    FetchRequestV0,
    FetchResponseV0,
    FetchResult,
    ListOffsetsPartition,
    ListOffsetsRequestV0,
    ListOffsetsResponseV0,
    ListOffsetsResult,
    ProduceEntry,
    ProduceRequestV0,
    ProduceResponseV0,
    ProduceResult,
)
from zlog.transport.rpc import RpcClient
from zlog.types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from zlog_testbed.broker_process import BrokerProcess, broker_process
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

CALL_TIMEOUT_MS: Final = 10_000
REPLY_TIMEOUT_S: Final = 10.0
REQUEST_HEADER: Final = struct.Struct(">hhiH")
PROBE_CORRELATION_ID: Final = 0x5EED
TIMESTAMP_SKEW_CONFIG: Final = "message.timestamp.difference.max.ms"

VICTIM: Final = "victim"  # 2 partitions: 0 on one worker, 1 on the other
KEYED: Final = "keyed.topic"  # cleanup.policy=compact; its name has a dot (collision case)
SMALL_SEGMENTS: Final = "small-segments"  # segment.bytes=1024
MIN_ISR: Final = "min-isr"  # min.insync.replicas=2 on a single broker
TRIMMED: Final = "trimmed"  # retention has moved its log start above 0
HEALTH: Final = "health"  # 2 partitions, the good produce+fetch after each case
SKEWED: Final = "skew-bounded"  # message.timestamp.difference.max.ms=60000
SKEW_MAX_MS: Final = 60_000
SEGMENT_BYTES_SMALL: Final = 1024
TRIMMED_BATCHES: Final = 4
STORED: Final = (VICTIM, KEYED, SMALL_SEGMENTS, MIN_ISR, TRIMMED, SKEWED)

# Batch header field positions (RecordBatch v2, zlog/record/header.py).
_BATCH_LENGTH_AT: Final = 8
_MAGIC_AT: Final = 16
_CRC_AT: Final = 17
_ATTRIBUTES_AT: Final = 21
_LAST_OFFSET_DELTA_AT: Final = 23
_RECORD_COUNT_AT: Final = 57
_CONTROL_BIT: Final = 0x20
_TRANSACTIONAL_BIT: Final = 0x10


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _batch(*values: bytes, keys: tuple[bytes | None, ...] | None = None,
           compression: Compression = Compression.NONE) -> bytes:
    keys = keys or (None,) * len(values)
    records = [NewRecord(value, key) for value, key in zip(values, keys, strict=True)]
    return build_batch(records, base_timestamp_ms=_now_ms(), compression=compression)


def _rewritten(batch: bytes, position: int, layout: str, value: int, *,
               fix_crc: bool = True) -> bytes:
    """`batch` with one header field changed, its CRC-32C recomputed unless told otherwise."""
    changed = bytearray(batch)
    struct.pack_into(layout, changed, position, value)
    if fix_crc:
        struct.pack_into(">I", changed, _CRC_AT, crc32c.crc32c(bytes(changed[_CRC_AT + 4:])))
    return bytes(changed)


# ---------------------------------------------------------------------------------- clients


@contextlib.contextmanager
def _dealer(endpoint: str, *, connect: bool = True) -> Iterator[zmq.Socket[bytes]]:
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    if connect:
        sock.connect(endpoint)
    try:
        yield sock
    finally:
        sock.close(linger=0)


def _receive(sock: zmq.Socket[bytes], timeout_s: float) -> list[bytes] | None:
    if not sock.poll(int(timeout_s * 1000)):
        return None
    frames: list[bytes] = sock.recv_multipart()
    return frames


def _raw(api_key: int, version: int, body: bytes, *batches: bytes,
         correlation_id: int = 77) -> list[bytes]:
    return [REQUEST_HEADER.pack(api_key, version, correlation_id, 0), body, *batches]


def _expect_error_reply(endpoint: str, frames: list[bytes], code: ErrorCode) -> str:
    """The request as a whole fails with `code` in the header; returns the message."""
    with _dealer(endpoint) as sock:
        sock.send_multipart(frames)
        reply = _receive(sock, REPLY_TIMEOUT_S)
    assert reply is not None, f"no reply from {endpoint}"
    header, body = decode_response(reply)
    expected_id = REQUEST_HEADER.unpack_from(frames[0])[2]
    assert header.correlation_id == expected_id
    assert isinstance(body, ErrorBody), body
    assert (ErrorCode(header.error_code), body.error_code) == (code, code), body.message
    assert body.message, "an error reply carries a readable message"
    return body.message


def _expect_no_reply(endpoint: str, frames: list[bytes]) -> None:
    """No answer to `frames`: the next reply on the connection answers the probe sent after it.

    One connection's requests are handled in order and answered at once, so a reply to the
    bad message would arrive before the probe's.
    """
    with _dealer(endpoint) as sock:
        sock.send_multipart(frames)
        sock.send_multipart(encode_request(PROBE_CORRELATION_ID, ApiVersionsRequestV0()))
        reply = _receive(sock, REPLY_TIMEOUT_S)
        assert reply is not None, f"no reply to the probe from {endpoint}"
        header, body = decode_response(reply)
        assert header.correlation_id == PROBE_CORRELATION_ID, (header, body)
        assert isinstance(body, ApiVersionsResponseV0)
        assert _receive(sock, 0.05) is None


def _call(endpoint: str, request: Request) -> Any:
    with RpcClient(endpoint) as rpc:
        return rpc.call(request, CALL_TIMEOUT_MS)


def _produce(endpoint: str, topic: str, partition: int, *batches: bytes,
             acks: int = 1) -> ProduceResult:
    response = _call(endpoint, ProduceRequestV0(
        acks, 5_000, (ProduceEntry(topic, partition, batches),)))
    assert isinstance(response, ProduceResponseV0)
    (result,) = response.entries
    assert (result.topic, result.partition) == (topic, partition)
    return result


def _fetch(endpoint: str, topic: str, partition: int, offset: int, *, max_wait_ms: int = 0,
           max_bytes: int = 1 << 20) -> FetchResult:
    response = _call(endpoint, FetchRequestV0(
        -1, max_wait_ms, 1, max_bytes, (FetchEntry(topic, partition, offset, max_bytes),)))
    assert isinstance(response, FetchResponseV0)
    (result,) = response.entries
    return result


def _list_offset(endpoint: str, topic: str, partition: int,
                 timestamp: int) -> ListOffsetsResult:
    response = _call(endpoint, ListOffsetsRequestV0(
        topic, (ListOffsetsPartition(partition, timestamp),)))
    assert isinstance(response, ListOffsetsResponseV0)
    (result,) = response.partitions
    return result


def _create(endpoint: str, *specs: TopicSpec) -> list[tuple[str, int]]:
    response = _call(endpoint, CreateTopicsRequestV0(specs))
    assert isinstance(response, CreateTopicsResponseV0)
    return [(t.name, t.error_code) for t in response.topics]


# ---------------------------------------------------------------------------------- the broker


@dataclass
class Env:
    broker: BrokerProcess
    endpoints: dict[tuple[str, int], str]
    worker_pids: list[int]
    health_counter: Iterator[int] = field(default_factory=lambda: iter(range(1_000_000)))

    @property
    def control(self) -> str:
        return self.broker.endpoint

    def at(self, topic: str, partition: int = 0) -> str:
        return self.endpoints[(topic, partition)]

    def stored_partitions(self) -> list[tuple[str, int]]:
        return sorted(tp for tp in self.endpoints if tp[0] in STORED)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with broker_process(tmp_path_factory.mktemp("logs"), workers=2) as broker:
        control = broker.endpoint
        # First, so that the worker's retention pass (every 5 s) runs during the setup.
        assert _create(control, TopicSpec(TRIMMED, 1, 1, {
            "segment.bytes": "100", "retention.bytes": "1"})) == [(TRIMMED, 0)]
        assert _create(
            control,
            TopicSpec(VICTIM, 2),
            TopicSpec(KEYED, 1, 1, {"cleanup.policy": "compact"}),
            TopicSpec(SMALL_SEGMENTS, 1, 1, {"segment.bytes": str(SEGMENT_BYTES_SMALL)}),
            TopicSpec(MIN_ISR, 1, 1, {"min.insync.replicas": "2"}),
            TopicSpec(HEALTH, 2),
            TopicSpec(SKEWED, 1, 1, {TIMESTAMP_SKEW_CONFIG: str(SKEW_MAX_MS)}),
        ) == [(VICTIM, 0), (KEYED, 0), (SMALL_SEGMENTS, 0), (MIN_ISR, 0), (HEALTH, 0),
              (SKEWED, 0)]
        endpoints = {(topic, partition): broker.data_endpoint(topic, partition)
                     for topic, count in ((TRIMMED, 1), (VICTIM, 2), (KEYED, 1),
                                          (SMALL_SEGMENTS, 1), (MIN_ISR, 1), (HEALTH, 2),
                                          (SKEWED, 1))
                     for partition in range(count)}
        assert endpoints[(VICTIM, 0)] != endpoints[(VICTIM, 1)], "one partition per worker"
        assert {endpoints[(HEALTH, 0)], endpoints[(HEALTH, 1)]} == {
            endpoints[(VICTIM, 0)], endpoints[(VICTIM, 1)]}
        for index in range(TRIMMED_BATCHES):  # 1 batch per segment: 100 bytes hold one
            assert _produce(endpoints[(TRIMMED, 0)], TRIMMED, 0,
                            _batch(f"t{index}".encode())).base_offset == index
        for partition, count in ((0, 3), (1, 2)):
            for index in range(count):
                result = _produce(endpoints[(VICTIM, partition)], VICTIM, partition,
                                  _batch(f"v{partition}-{index}".encode(), b"second"))
                assert (result.error_code, result.base_offset) == (0, 2 * index)
        keyed = _batch(b"a1", b"b1", keys=(b"a", b"b"), compression=Compression.LZ4)
        assert _produce(endpoints[(KEYED, 0)], KEYED, 0, keyed).error_code == 0
        assert _produce(endpoints[(SMALL_SEGMENTS, 0)], SMALL_SEGMENTS, 0,
                        _batch(b"small")).error_code == 0
        assert _produce(endpoints[(MIN_ISR, 0)], MIN_ISR, 0, _batch(b"acks=1")).error_code == 0

        def trimmed() -> bool:
            start = _list_offset(endpoints[(TRIMMED, 0)], TRIMMED, 0, EARLIEST_TIMESTAMP)
            return start.offset == TRIMMED_BATCHES - 1  # only the active segment is left

        wait_until(trimmed, 30, interval_s=0.1, what="retention to trim the log start")
        yield Env(broker, endpoints, broker.worker_pids())


# ---------------------------------------------------------------------------------- snapshots


@dataclass(frozen=True)
class PartitionState:
    log_start_offset: int
    high_watermark: int
    log_end_offset: int
    stored_bytes: bytes


def _read_everything(endpoint: str, topic: str, partition: int) -> PartitionState:
    start = _list_offset(endpoint, topic, partition, EARLIEST_TIMESTAMP)
    end = _list_offset(endpoint, topic, partition, LATEST_TIMESTAMP)
    assert start.error_code == end.error_code == 0
    offset, chunks = start.offset, []
    high_watermark = end.offset
    while offset < end.offset:
        result = _fetch(endpoint, topic, partition, offset)
        assert result.error_code == 0, result
        assert result.chunks, f"no data at {offset} below the HW {result.high_watermark}"
        data = b"".join(bytes(chunk) for chunk in result.chunks)
        chunks.append(data)
        position = 0
        while position < len(data):
            header = read_header(data, position)
            offset = header.next_offset
            position += header.size_bytes
        high_watermark = result.high_watermark
    return PartitionState(start.offset, high_watermark, end.offset, b"".join(chunks))


# Bookkeeping a worker rewrites on its own schedule (derived from the stored batches, which
# the partition states compare byte for byte): its appearance is not a change to stored data.
_BOOKKEEPING_SUFFIXES: Final = (SNAPSHOT_SUFFIX, f"{SNAPSHOT_SUFFIX}.tmp")  # producer snapshots


def _files(directory: Path) -> list[str]:
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*")
                  if "__raft" not in path.parts
                  and not path.name.endswith(_BOOKKEEPING_SUFFIXES))


def _snapshot(env: Env) -> dict[str, Any]:
    broker = env.broker
    topics = sorted(t.name for t in broker.metadata(None).topics)
    return {
        "topics": topics,
        "partitions": {tp: _read_everything(env.endpoints[tp], *tp)
                       for tp in env.stored_partitions()},
        "data files": _files(broker.data_dir),
        "beside the data dir": sorted(p.name for p in broker.data_dir.parent.iterdir()),
        "ring files": _files(broker.ring_dir),
        "escaped": _escaped_paths(broker),
    }


ESCAPING_NAMES: Final = ("../x", "../../x", "x/../../y", "/abs", "..", ".")


def _escaped_paths(broker: BrokerProcess) -> list[str]:
    """Where a topic name that escapes `<data>/<topic>-<p>` or the ring dir would land."""
    found = []
    for name in ESCAPING_NAMES:
        for partition in (0, 1):
            for base, suffix in ((broker.data_dir, ""), (broker.ring_dir, ".ring")):
                path = Path(os.path.normpath(base / f"{name}-{partition}{suffix}"))
                if path.exists():
                    found.append(str(path))
    return found


def _assert_still_serving(env: Env) -> None:
    """The supervisor answers, both workers take a good produce and fetch, none restarted."""
    broker = env.broker
    assert broker.process is not None and broker.process.poll() is None, broker.log_tail()
    assert broker.worker_pids() == env.worker_pids, "a worker was restarted"
    assert broker.served_endpoints(HEALTH) == {
        0: env.at(HEALTH, 0), 1: env.at(HEALTH, 1)}
    for partition in (0, 1):
        endpoint = env.at(HEALTH, partition)
        value = f"health-{next(env.health_counter)}".encode()
        produced = _produce(endpoint, HEALTH, partition, _batch(value))
        assert produced.error_code == 0, produced
        fetched = _fetch(endpoint, HEALTH, partition, produced.base_offset)
        assert fetched.error_code == 0 and fetched.chunks, fetched
        view = parse_batch(b"".join(bytes(chunk) for chunk in fetched.chunks))
        assert view.values()[-1] == value


# ---------------------------------------------------------------------------------- the cases


@dataclass(frozen=True)
class Case:
    row: int
    name: str
    act: Callable[[Env], None]

    @property
    def id(self) -> str:
        return f"row{self.row:02d}-{self.name}"


CASES: list[Case] = []


def case(row: int, name: str) -> Callable[[Callable[[Env], None]], Callable[[Env], None]]:
    def register(act: Callable[[Env], None]) -> Callable[[Env], None]:
        CASES.append(Case(row, name, act))
        return act

    return register


def _both_endpoints(env: Env) -> list[str]:
    return [env.control, env.at(VICTIM, 0), env.at(VICTIM, 1)]


# Row 1: wrong frame count, short or garbled fixed header.


@case(1, "not-even-a-header")
def _short_headers(env: Env) -> None:
    for endpoint in _both_endpoints(env):
        for frames in ([b""], [b"short"], [b"\x00" * 9], [b"\x00" * 9, b"{}"]):
            _expect_no_reply(endpoint, frames)


@case(1, "garbled-header")
def _garbled_header(env: Env) -> None:
    for endpoint in _both_endpoints(env):
        frames = [b"\xff\xfe\x00\x07\x12\x34\x56\x78\xff\xff", b"\x00garbage\xff"]
        _expect_error_reply(endpoint, frames, ErrorCode.UNSUPPORTED_VERSION)  # api key -2
        frames = [REQUEST_HEADER.pack(18, 0, 77, 0xFFFF), b"\x00garbage\xff"]
        _expect_error_reply(endpoint, frames, ErrorCode.INVALID_REQUEST)


@case(1, "header-without-body")
def _header_only(env: Env) -> None:
    for endpoint in _both_endpoints(env):
        _expect_error_reply(endpoint, _raw(18, 0, b"")[:1], ErrorCode.INVALID_REQUEST)


@case(1, "header-too-long")
def _long_header(env: Env) -> None:
    for endpoint in _both_endpoints(env):
        frames = [REQUEST_HEADER.pack(18, 0, 77, 0) + b"\x00", b"{}"]
        _expect_error_reply(endpoint, frames, ErrorCode.INVALID_REQUEST)


@case(1, "extra-frames")
def _extra_frames(env: Env) -> None:
    _expect_error_reply(env.control, _raw(3, 0, b'{"topics": null}', b"extra"),
                        ErrorCode.INVALID_REQUEST)
    body = b'{"topic": "victim", "partitions": [{"partition": 0, "timestamp": -1}]}'
    _expect_error_reply(env.at(VICTIM, 0), _raw(2, 0, body, b"extra"), ErrorCode.INVALID_REQUEST)
    # A produce whose entry accounts for fewer frames than the message carries.
    produce = _produce_body(1, [(VICTIM, 0, 1)])
    batch = _batch(b"never stored")
    _expect_error_reply(env.at(VICTIM, 0), _raw(0, 0, produce, batch, batch),
                        ErrorCode.INVALID_REQUEST)


# Row 2: unknown api key or version.


@case(2, "unknown-api-key-or-version")
def _unknown_api(env: Env) -> None:
    for endpoint in _both_endpoints(env):
        for api_key, version in ((999, 0), (-1, 0), (0x7FFF, 0), (18, 1), (18, -1)):
            message = _expect_error_reply(endpoint, _raw(api_key, version, b"{}"),
                                          ErrorCode.UNSUPPORTED_VERSION)
            assert "version" in message or "supported" in message, message
    data = env.at(VICTIM, 0)
    # A data api one version past its newest (Fetch v1 is a follower's replica fetch, v2 a
    # consumer's subscription).
    for api_key, version in ((0, 1), (1, 3), (2, 1)):
        _expect_error_reply(data, _raw(api_key, version, b"{}"), ErrorCode.UNSUPPORTED_VERSION)
    # A malformed follower fetch or subscription is refused whole, with nothing stored.
    _expect_error_reply(data, _raw(1, 1, b"{}"), ErrorCode.INVALID_REQUEST)
    _expect_error_reply(data, _raw(1, 2, b"{}"), ErrorCode.INVALID_REQUEST)
    # Each endpoint refuses the other's apis.
    _expect_error_reply(data, _raw(3, 0, b'{"topics": null}'), ErrorCode.UNSUPPORTED_VERSION)
    _expect_error_reply(data, _raw(19, 0, b'{"topics": []}'), ErrorCode.UNSUPPORTED_VERSION)
    _expect_error_reply(env.control, _raw(0, 0, _produce_body(1, [(VICTIM, 0, 1)]),
                                          _batch(b"never stored")),
                        ErrorCode.UNSUPPORTED_VERSION)
    _expect_error_reply(env.control, _raw(1, 0, b"\x00" * 20), ErrorCode.UNSUPPORTED_VERSION)


# Row 3: undecodable bodies.


def _produce_body(acks: int, entries: list[tuple[str, int, int]], timeout_ms: int = 5000,
                  count: int | None = None) -> bytes:
    parts = [struct.pack(">hiI", acks, timeout_ms, len(entries) if count is None else count)]
    for topic, partition, batch_count in entries:
        raw = topic.encode()
        parts.append(struct.pack(">iIH", partition, batch_count, len(raw)) + raw)
    return b"".join(parts)


def _fetch_body(entries: list[tuple[str, int, int, int]], max_wait_ms: int = 0,
                min_bytes: int = 1, max_bytes: int = 1 << 20, count: int | None = None) -> bytes:
    parts = [struct.pack(">iiiiI", -1, max_wait_ms, min_bytes, max_bytes,
                         len(entries) if count is None else count)]
    for topic, partition, offset, partition_max_bytes in entries:
        raw = topic.encode()
        parts.append(struct.pack(">iqiH", partition, offset, partition_max_bytes, len(raw)) + raw)
    return b"".join(parts)


@case(3, "produce-bodies")
def _bad_produce_bodies(env: Env) -> None:
    endpoint = env.at(VICTIM, 0)
    batch = _batch(b"never stored")
    good = _produce_body(1, [(VICTIM, 0, 1)])
    for body, frames in [
        (good[:5], [batch]),  # struct size mismatch: cut inside the fixed part
        (good[:-3], [batch]),  # cut inside the topic
        (good + b"\x00", [batch]),  # trailing bytes
        (_produce_body(1, [(VICTIM, 0, 1)], count=2**32 - 1), [batch]),  # absurd entry count
        (_produce_body(1, [(VICTIM, 0, 3)]), [batch]),  # claims more batch frames than sent
        (_produce_body(1, [(VICTIM, 0, 2**32 - 1)]), [batch]),  # "negative" (huge) frame count
        (struct.pack(">hiI", 1, 5000, 1) + struct.pack(">iIH", 0, 1, 2) + b"\xff\xfe", [batch]),
        (b"", [batch]),
    ]:
        _expect_error_reply(endpoint, _raw(0, 0, body, *frames), ErrorCode.INVALID_REQUEST)


@case(3, "fetch-bodies")
def _bad_fetch_bodies(env: Env) -> None:
    endpoint = env.at(VICTIM, 0)
    good = _fetch_body([(VICTIM, 0, 0, 1 << 20)])
    for body in [
        good[:7], good[:-1], good + b"\x00",
        _fetch_body([(VICTIM, 0, 0, 1 << 20)], count=2**32 - 1),
        _fetch_body([(VICTIM, 0, 0, 1 << 20)], max_wait_ms=-1),
        _fetch_body([(VICTIM, 0, 0, 1 << 20)], min_bytes=-1),
        _fetch_body([(VICTIM, 0, 0, 1 << 20)], max_bytes=-1),
        _fetch_body([(VICTIM, 0, 0, -1)]),
    ]:
        _expect_error_reply(endpoint, _raw(1, 0, body), ErrorCode.INVALID_REQUEST)
    _expect_error_reply(endpoint, _raw(1, 0, good, b"a batch frame a fetch cannot carry"),
                        ErrorCode.INVALID_REQUEST)


@case(3, "json-bodies")
def _bad_json_bodies(env: Env) -> None:
    data = env.at(VICTIM, 0)
    for body in [b"{not json", b"[]", b'"text"', b"\xff\xfe", b'{"topic": 5, "partitions": []}',
                 b'{"topic": "victim"}', b'{"topic": "victim", "partitions": -1}',
                 b'{"topic": "victim", "partitions": [{"partition": "0", "timestamp": -1}]}']:
        _expect_error_reply(data, _raw(2, 0, body), ErrorCode.INVALID_REQUEST)
    for api_key, body in [(3, b"{not json"), (3, b'{"topics": "victim"}'), (3, b"[1, 2]"),
                          (19, b'{"topics": [{"name": "x"}]}'), (19, b'{"topics": {}}'),
                          (20, b'{"topics": [1]}'), (18, b"")]:
        _expect_error_reply(env.control, _raw(api_key, 0, body), ErrorCode.INVALID_REQUEST)
    list_offsets = b'{"topic": "victim", "partitions": [{"partition": 0, "timestamp": %s}]}'
    for number in (b"1e400", b"NaN", b"1.5", str(2**63).encode(), str(10**30).encode(),
                   b"true", b"null"):
        _expect_error_reply(data, _raw(2, 0, list_offsets % number), ErrorCode.INVALID_REQUEST)
    nested = b"[" * 100_000 + b"]" * 100_000  # deeper than any parser's recursion
    oversized = b'{"topics": null, "padding": "' + b"x" * limits.JSON_BODY_BYTES_MAX + b'"}'
    for endpoint, api_key in ((env.control, 3), (data, 2)):
        for body in (nested, oversized):
            _expect_error_reply(endpoint, _raw(api_key, 0, body), ErrorCode.INVALID_REQUEST)


# Row 4: a message above the transport cap: libzmq drops the connection, nothing is answered.


def _await_event(monitor: zmq.Socket[bytes], event: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if monitor.poll(100) and recv_monitor_message(monitor)["event"] == event:
            return
    raise AssertionError(f"no zmq event {event} within {timeout_s}s")


@case(4, "frame-above-transport-cap")
def _oversized_frame(env: Env) -> None:
    huge = bytes(limits.SERVER_FRAME_BYTES_MAX + 1)
    requests = {
        env.at(VICTIM, 0): _raw(0, 0, _produce_body(1, [(VICTIM, 0, 1)]), huge),
        env.control: _raw(3, 0, huge),
    }
    for endpoint, frames in requests.items():
        with _dealer(endpoint, connect=False) as sock:
            monitor = sock.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
            try:
                sock.connect(endpoint)  # after the monitor, so that no event is missed
                _await_event(monitor, zmq.EVENT_CONNECTED, REPLY_TIMEOUT_S)
                sock.send_multipart(frames)
                _await_event(monitor, zmq.EVENT_DISCONNECTED, REPLY_TIMEOUT_S)
                # The DEALER reconnects by itself; the next request gets the first reply.
                _await_event(monitor, zmq.EVENT_CONNECTED, REPLY_TIMEOUT_S)
                sock.send_multipart(encode_request(PROBE_CORRELATION_ID,
                                                   ApiVersionsRequestV0()))
                reply = _receive(sock, REPLY_TIMEOUT_S)
                assert reply is not None
                assert decode_response(reply)[0].correlation_id == PROBE_CORRELATION_ID
            finally:
                sock.disable_monitor()
                monitor.close(linger=0)


# Rows 5-9: bad batches, each in a produce that a correct client could send.


def _refused(env: Env, topic: str, batch: bytes, code: ErrorCode, partition: int = 0) -> None:
    result = _produce(env.at(topic, partition), topic, partition, batch)
    assert ErrorCode(result.error_code) == code, result
    assert result.base_offset == -1 and result.error_message, result


@case(5, "batch-above-max-message-bytes")
def _too_large(env: Env) -> None:
    batch = _batch(bytes(1_048_588))  # the value alone is max.message.bytes
    _refused(env, VICTIM, batch, ErrorCode.MESSAGE_TOO_LARGE)


@case(6, "batch-above-segment-bytes")
def _above_segment(env: Env) -> None:
    batch = _batch(bytes(2 * SEGMENT_BYTES_SMALL))
    _refused(env, SMALL_SEGMENTS, batch, ErrorCode.RECORD_LIST_TOO_LARGE)


@case(7, "crc-mismatch")
def _crc(env: Env) -> None:
    for batch in (_batch(b"one", b"two"), _batch(b"lz4", compression=Compression.LZ4)):
        corrupt = bytearray(batch)
        corrupt[-1] ^= 0xFF
        _refused(env, VICTIM, bytes(corrupt), ErrorCode.CORRUPT_MESSAGE)
        stale_crc = _rewritten(batch, _ATTRIBUTES_AT, ">h", 8, fix_crc=False)  # LogAppendTime
        _refused(env, VICTIM, stale_crc, ErrorCode.CORRUPT_MESSAGE)


@case(7, "crc-mismatch-acks-0")
def _crc_acks_0(env: Env) -> None:
    corrupt = bytearray(_batch(b"unanswered"))
    corrupt[-1] ^= 0xFF
    frames = _raw(0, 0, _produce_body(0, [(VICTIM, 0, 1)]), bytes(corrupt))
    _expect_no_reply(env.at(VICTIM, 0), frames)


@case(7, "length-mismatch")
def _length(env: Env) -> None:
    batch = _batch(b"length")
    _refused(env, VICTIM, batch + b"\x00", ErrorCode.CORRUPT_MESSAGE)
    _refused(env, VICTIM, batch + batch, ErrorCode.CORRUPT_MESSAGE)  # one batch per frame
    _refused(env, VICTIM, batch[:-1], ErrorCode.CORRUPT_MESSAGE)
    for length in (len(batch) - 12 + 1, len(batch) - 12 - 1, 0, -1, 2**31 - 1):
        _refused(env, VICTIM, _rewritten(batch, _BATCH_LENGTH_AT, ">i", length),
                 ErrorCode.CORRUPT_MESSAGE)
    _refused(env, VICTIM, b"short", ErrorCode.CORRUPT_MESSAGE)
    _refused(env, VICTIM, b"", ErrorCode.CORRUPT_MESSAGE)


@case(7, "bad-magic")
def _magic(env: Env) -> None:
    batch = _batch(b"magic")
    for magic in (0, 1, 3, -1):
        result = _produce(env.at(VICTIM, 0), VICTIM, 0,
                          _rewritten(batch, _MAGIC_AT, ">b", magic))
        assert result.error_code in (ErrorCode.CORRUPT_MESSAGE,
                                     ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT), result


@case(8, "record-count-not-positive")
def _count(env: Env) -> None:
    batch = _batch(b"one", b"two")
    for count in (0, -1, -(2**31)):
        _refused(env, VICTIM, _rewritten(batch, _RECORD_COUNT_AT, ">i", count),
                 ErrorCode.INVALID_RECORD)


@case(8, "record-count-the-bytes-cannot-hold")
def _count_too_large(env: Env) -> None:
    batch = _batch(b"one", b"two")
    for count in (3, 1_000, 2**24 + 1, 2**31 - 1):
        claimed = _rewritten(batch, _LAST_OFFSET_DELTA_AT, ">i", count - 1)
        claimed = _rewritten(claimed, _RECORD_COUNT_AT, ">i", count)
        result = _produce(env.at(VICTIM, 0), VICTIM, 0, claimed)
        assert result.error_code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD), (
            count, result)


@case(8, "last-offset-delta-not-count-minus-one")
def _last_offset_delta(env: Env) -> None:
    batch = _batch(b"one", b"two", b"three")
    for delta in (0, 1, 3, 100, -1):
        _refused(env, VICTIM, _rewritten(batch, _LAST_OFFSET_DELTA_AT, ">i", delta),
                 ErrorCode.INVALID_RECORD)


@case(8, "records-garbled-behind-a-valid-crc")
def _garbled_records(env: Env) -> None:
    batch = _batch(b"first value", b"second value", b"third value")
    records_at = 61  # the first record: length, attributes, timestamp delta, offset delta, ...
    for position, garbage in (
        (records_at, 0xFF),  # the record length runs on into the next bytes
        (records_at + 2, 0x80),  # the timestamp delta swallows the offset delta
        (records_at + 3, 0x7E),  # offset delta 63, past the batch's last offset delta
        (len(batch) - 1, 0x55),  # the last record claims 42 headers it does not have
    ):
        garbled = bytearray(batch)
        garbled[position] = garbage
        changed = bytes(garbled)
        resealed = _rewritten(changed, _RECORD_COUNT_AT, ">i", 3)  # recomputes the CRC
        result = _produce(env.at(VICTIM, 0), VICTIM, 0, resealed)
        assert result.error_code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD), (
            position, result)
    for compression in (Compression.LZ4,):
        compressed = bytearray(_batch(b"a" * 200, b"b" * 200, compression=compression))
        compressed[-3] ^= 0xFF  # inside the LZ4 frame
        resealed = _rewritten(bytes(compressed), _RECORD_COUNT_AT, ">i", 2)
        result = _produce(env.at(VICTIM, 0), VICTIM, 0, resealed)
        assert result.error_code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD), result


@case(8, "control-or-transactional-bit-from-a-client")
def _control_bit(env: Env) -> None:
    batch = _batch(b"not a marker")
    for bits in (_CONTROL_BIT, _TRANSACTIONAL_BIT, _CONTROL_BIT | _TRANSACTIONAL_BIT):
        _refused(env, VICTIM, _rewritten(batch, _ATTRIBUTES_AT, ">h", bits),
                 ErrorCode.INVALID_RECORD)


@case(8, "null-key-on-compacted-topic")
def _null_key(env: Env) -> None:
    for compression in (Compression.NONE, Compression.LZ4):
        mixed = _batch(b"keyed", b"keyless", keys=(b"k", None), compression=compression)
        _refused(env, KEYED, mixed, ErrorCode.INVALID_RECORD)
    # In a multi-batch entry, the bad batch fails and so does every later one.
    good = _batch(b"fine", keys=(b"k",))
    result = _produce(env.at(KEYED), KEYED, 0, _batch(b"keyless"), good)
    assert ErrorCode(result.error_code) == ErrorCode.INVALID_RECORD, result


@case(9, "unsupported-compression")
def _compression(env: Env) -> None:
    batch = _batch(b"codec")
    for codec in (5, 7):  # codecs that do not exist
        _refused(env, VICTIM, _rewritten(batch, _ATTRIBUTES_AT, ">h", codec),
                 ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
    for codec in (1, 2, 4):  # gzip, snappy, zstd claimed over records that are not
        _refused(env, VICTIM, _rewritten(batch, _ATTRIBUTES_AT, ">h", codec),
                 ErrorCode.CORRUPT_MESSAGE)


# Row 10: timestamp skew (message.timestamp.difference.max.ms, as in Kafka).


@case(10, "timestamp-outside-allowed-skew")
def _timestamp_skew(env: Env) -> None:
    assert TIMESTAMP_SKEW_CONFIG in TOPIC_CONFIG_KEYS
    for offset_ms in (-10 * SKEW_MAX_MS, 10 * SKEW_MAX_MS, -(2**40)):
        records = [NewRecord(b"when?")]
        stamped = build_batch(records, base_timestamp_ms=max(_now_ms() + offset_ms, 0))
        _refused(env, SKEWED, stamped, ErrorCode.INVALID_TIMESTAMP)
    # One record in range and one out: the batch is refused whole.
    mixed = build_batch([NewRecord(b"now", timestamp_ms=_now_ms()),
                         NewRecord(b"then", timestamp_ms=_now_ms() - 10 * SKEW_MAX_MS)])
    _refused(env, SKEWED, mixed, ErrorCode.INVALID_TIMESTAMP)


@case(10, "negative-timestamp")
def _negative_timestamp(env: Env) -> None:
    """A timestamp is ms since the epoch, or -1 for none: anything below -1 is refused on
    every topic, with or without a skew bound (Kafka's producer refuses it too)."""
    for timestamp_ms in (-2, -5, -(2**40)):
        stamped = build_batch([NewRecord(b"when?", timestamp_ms=timestamp_ms)],
                              base_timestamp_ms=timestamp_ms)
        _refused(env, VICTIM, stamped, ErrorCode.INVALID_TIMESTAMP)
    mixed = build_batch([NewRecord(b"now", timestamp_ms=_now_ms()),
                         NewRecord(b"before time", timestamp_ms=-7)])
    _refused(env, VICTIM, mixed, ErrorCode.INVALID_TIMESTAMP)


# Row 11: unknown topic, partition out of range.


@case(11, "unknown-topic-or-partition")
def _unknown(env: Env) -> None:
    data = env.at(VICTIM, 0)
    batch = _batch(b"nowhere")
    for topic, partition in (("no-such-topic", 0), (VICTIM, 2), (VICTIM, -1), (VICTIM, 2**31 - 1)):
        # The worker owns no such partition (docs/protocol.md): NOT_LEADER_OR_FOLLOWER.
        assert _produce(data, topic, partition, batch).error_code == (
            ErrorCode.NOT_LEADER_OR_FOLLOWER)
        fetched = _fetch(data, topic, partition, 0)
        assert (fetched.error_code, fetched.chunks) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, ())
        assert _list_offset(data, topic, partition, -1).error_code == (
            ErrorCode.NOT_LEADER_OR_FOLLOWER)
    # Metadata, where clients look first, says the topic does not exist.
    (missing,) = env.broker.metadata(["no-such-topic"]).topics
    assert (missing.error_code, missing.partitions) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ())
    # And so does the client library, before sending anything: at the call once it knows the
    # topic, else through the future (`send` does not wait for metadata).
    with Producer(env.control, max_block_ms=5_000) as producer:
        wanted: list[tuple[str, int | None]] = [("no-such-topic", None), (VICTIM, 2), (VICTIM, -1)]
        for name, chosen in wanted:
            try:
                error = producer.send(name, b"nowhere", partition=chosen).exception(timeout=10)
            except ZlogError as raised:
                error = raised
            assert isinstance(error, ZlogError), (name, chosen)
            assert error.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, (name, chosen)


# Row 12: invalid topic names, including ones that would escape the data directory.

INVALID_NAMES: Final = ["", ".", "..", "../x", "../../x", "x/../../y", "/abs", "a/b", "a\\b",
                        "x" * 250, "a b", "ü", "a\x00b", "a\nb", "__internal", "keyed_topic"]


@case(12, "invalid-topic-names")
def _invalid_names(env: Env) -> None:
    for name in INVALID_NAMES:
        assert _create(env.control, TopicSpec(name, 1)) == [
            (name, ErrorCode.INVALID_TOPIC_EXCEPTION)], name
    # Two names of one request that collide with each other: the later one is refused.
    response = _call(env.control, CreateTopicsRequestV0(
        (TopicSpec("new.name", 1), TopicSpec("new_name", 1)), validate_only=True))
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("new.name", 0), ("new_name", ErrorCode.INVALID_TOPIC_EXCEPTION)]
    # The data path has no such partition either; nothing is created on disk for it.
    for name in ESCAPING_NAMES:
        assert _produce(env.at(VICTIM, 0), name, 0, _batch(b"escape")).error_code == (
            ErrorCode.NOT_LEADER_OR_FOLLOWER)
        assert _fetch(env.at(VICTIM, 0), name, 0, 0).error_code == (
            ErrorCode.NOT_LEADER_OR_FOLLOWER)


@case(12, "longest-valid-name-is-249")
def _name_length(env: Env) -> None:
    response = _call(env.control, CreateTopicsRequestV0(
        (TopicSpec("y" * 249, 1), TopicSpec("y" * 250, 1)), validate_only=True))
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("y" * 249, 0), ("y" * 250, ErrorCode.INVALID_TOPIC_EXCEPTION)]


# Row 13: bad admin arguments.


@case(13, "bad-admin-arguments")
def _bad_admin(env: Env) -> None:
    cases = [
        (TopicSpec("p-zero", 0), ErrorCode.INVALID_PARTITIONS),
        (TopicSpec("p-negative", -1), ErrorCode.INVALID_PARTITIONS),
        (TopicSpec("p-too-many", 65_537), ErrorCode.INVALID_PARTITIONS),
        (TopicSpec("rf-zero", 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR),
        (TopicSpec("rf-negative", 1, -1), ErrorCode.INVALID_REPLICATION_FACTOR),
        (TopicSpec("rf-above-brokers", 1, 2), ErrorCode.INVALID_REPLICATION_FACTOR),
        (TopicSpec(VICTIM, 1), ErrorCode.TOPIC_ALREADY_EXISTS),
        (TopicSpec("cfg-unknown", 1, 1, {"no.such.config": "1"}), ErrorCode.INVALID_CONFIG),
        (TopicSpec("cfg-value", 1, 1, {"retention.ms": "soon"}), ErrorCode.INVALID_CONFIG),
        (TopicSpec("cfg-range", 1, 1, {"segment.bytes": "1"}), ErrorCode.INVALID_CONFIG),
        (TopicSpec("cfg-isr", 1, 1, {"min.insync.replicas": "0"}), ErrorCode.INVALID_CONFIG),
        (TopicSpec("cfg-policy", 1, 1, {"cleanup.policy": "shred"}),
         ErrorCode.INVALID_CONFIG),
    ]
    for spec, code in cases:
        assert _create(env.control, spec) == [(spec.name, code)], spec


# Row 14: acks outside {0, 1, -1}.


@case(14, "invalid-required-acks")
def _acks(env: Env) -> None:
    for acks in (2, -2, 100, 2**15 - 1, -(2**15)):
        result = _produce(env.at(VICTIM, 0), VICTIM, 0, _batch(b"acks"), acks=acks)
        assert ErrorCode(result.error_code) == ErrorCode.INVALID_REQUIRED_ACKS, result


# Row 15: acks=all with fewer in-sync replicas than min.insync.replicas.


@case(15, "not-enough-replicas")
def _min_isr(env: Env) -> None:
    result = _produce(env.at(MIN_ISR), MIN_ISR, 0, _batch(b"acks=all"), acks=-1)
    assert ErrorCode(result.error_code) == ErrorCode.NOT_ENOUGH_REPLICAS, result


# Row 16: produce and fetch to a worker that does not own the partition.


@case(16, "partition-not-owned-by-this-worker")
def _not_owned(env: Env) -> None:
    for here, elsewhere in ((0, 1), (1, 0)):
        endpoint = env.at(VICTIM, here)
        for acks in (1, -1):
            result = _produce(endpoint, VICTIM, elsewhere, _batch(b"wrong worker"), acks=acks)
            assert ErrorCode(result.error_code) == ErrorCode.NOT_LEADER_OR_FOLLOWER, result
        frames = _raw(0, 0, _produce_body(0, [(VICTIM, elsewhere, 1)]), _batch(b"wrong worker"))
        _expect_no_reply(endpoint, frames)  # acks=0: refused without an answer
        fetched = _fetch(endpoint, VICTIM, elsewhere, 0)
        assert (fetched.error_code, fetched.chunks) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, ())
        assert _list_offset(endpoint, VICTIM, elsewhere, -2).error_code == (
            ErrorCode.NOT_LEADER_OR_FOLLOWER)


# Rows 17-18: fetch offsets out of range; fetch at the high watermark.


@case(17, "fetch-offset-out-of-range")
def _out_of_range(env: Env) -> None:
    log_start = TRIMMED_BATCHES - 1
    for topic, start, end in ((TRIMMED, log_start, TRIMMED_BATCHES), (VICTIM, 0, 6)):
        for offset in (*range(start), end + 1, end + 1000, -1, -(2**63)):
            fetched = _fetch(env.at(topic), topic, 0, offset)
            assert (fetched.error_code, fetched.chunks) == (ErrorCode.OFFSET_OUT_OF_RANGE, ()), (
                topic, offset, fetched)
            assert (fetched.log_start_offset, fetched.high_watermark) == (start, end), fetched


@case(18, "fetch-at-high-watermark-waits-then-empty")
def _at_high_watermark(env: Env) -> None:
    max_wait_ms = 300
    for topic in (VICTIM, TRIMMED):
        end = _list_offset(env.at(topic), topic, 0, LATEST_TIMESTAMP).offset
        started = time.monotonic()
        fetched = _fetch(env.at(topic), topic, 0, end, max_wait_ms=max_wait_ms)
        waited_s = time.monotonic() - started
        assert (fetched.error_code, fetched.chunks, fetched.high_watermark) == (0, (), end)
        assert max_wait_ms / 1000 <= waited_s < max_wait_ms / 1000 + 5, waited_s


# Row 19: ListOffsets timestamps below -2.


@case(19, "list-offsets-timestamp-below-minus-2")
def _list_offsets_timestamp(env: Env) -> None:
    for timestamp in (-3, -100, -(2**63)):
        body = (b'{"topic": "victim", "partitions": [{"partition": 0, "timestamp": %d}]}'
                % timestamp)
        _expect_error_reply(env.at(VICTIM, 0), _raw(2, 0, body), ErrorCode.INVALID_REQUEST)


# ---------------------------------------------------------------------------------- the test


def test_every_catalogue_row_from_1_to_19_has_a_case() -> None:
    assert {c.row for c in CASES} == set(range(1, 20))
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("bad_input", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_and_changes_nothing(env: Env, bad_input: Case) -> None:
    before = _snapshot(env)
    bad_input.act(env)
    after = _snapshot(env)
    for key in before:
        assert after[key] == before[key], f"{key} changed"
    _assert_still_serving(env)


def test_the_snapshot_sees_a_stored_change(env: Env) -> None:
    """The check above is not blind: one good batch changes the snapshot (runs last)."""
    before = _snapshot(env)
    assert _produce(env.at(SMALL_SEGMENTS), SMALL_SEGMENTS, 0, _batch(b"good")).error_code == 0
    after = _snapshot(env)
    changed = after["partitions"][(SMALL_SEGMENTS, 0)]
    unchanged = before["partitions"][(SMALL_SEGMENTS, 0)]
    assert changed.log_end_offset == unchanged.log_end_offset + 1
    assert changed.stored_bytes.startswith(unchanged.stored_bytes)
    assert len(changed.stored_bytes) > len(unchanged.stored_bytes)
