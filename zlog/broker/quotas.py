"""Quotas: produce and fetch bytes per second and requests per second, per principal or
client id, enforced by answering late (as Kafka does: librdkafka does not throttle itself).

Each entity has, per kind, the time its use so far is paid off at its rate (a virtual clock):
a request of `amount` moves it `amount / rate` seconds on, from no earlier than BURST_MS ago
(so an entity idle for a while may use one burst at once, never more). The answer is held
until that time: the throttle, reported as throttle_time_ms where the protocol has the field.
A client waits for its answers before it sends more than its in-flight limit, so over any
stretch longer than that backlog its rate is the quota's.

Which quota applies (Kafka's order, without the combined user-and-client entries): the
principal's own, else the client id's, else the principal default ("*"), else the client id
default. Pure: time comes in as `now_ms`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

from zlog.transport.messages.security import QUOTA_KINDS, QuotaEntry

BURST_MS: Final = 1_000


class QuotaMeter:
    """The quotas as last set, and each entity's virtual clock per kind."""

    def __init__(self, quotas: Iterable[QuotaEntry] = ()) -> None:
        self._quotas = {(q.entity_type, q.entity_name): q for q in quotas}
        self._paid_until_ms: dict[tuple[str, str, str], float] = {}

    def set_quotas(self, quotas: Iterable[QuotaEntry]) -> None:
        """New quotas; the entities keep what they used."""
        self._quotas = {(q.entity_type, q.entity_name): q for q in quotas}

    def quota_for(self, principal: str,
                  client_id: str) -> tuple[tuple[str, str], QuotaEntry] | None:
        """(the entity whose use is counted, its quota): a default quota ("*") still counts
        each principal or client id on its own."""
        for entity_type, name, own in (("principal", principal, principal),
                                       ("client_id", client_id, client_id),
                                       ("principal", "*", principal),
                                       ("client_id", "*", client_id)):
            quota = self._quotas.get((entity_type, name)) if own else None
            if quota is not None:
                return (entity_type, own), quota
        return None

    def record(self, principal: str, client_id: str, kind: str, amount: int,
               now_ms: int) -> int:
        """Count `amount` of `kind` (a QuotaEntry field name) against the entity's quota;
        how long to hold the answer (ms, 0: none)."""
        assert kind in QUOTA_KINDS
        found = self.quota_for(principal, client_id)
        if found is None or amount <= 0:
            return 0
        entity, quota = found
        rate = int(getattr(quota, kind))
        if rate <= 0:
            return 0
        key = (*entity, kind)
        paid_ms = (max(self._paid_until_ms.get(key, -math.inf), now_ms - BURST_MS)
                   + amount * 1000 / rate)
        self._paid_until_ms[key] = paid_ms
        return max(0, int(paid_ms) - now_ms)

    @property
    def active(self) -> bool:
        return bool(self._quotas)
