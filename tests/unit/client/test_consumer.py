"""Consumer positions against a fake partition leader: resets, seeks and stale answers.

The fake serves one partition holding batches of 5 records (offsets 0..19), answers
ListOffsets (-2: 0, -1: 20) and Fetch with every stored batch that ends past the offset asked
for, whole, as a real worker does (docs/protocol.md, Fetch v0); a subscription (Fetch v2) gets
that one answer, saying no more follow, as a real worker's does once it has sent its max. It
can hold fetch answers back to let a test seek while a fetch is in flight, and play a new
leader whose high watermark has not reached its epoch start yet (ListOffsets(LATEST)
OFFSET_NOT_AVAILABLE, fetches with no high watermark: -1) for its next `unsettled_answers`
answers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import zmq

from tests.clock import ManualClock
from zlog.client import Admin, Consumer, TopicPartition
from zlog.errors import ErrorCode, ZlogError
from zlog.record.arrays import BatchView, build_batch_from_values
from zlog.transport.codec import RequestHeader, decode_request, encode_response
from zlog.transport.messages.admin import (
    BrokerMetadata,
    MetadataRequestV0,
    MetadataResponseV0,
    PartitionMetadata,
    TopicMetadata,
)
from zlog.transport.messages.data import (
    FetchRequestV0,
    FetchRequestV2,
    FetchResponseV0,
    FetchResponseV2,
    FetchResult,
    ListOffsetsRequestV0,
    ListOffsetsResponseV0,
    ListOffsetsResult,
)
from zlog.transport.sockets import make_router, recv_routed, send_routed
from zlog.transport.wire import Buffer
from zlog_testbed.waiting import wait_until

TOPIC = "t"
TP = TopicPartition(TOPIC, 0)
HIGH_WATERMARK = 20
BATCHES = [
    build_batch_from_values([f"v{o}".encode() for o in range(base, base + 5)], timestamp_ms=7,
                            base_offset=base)
    for base in range(0, HIGH_WATERMARK, 5)
]


class FakeLeader:
    def __init__(self) -> None:
        self.socket, self.endpoint = make_router("tcp://127.0.0.1:0")
        self.fetch_offsets: list[int] = []
        self.metadata_topics: list[tuple[str, ...] | None] = []  # each Metadata request's
        self.hold = threading.Event()  # set: fetch answers wait until it is cleared
        self.unsettled_answers = 0  # ListOffsets and Fetch answers still to give unsettled
        self._held: list[tuple[bytes, RequestHeader, FetchRequestV0 | FetchRequestV2]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.hold.is_set():
                for held_identity, held_header, held_request in self._held:
                    send_routed(self.socket, held_identity,
                                self._fetch(held_header, held_request))
                self._held.clear()
            if not self.socket.poll(5, zmq.POLLIN):
                continue
            received = recv_routed(self.socket)
            assert received is not None
            identity, frames = received
            header, request = decode_request(frames)
            if isinstance(request, FetchRequestV2) and not request.entries:
                continue  # a cancel: this fake's subscriptions end with their one answer
            if isinstance(request, FetchRequestV0 | FetchRequestV2):
                self.fetch_offsets.extend(e.fetch_offset for e in request.entries)
                if self.hold.is_set():
                    self._held.append((identity, header, request))
                    continue
                reply = self._fetch(header, request)
            elif isinstance(request, ListOffsetsRequestV0):
                unsettled = self._unsettled()
                results = tuple(
                    ListOffsetsResult(p.partition, ErrorCode.OFFSET_NOT_AVAILABLE, "not yet",
                                      -1, -1)
                    if unsettled and p.timestamp == -1 else
                    ListOffsetsResult(p.partition, 0, "", 0 if p.timestamp == -2 else 20, -1)
                    for p in request.partitions)
                reply = encode_response(header, ListOffsetsResponseV0(TOPIC, results))
            else:
                assert isinstance(request, MetadataRequestV0), request
                self.metadata_topics.append(request.topics)
                partition = PartitionMetadata(0, 1, 0, (1,), (1,), self.endpoint)
                topic = TopicMetadata(TOPIC, 0, "", {}, (partition,))
                reply = encode_response(header, MetadataResponseV0(
                    "c", 1, (BrokerMetadata(1, "h", self.endpoint),), (topic,)))
            send_routed(self.socket, identity, reply)

    def _unsettled(self) -> bool:
        if self.unsettled_answers <= 0:
            return False
        self.unsettled_answers -= 1
        return True

    def _fetch(self, header: RequestHeader,
               request: FetchRequestV0 | FetchRequestV2) -> list[Buffer]:
        (entry,) = request.entries
        shown = -1 if self._unsettled() else HIGH_WATERMARK
        if not 0 <= entry.fetch_offset <= HIGH_WATERMARK:
            result = FetchResult(TOPIC, 0, ErrorCode.OFFSET_OUT_OF_RANGE, HIGH_WATERMARK,
                                 HIGH_WATERMARK, 0, (), "out of range")
        else:
            chunks = tuple(b for i, b in enumerate(BATCHES) if 5 * i + 5 > entry.fetch_offset)
            result = FetchResult(TOPIC, 0, 0, shown, shown, 0,
                                 (b"".join(chunks),) if chunks else ())
        if isinstance(request, FetchRequestV2):
            return encode_response(header, FetchResponseV2((result,), more=False))
        return encode_response(header, FetchResponseV0((result,)))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.socket.close(linger=0)


@pytest.fixture
def leader() -> Iterator[FakeLeader]:
    fake = FakeLeader()
    yield fake
    fake.close()


def consumer_for(leader: FakeLeader, reset: str) -> Consumer:
    consumer = Consumer(leader.endpoint, auto_offset_reset=reset, fetch_max_wait_ms=50)
    consumer.assign([TP])
    return consumer


def poll_offsets(consumer: Consumer, count: int) -> list[int]:
    offsets: list[int] = []
    for _ in range(50):
        offsets.extend(r.offset for r in consumer.poll(100, max_records=count - len(offsets)))
        if len(offsets) >= count:
            break
    return offsets


def test_reset_policies_pick_the_first_position(leader: FakeLeader) -> None:
    with consumer_for(leader, "earliest") as earliest:
        assert earliest.position(TP) == 0
    with consumer_for(leader, "latest") as latest:
        assert latest.position(TP) == HIGH_WATERMARK
    with consumer_for(leader, "none") as strict, pytest.raises(ZlogError) as caught:
        strict.position(TP)
    assert caught.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_a_new_leader_not_settled_yet_is_asked_again(leader: FakeLeader) -> None:
    """OFFSET_NOT_AVAILABLE (a new leader whose high watermark is below its epoch start) is
    retried within the request timeout, by the consumer and by the admin client; a fetch
    answer without a high watermark (-1) leaves the one seen before, as Kafka's clients do."""
    leader.unsettled_answers = 3
    with consumer_for(leader, "latest") as latest:
        assert latest.position(TP) == HIGH_WATERMARK
    leader.unsettled_answers = 3
    with Admin(leader.endpoint) as admin:
        assert admin.list_offsets({TP: -1})[TP].offset == HIGH_WATERMARK
    with consumer_for(leader, "earliest") as consumer:
        assert poll_offsets(consumer, 5) == [0, 1, 2, 3, 4]
        assert consumer.highwater(TP) == HIGH_WATERMARK
        leader.unsettled_answers = 1
        consumer.seek(TP, 0)
        assert poll_offsets(consumer, 5) == [0, 1, 2, 3, 4]
        assert consumer.highwater(TP) == HIGH_WATERMARK


