"""A local consumer parks on a worker's doorbell (zlog/client/ring_doorbells.py): it says
where it waits, once per offset, and a bell ends its sleep long before its pause would.

A real abstract Unix socket stands for the worker (zlog/transport/local_channel.py). The pause
is 60 s, so a park that returns at all returned on the bell.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterator

import pytest

from zlog.client.ring_doorbells import RingDoorbells
from zlog.transport import local_channel
from zlog.types import TopicPartition

LONG_PAUSE_S = 60.0
JOIN_S = 30.0
TP = TopicPartition("t", 3)
_ports = itertools.count(1)


@pytest.fixture
def endpoint() -> str:
    return f"tcp://127.0.0.1:{next(_ports)}-test-{os.getpid()}"


@pytest.fixture
def doorbells() -> Iterator[RingDoorbells]:
    bells = RingDoorbells()
    yield bells
    bells.close()


def park_in_thread(doorbells: RingDoorbells, endpoint: str, offset: int) -> threading.Thread:
    thread = threading.Thread(target=doorbells.park, daemon=True, args=(
        [(endpoint, TP, offset)], LONG_PAUSE_S, lambda: False), kwargs={"complete": True})
    thread.start()
    return thread


def test_a_park_tells_its_wait_and_ends_on_the_bell(doorbells: RingDoorbells,
                                                    endpoint: str) -> None:
    with local_channel.listen(endpoint) as listener:
        listener.setblocking(True)
        parked = park_in_thread(doorbells, endpoint, 41)
        worker_side, _ = listener.accept()
        with worker_side:
            assert worker_side.recv(4096) == local_channel.READER_HELLO
            assert local_channel.parse_wait(worker_side.recv(4096)) == ("t", 3, 41)
            assert local_channel.ring(worker_side)
            parked.join(JOIN_S)
            assert not parked.is_alive(), "the bell ended the park"
            # Rung: the next park tells the same wait again (the worker forgot it).
            parked = park_in_thread(doorbells, endpoint, 41)
            assert local_channel.parse_wait(worker_side.recv(4096)) == ("t", 3, 41)
        parked.join(JOIN_S)  # the worker's end closed: that ends the park too
        assert not parked.is_alive()

