"""The `zlog` command: parse arguments, call the broker or the client library, print.

    zlog serve [...]                     run a broker (see `zlog serve --help`)
    zlog topic create NAME --partitions N [--replication-factor R] [--config k=v]...
    zlog topic list | describe NAME | delete NAME
    zlog produce TOPIC [--key-separator S] [--acks A]      lines from stdin
    zlog consume TOPIC [--from-beginning | --offset N] [--partition P]
                       [--max-messages N] [--timeout-ms T]  records to stdout
    zlog offsets TOPIC
    zlog cluster status

Every client command takes --bootstrap (default tcp://127.0.0.1:7400, or $ZLOG_BOOTSTRAP).
Failures print `error: <CODE NAME> (<n>): <sentence>` on stderr and exit 1, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, BinaryIO, Final, TextIO

from zlog.errors import ErrorCode, ZlogError

if TYPE_CHECKING:
    from zlog.client import Admin, Consumer

DEFAULT_BOOTSTRAP: Final = "tcp://127.0.0.1:7400"
PRODUCE_CHUNK_LINES: Final = 10_000  # lines handed to send_many at a time


def _bootstrap_parent() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--bootstrap", default=os.environ.get("ZLOG_BOOTSTRAP", DEFAULT_BOOTSTRAP),
                        help="control endpoint(s), comma-separated [env ZLOG_BOOTSTRAP] "
                             f"(default {DEFAULT_BOOTSTRAP})")
    parent.add_argument("--request-timeout-ms", type=int, default=10_000,
                        help="bound on each request to the cluster (default 10000)")
    return parent


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zlog", description="zlog: a distributed event log")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    client = _bootstrap_parent()

    commands.add_parser("serve", help="run a broker on this host (see zlog serve --help)")

    topic = commands.add_parser("topic", help="create, list, describe or delete topics")
    topic_commands = topic.add_subparsers(dest="topic_command", required=True, metavar="ACTION")
    create = topic_commands.add_parser("create", parents=[client], help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=int, required=True)
    create.add_argument("--replication-factor", type=int, default=1)
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a topic config, e.g. retention.ms=86400000 (repeatable)")
    create.set_defaults(handler=_topic_create)
    listing = topic_commands.add_parser("list", parents=[client], help="list topic names")
    listing.set_defaults(handler=_topic_list)
    describe = topic_commands.add_parser("describe", parents=[client], help="show partitions")
    describe.add_argument("name")
    describe.set_defaults(handler=_topic_describe)
    delete = topic_commands.add_parser("delete", parents=[client], help="delete a topic")
    delete.add_argument("name")
    delete.set_defaults(handler=_topic_delete)

    produce = commands.add_parser("produce", parents=[client], help="send stdin lines")
    produce.add_argument("topic")
    produce.add_argument("--key-separator", default=None, metavar="S",
                         help="split each line into key S value at the first S")
    produce.add_argument("--acks", default="1", help="0, 1 or all (default 1)")
    produce.set_defaults(handler=_produce)

    consume = commands.add_parser("consume", parents=[client], help="print records")
    consume.add_argument("topic")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true")
    start.add_argument("--offset", type=int, default=None, help="start at this offset")
    consume.add_argument("--partition", type=int, default=None,
                         help="only this partition (default: all)")
    consume.add_argument("--max-messages", type=int, default=None)
    consume.add_argument("--timeout-ms", type=int, default=None,
                         help="stop after this long without a record (default: never)")
    consume.set_defaults(handler=_consume)

    offsets = commands.add_parser("offsets", parents=[client],
                                  help="log start and high watermark per partition")
    offsets.add_argument("topic")
    offsets.set_defaults(handler=_offsets)

    cluster = commands.add_parser("cluster", help="cluster state")
    cluster_commands = cluster.add_subparsers(dest="cluster_command", required=True,
                                              metavar="ACTION")
    status = cluster_commands.add_parser("status", parents=[client], help="brokers and Raft")
    status.set_defaults(handler=_cluster_status)
    return parser


# ---------------------------------------------------------------------------------------------
# Commands. Each returns the exit status.
# ---------------------------------------------------------------------------------------------


def _admin(args: argparse.Namespace) -> Admin:
    from zlog.client import Admin  # noqa: PLC0415  (keeps `zlog serve` free of the client)

    return Admin(args.bootstrap, request_timeout_ms=args.request_timeout_ms)


def _parse_configs(pairs: Sequence[str]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for pair in pairs:
        name, separator, value = pair.partition("=")
        if not separator or not name:
            raise ZlogError(ErrorCode.INVALID_CONFIG, f"--config wants KEY=VALUE, not {pair!r}")
        configs[name.strip()] = value.strip()
    return configs


def _topic_create(args: argparse.Namespace) -> int:
    from zlog.client import NewTopic  # noqa: PLC0415

    topic = NewTopic(args.name, args.partitions, args.replication_factor,
                     _parse_configs(args.config))
    with _admin(args) as admin:
        admin.create_topics([topic])
    print(f"created topic {args.name} with {args.partitions} partition(s)")
    return 0


def _topic_list(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        for name in admin.list_topics():
            print(name)
    return 0


def _topic_describe(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        (description,) = admin.describe_topics([args.name])
    configs = ",".join(f"{k}={v}" for k, v in sorted(description.configs.items()))
    factor = len(description.partitions[0].replicas) if description.partitions else 0
    print(f"Topic: {description.name}\tPartitionCount: {len(description.partitions)}\t"
          f"ReplicationFactor: {factor}\tConfigs: {configs}")
    for p in description.partitions:
        print(f"\tPartition: {p.partition}\tLeader: {p.leader}\tEpoch: {p.leader_epoch}\t"
              f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}\t"
              f"Endpoint: {p.endpoint}")
    return 0


def _topic_delete(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        admin.delete_topics([args.name])
    print(f"deleted topic {args.name}")
    return 0


def _chunks(lines: BinaryIO) -> Iterator[list[bytes]]:
    chunk: list[bytes] = []
    for line in lines:
        chunk.append(line.rstrip(b"\r\n") if line.endswith(b"\n") else line)
        if len(chunk) >= PRODUCE_CHUNK_LINES:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _produce(args: argparse.Namespace) -> int:
    from zlog.client import Producer  # noqa: PLC0415

    separator = None if args.key_separator is None else args.key_separator.encode()
    futures = []
    with Producer(args.bootstrap, acks=args.acks, request_timeout_ms=args.request_timeout_ms,
                  max_block_ms=args.request_timeout_ms) as producer:
        for chunk in _chunks(sys.stdin.buffer):
            if separator is None:
                futures.append(producer.send_many(args.topic, chunk))
                continue
            keys: list[bytes | None] = []
            values: list[bytes] = []
            for line in chunk:
                key, found, value = line.partition(separator)
                keys.append(key if found else None)
                values.append(value if found else line)
            futures.append(producer.send_many(args.topic, values, keys=keys))
        producer.flush()
    for future in futures:
        future.result()  # raises the first delivery error
    return 0


def _consume(args: argparse.Namespace) -> int:
    from zlog.client import Consumer, TopicPartition  # noqa: PLC0415

    reset = "earliest" if args.from_beginning else "latest"
    with Consumer(args.bootstrap, auto_offset_reset=reset,
                  request_timeout_ms=args.request_timeout_ms) as consumer:
        if args.partition is not None:
            partitions = [args.partition]
        else:
            with _admin(args) as admin:
                (description,) = admin.describe_topics([args.topic])
            partitions = [p.partition for p in description.partitions]
        assigned = [TopicPartition(args.topic, p) for p in partitions]
        consumer.assign(assigned)
        if args.offset is not None:
            for tp in assigned:
                consumer.seek(tp, args.offset)
        return _print_records(consumer, args.max_messages, args.timeout_ms, sys.stdout.buffer)


def _print_records(consumer: Consumer, max_messages: int | None, timeout_ms: int | None,
                   out: BinaryIO) -> int:
    printed = 0
    idle_ms = 0
    slice_ms = 200 if timeout_ms is None else max(1, min(200, timeout_ms))
    while max_messages is None or printed < max_messages:
        want = 500 if max_messages is None else min(500, max_messages - printed)
        records = consumer.poll(slice_ms, max_records=want)
        if not records:
            idle_ms += slice_ms
            if timeout_ms is not None and idle_ms >= timeout_ms:
                break
            continue
        idle_ms = 0
        out.write(b"".join((r.value or b"") + b"\n" for r in records))
        out.flush()
        printed += len(records)
    return 0


def _offsets(args: argparse.Namespace) -> int:
    from zlog.client import EARLIEST, LATEST, TopicPartition  # noqa: PLC0415

    with _admin(args) as admin:
        (description,) = admin.describe_topics([args.topic])
        tps = [TopicPartition(args.topic, p.partition) for p in description.partitions]
        starts = admin.list_offsets(dict.fromkeys(tps, EARLIEST))
        ends = admin.list_offsets(dict.fromkeys(tps, LATEST))
    print("partition\tlog_start_offset\thigh_watermark")
    for tp in tps:
        print(f"{tp.partition}\t{starts[tp].offset}\t{ends[tp].offset}")
    return 0


def _cluster_status(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        cluster = admin.describe_cluster()
    print(f"cluster_id: {cluster.cluster_id}")
    print(f"controller: {cluster.controller_id}")
    leader = "none" if cluster.raft_leader is None else str(cluster.raft_leader)
    print(f"raft: leader {leader}, term {cluster.raft_term}, "
          f"commit {cluster.raft_commit[0]}/{cluster.raft_commit[1]}")
    for broker in cluster.brokers:
        print(f"broker {broker.node_id}: {broker.host} {broker.control_endpoint}")
    return 0


# ---------------------------------------------------------------------------------------------
# Entry point.
# ---------------------------------------------------------------------------------------------


def _report(error: ZlogError, stream: TextIO) -> int:
    print(f"error: {error.code.name} ({int(error.code)}): {error.message}", file=stream)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if arguments[:1] == ["serve"]:
        return _main_serve(parser, arguments)
    args = parser.parse_args(arguments)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except ZlogError as error:
        return _report(error, sys.stderr)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader (e.g. `head`) went away: stop quietly, and keep Python from complaining
        # about the closed stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _main_serve(parser: argparse.ArgumentParser, arguments: list[str]) -> int:
    """`zlog serve`: the broker defines its own flags, loaded only now."""
    from zlog.broker import serve  # noqa: PLC0415  (the broker loads only for `serve`)

    serve_parser = argparse.ArgumentParser(prog="zlog serve", description="run a zlog broker")
    serve.add_arguments(serve_parser)
    del parser  # the top-level parser knows `serve` only by name, for --help
    return serve.run(serve_parser.parse_args(arguments[1:]))


if __name__ == "__main__":
    raise SystemExit(main())
