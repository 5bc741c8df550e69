"""The `zlog` command: parse arguments, call the broker or the client library, print.

    zlog serve [...]                     run a broker (see `zlog serve --help`)
    zlog dev-cluster [--brokers N]       run N local brokers on 127.0.0.1..N (a cluster to try)
    zlog topic create NAME --partitions N [--replication-factor R] [--config k=v]...
    zlog topic list | describe NAME [--configs] | delete NAME
    zlog topic alter NAME [--config k=v]... [--delete-config k]...
    zlog produce TOPIC [--key-separator S | --json] [--partition P] [--header k=v]...
                       [--acks A] [--compression C]                 lines from stdin
    zlog consume TOPIC [--from-beginning | --offset N] [--partition P]
                       [--format F | --print-key | --json] [--max-messages N]
                       [--timeout-ms T]                             records to stdout
                       [--local [--prefer-local-replica] [--client-rack R] [--ring-dir D]]
                       [--group G]                                  join group G
    zlog offsets TOPIC
    zlog delete-records TOPIC --before OFFSET|hw [--partition P]...
    zlog group list | describe G | delete G
    zlog group reset-offsets G --topic T (--to-earliest | --to-latest | --to-offset N |
                             --to-datetime ISO | --shift-by N) [--execute]
    zlog cluster status
    zlog keys generate DIR [NAME]...
    zlog acl add|remove --principal P --operation OP (--topic T | --group G | --cluster) ...
    zlog acl list | zlog user add|remove NAME | user list | quota set ... | quota list
    zlog --version

Every client command takes --bootstrap (default tcp://127.0.0.1:7400, or $ZLOG_BOOTSTRAP) and
--request-timeout-ms (and, with security on, --key-file and --server-key-file), before or
after the command's name. Failures print
`error: <CODE NAME> (<n>): <sentence>` on stderr and exit 1, never a traceback; a bad command
line prints that command's usage and exits 2. docs/cli.md describes the record formats.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, BinaryIO, Final, TextIO

import zlog
from zlog import cli_acls, cli_cluster, cli_groups, cli_health, cli_rings, cli_security, cli_top
from zlog.cli_records import (
    FORMAT_TOKENS,
    NULL_TEXT_DEFAULT,
    Formatter,
    format_formatter,
    json_formatter,
    key_value_formatter,
    parse_json_record,
    value_formatter,
)
from zlog.errors import ErrorCode, ZlogError
from zlog.types import DEFAULT_BOOTSTRAP, DELETE_TO_HIGH_WATERMARK

if TYPE_CHECKING:
    from zlog.client import Admin, Consumer, Producer

REQUEST_TIMEOUT_MS_DEFAULT: Final = 10_000
PRODUCE_CHUNK_LINES: Final = 10_000  # lines handed to send_many at a time
POLL_RECORDS_MAX: Final = 500


# ---------------------------------------------------------------------------------------------
# The command line.
# ---------------------------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, not {value}")
    return value


def _before_offset(text: str) -> int:
    """delete-records' --before: an offset, or "hw" for the high watermark."""
    return DELETE_TO_HIGH_WATERMARK if text == "hw" else _non_negative_int(text)


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _header(text: str) -> tuple[str, bytes]:
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise argparse.ArgumentTypeError(f"wants KEY=VALUE, not {text!r}")
    return name, value.encode()


def _add_client_options(parser: argparse.ArgumentParser) -> None:
    """--bootstrap and --request-timeout-ms, accepted before and after the command's name.

    Both spellings are declared without a default (SUPPRESS), so a value given before the
    command is not overwritten by the command's parser; `_fill_client_defaults` fills in
    what neither gave.
    """
    parser.add_argument("--bootstrap", default=argparse.SUPPRESS, metavar="ENDPOINTS",
                        help="control endpoint(s), comma-separated (default $ZLOG_BOOTSTRAP, "
                             f"else {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--request-timeout-ms", type=_positive_int, default=argparse.SUPPRESS,
                        metavar="MS", help="bound on each request to the cluster, and on "
                                           "each record's delivery with its retries "
                                           f"(default {REQUEST_TIMEOUT_MS_DEFAULT})")
    cli_security.add_client_key_options(parser)


