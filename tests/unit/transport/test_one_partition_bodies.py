"""The one-partition decoders agree with the general cursor decoders, and defer to them otherwise.

Each data-path body has a fast decoder for its one-partition shape. For every body it accepts it
must return what the general decoder returns; for every other body (malformed ones included) it
must decline, so that the general decoder gives its usual answer or error.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from zlog.errors import ErrorCode, ZlogError
from zlog.transport import struct_bodies
from zlog.transport.messages.data import (
    FetchEntry,
    FetchRequestV0,
    ProduceEntry,
    ProduceRequestV0,
    ProduceResponseV0,
    ProduceResult,
)

CODE = ErrorCode.INVALID_REQUEST
TOPICS = ("t", "orders", "événements-ü", "x" * 300)


def _general(monkeypatch: pytest.MonkeyPatch, fast_name: str) -> None:
    """Turn the fast decoder off: what remains is the general decoder alone."""
    monkeypatch.setattr(struct_bodies, fast_name, lambda body, frames, *cls: None)


def _outcome(decode: Callable[[], Any]) -> Any:
    try:
        return decode()
    except ZlogError as error:
        return ("error", error.code, error.message)


def _produce_requests(rng: random.Random) -> Iterator[ProduceRequestV0]:
    for _ in range(200):
        batches = tuple(rng.randbytes(rng.randint(0, 90)) for _ in range(rng.randint(0, 3)))
        entry = ProduceEntry(rng.choice(TOPICS), rng.randint(0, 2**31 - 1), batches)
        yield ProduceRequestV0(rng.choice([-1, 0, 1, 7]), rng.randint(-5, 60_000), (entry,))


def _fetch_requests(rng: random.Random) -> Iterator[FetchRequestV0]:
    for _ in range(200):
        entry = FetchEntry(rng.choice(TOPICS), rng.randint(0, 100), rng.randint(-1, 2**40),
                           rng.randint(0, 2**31 - 1))
        yield FetchRequestV0(rng.randint(-1, 3), rng.randint(0, 1000), rng.randint(0, 10),
                             rng.randint(0, 2**31 - 1), (entry,))


def _produce_responses(rng: random.Random) -> Iterator[ProduceResponseV0]:
    for _ in range(200):
        message = rng.choice(["", "not the leader", "ошибка"])
        result = ProduceResult(rng.choice(TOPICS), rng.randint(0, 100), rng.choice([0, 6, 45]),
                               rng.randint(-1, 2**40), rng.randint(-1, 2**41),
                               rng.randint(-1, 2**40), message)
        yield ProduceResponseV0((result,))


def test_produce_requests_decode_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    for request in _produce_requests(random.Random(1)):
        body, frames = struct_bodies.encode_produce_request(request)
        views = [memoryview(bytes(frame)) for frame in frames]
        fast = struct_bodies.decode_produce_request(memoryview(body), views, CODE)
        assert struct_bodies._one_partition_produce_request(memoryview(body), views) is not None
        assert fast == request
    _general(monkeypatch, "_one_partition_produce_request")
    for request in _produce_requests(random.Random(1)):
        body, frames = struct_bodies.encode_produce_request(request)
        views = [memoryview(bytes(frame)) for frame in frames]
        assert struct_bodies.decode_produce_request(memoryview(body), views, CODE) == request


def test_fetch_requests_and_produce_responses_decode_the_same() -> None:
    for request in _fetch_requests(random.Random(2)):
        body = memoryview(struct_bodies.encode_fetch_request(request))
        assert struct_bodies._one_partition_fetch_request(body, [], FetchRequestV0) == request
        assert struct_bodies.decode_fetch_request(body, [], CODE, FetchRequestV0) == request
    for response in _produce_responses(random.Random(3)):
        body = memoryview(struct_bodies.encode_produce_response(response))
        assert struct_bodies._one_partition_produce_response(body, []) == response
        assert struct_bodies.decode_produce_response(body, [], CODE) == response


def _mangled(body: bytes, rng: random.Random) -> Iterator[bytes]:
    """Bodies near a valid one: cut short, lengthened, a byte changed, an invalid UTF-8 topic."""
    yield body[: rng.randint(0, len(body) - 1)]
    yield body + b"\x00"
    for _ in range(12):
        position = rng.randrange(len(body))
        yield body[:position] + bytes([rng.randrange(256)]) + body[position + 1 :]
    yield body[:-1] + b"\xff"


@pytest.mark.parametrize(
    ("fast_name", "decode", "make"),
    [
        ("_one_partition_produce_request", struct_bodies.decode_produce_request,
         lambda rng: struct_bodies.encode_produce_request(next(_produce_requests(rng)))),
        ("_one_partition_fetch_request",
         functools.partial(struct_bodies.decode_fetch_request, cls=FetchRequestV0),
         lambda rng: (struct_bodies.encode_fetch_request(next(_fetch_requests(rng))), [])),
        ("_one_partition_produce_response", struct_bodies.decode_produce_response,
         lambda rng: (struct_bodies.encode_produce_response(next(_produce_responses(rng))), [])),
    ],
)
def test_malformed_bodies_get_the_general_answer(
    monkeypatch: pytest.MonkeyPatch, fast_name: str, decode: Any, make: Any
) -> None:
    rng = random.Random(fast_name)
    cases = []
    for _ in range(40):
        body, frames = make(rng)
        views = [memoryview(bytes(frame)) for frame in frames]
        for mangled in _mangled(body, rng):
            for frame_views in (views, views[:-1], [*views, memoryview(b"extra")]):
                cases.append((mangled, frame_views))
    with_fast = [_outcome(lambda c=case: decode(memoryview(c[0]), c[1], CODE)) for case in cases]
    _general(monkeypatch, fast_name)
    general = [_outcome(lambda c=case: decode(memoryview(c[0]), c[1], CODE)) for case in cases]
    assert with_fast == general
    assert any(isinstance(outcome, tuple) for outcome in general), "some bodies are refused"
