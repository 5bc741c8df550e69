"""`python -m zlog.kafka_gateway`: the gateway process, as the supervisor starts it.

The supervisor binds the listening socket itself (an address in use fails `zlog serve` at
start, and a restarted gateway takes over the same socket) and hands it over by descriptor,
with a read end of its lifeline pipe (zlog/broker/supervisor_lifeline.py).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import socket
from collections.abc import Sequence

from zlog.broker.log_lines import LOG_FORMATS, parse_module_levels, setup_logging
from zlog.kafka_gateway.calls import Gateway, GatewaySettings
from zlog.kafka_gateway.native import Native
from zlog.kafka_gateway.server import GatewayServer
from zlog.kafka_gateway.topology import gateway_node


def _raise_open_files_limit() -> None:
    """Each Kafka client holds a connection: allow as many as the hard limit does."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zlog.kafka_gateway")
    parser.add_argument("--listen-fd", type=int, required=True)
    parser.add_argument("--lifeline-fd", type=int, default=None)
    parser.add_argument("--control", required=True, help="this broker's control endpoint")
    parser.add_argument("--node-id", type=int, required=True)
    parser.add_argument("--advertised", required=True, help="HOST:PORT clients are told")
    parser.add_argument("--rack", default="")
    parser.add_argument("--default-partitions", type=int, default=1)
    parser.add_argument("--default-replication-factor", type=int, default=1)
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--log-format", choices=LOG_FORMATS, default=LOG_FORMATS[0])
    parser.add_argument("--log-levels", default="", help="levels per logger, logger=level,...")
    args = parser.parse_args(argv)
    try:
        module_levels = parse_module_levels(args.log_levels)
    except ValueError as error:
        parser.error(f"--log-levels {error}")
    setup_logging(args.log_level, args.log_format, module_levels, "kafka-gateway")
    _raise_open_files_limit()
    settings = GatewaySettings(args.node_id, args.advertised, args.default_partitions,
                               args.default_replication_factor)
    node = gateway_node(args.node_id, args.advertised, ())
    if args.rack:
        node = type(node)(node.node_id, node.host, node.port, args.rack)
    listener = socket.socket(fileno=args.listen_fd)
    listener.setblocking(False)
    server = GatewayServer(Gateway(settings, Native(args.control), node), listener,
                           args.lifeline_fd)
    asyncio.run(server.serve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
