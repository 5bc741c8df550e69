"""SASL/PLAIN and SCRAM's server side against the RFCs' client computations."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from zlog.client.scram import scram_user
from zlog.kafka.sasl import BAD_CREDENTIALS, SaslExchange, SaslFailure
from zlog.transport.messages.security import ScramUser

DIGESTS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


def users_of(*users: ScramUser):  # type: ignore[no-untyped-def]
    table = {(user.name, user.mechanism): user for user in users}
    return lambda name, mechanism: table.get((name, mechanism))


def scram_login(exchange: SaslExchange, name: str, password: str, mechanism: str) -> bytes:
    """A client's SCRAM exchange (RFC 5802 section 3); the server's final message."""
    digest = DIGESTS[mechanism]
    first_bare = f"n={name},r=clientnonce"
    server_first = exchange.step(f"n,,{first_bare}".encode()).decode()
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    assert fields["r"].startswith("clientnonce")
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), base64.b64decode(fields["s"]),
                                 int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, digest).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = exchange.step(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    expected = hmac.new(server_key, auth_message, digest).digest()
    assert final == b"v=" + base64.b64encode(expected)
    return final


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_logs_in_with_the_right_password_and_proves_the_server(mechanism: str) -> None:
    users = users_of(scram_user("alice", "s3cret", mechanism, iterations=4096))
    exchange = SaslExchange(mechanism, users, nonce=lambda: b"n" * 24)
    scram_login(exchange, "alice", "s3cret", mechanism)
    assert exchange.principal == "alice"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_refuses_a_wrong_password(mechanism: str) -> None:
    users = users_of(scram_user("alice", "s3cret", mechanism, iterations=4096))
    exchange = SaslExchange(mechanism, users)
    with pytest.raises(SaslFailure, match=BAD_CREDENTIALS):
        scram_login(exchange, "alice", "guess", mechanism)
    assert exchange.principal is None


def test_scram_refuses_an_unknown_user_and_a_user_of_another_mechanism() -> None:
    users = users_of(scram_user("alice", "s3cret", "SCRAM-SHA-256", iterations=4096))
    with pytest.raises(SaslFailure, match=BAD_CREDENTIALS):
        SaslExchange("SCRAM-SHA-256", users).step(b"n,,n=bob,r=abc")
    with pytest.raises(SaslFailure, match=BAD_CREDENTIALS):
        SaslExchange("SCRAM-SHA-512", users).step(b"n,,n=alice,r=abc")


def test_plain_checks_the_password_against_the_stored_credential() -> None:
    users = users_of(scram_user("alice", "s3cret", "SCRAM-SHA-512", iterations=4096))
    exchange = SaslExchange("PLAIN", users)
    assert exchange.step(b"\0alice\0s3cret") == b""
    assert exchange.principal == "alice"
    for wrong in (b"\0alice\0guess", b"\0bob\0s3cret", b"alice\0s3cret", b"bob\0alice\0s3cret"):
        refused = SaslExchange("PLAIN", users)
        with pytest.raises(SaslFailure):
            refused.step(wrong)
        assert refused.principal is None


def test_a_mechanism_not_offered_and_garbage_are_refused_with_a_sentence() -> None:
    users = users_of()
    with pytest.raises(SaslFailure, match="unsupported SASL mechanism 'GSSAPI'"):
        SaslExchange("GSSAPI", users)
    for garbage in (b"", b"\xff\xfe", b"n,,", b"p=tls-unique,,n=a,r=b"):
        with pytest.raises(SaslFailure):
            SaslExchange("SCRAM-SHA-256", users).step(garbage)
