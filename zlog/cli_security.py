"""`zlog keys generate`, and the client options that turn CURVE on for a command.

    zlog keys generate DIR [NAME]...   the cluster's server key and broker principal (no NAME),
                                       or a key pair per named principal, under DIR/principals

A broker reads the directory `zlog keys generate` writes (zlog/transport/curve_keys.py); a
client is given its own NAME.key_secret and the cluster's server.key, named with --key-file
and --server-key-file (or $ZLOG_KEY_FILE and $ZLOG_SERVER_KEY_FILE) on every client command.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Final

from zlog.transport import curve
from zlog.transport.curve_keys import (
    PRINCIPALS_DIR,
    SERVER_KEY_NAME,
    client_security,
    generate_key_pair,
)

KEY_FILE_ENV: Final = "ZLOG_KEY_FILE"
SERVER_KEY_FILE_ENV: Final = "ZLOG_SERVER_KEY_FILE"
BROKER_PRINCIPAL_DEFAULT: Final = "broker"


def add_client_key_options(parser: argparse.ArgumentParser) -> None:
    """--key-file and --server-key-file, declared as the other client options are (SUPPRESS:
    given before or after the command's name)."""
    parser.add_argument("--key-file", type=Path, default=argparse.SUPPRESS, metavar="FILE",
                        help=f"this client's NAME.key_secret: CURVE on (default ${KEY_FILE_ENV})")
    parser.add_argument("--server-key-file", type=Path, default=argparse.SUPPRESS,
                        metavar="FILE", help="the cluster's server.key "
                                             f"(default ${SERVER_KEY_FILE_ENV})")


def install_client_keys(args: argparse.Namespace) -> None:
    """CURVE on for this command's connections when a key file is given (ZlogError
    INVALID_CONFIG for a missing, unreadable or world-readable file)."""
    key_file = getattr(args, "key_file", None) or os.environ.get(KEY_FILE_ENV)
    server_key_file = (getattr(args, "server_key_file", None)
                       or os.environ.get(SERVER_KEY_FILE_ENV))
    if not key_file:
        return
    if not server_key_file:
        server_key_file = str(Path(key_file).with_name(SERVER_KEY_NAME + ".key"))
    curve.install(client_security(Path(key_file), Path(server_key_file)))


def _keys_generate(args: argparse.Namespace) -> int:
    directory: Path = args.directory
    written: list[Path] = []
    if not args.names:
        written += generate_key_pair(directory, SERVER_KEY_NAME)
        written += generate_key_pair(directory / PRINCIPALS_DIR, BROKER_PRINCIPAL_DEFAULT)
    for name in args.names:
        written += generate_key_pair(directory / PRINCIPALS_DIR, name)
    for path in written:
        print(path)
    return 0


def add_keys_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                    set_handler: Callable[[argparse.ArgumentParser,
                                           Callable[[argparse.Namespace], int]], None]) -> None:
    keys = commands.add_parser("keys", help="CURVE key pairs for brokers and clients",
                               description="CURVE key pairs for brokers and clients")
    actions = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    generate = actions.add_parser(
        "generate", help="new key pairs (secret files 0600); never overwrites one",
        description="Without NAME: the cluster's server key (DIR/server.key_secret, and "
                    "server.key for clients) and the brokers' principal "
                    "(DIR/principals/broker.key_secret). With NAMEs: one principal each, "
                    "DIR/principals/NAME.key (the broker lets it in) and NAME.key_secret "
                    "(give it to that client, then remove it from the broker).")
    generate.add_argument("directory", type=Path, metavar="DIR", help="the key directory")
    generate.add_argument("names", nargs="*", metavar="NAME", help="principals to make keys for")
    set_handler(generate, _keys_generate)
