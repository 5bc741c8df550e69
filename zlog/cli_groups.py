"""`zlog group ...`: list, describe, reset the offsets of and delete consumer groups.

    zlog group list
    zlog group describe G          state, members, per partition committed / high watermark / lag
    zlog group reset-offsets G --topic T (--to-earliest | --to-latest | --to-offset N |
                             --to-datetime ISO | --shift-by N) [--execute]
    zlog group delete G

Lag is the high watermark minus the committed offset (consumers never read above the high
watermark); `-` where nothing is committed. reset-offsets prints its plan and applies it only
with --execute, and only to a group without members (the coordinator refuses it otherwise).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from zlog.errors import ErrorCode, ZlogError
from zlog.types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, TopicPartition

if TYPE_CHECKING:
    from zlog.client import Admin

Command = Callable[..., argparse.ArgumentParser]
ACTIVE_STATES = frozenset({"Stable", "PreparingRebalance", "CompletingRebalance", "Assigning",
                           "Reconciling"})
"""States of a group with members: its offsets may not be altered from outside."""


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                command: Command) -> None:
    group = commands.add_parser("group", help="consumer groups: list, describe, reset "
                                "offsets, delete", description="consumer groups")
    actions = group.add_subparsers(dest="group_command", required=True, metavar="ACTION")
    command(actions, "list", "every consumer group and its state", group_list)
    describe = command(actions, "describe", "a group's members, committed offsets and lag",
                       group_describe)
    describe.add_argument("group", help="the group id")
    delete = command(actions, "delete", "delete a group without members, and its offsets",
                     group_delete)
    delete.add_argument("group", help="the group id")
    reset = command(actions, "reset-offsets", "move a group's committed offsets of a topic "
                    "(prints the plan; --execute applies it)", group_reset_offsets)
    reset.add_argument("group", help="the group id")
    reset.add_argument("--topic", required=True, help="the topic whose offsets move")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="to each log start")
    target.add_argument("--to-latest", action="store_true", help="to each high watermark")
    target.add_argument("--to-offset", type=int, metavar="N",
                        help="to N (kept within log start .. high watermark)")
    target.add_argument("--to-datetime", metavar="ISO",
                        help="to the first record at or after this time, e.g. "
                             "2024-05-01T12:00:00 (UTC unless it names a zone)")
    target.add_argument("--shift-by", type=int, metavar="N",
                        help="by N from the committed offset (negative moves back)")
    reset.add_argument("--execute", action="store_true", help="apply the plan")


def _admin(args: argparse.Namespace) -> Admin:
    from zlog.client import Admin  # noqa: PLC0415

    return Admin(args.bootstrap, request_timeout_ms=args.request_timeout_ms)


def group_list(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        groups = admin.list_groups()
    print("group\tstate\ttype")
    for group in groups:
        print(f"{group.group_id}\t{group.state}\t{group.group_type}")
    return 0


def group_describe(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        (group,) = admin.describe_groups([args.group])
        committed = admin.list_group_offsets(args.group)
        owners = {tp: member for member in group.members for tp in member.assignment}
        partitions = sorted(set(committed) | set(owners))
        ends = _offsets(admin, partitions, LATEST_TIMESTAMP)
    print(f"group {group.group_id}: {group.state}, protocol {group.group_type}"
          f"{' (' + group.protocol + ')' if group.protocol else ''}, epoch {group.epoch}, "
          f"{len(group.members)} member(s)")
    for member in group.members:
        assigned = ",".join(f"{tp.topic}-{tp.partition}" for tp in member.assignment) or "-"
        print(f"member {member.member_id} host {member.host or '-'} client "
              f"{member.client_id or '-'} assigned {assigned}")
    print("topic\tpartition\tcommitted\thigh_watermark\tlag\tmember\thost")
    for tp in partitions:
        offset = committed.get(tp)
        end = ends.get(tp)
        lag = "-" if offset is None or end is None else str(end - offset)
        owner = owners.get(tp)
        print(f"{tp.topic}\t{tp.partition}\t{'-' if offset is None else offset}\t"
              f"{'-' if end is None else end}\t{lag}\t{owner.member_id if owner else '-'}\t"
              f"{(owner.host or '-') if owner else '-'}")
    return 0


def group_delete(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        error = admin.delete_groups([args.group]).get(args.group)
    if error is not None:
        raise error
    print(f"group {args.group} deleted")
    return 0


def group_reset_offsets(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        (group,) = admin.describe_groups([args.group])
        if group.state in ACTIVE_STATES or group.members:
            raise ZlogError(ErrorCode.NON_EMPTY_GROUP,
                            f"group {args.group!r} is {group.state} with "
                            f"{len(group.members)} member(s): stop its consumers first")
        (topic,) = admin.describe_topics([args.topic])
        tps = [TopicPartition(args.topic, p.partition) for p in topic.partitions]
        committed = {tp: offset for tp, offset in admin.list_group_offsets(args.group).items()
                     if tp.topic == args.topic}
        starts = _offsets(admin, tps, EARLIEST_TIMESTAMP)
        ends = _offsets(admin, tps, LATEST_TIMESTAMP)
        at_time = (_offsets(admin, tps, _timestamp_ms(args.to_datetime))
                   if args.to_datetime is not None else {})
        plan = plan_reset(tps, committed, starts, ends, to_earliest=args.to_earliest,
                          to_latest=args.to_latest, to_offset=args.to_offset,
                          at_time=at_time if args.to_datetime is not None else None,
                          shift_by=args.shift_by)
        print("topic\tpartition\tcommitted\tnew")
        for tp, new in plan.items():
            current = committed.get(tp)
            print(f"{tp.topic}\t{tp.partition}\t{'-' if current is None else current}\t{new}")
        if args.execute:
            admin.alter_group_offsets(args.group, plan)
            print(f"group {args.group}: {len(plan)} offset(s) reset")
        else:
            print("(dry run: add --execute to apply)")
    return 0


def plan_reset(partitions: list[TopicPartition], committed: Mapping[TopicPartition, int],
               starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int], *,
               to_earliest: bool = False, to_latest: bool = False, to_offset: int | None = None,
               at_time: Mapping[TopicPartition, int] | None = None,
               shift_by: int | None = None) -> dict[TopicPartition, int]:
    """The new committed offset of each partition, kept within [log start, high watermark].

    `at_time` holds the first offset at or after the time per partition (-1: none that
    recent, so the high watermark). A shift needs a committed offset to shift from."""
    plan: dict[TopicPartition, int] = {}
    for tp in partitions:
        start, end = starts[tp], ends[tp]
        if to_earliest:
            new = start
        elif to_latest:
            new = end
        elif to_offset is not None:
            new = to_offset
        elif at_time is not None:
            new = at_time[tp] if at_time.get(tp, -1) >= 0 else end
        elif shift_by is not None:
            if tp not in committed:
                raise ZlogError(ErrorCode.INVALID_REQUEST,
                                f"{tp.topic}-{tp.partition} has no committed offset to shift "
                                "from: use --to-earliest, --to-latest or --to-offset")
            new = committed[tp] + shift_by
        else:
            raise ZlogError(ErrorCode.INVALID_REQUEST, "name where the offsets go")
        plan[tp] = min(max(new, start), end)
    return plan


def _timestamp_ms(text: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ZlogError(ErrorCode.INVALID_REQUEST,
                        f"--to-datetime {text!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _offsets(admin: Admin, partitions: list[TopicPartition], spec: int,
             ) -> dict[TopicPartition, int]:
    if not partitions:
        return {}
    return {tp: found.offset for tp, found in admin.list_offsets(dict.fromkeys(partitions,
                                                                               spec)).items()}
