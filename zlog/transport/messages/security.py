"""The security admin messages: ACLs, SASL users and quotas, as the metadata log keeps them.

    AlterSecurity(acls_add, acls_remove, users_set, users_remove, quotas_set)  -> errors
    DescribeSecurity(credentials)                     -> the ACLs, user names, quotas
                                                         (and credentials: brokers only)

zlog's own API keys (Kafka splits these over CreateAcls, DeleteAcls, DescribeAcls,
AlterUserScramCredentials and AlterClientQuotas, which a Kafka listener maps onto these): one
change is one metadata command, applied whole or not at all. The entries are also the records
the metadata state holds (broker/control/metadata/state.py), so each is declared once, here.
Names (resource types, operations ...) are Kafka's, lower case.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar, Final

from zlog.transport.api import ApiKey
from zlog.transport.wire_types import Absent, AtLeast, Check, ErrorCode16, Sparse

RESOURCE_TYPES: Final = ("topic", "group", "cluster")
PATTERN_TYPES: Final = ("literal", "prefixed")
OPERATIONS: Final = ("read", "write", "create", "delete", "describe", "alter",
                     "describe_configs", "alter_configs", "cluster_action", "all")
PERMISSIONS: Final = ("allow", "deny")
SCRAM_MECHANISMS: Final = ("SCRAM-SHA-256", "SCRAM-SHA-512")
QUOTA_ENTITY_TYPES: Final = ("principal", "client_id")
QUOTA_KINDS: Final = ("produce_bytes_per_s", "fetch_bytes_per_s", "requests_per_s")
CLUSTER_RESOURCE: Final = "kafka-cluster"  # the one cluster resource's name, as Kafka's
ANY_PRINCIPAL: Final = "*"  # an ACL for every principal
ANONYMOUS: Final = "ANONYMOUS"  # the principal of every request while security is off


def _one_of(names: tuple[str, ...]) -> Check:
    return Check(lambda value: value in names, f"must be one of {', '.join(names)}")


Name = Annotated[str, Check(bool, "must be a non-empty string")]


@dataclass(frozen=True, slots=True)
class AclEntry:
    """`principal` may (or, `permission` deny, may not) do `operation` on the resources
    `resource_name` names: that name exactly (literal) or every name starting with it
    (prefixed; a literal "*" is every resource of the type)."""

    principal: Name
    resource_type: Annotated[str, _one_of(RESOURCE_TYPES)]
    resource_name: Name
    operation: Annotated[str, _one_of(OPERATIONS)]
    pattern_type: Annotated[str, _one_of(PATTERN_TYPES)] = "literal"
    permission: Annotated[str, _one_of(PERMISSIONS)] = "allow"


@dataclass(frozen=True, slots=True)
class ScramUser:
    """A SASL/SCRAM user's stored credential (RFC 5802: never the password itself)."""

    name: Name
    mechanism: Annotated[str, _one_of(SCRAM_MECHANISMS)]
    iterations: Annotated[int, AtLeast(4096)]
    salt: str  # base64
    stored_key: str  # base64
    server_key: str  # base64


Rate = Annotated[int, AtLeast(0)]
"""A quota's bound per second; 0: none."""


@dataclass(frozen=True, slots=True)
class QuotaEntry:
    """Bounds for one principal or client id (`entity_name` "*": each one without its own)."""

    entity_type: Annotated[str, _one_of(QUOTA_ENTITY_TYPES)]
    entity_name: Name
    produce_bytes_per_s: Rate = 0
    fetch_bytes_per_s: Rate = 0
    requests_per_s: Rate = 0


@dataclass(frozen=True, slots=True)
class AlterSecurityRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.ALTER_SECURITY
    API_VERSION: ClassVar[int] = 0

    acls_add: tuple[AclEntry, ...] = ()
    acls_remove: tuple[AclEntry, ...] = ()
    users_set: tuple[ScramUser, ...] = ()
    users_remove: tuple[Name, ...] = ()
    quotas_set: tuple[QuotaEntry, ...] = ()  # all bounds 0: the entity's quota is removed


@dataclass(frozen=True, slots=True)
class AlterSecurityResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.ALTER_SECURITY
    API_VERSION: ClassVar[int] = 0

    error_code: ErrorCode16
    error_message: Annotated[str, Absent("")] = ""


@dataclass(frozen=True, slots=True)
class DescribeSecurityRequestV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.DESCRIBE_SECURITY
    API_VERSION: ClassVar[int] = 0

    credentials: Annotated[bool, Sparse] = False
    """The users' SCRAM credentials too: only a broker's own processes may ask (its Kafka
    gateway checks logins with them)."""


@dataclass(frozen=True, slots=True)
class UserListing:
    """A user as described: its name and mechanisms, never its credential."""

    name: str
    mechanisms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DescribeSecurityResponseV0:
    API_KEY: ClassVar[ApiKey] = ApiKey.DESCRIBE_SECURITY
    API_VERSION: ClassVar[int] = 0

    acls: tuple[AclEntry, ...]
    users: tuple[UserListing, ...]
    quotas: tuple[QuotaEntry, ...]
    credentials: Annotated[tuple[ScramUser, ...], Sparse] = ()  # asked for, by a broker only
