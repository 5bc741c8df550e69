"""`zlog partition reassign`, `zlog cluster remove-broker` and `zlog cluster add-broker`.

Reassignment and drain run at the controller; add-broker's plan is made here, as Kafka's
reassignment tool generates one: from the cluster's current replica lists
(`replica_moves.join_moves`), submitted as one AlterPartitionReassignments request. The
commands that move replicas wait until the moves are done (or `--no-wait`).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from zlog.clock import monotonic_ms
from zlog.errors import ErrorCode, ZlogError
from zlog.types import TopicPartition

if TYPE_CHECKING:
    from zlog.client import Admin

WAIT_POLL_MS: Final = 200  # between looks at the moves in progress

LeafCommand = Callable[
    ["argparse._SubParsersAction[argparse.ArgumentParser]", str, str,
     Callable[[argparse.Namespace], int]], argparse.ArgumentParser]


def _admin(args: argparse.Namespace) -> Admin:
    from zlog.client import Admin  # noqa: PLC0415  (keeps `zlog serve` free of the client)

    return Admin(args.bootstrap, request_timeout_ms=args.request_timeout_ms)


def _broker_ids(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(item) for item in text.split(","))
    except ValueError:
        raise ZlogError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"--replicas wants broker ids like 2,3,1, not {text!r}") from None


def read_plan(path: Path) -> dict[TopicPartition, Sequence[int] | None]:
    """A plan file in Kafka's reassignment JSON: {"partitions": [{"topic", "partition",
    "replicas"}]}; a null `replicas` cancels that partition's move."""
    try:
        data = json.loads(path.read_text())
        return {TopicPartition(str(item["topic"]), int(item["partition"])):
                None if item["replicas"] is None else tuple(int(r) for r in item["replicas"])
                for item in data["partitions"]}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ZlogError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"{path} is not a reassignment plan: {error}") from None


def reassign(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        if args.list:
            ongoing = admin.list_partition_reassignments()
            for tp, moving in sorted(ongoing.items()):
                print(f"{tp.topic}-{tp.partition}: replicas {list(moving.replicas)}, adding "
                      f"{list(moving.adding)}, removing {list(moving.removing)}")
            if not ongoing:
                print("no reassignment in progress")
            return 0
        if args.plan is not None:
            targets = read_plan(Path(args.plan))
        elif args.topic is None or args.partition is None or (
                args.replicas is None and not args.cancel):
            raise ZlogError(ErrorCode.INVALID_REQUEST, "name TOPIC PARTITION and --replicas "
                            "(or --cancel), or give --plan FILE, or --list")
        else:
            targets = {TopicPartition(args.topic, args.partition):
                       None if args.cancel else _broker_ids(args.replicas)}
        admin.alter_partition_reassignments(targets)
        print(f"{len(targets)} partition reassignment(s) started")
        if not args.no_wait:
            _wait_moves(admin, set(targets), args.wait_timeout_s)
    return 0


def remove_broker(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        moved = admin.remove_broker(args.broker_id)
        print(f"broker {args.broker_id} is draining: {moved} partition(s) moving off it")
        if args.no_wait:
            return 0
        deadline_ms = monotonic_ms() + args.wait_timeout_s * 1000
        while any(b.node_id == args.broker_id for b in admin.describe_cluster().brokers):
            _sleep_until(deadline_ms, f"broker {args.broker_id} still holds replicas")
    print(f"broker {args.broker_id} was removed from the cluster")
    return 0


def add_broker(args: argparse.Namespace) -> int:
    from zlog.broker.control.controller.replica_moves import join_moves  # noqa: PLC0415

    with _admin(args) as admin:
        brokers = admin.describe_cluster().brokers
        joining = next((b for b in brokers if b.node_id == args.broker_id), None)
        if joining is None or joining.state != "live":
            raise ZlogError(ErrorCode.BROKER_ID_NOT_REGISTERED,
                            f"broker {args.broker_id} is not a live registered broker; start "
                            f"it first (zlog serve --node-id {args.broker_id} --voters ...)")
        if admin.list_partition_reassignments():
            raise ZlogError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                            "reassignments are in progress; wait for them (zlog partition "
                            "reassign --list) before planning another")
        assignment = {TopicPartition(topic.name, p.partition): p.replicas
                      for topic in admin.describe_topics() for p in topic.partitions}
        live = [b.node_id for b in brokers if b.state == "live"]
        moves = join_moves(assignment, args.broker_id, live)
        if moves:
            admin.alter_partition_reassignments(moves)
        print(f"{len(moves)} partition(s) moving a replica onto broker {args.broker_id}")
        if args.no_wait:
            return 0
        _wait_moves(admin, set(moves), args.wait_timeout_s)
        elected = admin.elect_preferred_leaders()
        print(f"{elected} leadership(s) moved to their preferred replica")
    return 0


def _wait_moves(admin: Admin, partitions: set[TopicPartition], timeout_s: float) -> None:
    deadline_ms = monotonic_ms() + timeout_s * 1000
    while partitions & set(admin.list_partition_reassignments()):
        _sleep_until(deadline_ms, "reassignments are still in progress")
    print("done")


def _sleep_until(deadline_ms: float, what: str) -> None:
    if monotonic_ms() >= deadline_ms:
        raise ZlogError(ErrorCode.REQUEST_TIMED_OUT,
                        f"{what}; they continue in the cluster (zlog partition reassign --list)")
    time.sleep(WAIT_POLL_MS / 1000)


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                cluster_commands: argparse._SubParsersAction[argparse.ArgumentParser],
                leaf: LeafCommand) -> None:
    """The commands' arguments, on the `zlog` and `zlog cluster` sub-commands."""
    partition = commands.add_parser("partition", help="partition replicas",
                                    description="partition replicas")
    partition_commands = partition.add_subparsers(dest="partition_command", required=True,
                                                  metavar="ACTION")
    moving = leaf(partition_commands, "reassign",
                  "move partitions to new replica sets (KIP-455), or list the moves", reassign)
    moving.add_argument("topic", nargs="?", help="the topic")
    moving.add_argument("partition", nargs="?", type=int, help="the partition")
    moving.add_argument("--replicas", metavar="IDS",
                        help="the new replica list, preferred leader first, e.g. 2,3,1")
    moving.add_argument("--cancel", action="store_true",
                        help="undo the partition's move in progress")
    moving.add_argument("--plan", metavar="FILE", help='a JSON plan: {"partitions": '
                        '[{"topic": T, "partition": P, "replicas": [..] or null}]}')
    moving.add_argument("--list", action="store_true", help="the moves in progress")
    remove = leaf(cluster_commands, "remove-broker",
                  "move every replica off a broker, then deregister it", remove_broker)
    remove.add_argument("broker_id", type=int, help="the broker to remove")
    add = leaf(cluster_commands, "add-broker", "move a fair share of replicas onto a "
               "registered broker, then elect preferred leaders", add_broker)
    add.add_argument("broker_id", type=int, help="the broker that joined")
    for parser in (moving, remove, add):
        parser.add_argument("--no-wait", action="store_true",
                            help="return once the moves started")
        parser.add_argument("--wait-timeout-s", type=float, default=300.0, metavar="S",
                            help="how long to wait for the moves (default 300)")
