"""A Kafka connection's login, request by request: what is answered before it, in it, after
it, and when the connection is to be closed."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from zlog.client.scram import scram_user
from zlog.errors import ErrorCode, ZlogError
from zlog.kafka.kafka_login import KafkaLogin
from zlog.kafka.requests import KafkaRequest, parse_request
from zlog.kafka.tls import server_context

ALICE = scram_user("alice", "s3cret", "SCRAM-SHA-256", iterations=4096)


def _users(name: str, mechanism: str):  # type: ignore[no-untyped-def]
    return ALICE if (name, mechanism) == ("alice", "SCRAM-SHA-256") else None


def _request(message: object, version: int, correlation_id: int = 1) -> KafkaRequest:
    message.with_header(correlation_id=correlation_id, client_id="t")  # type: ignore[attr-defined]
    framed = bytes(message.encode(version=version, header=True, framed=True))  # type: ignore[attr-defined]
    return parse_request(framed[4:])


def _code(reply: bytes | None) -> int:
    assert reply is not None
    return int(struct.unpack_from(">h", reply, 8)[0])  # size, correlation id, error code


def test_a_login_by_plain_then_requests_are_the_ports() -> None:
    login = KafkaLogin(_users)
    handshake = login.step(_request(SaslHandshakeRequest(mechanism="PLAIN"), 1))
    assert handshake is not None and not handshake.close
    assert _code(handshake.reply) == ErrorCode.NONE
    done = login.step(_request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0s3cret"), 1))
    assert done is not None and not done.close and _code(done.reply) == ErrorCode.NONE
    assert login.principal == "alice"
    assert login.step(_request(MetadataRequest(topics=None), 1)) is None


def test_a_request_before_the_login_is_refused_and_closes() -> None:
    login = KafkaLogin(_users)
    refused = login.step(_request(MetadataRequest(topics=None), 1, correlation_id=5))
    assert refused is not None and refused.close and refused.reply is not None
    assert struct.unpack_from(">i", refused.reply, 4)[0] == 5
    assert login.closed and login.principal is None


@pytest.mark.parametrize(("steps", "code"), [
    ([SaslAuthenticateRequest(auth_bytes=b"\0alice\0s3cret")], ErrorCode.ILLEGAL_SASL_STATE),
    ([SaslHandshakeRequest(mechanism="GSSAPI")], ErrorCode.UNSUPPORTED_SASL_MECHANISM),
    ([SaslHandshakeRequest(mechanism="PLAIN"),
      SaslAuthenticateRequest(auth_bytes=b"\0alice\0guess")], ErrorCode.SASL_AUTHENTICATION_FAILED),
    ([SaslHandshakeRequest(mechanism="PLAIN"),
      SaslAuthenticateRequest(auth_bytes=b"\0alice\0s3cret"),
      SaslHandshakeRequest(mechanism="PLAIN")], ErrorCode.ILLEGAL_SASL_STATE),
])
def test_a_login_out_of_order_or_failed_is_answered_then_closed(steps: list[object],
                                                                code: ErrorCode) -> None:
    login = KafkaLogin(_users)
    for message in steps[:-1]:
        step = login.step(_request(message, 1))
        assert step is not None and not step.close
    last = login.step(_request(steps[-1], 1))
    assert last is not None and last.close and _code(last.reply) == code
    assert login.closed


def test_an_unusable_certificate_is_refused_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(ZlogError, match=r"kafka_tls_cert_file .*missing\.pem") as caught:
        server_context(tmp_path / "missing.pem", tmp_path / "missing.key")
    assert caught.value.code == ErrorCode.INVALID_CONFIG
