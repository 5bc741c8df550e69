"""The metadata log's security records: ACLs, SASL users and quotas, and how a change applies.

One `AlterSecurity` command carries every part of one change (ACLs added and removed, users set
and removed, quotas set), so the change is whole or absent on every node. The records are kept
sorted, so that every node that applied the same commands holds equal state (and an equal
snapshot). A quota whose bounds are all 0 is no quota: setting one removes the entity's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from zlog.transport.messages.security import AclEntry, QuotaEntry, ScramUser

T = TypeVar("T", AclEntry, ScramUser, QuotaEntry)


@dataclass(frozen=True, slots=True)
class SecurityRecords:
    """One version of the security records; never mutated once published."""

    acls: tuple[AclEntry, ...] = ()
    users: tuple[ScramUser, ...] = ()  # one per (name, mechanism)
    quotas: tuple[QuotaEntry, ...] = ()  # one per (entity type, entity name)

    def user_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(user.name for user in self.users))


def _sorted(records: Iterable[T]) -> tuple[T, ...]:
    return tuple(sorted(records, key=dataclasses.astuple))


def altered(records: SecurityRecords, *, acls_add: Iterable[AclEntry] = (),
            acls_remove: Iterable[AclEntry] = (), users_set: Iterable[ScramUser] = (),
            users_remove: Iterable[str] = (),
            quotas_set: Iterable[QuotaEntry] = ()) -> SecurityRecords:
    """The records after one change: removals first, then additions."""
    acls = set(records.acls) - set(acls_remove) | set(acls_add)
    removed = set(users_remove)
    users = {(u.name, u.mechanism): u for u in records.users if u.name not in removed}
    users.update(((u.name, u.mechanism), u) for u in users_set)
    quotas = {(q.entity_type, q.entity_name): q for q in records.quotas}
    for quota in quotas_set:
        key = (quota.entity_type, quota.entity_name)
        if quota.produce_bytes_per_s or quota.fetch_bytes_per_s or quota.requests_per_s:
            quotas[key] = quota
        else:
            quotas.pop(key, None)
    return SecurityRecords(_sorted(acls), _sorted(users.values()), _sorted(quotas.values()))


def records_to_json(records: SecurityRecords) -> dict[str, Any]:
    return {"acls": [dataclasses.asdict(entry) for entry in records.acls],
            "users": [dataclasses.asdict(user) for user in records.users],
            "quotas": [dataclasses.asdict(quota) for quota in records.quotas]}


def records_from_json(data: Mapping[str, Any]) -> SecurityRecords:
    """A snapshot's records; a snapshot from before security has none."""
    return SecurityRecords(
        tuple(AclEntry(**item) for item in data.get("acls", ())),
        tuple(ScramUser(**item) for item in data.get("users", ())),
        tuple(QuotaEntry(**item) for item in data.get("quotas", ())))
