"""What the gateway enforces with security on: the SASL users, ACLs and quotas of the metadata
log, read from its broker once a second.

The gateway is a client of its broker's control plane, so it asks for them as the broker's
own principal, the only one let read the users' credentials (DescribeSecurity with
credentials). Until the first answer no login succeeds: the user table is empty, and a client
is answered SASL_AUTHENTICATION_FAILED as for a wrong password, and tries again. A user added
with `zlog user add` logs in within a second; a user removed cannot log in again, while a
connection already logged in stays, as in Kafka.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Final

from zlog.broker.authorizer import Authorizer
from zlog.broker.quotas import QuotaMeter
from zlog.errors import ZlogError
from zlog.kafka_gateway.native import Native
from zlog.transport.messages.security import (
    AclEntry,
    DescribeSecurityRequestV0,
    DescribeSecurityResponseV0,
    ScramUser,
)

log = logging.getLogger("zlog.kafka_gateway")

REFRESH_INTERVAL_MS: Final = 1_000


class GatewaySecurity:
    """The users, the authorizer and the quota meter as last read."""

    def __init__(self, native: Native, super_users: Iterable[str]) -> None:
        self._native = native
        self.super_users = tuple(super_users)
        self._users: dict[tuple[str, str], ScramUser] = {}
        self._acls: tuple[AclEntry, ...] | None = None
        self.authorizer = Authorizer((), self.super_users)
        self.quotas = QuotaMeter()
        self.ready = threading.Event()  # set at the first answer
        self._stopped = threading.Event()

    def user(self, name: str, mechanism: str) -> ScramUser | None:
        return self._users.get((name, mechanism))

    def apply(self, answer: DescribeSecurityResponseV0) -> None:
        self._users = {(user.name, user.mechanism): user for user in answer.credentials}
        if answer.acls != self._acls:
            self._acls = answer.acls
            self.authorizer = Authorizer(answer.acls, self.super_users)
        self.quotas.set_quotas(answer.quotas)
        self.ready.set()

    def refresh(self) -> None:
        try:
            answer = self._native.control(DescribeSecurityRequestV0(credentials=True),
                                          DescribeSecurityResponseV0, REFRESH_INTERVAL_MS * 5)
        except ZlogError as error:
            log.log(logging.INFO if self.ready.is_set() else logging.DEBUG,
                    "kafka users and ACLs not read from the broker: %s", error)
            return
        self.apply(answer)

    def run(self) -> None:
        """Refresh until `stop` (on a thread of its own)."""
        while not self._stopped.is_set():
            self.refresh()
            self._stopped.wait(REFRESH_INTERVAL_MS / 1000)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="kafka-security", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stopped.set()