def _fill_client_defaults(args: argparse.Namespace) -> None:
    if not hasattr(args, "bootstrap"):
        args.bootstrap = os.environ.get("ZLOG_BOOTSTRAP", DEFAULT_BOOTSTRAP)
    if not hasattr(args, "request_timeout_ms"):
        args.request_timeout_ms = REQUEST_TIMEOUT_MS_DEFAULT


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str,
    handler: Callable[[argparse.Namespace], int],
) -> argparse.ArgumentParser:
    """A leaf command: client options, its handler, and itself for usage errors."""
    parser = commands.add_parser(name, help=help_text, description=help_text)
    _add_client_options(parser)
    _set_handler(parser, handler)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zlog", description="zlog: a distributed event log")
    parser.add_argument("--version", action="version", version=f"zlog {zlog.__version__}",
                        help="print zlog's version and exit")
    _add_client_options(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    commands.add_parser("serve", help="run a broker on this host (see zlog serve --help)")
    commands.add_parser("dev-cluster", help="run a local cluster of brokers on 127.0.0.1, "
                        "127.0.0.2, ... (see zlog dev-cluster --help)")

    topic = commands.add_parser("topic", help="create, list, describe, alter or delete topics",
                                description="create, list, describe, alter or delete topics")
    topic_commands = topic.add_subparsers(dest="topic_command", required=True, metavar="ACTION")
    create = _command(topic_commands, "create", "create a topic", _topic_create)
    create.add_argument("name", help="the topic's name: [a-zA-Z0-9._-], at most 249 characters")
    create.add_argument("--partitions", type=_int, required=True, metavar="N",
                        help="how many partitions")
    create.add_argument("--replication-factor", type=_int, default=1, metavar="R",
                        help="replicas per partition (default 1)")
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a topic config, e.g. retention.ms=86400000 (repeatable)")
    _command(topic_commands, "list", "list topic names", _topic_list)
    describe = _command(topic_commands, "describe",
                        "show a topic's partitions, or with --configs its configs",
                        _topic_describe)
    describe.add_argument("name", help="the topic")
    describe.add_argument("--configs", action="store_true",
                          help="list every topic config with its value and source: topic (set "
                               "on the topic), broker (the broker's topic_defaults) or default")
    alter = _command(topic_commands, "alter", "change a topic's configs or grow it",
                     _topic_alter)
    alter.add_argument("name", help="the topic")
    alter.add_argument("--partitions", type=int, default=None, metavar="N",
                       help="grow the topic to N partitions in all (never fewer; records with "
                            "a key may map to another partition afterwards)")
    alter.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                       help="set a topic config, e.g. retention.ms=3600000 (repeatable)")
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                       help="reset a topic config to the broker's or zlog's default "
                            "(repeatable)")
    delete = _command(topic_commands, "delete", "delete a topic and its data", _topic_delete)
    delete.add_argument("name", help="the topic")

    produce = _command(commands, "produce", "send stdin's lines as records", _produce)
    produce.add_argument("topic", help="the topic to send to")
    produce_input = produce.add_mutually_exclusive_group()
    produce_input.add_argument("--key-separator", default=None, metavar="S",
                               help="split each line into key S value at the first S (a line "
                                    "without S is a value without a key)")
    produce_input.add_argument("--json", action="store_true",
                               help="one JSON object per line: value (null: a tombstone), key, "
                                    "headers, partition, timestamp_ms; bytes that are not text "
                                    'as {"base64": "..."}, as consume --json writes them')
    produce.add_argument("--partition", type=_non_negative_int, default=None, metavar="P",
                         help="send every record to this partition (default: by key, else "
                              "sticky)")
    produce.add_argument("--header", type=_header, action="append", default=[],
                         metavar="KEY=VALUE", help="a header on every record (repeatable)")
    produce.add_argument("--acks", default="all", help="0, 1 or all (default all)")
    produce.add_argument("--compression", choices=("lz4", "none"), default="lz4",
                         help="the codec batches are sent in (default lz4)")
    produce.add_argument("--local", action="store_true",
                         help="to a leader on this host through shared memory, not a socket")

    consume = _command(commands, "consume", "print a topic's records", _consume)
    consume.add_argument("topic", help="the topic to read")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true",
                       help="start at each partition's log start (default: at its end)")
    start.add_argument("--offset", type=_non_negative_int, default=None, metavar="N",
                       help="start at this offset")
    consume.add_argument("--partition", type=_non_negative_int, default=None, metavar="P",
                         help="only this partition (default: all)")
    consume.add_argument("--group", default=None, metavar="G",
                         help="join consumer group G: read the partitions its coordinator "
                              "assigns, from the group's committed offsets, committing as it goes")
    consume.add_argument("--max-messages", type=_positive_int, default=None, metavar="N",
                         help="stop after this many records (default: never)")
    consume.add_argument("--timeout-ms", type=_non_negative_int, default=None, metavar="MS",
                         help="stop after this long without a record (default: never)")
    output = consume.add_mutually_exclusive_group()
    tokens = ", ".join(f"%{token} {meaning}" for token, meaning in FORMAT_TOKENS.items())
    format_help = f"kcat's -f: {tokens}; escapes \\n \\t \\r \\\\ (e.g. '%p:%o %k=%s\\n')"
    output.add_argument("--format", default=None, metavar="FORMAT",
                        help=format_help.replace("%", "%%"))  # argparse %-formats help
    output.add_argument("--print-key", action="store_true",
                        help="print key, separator, value (default: the value alone)")
    output.add_argument("--json", action="store_true",
                        help="one JSON object per record: topic, partition, offset, "
                             "timestamp_ms, key, value, headers; null for a null key or value, "
                             'bytes that are not UTF-8 as {"base64": "..."}')
    consume.add_argument("--key-separator", default="\t", metavar="S",
                         help="what --print-key puts between key and value (default a tab)")
    consume.add_argument("--null-text", default=NULL_TEXT_DEFAULT, metavar="TEXT",
                         help="what the text modes print for a null key or value, e.g. a "
                              f"tombstone (default {NULL_TEXT_DEFAULT})")
    consume.add_argument("--local", action="store_true",
                         help="read a partition whose leader runs on this host straight from "
                              "its shared-memory ring")
    consume.add_argument("--prefer-local-replica", action="store_true",
                         help="with --local: also read an in-sync follower's ring on this host "
                              "(up to its high watermark) when the leader is elsewhere")
    consume.add_argument("--client-rack", default=None, metavar="RACK",
                         help="with --local: only brokers of this rack are this host's, and "
                              "their in-sync followers' rings may be read (Kafka's client.rack)")
    consume.add_argument("--ring-dir", default=None, metavar="DIR",
                         help="with --local: only rings in this directory (one broker's "
                              "--ring-dir) are this host's")

    cli_groups.add_parsers(commands, _command)
    cli_rings.add_parsers(commands)

    offsets = _command(commands, "offsets", "log start and high watermark per partition",
                       _offsets)
    offsets.add_argument("topic", help="the topic")
    delete_records = _command(commands, "delete-records",
                              "delete a topic's records below an offset (Kafka's "
                              "DeleteRecords): the log start moves up to it", _delete_records)
    delete_records.add_argument("topic", help="the topic")
    delete_records.add_argument("--before", type=_before_offset, required=True,
                                metavar="OFFSET", help="delete every record below OFFSET, or "
                                "below the high watermark with 'hw' (at most the high "
                                "watermark)")
    delete_records.add_argument("--partition", type=_non_negative_int, action="append",
                                default=[], metavar="P",
                                help="only this partition (repeatable; default: all)")

    cluster = commands.add_parser("cluster", help="cluster state", description="cluster state")
    cluster_commands = cluster.add_subparsers(dest="cluster_command", required=True,
                                              metavar="ACTION")
    _command(cluster_commands, "status", "brokers and the metadata log (Raft)", _cluster_status)
    cli_cluster.add_parsers(commands, cluster_commands, _command)
    cli_health.add_parsers(cluster_commands, _command)
    cli_top.add_parser(commands)

    leader = commands.add_parser("leader", help="partition leadership",
                                 description="partition leadership")
    leader_commands = leader.add_subparsers(dest="leader_command", required=True,
                                            metavar="ACTION")
    elect = _command(leader_commands, "elect",
                     "give leaderships back to the preferred (first) replicas", _leader_elect)
    elect.add_argument("--preferred", action="store_true", required=True,
                       help="a preferred-leader election over every partition (the only kind)")
    cli_security.add_keys_parser(commands, _set_handler)
    cli_acls.add_parsers(commands, _command)
    return parser


