"""`zlog acl`, `zlog user` and `zlog quota`: the security records of the metadata log.

    zlog acl add|remove --principal P --operation OP... (--topic T | --group G | --cluster)
                        [--prefixed] [--deny]
    zlog acl list
    zlog user add NAME [--mechanism SCRAM-SHA-256|SCRAM-SHA-512] [--iterations N]
                                            the password from $ZLOG_PASSWORD, else prompted
    zlog user remove NAME | list
    zlog quota set (--principal P | --client-id C) [--produce-bytes-per-s N]
                   [--fetch-bytes-per-s N] [--requests-per-s N]   (all 0: removed)
    zlog quota list

Each change is one AlterSecurity request, committed whole (docs/security.md). `list` prints one
tab-separated line per record, its fields in the order of the header line.
"""

from __future__ import annotations

import argparse
import getpass
import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Final

from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages.security import (
    CLUSTER_RESOURCE,
    OPERATIONS,
    QUOTA_KINDS,
    SCRAM_MECHANISMS,
    AclEntry,
    AlterSecurityRequestV0,
    DescribeSecurityResponseV0,
    QuotaEntry,
)

if TYPE_CHECKING:
    from zlog.client import Admin

PASSWORD_ENV: Final = "ZLOG_PASSWORD"

LeafCommand = Callable[
    ["argparse._SubParsersAction[argparse.ArgumentParser]", str, str,
     Callable[[argparse.Namespace], int]], argparse.ArgumentParser]


def _admin(args: argparse.Namespace) -> Admin:
    from zlog.client import Admin  # noqa: PLC0415  (keeps `zlog serve` free of the client)

    return Admin(args.bootstrap, request_timeout_ms=args.request_timeout_ms)


def _alter(args: argparse.Namespace, change: AlterSecurityRequestV0) -> int:
    with _admin(args) as admin:
        admin.alter_security(change)
    return 0


def _acl_entries(args: argparse.Namespace) -> tuple[AclEntry, ...]:
    if args.cluster:
        resource_type, name = "cluster", CLUSTER_RESOURCE
    elif args.topic is not None:
        resource_type, name = "topic", args.topic
    else:
        resource_type, name = "group", args.group
    return tuple(AclEntry(args.principal, resource_type, name, operation,
                          "prefixed" if args.prefixed else "literal",
                          "deny" if args.deny else "allow")
                 for operation in dict.fromkeys(args.operation))


def _acl_add(args: argparse.Namespace) -> int:
    return _alter(args, AlterSecurityRequestV0(acls_add=_acl_entries(args)))


def _acl_remove(args: argparse.Namespace) -> int:
    return _alter(args, AlterSecurityRequestV0(acls_remove=_acl_entries(args)))


def _print_table(args: argparse.Namespace, header: Sequence[str],
                 rows: Callable[[DescribeSecurityResponseV0], Iterable[Sequence[object]]]) -> int:
    """One tab-separated line per record, after a header line naming the columns."""
    with _admin(args) as admin:
        described = admin.describe_security()
    for row in (header, *rows(described)):
        print("\t".join(str(cell) for cell in row))
    return 0


def _acl_list(args: argparse.Namespace) -> int:
    return _print_table(
        args, ("principal", "permission", "operation", "resource_type", "pattern_type",
               "resource_name"),
        lambda described: ((e.principal, e.permission, e.operation, e.resource_type,
                            e.pattern_type, e.resource_name) for e in described.acls))


def _password() -> str:
    password = os.environ.get(PASSWORD_ENV)
    if password is None:
        password = getpass.getpass("password: ")
    if not password:
        raise ZlogError(ErrorCode.INVALID_REQUEST, "an empty password")
    return password


def _user_add(args: argparse.Namespace) -> int:
    # loaded only for this command
    from zlog.client.scram import ITERATIONS_DEFAULT, scram_user  # noqa: PLC0415

    user = scram_user(args.name, _password(), args.mechanism,
                      args.iterations or ITERATIONS_DEFAULT)
    return _alter(args, AlterSecurityRequestV0(users_set=(user,)))


