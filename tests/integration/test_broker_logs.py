"""What a real broker writes on stderr: one line per event, in the format asked for, from the
supervisor and its workers alike, with journald's priorities when stderr is the journal's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from zlog.client import Admin, NewTopic
from zlog_testbed.broker_process import BrokerProcess

pytestmark = pytest.mark.slow

BANNER = re.compile(r"^zlog \S+ serving: control ")  # the supervisor's banner, on stdout
LOGFMT_LINE = re.compile(r'^(\w+=("(?:[^"\\]|\\.)*"|[^ "]+))( \w+=("(?:[^"\\]|\\.)*"|[^ "]+))*$')
JOURNAL_PRIORITY = re.compile(r"^<([0-7])>")


def _run_once(broker: BrokerProcess) -> list[str]:
    """Start, create a topic (so workers log), stop gracefully: every line the broker wrote."""
    broker.start()
    with Admin(broker.endpoint) as admin:
        admin.create_topics([NewTopic("logged", 2, 1)])
    broker.data_endpoint("logged", 0)
    broker.data_endpoint("logged", 1)
    assert broker.stop() == 0
    return [line for line in broker.log_text().splitlines() if not BANNER.match(line)]


def test_logfmt_by_default_one_line_per_event(tmp_path: Path) -> None:
    broker = BrokerProcess(workers=2)
    try:
        lines = _run_once(broker)
        assert lines
        bad = [line for line in lines if not LOGFMT_LINE.match(line)]
        assert bad == [], "\n".join(bad)
        assert all(line.startswith("ts=") for line in lines)
        procs = {found.group(1) for line in lines if (found := re.search(r" proc=(\S+)", line))}
        assert {"supervisor", "worker-0", "worker-1"} <= procs
        assert not any("Traceback" in line for line in lines)
    finally:
        broker.close(tmp_path)


def test_json_under_journald_with_a_level_per_module(tmp_path: Path) -> None:
    """JOURNAL_STREAM names the broker's stderr, as systemd sets it: every line, the workers'
    too, starts with its syslog priority and is one JSON object without a time; a logger set
    to warning says nothing at info while the others do."""
    quiet = "zlog.broker.control.workers.pool"
    broker = BrokerProcess(workers=2, extra_args=["--log-format", "json",
                                                  "--log-levels", f"{quiet}=warning"])
    try:
        stderr = broker.directory / "broker-1.log"  # start() writes into it, same inode
        stderr.touch()
        status = stderr.stat()
        broker.environment["JOURNAL_STREAM"] = f"{status.st_dev}:{status.st_ino}"
        lines = _run_once(broker)
        events = []
        for line in lines:
            priority = JOURNAL_PRIORITY.match(line)
            assert priority is not None, line
            event = json.loads(line[priority.end():])
            assert "ts" not in event
            assert {"error": "3", "warning": "4", "info": "6", "debug": "7"}[
                event["level"]] == priority.group(1)
            events.append(event)
        assert {"supervisor", "worker-0", "worker-1"} <= {event["proc"] for event in events}
        assert any(event["level"] == "info" for event in events)
        assert not [event for event in events
                    if event["logger"] == quiet and event["level"] == "info"]
    finally:
        broker.close(tmp_path)
