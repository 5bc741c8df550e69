"""The broker's log lines (zlog/broker/log_lines.py): one event, one line, in either format."""

from __future__ import annotations

import errno
import json
import logging
import re
import sys
import threading

import pytest

from zlog.broker.config import ConfigError, load_config
from zlog.broker.log_lines import (
    EventFormatter,
    format_module_levels,
    log_failure,
    parse_module_levels,
    setup_logging,
)
from zlog.errors import ErrorCode, ZlogError

LOGFMT_PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^ "]+)(?: |$)')


def _record(message: str, *args: object, level: int = logging.WARNING,
            exc_info: bool = False) -> logging.LogRecord:
    info = sys.exc_info() if exc_info else None
    return logging.LogRecord("zlog.broker.data.worker", level, __file__, 1, message, args, info)


def _logfmt(line: str) -> dict[str, str]:
    """Parse a logfmt line back, insisting that the pairs cover all of it."""
    pairs = LOGFMT_PAIR.findall(line)
    assert "".join(f"{k}={v} " for k, v in pairs).rstrip() == line, line
    return {key: json.loads(value) if value.startswith('"') else value for key, value in pairs}


def test_logfmt_line_has_time_level_process_logger_and_message() -> None:
    line = EventFormatter("logfmt", "worker-3", journal=False).format(
        _record('partition %s-%d: "odd" = value', "t", 0))
    fields = _logfmt(line)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", fields.pop("ts"))
    assert fields == {"level": "warning", "proc": "worker-3",
                      "logger": "zlog.broker.data.worker",
                      "msg": 'partition t-0: "odd" = value'}


def test_a_traceback_stays_on_the_line_of_its_event() -> None:
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        record = _record("tick of %s-%d failed", "t", 1, level=logging.ERROR, exc_info=True)
    for log_format in ("logfmt", "json"):
        line = EventFormatter(log_format, "worker-0", journal=False).format(record)
        assert "\n" not in line
        fields = _logfmt(line) if log_format == "logfmt" else json.loads(line)
        assert fields["msg"] == "tick of t-1 failed"
        assert fields["error"] == "ValueError: bad\nthing"
        assert fields["traceback"].startswith("Traceback (most recent call last):\n")


def test_json_line_is_one_object() -> None:
    line = EventFormatter("json", "supervisor", journal=False).format(_record("hello"))
    fields = json.loads(line)
    assert set(fields) == {"ts", "level", "proc", "logger", "msg"}
    assert (fields["level"], fields["proc"], fields["msg"]) == ("warning", "supervisor", "hello")


@pytest.mark.parametrize(("level", "priority"), [
    (logging.DEBUG, 7), (logging.INFO, 6), (logging.WARNING, 4), (logging.ERROR, 3),
    (logging.CRITICAL, 2)])
def test_under_journald_a_line_starts_with_its_priority_and_has_no_time(
        level: int, priority: int) -> None:
    for log_format in ("logfmt", "json"):
        line = EventFormatter(log_format, "supervisor", journal=True).format(
            _record("x", level=level))
        assert line.startswith(f"<{priority}>")
        assert "ts" not in (_logfmt(line[3:]) if log_format == "logfmt" else json.loads(line[3:]))


def test_module_levels_parse_and_print_back() -> None:
    levels = parse_module_levels(" zlog.raft=DEBUG, zlog.broker.data=warning ,")
    assert levels == (("zlog.broker.data", "warning"), ("zlog.raft", "debug"))
    assert parse_module_levels(format_module_levels(levels)) == levels
    assert parse_module_levels("") == ()
    for bad in ("zlog.raft", "=debug", "zlog.raft=loud"):
        with pytest.raises(ValueError, match="logger=level"):
            parse_module_levels(bad)


def test_log_format_and_levels_are_settings_in_every_spelling() -> None:
    config = load_config({"log_levels": "zlog.raft=debug"},
                         environ={"ZLOG_LOG_FORMAT": "JSON"})
    assert (config.log_format, config.log_levels) == ("json", (("zlog.raft", "debug"),))
    with pytest.raises(ConfigError, match="ZLOG_LOG_FORMAT must be one of logfmt, json"):
        load_config({}, environ={"ZLOG_LOG_FORMAT": "xml"})
    with pytest.raises(ConfigError, match="--log-levels must be logger=level"):
        load_config({"log_levels": "zlog.raft:debug"}, environ={})


def test_an_expected_failure_is_one_line_with_its_code_a_bug_keeps_its_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("zlog.test.failures")
    full = OSError(errno.ENOSPC, "No space left on device", "/data/t-0/0.log")
    refused = ZlogError(ErrorCode.KAFKA_STORAGE_ERROR, "t-0: the disk is gone")
    with caplog.at_level(logging.ERROR, logger.name):
        log_failure(logger, full, "tick of %s-%d failed", "t", 0)
        log_failure(logger, refused, "tick of %s-%d failed", "t", 0)
        log_failure(logger, KeyError("x"), "tick of %s-%d failed", "t", 0)
    first, second, bug = caplog.records
    assert first.getMessage() == ("tick of t-0 failed: ENOSPC: No space left on device "
                                  "(/data/t-0/0.log)")
    assert second.getMessage() == ("tick of t-0 failed: KAFKA_STORAGE_ERROR (56): "
                                   "t-0: the disk is gone")
    assert first.exc_info is None and second.exc_info is None
    assert bug.getMessage() == "tick of t-0 failed" and bug.exc_info is not None


def test_a_thread_that_dies_is_one_line_like_any_event(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Python prints an uncaught exception of a thread on stderr over many lines; once the
    broker's logging is set up, it is one event like the others (at critical level)."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    setup_logging("info", "json", (), "supervisor")

    def die() -> None:
        raise RuntimeError("the raft loop fell over")

    thread = threading.Thread(target=die, name="raft-1")
    thread.start()
    thread.join()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    event = json.loads(lines[0])
    assert event["level"] == "critical"
    assert event["msg"] == "thread raft-1 died"
    assert event["error"] == "RuntimeError: the raft loop fell over"
