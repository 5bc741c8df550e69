"""`utf8_longer_than`: the byte-length limit of ids and metadata, without encoding what is
too short in characters to break it (zlog/transport/wire.py)."""

from __future__ import annotations

import random

from zlog.transport.wire import utf8_longer_than


def _encoded_longer_than(text: str, max_bytes: int) -> bool:
    return len(text.encode("utf-8", "surrogatepass")) > max_bytes


def test_it_agrees_with_the_encoded_length_at_and_around_every_boundary() -> None:
    characters = ["a", "é", "€", "\U0001f600", "\ud800"]  # 1, 2, 3 and 4 bytes, a surrogate
    rng = random.Random(4)
    for _ in range(2_000):
        text = "".join(rng.choice(characters) for _ in range(rng.randrange(12)))
        encoded_bytes = len(text.encode("utf-8", "surrogatepass"))
        for max_bytes in {0, encoded_bytes - 1, encoded_bytes, encoded_bytes + 1,
                          len(text) * 4, len(text) * 4 - 1}:
            if max_bytes >= 0:
                assert utf8_longer_than(text, max_bytes) == _encoded_longer_than(text, max_bytes)


def test_four_byte_characters_at_the_limit_are_not_over_it_and_one_more_is() -> None:
    assert not utf8_longer_than("\U0001f600" * 256, 1_024)
    assert utf8_longer_than("\U0001f600" * 256 + "a", 1_024)
