"""What a worker's data endpoint enforces once security is on: the ACLs and the quotas.

Every request is checked against the ACLs before it runs (request_acls.py): one a principal
may not make is answered with the authorization error and touches nothing. Then its use is
counted against the principal's quotas (quotas.py): produce bytes as sent, fetch bytes as
answered, one request each, and the answer is held back for as long as the quota says; the
client sees a slower answer, never an error (Kafka's way, KIP-219).

Until the supervisor's first SecuritySettings the worker knows no ACL: only its own broker's
principal gets through (its followers' fetches), nothing else; and no SASL user, so no Kafka
client logs in at its Kafka port.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from zlog.broker.authorizer import Authorizer
from zlog.broker.quotas import QuotaMeter
from zlog.broker.request_acls import check_request
from zlog.broker.worker_protocol import SecuritySettings
from zlog.transport.messages import Request
from zlog.transport.messages.data import FetchRequestV0, ProduceRequestV0
from zlog.transport.messages.security import ScramUser
from zlog.transport.server import Reply


@dataclass(slots=True)
class DataSecurity:
    authorizer: Authorizer
    quotas: QuotaMeter = field(default_factory=QuotaMeter)
    users: dict[tuple[str, str], ScramUser] = field(default_factory=dict)

    @classmethod
    def before_settings(cls, own_principal: str) -> DataSecurity:
        return cls(Authorizer((), (own_principal,)))

    def configure(self, settings: SecuritySettings) -> None:
        self.authorizer = Authorizer(settings.acls, settings.super_users)
        self.quotas.set_quotas(settings.quotas)
        self.users = {(user.name, user.mechanism): user for user in settings.users}

    def user(self, name: str, mechanism: str) -> ScramUser | None:
        """A SASL user's credential, for the Kafka port's logins (sasl.UserLookup)."""
        return self.users.get((name, mechanism))

    def check(self, principal: str, request: Request) -> None:
        check_request(self.authorizer, principal, request)

    def throttle_ms(self, principal: str, request: Request, identity: bytes,
                    replies: Sequence[Reply], now_ms: int) -> int:
        """How long to hold this request's answer: the longest any of its quotas asks."""
        quotas = self.quotas
        if not quotas.active or principal in self.authorizer.super_users:
            return 0
        delay_ms = quotas.record(principal, "", "requests_per_s", 1, now_ms)
        if isinstance(request, ProduceRequestV0):
            sent = sum(len(memoryview(batch)) for entry in request.entries
                       for batch in entry.batches)
            delay_ms = max(delay_ms, quotas.record(principal, "", "produce_bytes_per_s", sent,
                                                   now_ms))
        elif isinstance(request, FetchRequestV0):
            answered = [reply for reply in replies if reply[0] == identity]
            delay_ms = max(delay_ms, self.fetch_throttle_ms(principal, answered, now_ms))
        return delay_ms

    def fetch_throttle_ms(self, principal: str, answers: Sequence[Reply], now_ms: int) -> int:
        """A consumer's fetch answered (now, or once its long poll settled): its bytes
        counted against the principal's fetch quota; how long to hold the answer."""
        if not self.quotas.active or principal in self.authorizer.super_users:
            return 0
        answered_bytes = sum(len(memoryview(frame)) for _peer, frames in answers
                             for frame in frames)
        return self.quotas.record(principal, "", "fetch_bytes_per_s", answered_bytes, now_ms)
