"""How the broker's processes write their logs: one line per event, on stderr.

Operators read them with journalctl, grep or a log shipper, so an event never spans lines: a
traceback (an unexpected failure, the one kind that carries one) is folded into the line it
belongs to, its newlines escaped. Two shapes, chosen by `log_format`:

    logfmt (the default)  ts=2026-11-28T12:00:00.123Z level=info proc=supervisor
                          logger=zlog.broker.serve msg="serving: control tcp://..."
    json                  {"ts": "...", "level": "info", "proc": "supervisor", ...}

Under systemd (JOURNAL_STREAM names our stderr, which the workers inherit) each line starts
with a `<N>` syslog priority, which journald makes the entry's priority, and drops the time
journald stamps itself. `log_levels` sets a level per logger prefix ("zlog.raft=debug"),
over `log_level` for the rest.

The supervisor and every worker call `setup_logging` with the same settings, so a broker's
lines all look alike; `proc` says which process wrote one.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final, NamedTuple, TextIO

from zlog.errors import ZlogError

LOG_FORMATS: Final = ("logfmt", "json")
LOG_LEVELS: Final = ("debug", "info", "warning", "error")

_SYSLOG_PRIORITY: Final = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4,
                           logging.ERROR: 3, logging.CRITICAL: 2}
_LOGFMT_BARE: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                "0123456789-_.:/@+,")


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _logfmt_value(text: str) -> str:
    """A value bare when it can be, else quoted with `"`, `\\` and control characters escaped."""
    if text and all(char in _LOGFMT_BARE for char in text):
        return text
    return json.dumps(text, ensure_ascii=False)  # escapes ", \, newlines and the rest


class EventFormatter(logging.Formatter):
    """One record -> one line, logfmt or JSON, with a journald priority when asked."""

    def __init__(self, log_format: str, process_name: str, *, journal: bool) -> None:
        super().__init__()
        assert log_format in LOG_FORMATS, log_format
        self.log_format = log_format
        self.process_name = process_name
        self.journal = journal

    def fields(self, record: logging.LogRecord) -> list[tuple[str, str]]:
        pairs = [] if self.journal else [("ts", _timestamp(record))]
        pairs += [("level", record.levelname.lower()), ("proc", self.process_name),
                  ("logger", record.name), ("msg", record.getMessage())]
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            pairs.append(("error", f"{type(error).__name__}: {error}"))
            pairs.append(("traceback", self.formatException(record.exc_info)))
        elif record.exc_text:
            pairs.append(("traceback", record.exc_text))
        if record.stack_info:
            pairs.append(("stack", record.stack_info))
        return pairs

    def format(self, record: logging.LogRecord) -> str:
        pairs = self.fields(record)
        if self.log_format == "json":
            line = json.dumps(dict(pairs), ensure_ascii=False)
        else:
            line = " ".join(f"{key}={_logfmt_value(value)}" for key, value in pairs)
        if self.journal:
            return f"<{_SYSLOG_PRIORITY.get(record.levelno, 6)}>{line}"
        return line


def stderr_is_journal(stream: TextIO | None = None) -> bool:
    """systemd sets JOURNAL_STREAM=dev:inode of the stream it connected to our stderr."""
    device, _, inode = os.environ.get("JOURNAL_STREAM", "").partition(":")
    if not device.isdigit() or not inode.isdigit():
        return False
    try:
        status = os.fstat((stream or sys.stderr).fileno())
    except (OSError, ValueError):
        return False
    return (status.st_dev, status.st_ino) == (int(device), int(inode))


def parse_module_levels(text: str) -> tuple[tuple[str, str], ...]:
    """"zlog.raft=debug,zlog.broker.data=warning" -> (("zlog.raft", "debug"), ...).

    Raises ValueError with a sentence naming the bad item.
    """
    levels: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, equals, level = (part.strip() for part in item.partition("="))
        if not equals or not name or level.lower() not in LOG_LEVELS:
            raise ValueError(f"must be logger=level[,...] with a level among "
                             f"{', '.join(LOG_LEVELS)}, not {item.strip()!r}")
        levels[name] = level.lower()
    return tuple(sorted(levels.items()))


def format_module_levels(levels: Sequence[tuple[str, str]]) -> str:
    """The inverse of parse_module_levels, for passing the setting on to a worker."""
    return ",".join(f"{name}={level}" for name, level in levels)


def log_failure(logger: logging.Logger, error: BaseException, message: str,
                *args: object) -> None:
    """`message: <why>` at error level, one line when the failure is an expected one.

    Expected: a refusal carrying a Kafka error code (ZlogError), or the operating system's
    (OSError: a full disk, an I/O error, a file gone), which an operator reads and acts on; a
    traceback would only bury the sentence. Anything else is a bug in zlog, logged with its
    traceback for whoever fixes it.
    """
    if isinstance(error, ZlogError):
        logger.error(f"{message}: %s (%d): %s", *args, error.code.name, int(error.code),
                     error.message)
    elif isinstance(error, OSError):
        logger.error(f"{message}: %s", *args, _os_error_text(error))
    else:
        logger.error(message, *args, exc_info=error)


def _os_error_text(error: OSError) -> str:
    """"ENOSPC: No space left on device (/data/t-0/0.log.cleaned)"."""
    name = errno.errorcode.get(error.errno or 0, "")
    where = f" ({error.filename})" if error.filename else ""
    text = error.strerror or str(error)
    return f"{name}: {text}{where}" if name else f"{text}{where}"


class LogSettings(NamedTuple):
    """The three settings a worker is started with, as the supervisor's config has them."""

    level: str
    log_format: str
    module_levels: tuple[tuple[str, str], ...]


def setup_logging(level: str, log_format: str = "logfmt",
                  module_levels: Sequence[tuple[str, str]] = (),
                  process_name: str = "supervisor") -> None:
    """Route every logger of this process to stderr, one line per event."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(EventFormatter(log_format, process_name, journal=stderr_is_journal()))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name, module_level in module_levels:
        logging.getLogger(name).setLevel(module_level.upper())
    threading.excepthook = _log_thread_death


def _log_thread_death(args: threading.ExceptHookArgs) -> None:
    """A thread's uncaught exception, which Python would print over many lines: one event."""
    if args.exc_type is SystemExit:
        return  # as Python's own hook: a thread may end itself so
    name = args.thread.name if args.thread is not None else "?"
    error = args.exc_value if args.exc_value is not None else args.exc_type()
    logging.getLogger(__name__).critical(
        "thread %s died", name, exc_info=(args.exc_type, error, args.exc_traceback))
