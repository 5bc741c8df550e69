"""The worker's data path driven by hand: real codec frames and logs, no sockets, manual time."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clock import ManualClock
from tests.storage_helpers import base_offset_of, batch_tags, make_batch, split_batches
from zlog import limits
from zlog.broker.data.data_plane import DataPlane
from zlog.broker.data.partition_host import PartitionHost
from zlog.broker.worker_metrics import (
    MetricsFile,
    PartitionField,
    SlotKind,
    WorkerMetrics,
    read_sample,
)
from zlog.broker.worker_protocol import Assign, decode_to_worker
from zlog.errors import ErrorCode, ZlogError
from zlog.record.arrays import build_batch_from_values
from zlog.record.header import Compression, read_header
from zlog.record.records import NewRecord, build_batch
from zlog.shm_segments.log_config import LogConfig
from zlog.transport.api import ApiKey
from zlog.transport.codec import REQUEST_HEADER, decode_response, encode_request
from zlog.transport.messages import (
    ErrorBody,
    Request,
    Response,
)
from zlog.transport.messages.admin import (
    ApiVersionsRequestV0,
    ApiVersionsResponseV0,
    MetadataRequestV0,
)
from zlog.transport.messages.data import (
    FetchEntry,
    FetchRequestV0,
    FetchRequestV2,
    FetchResponseV0,
    FetchResponseV2,
    ListOffsetsPartition,
    ListOffsetsRequestV0,
    ListOffsetsResponseV0,
    ProduceEntry,
    ProduceRequestV0,
    ProduceResponseV0,
)
from zlog.transport.server import Reply

CLIENT, OTHER, THIRD = b"client", b"other", b"third"


class Harness:
    def __init__(self, host: PartitionHost, clock: ManualClock) -> None:
        self.host, self.clock = host, clock
        self.plane = DataPlane(host.partitions)
        self.correlation_id = 0

    def assign(self, topic: str = "t", partition: int = 0, **configs: str) -> None:
        self.host.assign(Assign(0, topic, partition, configs, leader_epoch=1))

    def send(self, request: Request, identity: bytes = CLIENT) -> list[Reply]:
        self.correlation_id += 1
        frames = encode_request(self.correlation_id, request)
        return self.plane.handle(identity, frames, self.clock.now_ms)

    def call(self, request: Request) -> Response | ErrorBody:
        replies = self.send(request)
        assert len(replies) == 1, replies
        return _decode(replies[0])

    def produce(self, *batches: bytes, acks: int = 1, partition: int = 0) -> ProduceResponseV0:
        response = self.call(
            ProduceRequestV0(acks, 1000, (ProduceEntry("t", partition, batches),))
        )
        assert isinstance(response, ProduceResponseV0)
        return response

    def fetch(self, offset: int, *, min_bytes: int = 0, max_wait_ms: int = 0,
              identity: bytes = CLIENT) -> list[Reply]:
        request = FetchRequestV0(-1, max_wait_ms, min_bytes, 1 << 20,
                                 (FetchEntry("t", 0, offset, 1 << 20),))
        return self.send(request, identity)


    def subscribe(self, offset: int, *, max_bytes: int = 1 << 20, max_wait_ms: int = 500,
                  identity: bytes = CLIENT) -> list[Reply]:
        request = FetchRequestV2(-1, max_wait_ms, 1, max_bytes,
                                 (FetchEntry("t", 0, offset, 1 << 20),))
        return self.send(request, identity)

    def produce_one(self, tag: int) -> list[Reply]:
        """Produce one batch of 3 records; every reply it causes (its own and woken fetches)."""
        return self.send(ProduceRequestV0(1, 1000, (ProduceEntry("t", 0, (make_batch(tag),)),)))


def _pushed(replies: list[Reply], identity: bytes = OTHER) -> list[FetchResponseV2]:
    """The subscription answers among `replies` that went to `identity`."""
    answers = [_decode(reply) for reply in replies if reply[0] == identity]
    assert all(isinstance(answer, FetchResponseV2) for answer in answers), answers
    return answers  # type: ignore[return-value]


def _tags(answer: FetchResponseV2) -> list[int]:
    return [tag for chunk in answer.entries[0].chunks
            for batch in split_batches([memoryview(bytes(chunk))])
            for tag in batch_tags(batch)[:1]]


def _decode(reply: Reply) -> Response | ErrorBody:
    _identity, frames = reply
    _header, response = decode_response([bytes(frame) for frame in frames])
    return response


def _fetched(reply: Reply) -> FetchResponseV0:
    response = _decode(reply)
    assert isinstance(response, FetchResponseV0)
    return response


@contextlib.contextmanager
def harness_at(tmp_path: Path, shm_dir: Path) -> Iterator[Harness]:
    """A data plane over one assigned partition `t-0`, on a manual clock."""
    clock = ManualClock()
    host = PartitionHost(tmp_path, shm_dir, base_config=LogConfig(ring_bytes=64 * 1024),
                         clock=clock)
    harness = Harness(host, clock)
    harness.assign()
    try:
        yield harness
    finally:
        host.close_all()


@pytest.fixture
def harness(tmp_path: Path, shm_dir: Path) -> Iterator[Harness]:
    with harness_at(tmp_path, shm_dir) as made:
        yield made


def test_produce_then_fetch_returns_the_stored_batches_as_views(harness: Harness) -> None:
    response = harness.produce(make_batch(0), make_batch(1))
    assert [(r.error_code, r.base_offset) for r in response.entries] == [(0, 0)]
    replies = harness.fetch(0)
    _identity, frames = replies[0]
    assert all(isinstance(frame, memoryview) for frame in frames[2:]), "zero copy out"
    result = _fetched(replies[0]).entries[0]
    assert (result.error_code, result.high_watermark, result.log_start_offset) == (0, 6, 0)
    batches = split_batches([memoryview(bytes(c)) for c in result.chunks])
    assert [base_offset_of(b) for b in batches] == [0, 3]
    assert [batch_tags(b)[0] for b in batches] == [0, 1]


def test_a_long_poll_is_woken_by_an_append_and_gets_the_new_data(harness: Harness) -> None:
    assert harness.fetch(0, min_bytes=1, max_wait_ms=5000, identity=OTHER) == []
    replies = harness.send(ProduceRequestV0(1, 1000, (ProduceEntry("t", 0, (make_batch(7),)),)))
    by_peer = {reply[0]: reply for reply in replies}
    assert set(by_peer) == {CLIENT, OTHER}
    result = _fetched(by_peer[OTHER]).entries[0]
    assert batch_tags(bytes(result.chunks[0])) == [7] * 3


def test_a_long_poll_times_out_at_max_wait_ms(harness: Harness) -> None:
    assert harness.fetch(0, min_bytes=1, max_wait_ms=300) == []
    assert harness.plane.next_deadline_ms() == harness.clock.now_ms + 300
    harness.clock.advance(299)
    assert harness.plane.on_timer(harness.clock.now_ms) == []
    harness.clock.advance(1)
    (reply,) = harness.plane.on_timer(harness.clock.now_ms)
    result = _fetched(reply).entries[0]
    assert (result.error_code, result.chunks) == (0, ())


def test_a_long_poll_waits_for_min_bytes(harness: Harness) -> None:
    size = len(make_batch(0))
    assert harness.fetch(0, min_bytes=2 * size, max_wait_ms=5000, identity=OTHER) == []
    assert len(harness.send(ProduceRequestV0(1, 0, (ProduceEntry("t", 0, (make_batch(0),)),)))) == 1
    replies = harness.send(ProduceRequestV0(1, 0, (ProduceEntry("t", 0, (make_batch(1),)),)))
    assert {identity for identity, _ in replies} == {CLIENT, OTHER}


def test_acks_zero_gets_no_reply_but_is_stored(harness: Harness) -> None:
    assert harness.send(ProduceRequestV0(0, 0, (ProduceEntry("t", 0, (make_batch(0),)),))) == []
    assert harness.host.hosted[("t", 0)].log.log_end_offset == 3


@pytest.mark.parametrize("acks", [2, -2, 100])
def test_invalid_acks_are_refused_and_nothing_is_stored(harness: Harness, acks: int) -> None:
    response = harness.produce(make_batch(0), acks=acks)
    assert response.entries[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert harness.host.hosted[("t", 0)].log.log_end_offset == 0


def test_partitions_not_owned_here_are_not_leader(harness: Harness) -> None:
    response = harness.produce(make_batch(0), partition=9)
    assert response.entries[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    fetch = FetchRequestV0(-1, 1000, 1, 1000, (FetchEntry("nope", 0, 0, 1000),))
    (reply,) = harness.send(fetch)  # an error answers at once, never waits
    assert _fetched(reply).entries[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    listed = harness.call(ListOffsetsRequestV0("t", (ListOffsetsPartition(5, -1),)))
    assert isinstance(listed, ListOffsetsResponseV0)
    assert listed.partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_leader_whose_lease_ran_out_takes_no_writes(harness: Harness) -> None:
    """Past its lease (no controller answer within a session) a leader may have been
    replaced: it refuses produce with the retriable NOT_LEADER_OR_FOLLOWER, and stores
    nothing; a renewed lease lets it write again."""
    harness.plane.lease_until_ms = harness.clock.now_ms + 100
    assert harness.produce(make_batch(0)).entries[0].error_code == ErrorCode.NONE
    log_end = harness.host.hosted[("t", 0)].log.log_end_offset
    harness.clock.advance(100)
    refused = harness.produce(make_batch(1))
    assert refused.entries[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert "controller" in refused.entries[0].error_message
    assert harness.host.hosted[("t", 0)].log.log_end_offset == log_end
    harness.plane.lease_until_ms = harness.clock.now_ms + 100
    assert harness.produce(make_batch(1)).entries[0].error_code == ErrorCode.NONE


def test_a_worker_whose_supervisor_is_gone_takes_no_writes(harness: Harness) -> None:
    """Its lease may run on, or it may have none (a broker alone): once its supervisor's
    lifeline is cut (zlog/broker/supervisor_lifeline.py) another broker may lead, at once."""
    gone = [False]
    harness.plane.supervisor_gone = lambda: gone[0]
    for lease_until_ms in (None, harness.clock.now_ms + 60_000):
        harness.plane.lease_until_ms = lease_until_ms
        gone[0] = False
        assert harness.produce(make_batch(0)).entries[0].error_code == ErrorCode.NONE
        log_end = harness.host.hosted[("t", 0)].log.log_end_offset
        gone[0] = True
        refused = harness.produce(make_batch(1))
        assert refused.entries[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert "supervisor is gone" in refused.entries[0].error_message
        assert harness.host.hosted[("t", 0)].log.log_end_offset == log_end
        assert harness.plane.lease_remaining_ms() == 0


def test_bad_requests_get_their_codes_and_change_nothing(harness: Harness) -> None:
    harness.produce(make_batch(0))
    assert harness.plane.handle(CLIENT, [b"short"], 0) == []
    assert harness.plane.stats.dropped_messages == 1
    unknown = REQUEST_HEADER.pack(99, 0, 5, 0)
    reply = _decode(harness.plane.handle(CLIENT, [unknown, b"{}"], 0)[0])
    assert isinstance(reply, ErrorBody) and reply.error_code == ErrorCode.UNSUPPORTED_VERSION
    garbled = REQUEST_HEADER.pack(0, 0, 6, 0)
    reply = _decode(harness.plane.handle(CLIENT, [garbled, b"\x00\x01"], 0)[0])
    assert isinstance(reply, ErrorBody) and reply.error_code == ErrorCode.INVALID_REQUEST
    reply = harness.call(MetadataRequestV0(None))
    assert isinstance(reply, ErrorBody) and reply.error_code == ErrorCode.UNSUPPORTED_VERSION
    corrupt = bytearray(make_batch(1))
    corrupt[-1] ^= 1
    assert harness.produce(bytes(corrupt)).entries[0].error_code == ErrorCode.CORRUPT_MESSAGE
    result = _fetched(harness.fetch(0)[0]).entries[0]
    assert result.high_watermark == 3 and len(split_batches(
        [memoryview(bytes(c)) for c in result.chunks])) == 1


def test_a_bug_in_one_request_is_answered_and_the_worker_keeps_serving(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    partition = harness.host.partitions[("t", 0)]

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("injected bug")

    monkeypatch.setattr(partition, "produce", broken)
    response = harness.produce(make_batch(0))
    assert response.entries[0].error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert "injected bug" in caplog.text
    monkeypatch.undo()
    assert harness.produce(make_batch(1)).entries[0].error_code == ErrorCode.NONE


def test_out_of_range_fetches_carry_the_log_offsets(harness: Harness) -> None:
    harness.produce(make_batch(0))
    result = _fetched(harness.fetch(4)[0]).entries[0]
    assert result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (result.high_watermark, result.log_start_offset) == (3, 0)


def test_list_offsets_and_api_versions(harness: Harness) -> None:
    harness.produce(make_batch(0, timestamp_ms=1_000), make_batch(1, timestamp_ms=2_000))
    request = ListOffsetsRequestV0("t", (
        ListOffsetsPartition(0, -1), ListOffsetsPartition(0, -2), ListOffsetsPartition(0, 1500),
        ListOffsetsPartition(0, 5000),
    ))
    listed = harness.call(request)
    assert isinstance(listed, ListOffsetsResponseV0)
    assert [(p.error_code, p.offset, p.timestamp) for p in listed.partitions] == [
        (0, 6, -1), (0, 0, -1), (0, 3, 2000), (0, -1, -1),
    ]
    versions = harness.call(ApiVersionsRequestV0())
    assert isinstance(versions, ApiVersionsResponseV0)
    groups = {8, 9, 11, 12, 13, 14, 15, 16, 42, 68}  # a worker coordinates groups too
    assert {v.api_key for v in versions.api_versions} == {0, 1, 2, 18, 21, 23} | groups


def test_unassigning_answers_the_parked_fetches(harness: Harness) -> None:
    assert harness.fetch(0, min_bytes=1, max_wait_ms=5000) == []
    assert harness.host.unassign(("t", 0), delete=False)
    (reply,) = harness.plane.partition_removed(("t", 0))
    assert _fetched(reply).entries[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert harness.plane.next_deadline_ms() is None


def test_acks_all_on_a_topic_needing_more_replicas_is_refused(harness: Harness) -> None:
    harness.assign(partition=1, **{"min.insync.replicas": "2"})
    response = harness.produce(make_batch(0), acks=-1, partition=1)
    assert response.entries[0].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert harness.produce(make_batch(0), acks=1, partition=1).entries[0].base_offset == 0


def test_an_idempotent_retry_is_answered_with_the_first_offset(harness: Harness) -> None:
    batch = build_batch_from_values([b"a", b"b"], timestamp_ms=1, producer_id=4,
                                    producer_epoch=0, base_sequence=0)
    harness.produce(make_batch(0))
    first = harness.produce(batch, acks=-1).entries[0]
    retry = harness.produce(batch, acks=-1).entries[0]
    assert (first.error_code, first.base_offset) == (retry.error_code, retry.base_offset) == (0, 3)
    assert harness.host.hosted[("t", 0)].log.log_end_offset == 5


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ({"topic": "../etc", "partition": 0}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ({"topic": "t", "partition": -1}, ErrorCode.INVALID_REQUEST),
        ({"topic": "t", "partition": True}, ErrorCode.INVALID_REQUEST),
        ({"topic": "u", "partition": 0, "configs": {"bogus": "1"}}, ErrorCode.INVALID_CONFIG),
        ({"topic": "u", "partition": 0, "configs": {"segment.bytes": "x"}},
         ErrorCode.INVALID_CONFIG),
        ({"topic": "t", "partition": 0, "configs": {"min.insync.replicas": "0"}},
         ErrorCode.INVALID_CONFIG),
        ({"topic": "t", "partition": 0, "leader_epoch": 0}, ErrorCode.FENCED_LEADER_EPOCH),
        ({"topic": "t", "partition": 0, "is_leader": "yes"}, ErrorCode.INVALID_REQUEST),
    ],
)
def test_malformed_assignments_are_refused(
    harness: Harness, message: dict[str, object], code: ErrorCode
) -> None:
    with pytest.raises(ZlogError) as caught:
        assign = decode_to_worker(json.dumps({"type": "assign", "request_id": 1, **message}))
        assert isinstance(assign, Assign)
        harness.host.assign(assign)
    assert caught.value.code == code
    assert set(harness.host.partitions) == {("t", 0)}


def test_a_reassignment_takes_the_new_epoch_and_configs(harness: Harness) -> None:
    harness.host.assign(Assign(0, "t", 0, {"min.insync.replicas": "2", "retention.ms": "1000"},
                               leader_epoch=5))
    partition = harness.host.partitions[("t", 0)]
    assert partition.leader_epoch == 5 and partition.replicas.min_insync_replicas == 2
    assert harness.host.hosted[("t", 0)].log.config.retention_ms == 1000


def test_a_reassignment_applies_changed_produce_configs(harness: Harness) -> None:
    """An altered topic reaches an open partition as a new assign: every produce after it runs
    under the new configs."""
    lz4 = make_batch(0, 30, value_bytes=100, compression=Compression.LZ4)
    assert len(lz4) < 1000 < len(make_batch(0, 30, value_bytes=100))
    harness.assign("t", 0, **{"compression.type": "none", "max.message.bytes": "100000"})
    assert harness.produce(lz4).entries[0].error_code == ErrorCode.NONE
    stored = _fetched(harness.fetch(0)[0]).entries[0].chunks[0]
    assert read_header(stored).compression == Compression.NONE, "re-encoded to the topic's codec"
    harness.assign("t", 0, **{"compression.type": "none", "max.message.bytes": "1000"})
    too_large = harness.produce(lz4).entries[0]
    assert too_large.error_code == ErrorCode.MESSAGE_TOO_LARGE, "checked after re-encoding"
    harness.assign("t", 0, **{"max.message.bytes": "1000", "cleanup.policy": "compact"})
    assert harness.produce(lz4).entries[0].error_code == ErrorCode.INVALID_RECORD, "no keys"
    keyed = build_batch([NewRecord(b"v", b"k")], compression=Compression.LZ4)
    assert harness.produce(keyed).entries[0].error_code == ErrorCode.NONE
    tail = _fetched(harness.fetch(30)[0]).entries[0].chunks[0]
    assert read_header(tail).compression == Compression.LZ4, "producer's codec kept again"


def test_compaction_runs_beside_the_writer_on_compacted_topics(harness: Harness) -> None:
    harness.assign("c", 0, **{"cleanup.policy": "compact", "segment.bytes": "300"})
    for round_ in range(12):
        batch = build_batch([NewRecord(b"value-%d" % round_, b"same-key")])
        request = ProduceRequestV0(1, 0, (ProduceEntry("c", 0, (batch,)),))
        response = _decode(harness.send(request)[0])
        assert isinstance(response, ProduceResponseV0) and response.entries[0].error_code == 0
    assert harness.host.start_compactions() == 1, "only the compacted topic"
    compaction = harness.host.hosted[("c", 0)].compaction
    assert compaction is not None
    stats = compaction.result(timeout=30)
    assert stats.records_after < stats.records_before
    fetch = FetchRequestV0(-1, 0, 0, 1 << 20, (FetchEntry("c", 0, 11, 1 << 20),))
    (reply,) = harness.send(fetch)
    assert _fetched(reply).entries[0].error_code == 0, "the latest record stays readable"


def test_retention_advances_the_log_start(harness: Harness) -> None:
    harness.assign("r", 0, **{"segment.bytes": "300", "retention.bytes": "300"})
    for tag in range(10):
        request = ProduceRequestV0(1, 0, (ProduceEntry("r", 0, (make_batch(tag),)),))
        harness.send(request)
    harness.host.tick()  # the worker's tick snapshots the producers of what rolled
    harness.host.enforce_retention()
    log = harness.host.hosted[("r", 0)].log
    assert log.log_start_offset > 0
    fetch = FetchRequestV0(-1, 0, 0, 1 << 20, (FetchEntry("r", 0, 0, 1 << 20),))
    result = _fetched(harness.send(fetch)[0]).entries[0]
    assert result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert result.log_start_offset == log.log_start_offset


def test_the_disk_share_of_each_assign_bounds_the_log_at_the_next_retention_pass(
    harness: Harness,
) -> None:
    size = len(make_batch(0))
    configs = {"segment.bytes": str(size), "retention.disk.percent": "1"}
    harness.host.assign(Assign(0, "d", 0, configs, leader_epoch=1, disk_share_bytes=4 * size))
    for tag in range(10):
        harness.send(ProduceRequestV0(1, 0, (ProduceEntry("d", 0, (make_batch(tag),)),)))
    log = harness.host.hosted[("d", 0)].log
    harness.host.tick()  # the worker's tick snapshots the producers of what rolled
    harness.host.enforce_retention()
    assert log.size_bytes == 4 * size
    # The topic grew: the same budget over more partitions, a smaller share for this one.
    harness.host.assign(Assign(0, "d", 0, configs, leader_epoch=1, disk_share_bytes=2 * size))
    assert log.size_bytes == 4 * size, "applied by retention, not by the assign"
    harness.host.enforce_retention()
    assert log.size_bytes == 2 * size
    kept = split_batches(log.read(log.log_start_offset, 1 << 20))
    assert [batch_tags(batch)[0] for batch in kept] == [8, 9], "the newest stay"
    harness.host.assign(Assign(0, "d", 0, configs, leader_epoch=1))  # no budget any more
    assert log.config.disk_share_bytes == -1


def test_flush_ms_sets_the_tick_interval(harness: Harness) -> None:
    assert harness.host.tick_interval_ms() == 1000
    harness.assign("f", 0, **{"flush.ms": "50"})
    assert harness.host.tick_interval_ms() == 50
    harness.host.tick()

def test_a_broken_invariant_crashes_the_worker_instead_of_serving_on(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    partition = harness.host.partitions[("t", 0)]

    def broken(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("invariant broken")

    monkeypatch.setattr(partition, "produce", broken)
    with pytest.raises(AssertionError):
        harness.produce(make_batch(0))


def test_a_consumer_fetch_naming_a_replica_moves_no_high_watermark(
        tmp_path: Path, shm_dir: Path) -> None:
    """Only a replica fetch (Fetch v1: the follower's broker and leader epochs) reports a
    follower's position; a consumer's Fetch v0 that names a replica id is refused with
    INVALID_REQUEST and a sentence, and the HW stays."""
    clock = ManualClock()
    host = PartitionHost(tmp_path, shm_dir, base_config=LogConfig(ring_bytes=64 * 1024),
                         clock=clock)
    try:
        host.assign(Assign(0, "t", 0, {}, leader_epoch=1, broker_id=1, leader=1,
                           replicas=(1, 2), isr=(1, 2)))
        harness = Harness(host, clock)
        assert harness.produce(make_batch(0)).entries[0].error_code == 0
        response = harness.call(FetchRequestV0(2, 0, 0, 1 << 20, (FetchEntry("t", 0, 3, 1 << 20),)))
        assert isinstance(response, FetchResponseV0)
        (entry,) = response.entries
        assert entry.error_code == ErrorCode.INVALID_REQUEST and not entry.chunks
        assert "Fetch v1" in entry.error_message
        latest = harness.call(ListOffsetsRequestV0("t", (ListOffsetsPartition(0, -1),)))
        assert isinstance(latest, ListOffsetsResponseV0)
        assert latest.partitions[0].offset == 0, "replica 2 never fetched"
    finally:
        host.close_all()


def test_a_subscription_is_answered_again_at_each_append_without_another_request(
        harness: Harness) -> None:
    harness.produce_one(0)
    (first,) = _pushed(harness.subscribe(0, identity=OTHER))
    assert (_tags(first), first.more) == ([0], True)
    for tag in (1, 2, 3):
        (pushed,) = _pushed(harness.produce_one(tag))
        assert (_tags(pushed), pushed.more) == ([tag], True)  # only the new batch


def test_a_quiet_subscription_is_answered_empty_at_max_wait_ms_and_stays(
        harness: Harness) -> None:
    assert harness.subscribe(0, max_wait_ms=300, identity=OTHER) == []
    harness.clock.advance(300)
    (empty,) = _pushed(harness.plane.on_timer(harness.clock.now_ms))
    assert (empty.entries[0].chunks, empty.more) == ((), True)
    (pushed,) = _pushed(harness.produce_one(5))
    assert _tags(pushed) == [5]


def test_a_subscription_ends_once_its_answers_reach_max_bytes(harness: Harness) -> None:
    size = len(make_batch(0))
    assert harness.subscribe(0, max_bytes=2 * size, identity=OTHER) == []
    (one,) = _pushed(harness.produce_one(0))
    (two,) = _pushed(harness.produce_one(1))
    assert (one.more, two.more) == (True, False)
    assert _pushed(harness.produce_one(2)) == []  # ended: nothing more is sent
    assert harness.plane.next_deadline_ms() is None


def test_a_subscription_behind_sends_the_rest_on_the_next_turns(harness: Harness) -> None:
    for tag in range(3):
        harness.produce_one(tag)
    request = FetchRequestV2(-1, 500, 1, 1 << 20, (FetchEntry("t", 0, 0, 1),))  # a batch each
    (first,) = _pushed(harness.send(request, OTHER))
    assert harness.plane.next_deadline_ms() == 0  # more to send at once
    (second,) = _pushed(harness.plane.on_timer(harness.clock.now_ms))
    (third,) = _pushed(harness.plane.on_timer(harness.clock.now_ms))
    assert [_tags(a) for a in (first, second, third)] == [[0], [1], [2]]
    assert _pushed(harness.plane.on_timer(harness.clock.now_ms)) == []  # caught up: parked


def test_a_cancel_ends_the_senders_subscriptions_without_an_answer(harness: Harness) -> None:
    assert harness.subscribe(0, identity=OTHER) == []
    assert harness.subscribe(0, identity=THIRD) == []
    assert harness.send(FetchRequestV2(-1, 0, 0, 0, ()), OTHER) == []
    replies = harness.produce_one(0)
    assert _pushed(replies, OTHER) == []
    (pushed,) = _pushed(replies, THIRD)  # another consumer's subscription stays
    assert _tags(pushed) == [0]


def test_a_subscription_ends_when_its_partition_leaves_or_its_lifetime_ends(
        harness: Harness) -> None:
    assert harness.subscribe(0, identity=OTHER) == []
    assert harness.host.unassign(("t", 0), delete=False)
    (gone,) = _pushed(harness.plane.partition_removed(("t", 0)))
    assert (gone.entries[0].error_code, gone.more) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, False)
    harness.assign()
    assert harness.subscribe(0, identity=OTHER) == []
    harness.clock.advance(limits.SUBSCRIPTION_LIFETIME_MS)
    (last,) = _pushed(harness.produce_one(0))
    assert (_tags(last), last.more) == ([0], False)
    assert harness.plane.next_deadline_ms() is None
def test_metrics_count_each_request_its_errors_and_each_partitions_bytes(
        harness: Harness, shm_dir: Path) -> None:
    """With a metrics file (worker_metrics.py): every request under its API, an answer with
    an error code for any partition as an error of that API (as Kafka's ErrorsPerSec), and
    the bytes a partition took in and sent to consumers."""
    metrics_file = MetricsFile.create(shm_dir / "metrics")
    metrics = WorkerMetrics(metrics_file)
    harness.plane.metrics = metrics
    harness.plane.stats.observe = metrics
    batch = make_batch(0)
    harness.produce(batch)
    refused = harness.call(ProduceRequestV0(1, 1000, (ProduceEntry("t", 9, (batch,)),)))
    assert isinstance(refused, ProduceResponseV0)
    assert refused.entries[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    harness.fetch(0)
    harness.call(FetchRequestV0(-1, 0, 0, 1 << 20, (FetchEntry("t", 9, 0, 1 << 20),)))
    sample = read_sample(metrics_file)
    by_api = {api.api_key: (api.requests, api.errors) for api in sample.apis}
    assert by_api == {ApiKey.PRODUCE: (2, 1), ApiKey.FETCH: (2, 1)}
    (partition,) = sample.of_kind(SlotKind.PARTITION)
    assert (partition.name, partition.number) == ("t", 0)
    assert partition.values[PartitionField.BYTES_IN] == len(batch)
    assert partition.values[PartitionField.BYTES_OUT] == len(batch)
    assert harness.plane.stats.entry_errors == 2
