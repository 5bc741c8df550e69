"""The server's side of SASL/PLAIN (RFC 4616) and SASL/SCRAM (RFC 5802, 7677) over the users
of the metadata log.

The metadata log keeps a SCRAM credential per user and mechanism (zlog/client/scram.py), never
a password. SCRAM checks the client's proof against StoredKey and proves the server with
ServerKey; PLAIN, which sends the password itself (only ever inside TLS), is checked by
deriving the credential again with the stored salt and iteration count and comparing StoredKey,
as Kafka does for a SCRAM user logging in by PLAIN.

Pure: the users come in as a lookup, the server's nonce as a function, so a test drives a whole
exchange without a socket. A failed login raises `SaslFailure` with the sentence the client is
told; what failed exactly (unknown user or wrong password) is not said, as in Kafka.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable
from typing import Final

from zlog.transport.messages.security import SCRAM_MECHANISMS, ScramUser

PLAIN: Final = "PLAIN"
MECHANISMS: Final = (PLAIN, *SCRAM_MECHANISMS)
HASHES: Final = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
NONCE_BYTES: Final = 24
BAD_CREDENTIALS: Final = "authentication failed: invalid user name or password"

UserLookup = Callable[[str, str], ScramUser | None]
"""(name, mechanism) -> that user's credential for the mechanism, or None."""


class SaslFailure(Exception):
    """A login refused; the message is the sentence for the client."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise SaslFailure("malformed SCRAM message: bad base64") from None


def _salted_keys(user: ScramUser, password: bytes) -> tuple[bytes, bytes]:
    """(StoredKey, ServerKey) for `password` with the user's salt and iteration count."""
    digest = HASHES[user.mechanism]
    salted = hashlib.pbkdf2_hmac(digest, password, _unb64(user.salt), user.iterations)
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    return hashlib.new(digest, client_key).digest(), server_key


def _sasl_name(text: str) -> str:
    """A SCRAM username as sent (RFC 5802: "=2C" is a comma and "=3D" an equals sign)."""
    return text.replace("=2C", ",").replace("=3D", "=")


class SaslExchange:
    """One login's exchange for one mechanism: `step(client bytes) -> server bytes` until
    `principal` is set; any refusal raises SaslFailure."""

    def __init__(self, mechanism: str, users: UserLookup,
                 nonce: Callable[[], bytes] = lambda: os.urandom(NONCE_BYTES)) -> None:
        if mechanism not in MECHANISMS:
            raise SaslFailure(f"unsupported SASL mechanism {mechanism!r}; this broker "
                              f"offers {', '.join(MECHANISMS)}")
        self.mechanism = mechanism
        self._users = users
        self._nonce = nonce
        self.principal: str | None = None
        self._scram: tuple[ScramUser, str, str] | None = None  # user, first bare, server first

    def step(self, client: bytes) -> bytes:
        if self.principal is not None:
            raise SaslFailure("the login is already complete")
        if self.mechanism == PLAIN:
            return self._plain(client)
        if self._scram is None:
            return self._scram_first(client)
        return self._scram_final(client)

    def _plain(self, client: bytes) -> bytes:
        parts = client.split(b"\0")
        if len(parts) != 3:
            raise SaslFailure("malformed PLAIN message: authzid NUL authcid NUL password")
        authzid, authcid, password = (part.decode("utf-8", "replace") for part in parts)
        if authzid and authzid != authcid:
            raise SaslFailure("PLAIN: authorization id must be empty or the user name")
        for mechanism in SCRAM_MECHANISMS:
            user = self._users(authcid, mechanism)
            if user is not None:
                stored, _server = _salted_keys(user, password.encode())
                if hmac.compare_digest(stored, _unb64(user.stored_key)):
                    self.principal = authcid
                    return b""
                break
        raise SaslFailure(BAD_CREDENTIALS)

    def _scram_first(self, client: bytes) -> bytes:
        text = client.decode("utf-8", "replace")
        gs2, _, bare = text.partition(",")
        authzid, _, bare = bare.partition(",")
        if gs2 not in ("n", "y") or not bare:
            raise SaslFailure("malformed SCRAM client-first message (channel binding is "
                              "not offered)")
        attributes = dict(item.split("=", 1) for item in bare.split(",") if "=" in item)
        name = _sasl_name(attributes.get("n", ""))
        client_nonce = attributes.get("r", "")
        if not name or not client_nonce:
            raise SaslFailure("malformed SCRAM client-first message: no user or nonce")
        if authzid and authzid != f"a={name}":
            raise SaslFailure("SCRAM: authorization id must be empty or the user name")
        user = self._users(name, self.mechanism)
        if user is None:
            raise SaslFailure(BAD_CREDENTIALS)
        nonce = client_nonce + _b64(self._nonce())
        server_first = f"r={nonce},s={user.salt},i={user.iterations}"
        self._scram = (user, bare, server_first)
        return server_first.encode()

    def _scram_final(self, client: bytes) -> bytes:
        assert self._scram is not None
        user, client_first_bare, server_first = self._scram
        text = client.decode("utf-8", "replace")
        without_proof, _, proof_text = text.rpartition(",p=")
        attributes = dict(item.split("=", 1) for item in without_proof.split(",") if "=" in item)
        server_nonce = server_first.split(",", 1)[0][2:]
        # Kafka's ScramSaslServer checks that the nonce ends with the server's, not that it is
        # equal: librdkafka sends the client's nonce in front of the server's whole one.
        if not proof_text or not attributes.get("r", "").endswith(server_nonce):
            raise SaslFailure("malformed SCRAM client-final message or a nonce not ours")
        digest = HASHES[user.mechanism]
        auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
        stored_key = _unb64(user.stored_key)
        signature = hmac.new(stored_key, auth_message, digest).digest()
        proof = _unb64(proof_text)
        if len(proof) != len(signature):
            raise SaslFailure(BAD_CREDENTIALS)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(digest, client_key).digest(), stored_key):
            raise SaslFailure(BAD_CREDENTIALS)
        self.principal = user.name
        server_signature = hmac.new(_unb64(user.server_key), auth_message, digest).digest()
        return f"v={_b64(server_signature)}".encode()
