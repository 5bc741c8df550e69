"""One Kafka connection's login: SaslHandshake, then SaslAuthenticate until the mechanism is
done, as Kafka's SaslServerAuthenticator runs it (KIP-43, KIP-152).

Until the connection has logged in, only ApiVersions, SaslHandshake and SaslAuthenticate are
served: any other request is answered SASL_AUTHENTICATION_FAILED (58) where its answer has an
error code, and the connection is closed, as Kafka closes it. A failed login is answered 58
with a sentence, then closed; so is a mechanism the broker does not offer
(UNSUPPORTED_SASL_MECHANISM 33) and a request out of order (ILLEGAL_SASL_STATE 34). Once
logged in, the principal is the user's name, as ACLs name it; logging in again on the same
connection (KIP-368's re-authentication) is refused.

Both Kafka ports use it: the gateway's asyncio connections and a worker's polled ones.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from zlog.errors import ErrorCode
from zlog.kafka.api_versions import SASL_AUTHENTICATE, SASL_HANDSHAKE
from zlog.kafka.requests import KafkaRequest
from zlog.kafka.responses import error_response, respond
from zlog.kafka.sasl import MECHANISMS, SaslExchange, SaslFailure, UserLookup
from zlog.transport.api import ApiKey

log = logging.getLogger("zlog.kafka.login")

LOGIN_FIRST: Final = ("this listener asks for a SASL login first (SASL_SSL): "
                      "SaslHandshake, then SaslAuthenticate")


@dataclass(frozen=True, slots=True)
class LoginStep:
    """The answer to a request before or during login, and whether to close after it."""

    reply: bytes | None
    close: bool = False


class KafkaLogin:
    """The login state of one connection."""

    __slots__ = ("_exchange", "_users", "closed", "peer", "principal")

    def __init__(self, users: UserLookup, peer: str = "") -> None:
        self._users = users
        self.peer = peer  # for the log lines
        self.principal: str | None = None
        self._exchange: SaslExchange | None = None
        self.closed = False  # refused: nothing more is served on the connection

    @classmethod
    def logged_in(cls, principal: str, peer: str = "") -> KafkaLogin:
        """A connection whose client logged in elsewhere (a worker relaying its request)."""
        login = cls(lambda _name, _mechanism: None, peer)
        login.principal = principal
        return login

    def step(self, request: KafkaRequest) -> LoginStep | None:
        """The answer to `request` when the login answers it; None when the port serves it
        (ApiVersions, or anything once logged in)."""
        step = self._step(request)
        if step is not None and step.close:
            self.closed = True
        return step

    def _step(self, request: KafkaRequest) -> LoginStep | None:
        key = request.api_key
        if key == ApiKey.API_VERSIONS:
            return None
        if key == SASL_HANDSHAKE:
            return self._handshake(request)
        if key == SASL_AUTHENTICATE:
            return self._authenticate(request)
        if self.principal is not None:
            return None
        log.info("kafka client %s sent API key %d before logging in: refused and closed",
                 self.peer, key)
        return LoginStep(error_response(key, request.api_version, request.correlation_id,
                                        ErrorCode.SASL_AUTHENTICATION_FAILED,
                                        request=request.body, message=LOGIN_FIRST), close=True)

    def _handshake(self, request: KafkaRequest) -> LoginStep:
        mechanism = request.body.mechanism
        code, close = ErrorCode.NONE, False
        if self.principal is not None or self._exchange is not None:
            code, close = ErrorCode.ILLEGAL_SASL_STATE, True
        else:
            try:
                self._exchange = SaslExchange(mechanism, self._users)
            except SaslFailure as failure:
                log.info("kafka client %s: %s", self.peer, failure)
                code, close = ErrorCode.UNSUPPORTED_SASL_MECHANISM, True
        return LoginStep(respond(SASL_HANDSHAKE, request.api_version, request.correlation_id,
                                 {"error_code": code, "mechanisms": list(MECHANISMS)}),
                         close)

    def _authenticate(self, request: KafkaRequest) -> LoginStep:
        exchange = self._exchange
        if exchange is None or self.principal is not None:
            return self._refuse(request, ErrorCode.ILLEGAL_SASL_STATE,
                                "SaslAuthenticate must follow a SaslHandshake, once")
        try:
            server = exchange.step(bytes(request.body.auth_bytes))
        except SaslFailure as failure:
            log.info("kafka client %s: %s login refused: %s", self.peer, exchange.mechanism,
                     failure)
            return self._refuse(request, ErrorCode.SASL_AUTHENTICATION_FAILED, str(failure))
        if exchange.principal is not None:
            self.principal = exchange.principal
            log.debug("kafka client %s logged in as %r (%s)", self.peer, self.principal,
                      exchange.mechanism)
        return LoginStep(respond(SASL_AUTHENTICATE, request.api_version,
                                 request.correlation_id,
                                 {"error_code": ErrorCode.NONE, "error_message": None,
                                  "auth_bytes": server}))

    @staticmethod
    def _refuse(request: KafkaRequest, code: ErrorCode, message: str) -> LoginStep:
        return LoginStep(respond(SASL_AUTHENTICATE, request.api_version, request.correlation_id,
                                 {"error_code": code, "error_message": message,
                                  "auth_bytes": b""}), close=True)
