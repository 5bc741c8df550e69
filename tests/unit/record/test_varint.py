"""Zigzag varints, one at a time and as arrays: protobuf's encoding, the same bytes both ways."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from zlog.record import varint


def test_varints_match_the_protobuf_zigzag_examples() -> None:
    assert varint.encode_varint(0) == b"\x00"
    assert varint.encode_varint(-1) == b"\x01"
    assert varint.encode_varint(1) == b"\x02"
    assert varint.encode_varint(63) == b"\x7e"
    assert varint.encode_varint(64) == b"\x80\x01"
    assert varint.encode_varint(varint.INT32_MAX) == b"\xfe\xff\xff\xff\x0f"
    assert varint.encode_varlong(varint.INT64_MIN) == b"\xff" * 9 + b"\x01"


@settings(max_examples=300, deadline=None)
@given(value=st.integers(min_value=varint.INT64_MIN, max_value=varint.INT64_MAX))
def test_scalar_varlongs_round_trip(value: int) -> None:
    encoded = varint.encode_varlong(value)
    assert len(encoded) == varint.varint_size_bytes(value)
    assert varint.decode_varlong(encoded, 0, len(encoded)) == (value, len(encoded))
    if varint.INT32_MIN <= value <= varint.INT32_MAX:
        assert varint.encode_varint(value) == encoded
        assert varint.decode_varint(encoded, 0, len(encoded)) == (value, len(encoded))


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.integers(min_value=varint.INT64_MIN, max_value=varint.INT64_MAX), min_size=1)
)
def test_array_varints_agree_with_scalar_varints(values: list[int]) -> None:
    encoded = [varint.encode_varlong(value) for value in values]
    as_array = np.array(values, np.int64)
    zigzag = varint.zigzag_encode_array(as_array)
    sizes = varint.varint_sizes_array(zigzag)
    assert sizes.tolist() == [len(one) for one in encoded]
    positions = np.cumsum(sizes) - sizes
    written = np.zeros(int(sizes.sum()), np.uint8)
    varint.write_varints_array(written, positions, zigzag, sizes)
    assert written.tobytes() == b"".join(encoded)
    decoded, decoded_sizes, well_formed = varint.read_varints_array(
        written, positions, varint.VARLONG_BYTES_MAX
    )
    assert decoded.tolist() == values
    assert np.array_equal(decoded_sizes, sizes) and well_formed.all()
