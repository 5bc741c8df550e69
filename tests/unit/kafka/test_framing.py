"""Kafka framing: whole frames out of arbitrary chunks, absurd sizes refused before allocation."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zlog.kafka.framing import FrameReader, FrameSizeError, frame
from zlog.limits import KAFKA_REQUEST_BYTES_MAX

PAYLOADS = st.lists(st.binary(min_size=8, max_size=300), max_size=8)


@given(PAYLOADS, st.lists(st.integers(1, 50), min_size=1, max_size=20))
def test_frames_come_out_whole_and_in_order_however_the_bytes_are_cut(
        payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(payload) for payload in payloads)
    reader = FrameReader()
    received: list[bytes] = []
    position = 0
    for length in [*cuts, len(stream)]:
        received += reader.feed(stream[position:position + length])
        position += length
    assert received == payloads
    assert reader.pending_bytes == 0
    assert all(type(item) is bytes for item in received)  # kio refuses bytearrays


@pytest.mark.parametrize("size", [-1, -(2**31), 0, 7, KAFKA_REQUEST_BYTES_MAX + 1, 2**31 - 1])
def test_an_absurd_size_is_refused_as_soon_as_its_prefix_arrives(size: int) -> None:
    reader = FrameReader()
    assert reader.feed(frame(b"\0" * 8)) == [b"\0" * 8]
    with pytest.raises(FrameSizeError, match=f"{size} bytes"):
        reader.feed(struct.pack(">i", size))


def test_the_largest_allowed_frame_is_waited_for_not_refused() -> None:
    reader = FrameReader(max_bytes=1_000)
    assert reader.feed(struct.pack(">i", 1_000) + b"x" * 999) == []
    assert reader.feed(b"y") == [b"x" * 999 + b"y"]


def test_frames_before_an_absurd_size_are_still_handed_out_then_the_stream_is_refused(
        ) -> None:
    reader = FrameReader()
    assert reader.feed(frame(b"a" * 8) + struct.pack(">i", -5)) == [b"a" * 8]
    assert reader.refusal is not None and "-5 bytes" in reader.refusal
    with pytest.raises(FrameSizeError):
        reader.feed(frame(b"b" * 8))
