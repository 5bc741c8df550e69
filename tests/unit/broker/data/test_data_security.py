"""A worker's data path with security on (data_security.py), driven by hand: an ACL refusal
touches nothing, and a fetch quota holds a long poll's answer once its bytes are known."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.storage_helpers import make_batch
from tests.unit.broker.data.test_data_plane import (
    CLIENT,
    OTHER,
    Harness,
    _decode,
    _fetched,
    harness_at,
)
from zlog.broker.authorizer import Authorizer
from zlog.broker.data.data_security import DataSecurity
from zlog.broker.quotas import QuotaMeter
from zlog.errors import ErrorCode
from zlog.transport.codec import encode_request
from zlog.transport.messages import ErrorBody
from zlog.transport.messages.data import (
    FetchEntry,
    FetchRequestV0,
    ProduceEntry,
    ProduceRequestV0,
)
from zlog.transport.messages.security import AclEntry, QuotaEntry
from zlog.transport.server import Reply
from zlog.types import TopicPartition

FETCH_BYTES_PER_S = 100


@pytest.fixture
def harness(tmp_path: Path, shm_dir: Path) -> Iterator[Harness]:
    """test_data_plane.py's harness with security on."""
    with harness_at(tmp_path, shm_dir) as made:
        made.plane.clock = made.clock  # one clock for the requests and the parked answers
        made.plane.security = DataSecurity(
            Authorizer((AclEntry("alice", "topic", "t", "read"),), ("admin",)),
            QuotaMeter((QuotaEntry("principal", "alice",
                                   fetch_bytes_per_s=FETCH_BYTES_PER_S),)))
        yield made


def _as(harness: Harness, principal: str, request: object,
        identity: bytes = CLIENT) -> list[Reply]:
    harness.correlation_id += 1
    frames = encode_request(harness.correlation_id, request)  # type: ignore[arg-type]
    return harness.plane.handle(identity, frames, harness.clock.now_ms, principal)


def _produce(harness: Harness, principal: str) -> list[Reply]:
    return _as(harness, principal, ProduceRequestV0(1, 1000, (ProduceEntry("t", 0,
                                                                           (make_batch(0),)),)))


def test_a_refused_produce_is_answered_with_its_code_and_appends_nothing(
        harness: Harness) -> None:
    (reply,) = _produce(harness, "alice")  # alice may read, not write
    refused = _decode(reply)
    assert isinstance(refused, ErrorBody)
    assert refused.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert harness.host.partitions[TopicPartition("t", 0)].log.log_end_offset == 0


def test_a_long_poll_s_answer_waits_out_the_fetch_quota(harness: Harness) -> None:
    fetch = FetchRequestV0(-1, 5_000, 1, 1 << 20, (FetchEntry("t", 0, 0, 1 << 20),))
    assert _as(harness, "alice", fetch, OTHER) == []  # parked: nothing to read yet
    woken = _produce(harness, "admin")  # the admin's produce answer, and alice's is held
    assert [peer for peer, _frames in woken] == [CLIENT]
    (_due_ms, _order, (_peer, frames)) = harness.plane.held[0]
    answered_bytes = sum(len(memoryview(frame)) for frame in frames)
    hold_ms = answered_bytes * 1000 // FETCH_BYTES_PER_S - 1000  # less one second's burst
    assert hold_ms > 0
    harness.clock.advance(hold_ms - 10)
    assert harness.plane.on_timer(harness.clock.now_ms) == []
    harness.clock.advance(20)
    (released,) = harness.plane.on_timer(harness.clock.now_ms)
    assert released[0] == OTHER
    assert _fetched(released).entries[0].high_watermark == 3
