"""A SASL/SCRAM user's stored credential, made where the password is typed (RFC 5802, 7677).

The metadata log keeps the salt, the iteration count, StoredKey and ServerKey, never the
password nor anything that logs in by itself: a server checks a client's proof with
StoredKey, and proves itself with ServerKey, as Kafka's SCRAM does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from typing import Final

from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages.security import SCRAM_MECHANISMS, ScramUser

ITERATIONS_DEFAULT: Final = 8_192  # Kafka's minimum is 4096
SALT_BYTES: Final = 32
_HASHES: Final = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


def scram_user(name: str, password: str, mechanism: str = "SCRAM-SHA-256",
               iterations: int = ITERATIONS_DEFAULT, salt: bytes | None = None) -> ScramUser:
    if mechanism not in SCRAM_MECHANISMS:
        raise ZlogError(ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                        f"{mechanism!r}: one of {', '.join(SCRAM_MECHANISMS)}")
    if not password:
        raise ZlogError(ErrorCode.INVALID_REQUEST, "an empty password")
    digest = _HASHES[mechanism]
    salt = salt if salt is not None else os.urandom(SALT_BYTES)
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", digest).digest()

    def text(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    return ScramUser(name, mechanism, iterations, text(salt), text(stored_key),
                     text(server_key))