def test_records_below_the_position_in_a_returned_batch_are_skipped(leader: FakeLeader) -> None:
    with consumer_for(leader, "earliest") as consumer:
        consumer.seek(TP, 7)
        assert poll_offsets(consumer, 13) == list(range(7, 20))
        assert consumer.position(TP) == 20
        assert leader.fetch_offsets[0] == 7


def test_max_records_splits_a_batch_and_the_position_follows(leader: FakeLeader) -> None:
    with consumer_for(leader, "earliest") as consumer:
        assert poll_offsets(consumer, 3) == [0, 1, 2]
        assert consumer.position(TP) == 3
        assert poll_offsets(consumer, 4) == [3, 4, 5, 6]


def test_an_answer_to_a_fetch_from_before_a_seek_is_dropped(leader: FakeLeader) -> None:
    with consumer_for(leader, "earliest") as consumer:
        leader.hold.set()
        assert consumer.poll(50) == []  # a fetch from offset 0 is now held by the leader
        consumer.seek(TP, 15)
        leader.hold.clear()
        assert poll_offsets(consumer, 5) == [15, 16, 17, 18, 19]


def test_offset_out_of_range_follows_auto_offset_reset(leader: FakeLeader) -> None:
    with consumer_for(leader, "earliest") as consumer:
        consumer.seek(TP, 500)
        assert poll_offsets(consumer, 2) == [0, 1]
    with consumer_for(leader, "none") as strict:
        strict.seek(TP, 500)
        with pytest.raises(ZlogError) as caught:
            poll_offsets(strict, 1)
        assert caught.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_poll_batches_returns_views_from_the_position(leader: FakeLeader) -> None:
    with consumer_for(leader, "earliest") as consumer:
        consumer.seek(TP, 12)
        views: list[BatchView] = []
        for _ in range(50):
            views.extend(view for _, view in consumer.poll_batches(100))
            if consumer.position(TP) == HIGH_WATERMARK:
                break
        assert [int(o) for view in views for o in view.offsets] == list(range(12, 20))
        assert views[0].values()[0] == b"v12"


