"""AlterSecurity and DescribeSecurity at the control plane, and the authorizer it serves from.

AlterSecurity becomes one AlterSecurity command of the metadata log (forwarded to the
controller by any other broker, after this one checked the principal may alter the cluster);
its answer comes once the command is committed and applied. DescribeSecurity answers from the
metadata at hand, with the users' credentials only for a broker's own process.
`authorizer()` is the Authorizer of the ACLs as last applied and the config's super-users,
built again only when the ACLs changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from zlog.broker.authorizer import Authorizer
from zlog.broker.control.metadata.commands import AlterSecurity, Propose, Result
from zlog.broker.control.metadata.state import ClusterState
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.codec import RequestHeader
from zlog.transport.messages import Response
from zlog.transport.messages.security import (
    AclEntry,
    AlterSecurityRequestV0,
    AlterSecurityResponseV0,
    DescribeSecurityRequestV0,
    DescribeSecurityResponseV0,
    UserListing,
)

Reply = Callable[[bytes, RequestHeader, Response], None]


class SecurityRequests:
    def __init__(self, state: Callable[[], ClusterState], propose: Propose, reply: Reply,
                 super_users: Iterable[str]) -> None:
        self._state = state  # the metadata as last applied
        self._propose = propose  # commit a command; Done runs later on the loop thread
        self._reply = reply  # send a response to a client
        self.super_users = tuple(dict.fromkeys(super_users))
        self._acls: tuple[AclEntry, ...] | None = None
        self._authorizer = Authorizer((), self.super_users)

    def authorizer(self) -> Authorizer:
        acls = self._state().security.acls
        if acls is not self._acls:
            self._acls = acls
            self._authorizer = Authorizer(acls, self.super_users)
        return self._authorizer

    def alter(self, identity: bytes, header: RequestHeader,
              request: AlterSecurityRequestV0) -> None:
        command = AlterSecurity(request.acls_add, request.acls_remove, request.users_set,
                                request.users_remove, request.quotas_set)

        def done(result: Result | None, error: ZlogError | None) -> None:
            del result
            code, text = (ErrorCode.NONE, "") if error is None else (error.code, error.message)
            self._reply(identity, header, AlterSecurityResponseV0(int(code), text))

        self._propose(command, done)

    def describe(self, request: DescribeSecurityRequestV0) -> DescribeSecurityResponseV0:
        """The users' credentials only when asked, by a broker (request_acls.py checked)."""
        records = self._state().security
        users = tuple(
            UserListing(name, tuple(u.mechanism for u in records.users if u.name == name))
            for name in records.user_names())
        return DescribeSecurityResponseV0(records.acls, users, records.quotas,
                                          records.users if request.credentials else ())
