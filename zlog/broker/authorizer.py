"""Who may do what: the ACLs of the metadata log, default-deny, as Kafka's StandardAuthorizer.

A principal may do an operation on a resource when it is a super-user, or when an ACL allows
it and none denies it (a deny wins). An ACL names its resource exactly (literal; "*" is every
resource of its type) or by the start of its name (prefixed), and its principal by name or "*"
(everyone). As in Kafka, read, write, delete and alter imply describe, alter_configs implies
describe_configs, and "all" is every operation.

Pure: both servers (the supervisor's control endpoint, every worker's data endpoint) and the
Kafka listener ask the same `Authorizer`, built from the metadata state and the super-users of
the broker's config, and hand its `ZlogError` to the client: TOPIC_AUTHORIZATION_FAILED,
GROUP_AUTHORIZATION_FAILED or CLUSTER_AUTHORIZATION_FAILED, with a sentence naming the
principal, the operation and the resource.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from zlog import limits
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages.security import ANY_PRINCIPAL, CLUSTER_RESOURCE, AclEntry

_IMPLIED_BY: Final[dict[str, frozenset[str]]] = {
    "describe": frozenset({"read", "write", "delete", "alter", "describe"}),
    "describe_configs": frozenset({"alter_configs", "describe_configs"}),
}
_REFUSAL_CODE: Final = {
    "topic": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    "group": ErrorCode.GROUP_AUTHORIZATION_FAILED,
    "cluster": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
}


def _granting(operation: str) -> frozenset[str]:
    """The ACL operations that grant `operation` (itself, what implies it, and "all")."""
    return _IMPLIED_BY.get(operation, frozenset({operation})) | {"all"}


def _names(entry: AclEntry, name: str) -> bool:
    if entry.pattern_type == "prefixed":
        return name.startswith(entry.resource_name)
    return entry.resource_name in (name, "*")


class Authorizer:
    """One version of the ACLs and the super-users; built again when either changes."""

    def __init__(self, acls: Iterable[AclEntry], super_users: Iterable[str]) -> None:
        self.super_users = frozenset(super_users)
        self._by_type: dict[str, list[AclEntry]] = {}
        for entry in acls:
            self._by_type.setdefault(entry.resource_type, []).append(entry)
        # Decisions so far: the same few (principal, operation, resource) come with every
        # request, and the ACLs never change under an Authorizer (a new one is built).
        self._decided: dict[tuple[str, str, str, str], bool] = {}

    def allowed(self, principal: str, operation: str, resource_type: str, name: str) -> bool:
        if principal in self.super_users:
            return True
        key = (principal, operation, resource_type, name)
        verdict = self._decided.get(key)
        if verdict is None:
            if len(self._decided) >= limits.ACL_DECISIONS_CACHED_MAX:
                self._decided.clear()
            verdict = self._decided[key] = self._decide(principal, operation, resource_type,
                                                        name)
        return verdict

    def _decide(self, principal: str, operation: str, resource_type: str, name: str) -> bool:
        granting = _granting(operation)
        verdict = False
        for entry in self._by_type.get(resource_type, ()):
            if entry.principal not in (principal, ANY_PRINCIPAL) or not _names(entry, name):
                continue
            if entry.permission == "deny" and entry.operation in (operation, "all"):
                return False
            if entry.permission == "allow" and entry.operation in granting:
                verdict = True
        return verdict

    def check(self, principal: str, operation: str, resource_type: str,
              name: str = CLUSTER_RESOURCE) -> None:
        """Raise the resource type's authorization error unless `allowed`."""
        if not self.allowed(principal, operation, resource_type, name):
            raise refusal(principal, operation, resource_type, name)


def refusal(principal: str, operation: str, resource_type: str, name: str) -> ZlogError:
    what = "the cluster" if resource_type == "cluster" else f"{resource_type} {name!r}"
    return ZlogError(_REFUSAL_CODE[resource_type],
                     f"principal {principal!r} may not {operation.replace('_', ' ')} {what}")
