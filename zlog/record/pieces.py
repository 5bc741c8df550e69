"""Copying pieces (keys, values) between a packed payload and their places in a batch.

The array codec keeps a batch's keys and values as one packed array plus starts and lengths;
these copies move them in or out with a few numpy operations. Runs of evenly spaced
equal-length pieces (equal values, the common case) are copied as strided 2-D views, anything
more irregular through a byte mask.
"""

from __future__ import annotations

import itertools
import struct
from typing import Final

import numpy as np

from zlog.record.varint import BoolArray, Int64Array, UInt8Array

# Above this many runs of evenly spaced equal-length pieces, copying through a byte mask is
# cheaper than one strided copy per run.
_COPY_RUNS_MAX: Final = 32


def _uniform_runs(
    starts: Int64Array, lengths: Int64Array
) -> list[tuple[int, int, int, int]] | None:
    """Split pieces into runs of equal length and equal spacing: (first, stop, stride, width).

    None when there are so many runs that a byte mask is the cheaper copy.
    """
    count = starts.size
    if count == 1:
        return [(0, 1, max(int(lengths[0]), 1), int(lengths[0]))]
    strides = np.diff(starts)
    breaks = lengths[1:] != lengths[:-1]
    breaks[1:] |= strides[1:] != strides[:-1]
    cuts = np.flatnonzero(breaks) + 1
    if cuts.size >= _COPY_RUNS_MAX:
        return None
    bounds = [0, *cuts.tolist(), count]
    runs = []
    for first, stop in itertools.pairwise(bounds):
        width = int(lengths[first])
        stride = int(strides[first]) if stop - first > 1 else max(width, 1)
        assert stride >= width, "pieces never overlap"
        runs.append((first, stop, stride, width))
    return runs


def _rows(buf: UInt8Array, start: int, count: int, stride: int, width: int) -> UInt8Array:
    """A (count, width) view of buf whose rows start `stride` bytes apart."""
    return np.ndarray((count, width), np.uint8, buffer=buf, offset=start, strides=(stride, 1))


def _piece_mask(size_bytes: int, starts: Int64Array, lengths: Int64Array) -> BoolArray:
    """True on every byte covered by a piece; pieces are sorted and disjoint.

    Built as alternating runs of False (the gap before a piece) and True (the piece), which
    np.repeat writes in one pass.
    """
    count = starts.size
    ends = starts + lengths
    run_bytes = np.empty(2 * count + 1, np.int64)
    run_bytes[0] = starts[0]
    run_bytes[2:-1:2] = starts[1:] - ends[:-1]
    run_bytes[1::2] = lengths
    run_bytes[-1] = size_bytes - ends[-1]
    assert bool((run_bytes >= 0).all()), "pieces are sorted, disjoint and inside the buffer"
    pattern = np.zeros(2 * count + 1, np.bool_)
    pattern[1::2] = True
    return np.repeat(pattern, run_bytes)


def scatter_pieces(
    out: UInt8Array, starts: Int64Array, lengths: Int64Array, payload: UInt8Array
) -> None:
    """Copy the pieces packed end to end in `payload` so that piece i lands at out[starts[i]:]."""
    assert payload.size == int(lengths.sum())
    if payload.size == 0:
        return
    runs = _uniform_runs(starts, lengths)
    if runs is None:
        out[_piece_mask(out.size, starts, lengths)] = payload
        return
    payload_at = 0
    for first, stop, stride, width in runs:
        count = stop - first
        rows = _rows(out, int(starts[first]), count, stride, width)
        rows[...] = payload[payload_at : payload_at + count * width].reshape(count, width)
        payload_at += count * width


def gather_pieces(buf: UInt8Array, starts: Int64Array, lengths: Int64Array) -> UInt8Array:
    """The pieces buf[starts[i]:starts[i] + lengths[i]], packed end to end in a new array."""
    total_bytes = int(lengths.sum())
    if total_bytes == 0:
        return np.empty(0, np.uint8)
    runs = _uniform_runs(starts, lengths)
    if runs is None:
        return buf[_piece_mask(buf.size, starts, lengths)]
    packed = np.empty(total_bytes, np.uint8)
    packed_at = 0
    for first, stop, stride, width in runs:
        count = stop - first
        rows = _rows(buf, int(starts[first]), count, stride, width)
        packed[packed_at : packed_at + count * width].reshape(count, width)[...] = rows
        packed_at += count * width
    return packed


def split_pieces(buf: UInt8Array, starts: Int64Array, lengths: Int64Array) -> list[bytes | None]:
    """The pieces as separate bytes objects: the one per-record object a list of values needs.

    An evenly spaced run becomes one struct format ("100s10x100s..."), so a single C call
    makes all of its bytes objects; the struct module caches formats, and batches repeat them.
    """
    runs = _uniform_runs(starts, lengths)
    if runs is None:
        data = buf.tobytes()
        ends = starts + lengths
        return list(map(data.__getitem__, map(slice, starts.tolist(), ends.tolist())))
    pieces: list[bytes | None] = []
    for first, stop, stride, width in runs:
        layout = f"{width}s{stride - width}x" * (stop - first - 1) + f"{width}s"
        pieces.extend(struct.unpack_from(layout, buf.data, int(starts[first])))
    return pieces