def _set_handler(parser: argparse.ArgumentParser,
                 handler: Callable[[argparse.Namespace], int]) -> None:
    parser.set_defaults(handler=handler, command_parser=parser)


def parse_arguments(parser: argparse.ArgumentParser, arguments: Sequence[str]) -> (
    argparse.Namespace
):
    """Parse; an unknown option is reported with the usage of the command it was given to."""
    args, unknown = parser.parse_known_args(arguments)
    if unknown:
        command_parser: argparse.ArgumentParser = getattr(args, "command_parser", parser)
        command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    _fill_client_defaults(args)
    return args


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
    if args.configs:
        return _topic_describe_configs(args)
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


def _topic_describe_configs(args: argparse.Namespace) -> int:
    """One line per config: name, value, source, in columns (as kafka-configs --all)."""
    with _admin(args) as admin:
        entries = admin.describe_configs([args.name])[args.name]
    rows = [("CONFIG", "VALUE", "SOURCE")] + [
        (entry.name, "null" if entry.value is None else entry.value, entry.source)
        for entry in entries
    ]
    name_width = max(len(row[0]) for row in rows)
    value_width = max(len(row[1]) for row in rows)
    for name, value, source in rows:
        print(f"{name:<{name_width}}  {value:<{value_width}}  {source}")
    return 0


