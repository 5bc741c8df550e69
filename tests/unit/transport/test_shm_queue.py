"""The shared-memory queue pair of a local producer: messages come out as they went in, in
order, across the end of the area; a full queue refuses instead of overwriting; a corrupt one
is refused with a Kafka code; the sleeping flag asks for one doorbell per sleep.

Spec: zlog/transport/shm_queue.py. A real file is mapped twice (a writer's and a reader's
mapping), as the producer and the worker map it.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from zlog.errors import ErrorCode, ZlogError
from zlog.transport.shm_queue import PAGE_BYTES, QueuePair, ShmQueue, message_bytes

SMALL_BYTES = 1024


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[QueuePair, QueuePair]]:
    path = tmp_path / "zlog-lpq-test"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    writer = QueuePair(path, fd, create=True, requests_bytes=SMALL_BYTES,
                       replies_bytes=SMALL_BYTES)
    reader = QueuePair.open(path)
    os.close(fd)
    yield writer, reader
    writer.close()
    reader.close()


def frames_of(*parts: bytes) -> list[memoryview]:
    return [memoryview(part) for part in parts]


def taken(queue: ShmQueue) -> list[bytes] | None:
    frames = queue.take()
    return None if frames is None else [bytes(frame) for frame in frames]


def test_messages_come_out_in_order_across_the_end_of_the_area(
        pair: tuple[QueuePair, QueuePair]) -> None:
    writer, reader = pair
    sent: list[list[bytes]] = []
    got: list[list[bytes]] = []
    for index in range(200):  # ~30 KB through a 1 KiB area: it wraps many times
        message = [b"h%03d" % index, bytes([index % 256]) * (index % 90), b""]
        assert writer.requests.put(frames_of(*message))
        sent.append(message)
        if index % 3 == 2:  # the reader lags by up to three messages
            while (frames := taken(reader.requests)) is not None:
                got.append(frames)
    while (frames := taken(reader.requests)) is not None:
        got.append(frames)
    assert got == sent
    assert reader.requests.is_empty() and writer.requests.used_bytes == 0


def test_a_full_queue_refuses_and_takes_again_once_read(
        pair: tuple[QueuePair, QueuePair]) -> None:
    writer, reader = pair
    message = frames_of(b"x" * 200)
    accepted = 0
    while writer.replies.put(message):
        accepted += 1
    assert accepted == SMALL_BYTES // message_bytes(message)
    assert taken(reader.replies) == [b"x" * 200]
    assert writer.replies.put(message)
    assert not writer.replies.put(message)


def test_a_message_that_can_never_fit_is_told(pair: tuple[QueuePair, QueuePair]) -> None:
    writer, _reader = pair
    assert writer.requests.fits(frames_of(b"y" * 400))
    assert not writer.requests.fits(frames_of(b"y" * 600))


def test_the_two_directions_are_separate(pair: tuple[QueuePair, QueuePair]) -> None:
    writer, reader = pair
    assert writer.requests.put(frames_of(b"request"))
    assert reader.replies.put(frames_of(b"reply"))
    assert taken(writer.replies) == [b"reply"]
    assert taken(reader.requests) == [b"request"]


def test_a_corrupt_message_length_is_refused_with_a_code(
        pair: tuple[QueuePair, QueuePair], tmp_path: Path) -> None:
    writer, reader = pair
    assert writer.requests.put(frames_of(b"fine"))
    with (tmp_path / "zlog-lpq-test").open("r+b") as scribbler:  # a writer gone wrong
        scribbler.seek(PAGE_BYTES)
        scribbler.write(struct.pack("<I", 999_999))
    with pytest.raises(ZlogError) as refused:
        reader.requests.take()
    assert refused.value.code == ErrorCode.CORRUPT_MESSAGE


def test_a_file_that_is_not_a_queue_pair_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "zlog-lpq-other"
    path.write_bytes(b"\0" * (2 * PAGE_BYTES))
    with pytest.raises(ZlogError) as refused:
        QueuePair.open(path)
    assert refused.value.code == ErrorCode.CORRUPT_MESSAGE


def test_the_doorbell_is_wanted_once_per_sleep(pair: tuple[QueuePair, QueuePair]) -> None:
    writer, reader = pair
    assert writer.requests.put(frames_of(b"a"))
    assert not writer.requests.wake_needed()  # the reader is awake
    assert not reader.requests.sleep_if_empty()  # a message waits: it must not sleep
    assert taken(reader.requests) == [b"a"]
    assert reader.requests.sleep_if_empty()
    assert writer.requests.put(frames_of(b"b"))
    assert writer.requests.wake_needed()
    assert writer.requests.put(frames_of(b"c"))
    assert not writer.requests.wake_needed()  # one doorbell wakes it for both
    reader.requests.awake()
    assert [taken(reader.requests), taken(reader.requests)] == [[b"b"], [b"c"]]
