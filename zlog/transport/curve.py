"""CURVE on every ZeroMQ socket of a process, with a ZAP handler that names each peer.

Security is a property of a process, not of a socket: once `install` has been called, every
socket `sockets.py` makes is a CURVE server (a ROUTER that binds) or a CURVE client (a DEALER
that connects), so no socket can be forgotten. A broker installs its server key pair, the key
it presents to other brokers and its own workers, and the principals it lets in; a client
installs its own key pair and the cluster's public server key.

Why a ZAP handler is always installed before the first server socket: a CURVE server without
one accepts any client key at all (the handshake only proves the client holds *some* key),
which is ZeroMQ's well-known pitfall. Each server socket also sets ZAP_ENFORCE_DOMAIN, so a
context whose handler is missing refuses the handshake instead of falling back to accepting.
The handler tells libzmq the principal's name as the connection's User-Id: every message from
that peer carries it (`principal_of`), which is what the broker's authorizer checks.

Principals are the public key files in a directory (`curve_keys.py`); the handler reads it
again when it changed, so a new client key is let in without restarting the broker.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import zmq
from zmq.auth.thread import ThreadAuthenticator

from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages.security import ANONYMOUS

log = logging.getLogger("zlog.transport.curve")

ZAP_DOMAIN: Final = "zlog"
_USER_ID: Final = "User-Id"
HANDSHAKE_REFUSED_EVENTS: Final = int(
    zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
"""Monitor events of a connection whose handshake failed. libzmq never tries such a
connection again: whoever needs it back makes a new socket."""


def handshake_refused(event: int, value: int) -> bool:
    """Whether a failed handshake (a monitor event and its value) was a refusal by security: an
    unknown key (ZAP said no), security on at one end only (the mechanisms differ), or a
    client without keys whose greeting a secured server cut short (the pipe closed under it:
    EPIPE). Anything else (a connection reset mid-handshake, a server gone or replaced on the
    port of a worker that moved) is a lost connection, to retry."""
    if event & zmq.EVENT_HANDSHAKE_FAILED_AUTH:
        return True
    if event & zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
        return value == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
    return (bool(event & zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL) and value == errno.EPIPE
            and installed() is None)


@dataclass(frozen=True, slots=True)
class CurveKeyPair:
    """A CURVE key pair, each key as its 40 Z85 characters."""

    public: bytes
    secret: bytes


@dataclass(frozen=True, slots=True)
class TransportSecurity:
    """What one process's sockets need once security is on.

    `server` is the cluster's server key pair (brokers only: a client binds nothing);
    `principals` gives the principals allowed in, by public key, read again on each new
    connection (a broker's key directory; a client has none).
    """

    own: CurveKeyPair  # presented on every connection this process makes
    server_public: bytes  # the cluster's public server key, checked on every connection
    server: CurveKeyPair | None = None
    principals: Callable[[], Mapping[bytes, str]] | None = None
    brokers: frozenset[str] = frozenset()  # who may speak on brokers-only sockets (Raft)


class _PrincipalAuthenticator(ThreadAuthenticator):
    """Lets in a client whose public key is a known principal, and names it as the User-Id."""

    def __init__(self, context: zmq.Context[Any]) -> None:
        super().__init__(context, log=logging.getLogger("zlog.transport.zap"))
        self.configure_curve_callback(ZAP_DOMAIN, credentials_provider=self)

    @staticmethod
    def _principals() -> Mapping[bytes, str]:
        """The principals of the security installed now (none once it is off)."""
        security = _installed
        if security is None or security.principals is None:
            return {}
        return security.principals()

    def callback(self, domain: str, key: bytes) -> bool:
        """pyzmq's credentials-provider hook: `key` is the client's Z85 public key."""
        del domain
        known = key in self._principals()
        if not known:
            log.warning("connection refused: public key %s is no known principal",
                        key.decode("ascii", "replace"))
        return known

    def curve_user_id(self, client_public_key: bytes) -> str:
        name = self._principals().get(zmq.utils.z85.encode(client_public_key))
        return name if name is not None else ANONYMOUS


_lock = threading.Lock()
_installed: TransportSecurity | None = None
_authenticators: dict[int, tuple[zmq.Context[Any], _PrincipalAuthenticator]] = {}


def install(security: TransportSecurity | None) -> None:
    """Turn security on for every socket made from now on (None: off again, for tests).

    Sockets made before keep what they had: a process installs before it makes any. A ZAP
    handler, once started for a context, stays for the process and asks the security
    installed at each connection (stopping one would race libzmq's asynchronous close of its
    endpoint with the next handler's bind).
    """
    global _installed
    with _lock:
        _installed = security


def installed() -> TransportSecurity | None:
    return _installed


def _ensure_authenticator(context: zmq.Context[Any], security: TransportSecurity) -> None:
    if security.principals is None:
        raise ZlogError(ErrorCode.INVALID_CONFIG,
                        "security is on but this process has no principals to let in")
    with _lock:
        entry = _authenticators.get(id(context))
        if entry is not None and entry[0] is context and entry[1].is_alive():
            return
        authenticator = _PrincipalAuthenticator(context)
        authenticator.start()
        _authenticators[id(context)] = (context, authenticator)


def secure_server(sock: zmq.Socket[Any]) -> None:
    """Make a socket that binds a CURVE server behind the ZAP handler; no-op when off."""
    security = _installed
    if security is None:
        return
    if security.server is None:
        raise ZlogError(ErrorCode.INVALID_CONFIG,
                        "security is on but this process has no server key to serve with")
    _ensure_authenticator(sock.context, security)
    sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)
    sock.setsockopt_string(zmq.ZAP_DOMAIN, ZAP_DOMAIN)
    sock.setsockopt(zmq.CURVE_SERVER, 1)
    sock.setsockopt(zmq.CURVE_PUBLICKEY, security.server.public)
    sock.setsockopt(zmq.CURVE_SECRETKEY, security.server.secret)


def secure_client(sock: zmq.Socket[Any]) -> None:
    """Make a socket that connects a CURVE client of the cluster's server key; no-op when off."""
    security = _installed
    if security is None:
        return
    sock.setsockopt(zmq.CURVE_SERVERKEY, security.server_public)
    sock.setsockopt(zmq.CURVE_PUBLICKEY, security.own.public)
    sock.setsockopt(zmq.CURVE_SECRETKEY, security.own.secret)


def is_broker(frame: zmq.Frame) -> bool:
    """Whether a message on a brokers-only socket (the metadata log's peers) comes from a
    broker: any peer when security is off; a client's key lets it connect, not vote."""
    security = _installed
    return security is None or principal_of(frame) in security.brokers


def principal_of(frame: zmq.Frame) -> str:
    """Who sent a message received on a server socket (its first frame after the routing id).

    With security off every peer is ANONYMOUS; with it on, the ZAP handler named the peer
    when it connected, and libzmq hands that name on with each of its messages.
    """
    if _installed is None:
        return ANONYMOUS
    try:
        principal = frame.get(_USER_ID)
    except zmq.ZMQError:
        return ANONYMOUS
    return principal if isinstance(principal, str) and principal else ANONYMOUS