def _topic_alter(args: argparse.Namespace) -> int:
    if not args.config and not args.delete_config and args.partitions is None:
        args.command_parser.error("give --partitions N, or at least one --config KEY=VALUE or "
                                  "--delete-config KEY")
    if args.partitions is not None:
        with _admin(args) as admin:
            admin.create_partitions({args.name: args.partitions})
        print(f"altered topic {args.name}: {args.partitions} partitions")
        if not args.config and not args.delete_config:
            return 0
    changes: dict[str, str | None] = dict(_parse_configs(args.config))
    for name in args.delete_config:
        if name in changes:
            raise ZlogError(ErrorCode.INVALID_CONFIG,
                            f"{name} is both set (--config) and reset (--delete-config)")
        changes[name] = None
    with _admin(args) as admin:
        admin.incremental_alter_configs({args.name: changes})
    done = [f"set {name}={value}" for name, value in changes.items() if value is not None]
    done += [f"reset {name}" for name, value in changes.items() if value is None]
    print(f"altered topic {args.name}: {', '.join(done)}")
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


class _Deliveries:
    """The first delivery error of many sends, without keeping a future per record."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []

    def watch(self, future: Future[Any]) -> None:
        future.add_done_callback(self._done)  # may run on the producer's I/O thread

    def _done(self, future: Future[Any]) -> None:
        error = future.exception()
        if error is not None and not self.errors:
            self.errors.append(error)

    def raise_first(self) -> None:
        if self.errors:
            raise self.errors[0]


def _produce(args: argparse.Namespace) -> int:
    from zlog.client import Producer  # noqa: PLC0415

    deliveries = _Deliveries()
    compression = None if args.compression == "none" else args.compression
    # --request-timeout-ms bounds the whole command: each request, and each record's delivery
    # with its retries (whose last cause is then the error shown).
    with Producer(args.bootstrap, acks=args.acks, compression=compression, local=args.local,
                  request_timeout_ms=args.request_timeout_ms,
                  delivery_timeout_ms=args.request_timeout_ms,
                  max_block_ms=args.request_timeout_ms) as producer:
        send = _json_sender if args.json else _header_sender if args.header else _line_sender
        line_number = 1
        for chunk in _chunks(sys.stdin.buffer):
            send(producer, args, chunk, line_number, deliveries)
            line_number += len(chunk)
        producer.flush()
    deliveries.raise_first()
    return 0


def _line_sender(producer: Producer, args: argparse.Namespace, chunk: list[bytes],
                 first_line: int, deliveries: _Deliveries) -> None:
    """Plain lines (split at --key-separator): the bulk path, send_many."""
    del first_line
    if args.key_separator is None:
        deliveries.watch(producer.send_many(args.topic, chunk, partition=args.partition))
        return
    separator = args.key_separator.encode()
    keys: list[bytes | None] = []
    values: list[bytes] = []
    for line in chunk:
        key, found, value = line.partition(separator)
        keys.append(key if found else None)
        values.append(value if found else line)
    deliveries.watch(producer.send_many(args.topic, values, keys=keys, partition=args.partition))


def _header_sender(producer: Producer, args: argparse.Namespace, chunk: list[bytes],
                   first_line: int, deliveries: _Deliveries) -> None:
    """Plain lines with --header: one send per record, since headers are per record."""
    del first_line
    separator = None if args.key_separator is None else args.key_separator.encode()
    headers = tuple(args.header)
    for line in chunk:
        key, value = None, line
        if separator is not None:
            before, found, after = line.partition(separator)
            key, value = (before, after) if found else (None, line)
        deliveries.watch(producer.send(args.topic, value, key, args.partition, headers))


def _json_sender(producer: Producer, args: argparse.Namespace, chunk: list[bytes],
                 first_line: int, deliveries: _Deliveries) -> None:
    """--json: a record per line; a bad line stops the command (the lines before it are sent)."""
    headers = tuple(args.header)
    for number, line in enumerate(chunk, start=first_line):
        if not line.strip():
            continue
        record = parse_json_record(line, number)
        partition = args.partition if record.partition is None else record.partition
        deliveries.watch(producer.send(args.topic, record.value, record.key, partition,
                                       headers + record.headers, record.timestamp_ms))


def _consume(args: argparse.Namespace) -> int:
    from zlog.client import Consumer, TopicPartition  # noqa: PLC0415

    formatter = _formatter(args)
    reset = "earliest" if args.from_beginning else "latest"
    if args.group is not None and (args.partition is not None or args.offset is not None):
        raise ZlogError(ErrorCode.INVALID_REQUEST, "--group reads what the group's coordinator "
                        "assigns: it does not mix with --partition or --offset")
    with Consumer(args.bootstrap, auto_offset_reset=reset,
                  request_timeout_ms=args.request_timeout_ms, local=args.local,
                  prefer_local_replica=args.prefer_local_replica, client_rack=args.client_rack,
                  ring_dir=args.ring_dir, group_id=args.group) as consumer:
        if args.group is not None:
            consumer.subscribe([args.topic])
            return _print_records(consumer, formatter, args.max_messages, args.timeout_ms,
                                  sys.stdout.buffer)
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
        return _print_records(consumer, formatter, args.max_messages, args.timeout_ms,
                              sys.stdout.buffer)


def _formatter(args: argparse.Namespace) -> Formatter:
    if args.json:
        return json_formatter()
    if args.format is not None:
        return format_formatter(args.format, args.null_text)
    if args.print_key:
        return key_value_formatter(args.key_separator, args.null_text)
    return value_formatter(args.null_text)


def _print_records(consumer: Consumer, formatter: Formatter, max_messages: int | None,
                   timeout_ms: int | None, out: BinaryIO) -> int:
    printed = 0
    idle_ms = 0
    slice_ms = 200 if timeout_ms is None else max(1, min(200, timeout_ms))
    while max_messages is None or printed < max_messages:
        want = POLL_RECORDS_MAX if max_messages is None else min(POLL_RECORDS_MAX,
                                                                  max_messages - printed)
        records = consumer.poll(slice_ms, max_records=want)
        if not records:
            idle_ms += slice_ms
            if timeout_ms is not None and idle_ms >= timeout_ms:
                break
            continue
        idle_ms = 0
        out.write(b"".join(formatter(record) for record in records))
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


def _delete_records(args: argparse.Namespace) -> int:
    from zlog.client import TopicPartition  # noqa: PLC0415

    with _admin(args) as admin:
        if args.partition:
            partitions = sorted(set(args.partition))
        else:
            (description,) = admin.describe_topics([args.topic])
            partitions = [p.partition for p in description.partitions]
        starts = admin.delete_records(
            {TopicPartition(args.topic, partition): args.before for partition in partitions})
    print("partition\tlog_start_offset")
    for tp, start in sorted(starts.items()):
        print(f"{tp.partition}\t{start}")
    return 0


def _leader_elect(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        moved = admin.elect_preferred_leaders()
    print(f"{moved} partition(s) moved back to their preferred leader" if moved else
          "every partition is led by its preferred replica already, or that replica is not "
          "in sync")
    return 0


def _cluster_status(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        cluster = admin.describe_cluster()
    print(f"cluster_id: {cluster.cluster_id}")
    print(f"controller: {cluster.controller_id}")
    leader = "none" if cluster.raft_leader is None else str(cluster.raft_leader)
    commit_term, commit_height = cluster.raft_commit
    print(f"raft: leader {leader}, term {cluster.raft_term}; "
          f"last commit: term {commit_term}, height {commit_height}")
    print("broker\tstate\tepoch\track\tcontrol_endpoint\tvoter_lag_blocks")
    lag = cluster.voter_lag_blocks or {}
    for broker in cluster.brokers:
        voter = str(lag[broker.node_id]) if broker.node_id in lag else "-"
        print(f"{broker.node_id}\t{broker.state}\t{broker.broker_epoch}\t{broker.rack or '-'}"
              f"\t{broker.control_endpoint}\t{voter}")
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
    if arguments[:1] == ["dev-cluster"]:
        return _main_dev_cluster(arguments)
    args = parse_arguments(parser, arguments)
    if args.command == "serve":  # reached only with options before it
        parser.error("zlog serve takes its own options only: zlog serve --help")
    handler: Callable[[argparse.Namespace], int] = args.handler
    _show_client_warnings(sys.stderr)
    try:
        cli_security.install_client_keys(args)
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


def _show_client_warnings(stream: TextIO) -> None:
    """The client library's warnings on stderr, one line each: a retry's cause (logged once
    per cause), an offset reset, a bootstrap address left out."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("zlog: %(message)s"))
    client_log = logging.getLogger("zlog.client")
    client_log.addHandler(handler)
    client_log.setLevel(logging.WARNING)
    client_log.propagate = False


def _main_serve(parser: argparse.ArgumentParser, arguments: list[str]) -> int:
    """`zlog serve`: the broker defines its own flags, loaded only now."""
    from zlog.broker import serve  # noqa: PLC0415  (the broker loads only for `serve`)

    serve_parser = argparse.ArgumentParser(prog="zlog serve", description="run a zlog broker")
    serve.add_arguments(serve_parser)
    del parser  # the top-level parser knows `serve` only by name, for --help
    return serve.run(serve_parser.parse_args(arguments[1:]))


def _main_dev_cluster(arguments: list[str]) -> int:
    from zlog import dev_cluster  # noqa: PLC0415  (loaded only for this command)

    dev_parser = argparse.ArgumentParser(
        prog="zlog dev-cluster", description=(dev_cluster.__doc__ or "").split("\n\n")[0])
    dev_cluster.add_arguments(dev_parser)
    return dev_cluster.run(dev_parser.parse_args(arguments[1:]))


if __name__ == "__main__":
    raise SystemExit(main())