def _user_remove(args: argparse.Namespace) -> int:
    return _alter(args, AlterSecurityRequestV0(users_remove=(args.name,)))


def _user_list(args: argparse.Namespace) -> int:
    return _print_table(args, ("name", "mechanisms"), lambda described: (
        (user.name, ",".join(user.mechanisms)) for user in described.users))


def _quota_set(args: argparse.Namespace) -> int:
    entity = ("principal", args.principal) if args.principal else ("client_id", args.client_id)
    quota = QuotaEntry(*entity, args.produce_bytes_per_s, args.fetch_bytes_per_s,
                       args.requests_per_s)
    return _alter(args, AlterSecurityRequestV0(quotas_set=(quota,)))


def _quota_list(args: argparse.Namespace) -> int:
    return _print_table(
        args, ("entity_type", "entity_name", *QUOTA_KINDS),
        lambda described: ((q.entity_type, q.entity_name, q.produce_bytes_per_s,
                            q.fetch_bytes_per_s, q.requests_per_s) for q in described.quotas))


def _rate(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"wants a whole number, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                leaf: LeafCommand) -> None:
    acl = commands.add_parser("acl", help="who may do what (default-deny with security on)",
                              description="who may do what (default-deny with security on)")
    acl_commands = acl.add_subparsers(dest="acl_command", required=True, metavar="ACTION")
    for name, help_text, handler in (("add", "allow (or --deny) operations", _acl_add),
                                     ("remove", "remove those ACLs", _acl_remove)):
        parser = leaf(acl_commands, name, help_text, handler)
        parser.add_argument("--principal", required=True, help='a principal, or "*" for all')
        parser.add_argument("--operation", required=True, action="append", choices=OPERATIONS,
                            help="repeatable")
        resource = parser.add_mutually_exclusive_group(required=True)
        resource.add_argument("--topic", help='a topic name (or prefix; "*": every topic)')
        resource.add_argument("--group", help="a consumer group id (or prefix)")
        resource.add_argument("--cluster", action="store_true", help="the cluster")
        parser.add_argument("--prefixed", action="store_true",
                            help="every resource whose name starts with the one given")
        parser.add_argument("--deny", action="store_true", help="deny (wins over any allow)")
    leaf(acl_commands, "list", "every ACL", _acl_list)

    user = commands.add_parser("user", help="SASL/SCRAM users (the Kafka listener)",
                               description="SASL/SCRAM users (the Kafka listener)")
    user_commands = user.add_subparsers(dest="user_command", required=True, metavar="ACTION")
    add = leaf(user_commands, "add", f"add or change a user (password: ${PASSWORD_ENV}, else "
                                     "asked)", _user_add)
    add.add_argument("name", help="the user's name (its principal on the Kafka listener)")
    add.add_argument("--mechanism", choices=SCRAM_MECHANISMS, default=SCRAM_MECHANISMS[0],
                     help=f"default {SCRAM_MECHANISMS[0]}")
    add.add_argument("--iterations", type=int, default=None,
                     help="PBKDF2 iterations (default 8192, at least 4096)")
    remove = leaf(user_commands, "remove", "remove a user", _user_remove)
    remove.add_argument("name", help="the user to remove")
    leaf(user_commands, "list", "every user and its mechanisms", _user_list)

    quota = commands.add_parser("quota", help="produce, fetch and request rates per principal",
                                description="produce, fetch and request rates per principal "
                                            "or client id, enforced by answering late")
    quota_commands = quota.add_subparsers(dest="quota_command", required=True,
                                          metavar="ACTION")
    set_quota = leaf(quota_commands, "set", "set an entity's quota (all 0: remove it)",
                     _quota_set)
    entity = set_quota.add_mutually_exclusive_group(required=True)
    entity.add_argument("--principal", help='a principal, or "*": each one without its own')
    entity.add_argument("--client-id", help='a client id, or "*"')
    for flag in ("--produce-bytes-per-s", "--fetch-bytes-per-s", "--requests-per-s"):
        set_quota.add_argument(flag, type=_rate, default=0, metavar="N", help="0: no bound")
    leaf(quota_commands, "list", "every quota", _quota_list)
