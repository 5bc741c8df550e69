"""The history file: what is written reads back equal, and a malformed line is refused by number."""

from __future__ import annotations

import json
from itertools import count
from pathlib import Path

import pytest

from zlog_jepsen.history import (
    Event,
    HistoryFormatError,
    HistoryWriter,
    SendRecord,
    fault,
    keys,
    nemesis_value,
    offsets,
    offsets_value,
    poll_value,
    polled,
    read_final_read,
    read_history,
    send_ok_value,
    send_value,
    sends,
    write_final_read,
)


def _write_sample(path: Path) -> list[Event]:
    clock = count(1_000, 10)
    with HistoryWriter(path, clock_ns=lambda: next(clock)) as writer:
        return [
            writer.append(0, "invoke", "send", send_value([(1, 10), (1, 11)])),
            writer.append(0, "ok", "send", send_ok_value([SendRecord(1, 10, 0),
                                                          SendRecord(1, 11, None)])),
            writer.append(1, "invoke", "assign", [1, 2], seek_to_beginning=True),
            writer.append(1, "ok", "assign", [1, 2], seek_to_beginning=True),
            writer.append(1, "invoke", "poll", poll_value()),
            writer.append(1, "ok", "poll", poll_value({1: [(0, 10)], 2: []}),
                          rebalance_log=[[2]]),
            writer.append(2, "invoke", "commit", offsets_value({1: 1}), group="g"),
            writer.append(2, "info", "commit", offsets_value({1: 1}), group="g",
                          error="REQUEST_TIMED_OUT"),
            writer.append("nemesis", "info", "nemesis", nemesis_value("kill", "start", node=2)),
            writer.append(3, "info", "crash"),
            writer.append("nemesis", "info", "nemesis",
                          nemesis_value("kill", "observed", seen=[{"leader": -1}])),
            writer.append("nemesis", "info", "nemesis",
                          nemesis_value("kill", "operator", action="unclean-election-on")),
        ]


def test_a_history_reads_back_as_written(tmp_path: Path) -> None:
    written = _write_sample(tmp_path / "history.jsonl")
    read = read_history(tmp_path / "history.jsonl")
    assert read == written
    assert [e.index for e in read] == list(range(len(written)))
    assert [e.time_ns for e in read] == [1_000 + 10 * i for i in range(len(written))]
    assert sends(read[1]) == [SendRecord(1, 10, 0), SendRecord(1, 11, None)]
    assert sends(read[0]) == [SendRecord(1, 10, None), SendRecord(1, 11, None)]
    assert keys(read[2]) == [1, 2] and read[2].seek_to_beginning
    assert polled(read[5]) == {1: [(0, 10)], 2: []}
    assert read[5].rebalanced(2) and not read[5].rebalanced(1)
    assert offsets(read[7]) == {1: 1} and read[7].error == "REQUEST_TIMED_OUT"
    assert read[7].group == "g"
    assert fault(read[8]) == ("kill", "start") and not read[8].is_client
    assert [fault(e).phase for e in read[10:]] == ["observed", "operator"]


def test_each_line_is_on_disk_before_the_writer_closes(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    writer = HistoryWriter(path)
    writer.append(0, "invoke", "poll", poll_value())
    assert len(read_history(path)) == 1  # a run killed now keeps its history
    writer.close()


def test_the_writer_refuses_a_malformed_event_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:
        with pytest.raises(HistoryFormatError, match="a send's value is an integer"):
            writer.append(0, "invoke", "send", [["send", 1, "x"]])
        event = writer.append(0, "invoke", "send", send_value([(1, 1)]))
    assert event.index == 0
    assert read_history(path) == [event]


GOOD = {"index": 0, "time_ns": 5, "process": 0, "type": "invoke", "f": "poll", "value": [["poll"]]}


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "an event is a JSON object"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "f"}), "needs the fields f"),
        (json.dumps({**GOOD, "colour": 1}), "unknown fields colour"),
        (json.dumps({**GOOD, "type": "done"}), "type is one of invoke, ok, fail, info"),
        (json.dumps({**GOOD, "f": "txn"}), "f is one of send"),
        (json.dumps({**GOOD, "index": "0"}), "index is an integer"),
        (json.dumps({**GOOD, "time_ns": True}), "time_ns is an integer"),
        (json.dumps({**GOOD, "process": "p1"}), "a process"),
        (json.dumps({**GOOD, "error": 6}), "error is a string"),
        (json.dumps({**GOOD, "rebalance_log": [[1]]}), "a rebalance_log entry"),
        (json.dumps({**GOOD, "value": [["poll", {"x": []}]]}), "a key is an integer"),
        (json.dumps({**GOOD, "value": [["poll", {"1": [[0]]}]]}), "a polled record is"),
        (json.dumps({**GOOD, "f": "send", "value": [["send", 1]]}), "a send micro-op is"),
        (json.dumps({**GOOD, "f": "send", "value": [["send", 1, [None]]]}), "has two items"),
        (json.dumps({**GOOD, "f": "assign", "value": {"1": 2}}), "an assign value is a list"),
        (json.dumps({**GOOD, "f": "commit", "value": [1]}), "offsets is an object"),
        (json.dumps({**GOOD, "f": "crash", "value": 1}), "a crash event has no value"),
        (json.dumps({**GOOD, "f": "nemesis", "value": {"fault": "kill"}}), "a nemesis phase"),
    ],
)
def test_a_malformed_line_is_refused_with_its_number_and_reason(
    tmp_path: Path, line: str, reason: str
) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + line + "\n")
    with pytest.raises(HistoryFormatError, match=rf"history\.jsonl:3: .*{reason}"):
        read_history(path)


def test_a_line_cut_short_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD)[:20])
    with pytest.raises(HistoryFormatError, match=r":2: not JSON .*cut short"):
        read_history(path)


def test_the_final_read_round_trips_and_refuses_bad_files(tmp_path: Path) -> None:
    path = tmp_path / "final.json"
    write_final_read(path, {1: [(0, 10), (2, 11)], 2: []})
    assert read_final_read(path) == {1: [(0, 10), (2, 11)], 2: []}
    path.write_text('{"1": [[0, "ten"]]}')
    with pytest.raises(HistoryFormatError, match=r"final\.json: a polled value is an integer"):
        read_final_read(path)
    path.write_text("{")
    with pytest.raises(HistoryFormatError, match=r"final\.json: not JSON"):
        read_final_read(path)
