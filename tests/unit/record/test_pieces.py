"""Pieces copied into their places in a batch and gathered back, whatever their spacing."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from zlog.record.pieces import gather_pieces, scatter_pieces


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(st.tuples(st.integers(0, 6), st.binary(max_size=6)), min_size=1, max_size=60)
)
def test_pieces_scatter_and_gather_back(pieces: list[tuple[int, bytes]]) -> None:
    gaps = np.array([gap for gap, _ in pieces], np.int64)
    lengths = np.array([len(piece) for _, piece in pieces], np.int64)
    starts = np.cumsum(gaps + lengths) - lengths
    buffer = np.zeros(int(starts[-1] + lengths[-1]) + 3, np.uint8)
    payload = np.frombuffer(b"".join(piece for _, piece in pieces), np.uint8)
    scatter_pieces(buffer, starts, lengths, payload)
    for start, (_, piece) in zip(starts.tolist(), pieces, strict=True):
        assert buffer[start : start + len(piece)].tobytes() == piece
    assert np.array_equal(gather_pieces(buffer, starts, lengths), payload)
