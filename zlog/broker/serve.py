"""`zlog serve`: parse the configuration, start the supervisor, serve until SIGTERM/SIGINT.

The CLI's `zlog serve` calls `add_arguments(parser)` and `run(args)`; `python -m zlog.broker`
and `python -m zlog.broker.serve` call `main()`. Exit status: 0 after a graceful stop, 1 when
the broker cannot start (data dir locked, address in use), 2 for a bad configuration.

Logs go to stderr, one line per event, as log_lines.py writes them (logfmt or JSON, with
journald priorities under systemd).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from zlog.broker.config import (
    BOOLEAN_KEYS,
    KEYS,
    BrokerConfig,
    ConfigError,
    field_docs,
    flag_name,
    load_config,
)
from zlog.broker.control.supervisor import StartupError, Supervisor
from zlog.broker.log_lines import setup_logging
from zlog.broker.sdnotify import SystemdNotifier
from zlog.errors import ZlogError

log = logging.getLogger("zlog.broker.serve")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per config key (default None: "not given", so lower layers show through)."""
    docs = field_docs()
    parser.add_argument("--config", type=Path, default=None, metavar="FILE",
                        help="a zlog.toml (default: $ZLOG_CONFIG, else none)")
    for key in KEYS:
        help_text = docs.get(key, "") + f" [env ZLOG_{key.upper()}]"
        if key in BOOLEAN_KEYS:
            parser.add_argument(flag_name(key), dest=key, nargs="?", const="true",
                                default=None, metavar="BOOL", help=help_text)
        else:
            parser.add_argument(flag_name(key), dest=key, default=None,
                                metavar=key.split("_")[-1].upper(), help=help_text)
    parser.add_argument("--topic-config", dest="topic_config", action="append", default=[],
                        metavar="NAME=VALUE",
                        help="a default topic config, e.g. retention.ms=86400000 (repeatable) "
                             "[env ZLOG_TOPIC_RETENTION_MS ...]")


def run(args: argparse.Namespace) -> int:
    warnings: list[str] = []
    try:
        config = load_config({key: getattr(args, key, None) for key in KEYS},
                             getattr(args, "topic_config", []) or [],
                             getattr(args, "config", None), warnings=warnings)
    except ConfigError as error:
        print(f"zlog serve: configuration error: {error}", file=sys.stderr)
        return 2
    setup_logging(config.log_level, config.log_format, config.log_levels)
    for warning in warnings:
        log.warning("%s", warning)
    return serve(config)


def serve(config: BrokerConfig, *, worker_module: str = "zlog.broker.data.worker") -> int:
    """Run one broker until SIGTERM or SIGINT; 0 after a graceful stop, 1 if it cannot start."""
    supervisor = Supervisor(config, notifier=SystemdNotifier(), worker_module=worker_module)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("%s: stopping", signal.Signals(signum).name)
        supervisor.request_stop()

    previous = {number: signal.signal(number, on_signal)
                for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            supervisor.start()
        except (StartupError, ZlogError, OSError) as error:  # e.g. an unwritable data dir
            log.error("cannot start: %s", error)
            supervisor.close()
            return 1
        return supervisor.serve()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="zlog serve", allow_abbrev=False,
        description="Run a zlog broker: the supervisor, its partition workers, the metadata log.",
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