def test_unassigned_partitions_are_refused(leader: FakeLeader) -> None:
    with consumer_for(leader, "earliest") as consumer:
        with pytest.raises(ZlogError) as caught:
            consumer.seek(TopicPartition("other", 0), 1)
        assert caught.value.code == ErrorCode.INVALID_REQUEST
        consumer.assign([])
        assert consumer.assignment() == set()
        assert consumer.poll(10) == []


def _poll_fetch_rounds(consumer: Consumer, leader: FakeLeader, rounds: int) -> None:
    """Poll until `rounds` more fetches reached the leader: each poll before them found its
    partition idle or waiting, whatever the timing of the answers."""
    target = len(leader.fetch_offsets) + rounds
    wait_until(lambda: bool(consumer.poll(0) or True) and len(leader.fetch_offsets) >= target,
               10, interval_s=0.001, what=f"{rounds} fetch rounds")


def test_a_local_consumer_asks_for_metadata_again_once_it_is_too_old(leader: FakeLeader) -> None:
    """A ring tells nothing of leadership, so a local consumer refreshes its metadata every
    local_metadata_max_age_ms; it also asks each broker on its host whose ring directory it
    does not know (a Metadata request for no topic), once. A network-only consumer does not
    refresh: its fetch answers tell it when the leader moved."""
    clock = ManualClock()
    local = Consumer(leader.endpoint, auto_offset_reset="earliest", local=True, clock=clock,
                     local_metadata_max_age_ms=1_000, fetch_max_wait_ms=0)
    local.assign([TP])
    assert local.position(TP) == 0
    assert leader.metadata_topics == [(TOPIC,), ()]
    _poll_fetch_rounds(local, leader, 3)
    clock.advance(999)
    _poll_fetch_rounds(local, leader, 3)
    assert leader.metadata_topics == [(TOPIC,), ()]
    clock.advance(1)
    _poll_fetch_rounds(local, leader, 3)
    assert leader.metadata_topics == [(TOPIC,), (), (TOPIC,)]
    local.close()

    leader.metadata_topics.clear()
    remote = Consumer(leader.endpoint, auto_offset_reset="earliest", clock=clock,
                      fetch_max_wait_ms=0)
    remote.assign([TP])
    assert remote.position(TP) == 0
    clock.advance(60_000)
    _poll_fetch_rounds(remote, leader, 3)
    assert leader.metadata_topics == [(TOPIC,)]
    remote.close()
