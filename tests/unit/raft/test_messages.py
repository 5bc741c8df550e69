"""Unit tests of the ConfigState payload codec in zlog.raft.messages (section 2: CONFIG blocks)."""

from __future__ import annotations

import struct

import pytest

from zlog.raft.messages import EMPTY_CONFIG, ConfigState


def test_config_round_trip() -> None:
    config = ConfigState.of([3, 1, 2], [7, 5])
    assert config == ConfigState((1, 2, 3), (5, 7))
    assert ConfigState.decode(config.encode()) == config
    assert config.members == (1, 2, 3, 5, 7)


def test_config_encoding_is_stable() -> None:
    """Every node must read the same config out of the same bytes: pin the layout."""
    encoded = ConfigState.of([1, 2], [9]).encode()
    assert encoded == struct.pack(">BHHQQQ", 1, 2, 1, 1, 2, 9)


def test_empty_config_round_trips() -> None:
    assert ConfigState.decode(EMPTY_CONFIG.encode()) == EMPTY_CONFIG


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\x01\x00",
        struct.pack(">BHH", 2, 0, 0),  # unknown version
        struct.pack(">BHHQ", 1, 2, 0, 1),  # fewer ids than counted
        struct.pack(">BHHQQ", 1, 2, 0, 2, 1),  # unsorted
        struct.pack(">BHHQQ", 1, 2, 0, 1, 1),  # duplicate
        struct.pack(">BHHQQ", 1, 1, 1, 1, 1),  # voter and learner at once
        struct.pack(">BHHQ", 1, 1, 0, 1) + b"x",  # trailing byte
    ],
)
def test_decode_rejects_malformed(payload: bytes) -> None:
    """A malformed CONFIG payload is an operating error (ValueError), never a crash."""
    with pytest.raises(ValueError):
        ConfigState.decode(payload)


def test_of_rejects_overlap() -> None:
    with pytest.raises(ValueError):
        ConfigState.of([1, 2], [2])
