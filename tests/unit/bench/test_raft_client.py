"""The standalone Raft node's client frames: every value round-trips, garbage is CodecError.

The node answers whatever arrives on its client port, so a malformed frame has to become an
error reply, never an IndexError or struct.error in the client thread (docs/benchmarks.md,
"Chained Raft"; docs/reliability.md §2.1).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bench.raft_client import (
    ClientReply,
    ClientRequest,
    ClientRequestKind,
    decode_client_reply,
    decode_client_request,
    encode_client_reply,
    encode_client_request,
)
from zlog.errors import ErrorCode
from zlog.raft.codec import CodecError

u64 = st.integers(min_value=0, max_value=2**64 - 1)
client_requests = st.builds(
    ClientRequest, st.sampled_from(ClientRequestKind), u64, st.binary(max_size=200)
)
client_replies = st.builds(
    ClientReply, u64, st.integers(-1, 200), st.integers(-1, 2**31 - 1), st.binary(max_size=200)
)


@given(client_requests)
def test_client_request_round_trip(request: ClientRequest) -> None:
    assert decode_client_request(encode_client_request(request)) == request


@given(client_replies)
def test_client_reply_round_trip(reply: ClientReply) -> None:
    assert decode_client_reply(encode_client_reply(reply)) == reply


@given(st.binary(max_size=200))
def test_random_bytes_raise_only_codec_error(data: bytes) -> None:
    for decode in (decode_client_request, decode_client_reply):
        try:
            decode(data)
        except CodecError as error:
            assert error.code == ErrorCode.CORRUPT_MESSAGE
