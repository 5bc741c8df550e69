"""`python -m zlog.kafka_gateway`: the gateway process, as the supervisor starts it.

The supervisor binds the listening socket itself (an address in use fails `zlog serve` at
start, and a restarted gateway takes over the same socket) and hands it over by descriptor,
with a read end of its lifeline pipe (zlog/broker/supervisor_lifeline.py). With security on
it is given the broker's keys (its native calls are CURVE, as the broker's principal) and the
TLS files: it then serves SASL_SSL only.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import socket
import ssl
import sys
from collections.abc import Sequence
from pathlib import Path

from zlog.broker.log_lines import LOG_FORMATS, parse_module_levels, setup_logging
from zlog.errors import ZlogError
from zlog.kafka.tls import server_context
from zlog.kafka_gateway.calls import Gateway, GatewaySettings
from zlog.kafka_gateway.gateway_security import GatewaySecurity
from zlog.kafka_gateway.native import Native
from zlog.kafka_gateway.server import GatewayServer
from zlog.kafka_gateway.topology import gateway_node
from zlog.transport import curve
from zlog.transport.curve_keys import broker_security


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
    parser.add_argument("--security-keys-dir", type=Path, default=None,
                        help="security on: the broker's keys; SASL_SSL with the TLS files")
    parser.add_argument("--security-principal", default="broker")
    parser.add_argument("--super-users", default="", help="name,name,...")
    parser.add_argument("--tls-cert-file", type=Path, default=None)
    parser.add_argument("--tls-key-file", type=Path, default=None)
    parser.add_argument("--tls-ca-file", type=Path, default=None)
    parser.add_argument("--relay", default="", help="@NAME: the workers' relay socket")
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
    native = Native(args.control)
    security: GatewaySecurity | None = None
    tls: ssl.SSLContext | None = None
    if args.security_keys_dir is not None:
        try:  # before the first socket: none is ever made in the clear
            curve.install(broker_security(args.security_keys_dir, args.security_principal))
            tls = server_context(args.tls_cert_file, args.tls_key_file, args.tls_ca_file)
        except ZlogError as error:
            print(f"kafka gateway cannot start: {error.message}", file=sys.stderr)
            return 1
        super_users = [name for name in args.super_users.split(",") if name]
        security = GatewaySecurity(native, (args.security_principal, *super_users))
    server = GatewayServer(Gateway(settings, native, node), listener, args.lifeline_fd,
                           security=security, tls=tls, relay=args.relay)
    asyncio.run(server.serve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
