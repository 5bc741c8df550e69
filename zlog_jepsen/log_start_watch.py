"""Each key's log start and high watermark, asked of its leader while a run goes on.

The checker tells records retention deleted from records lost by the log starts the brokers
answered, and finds a leader that deleted records above its high watermark
(zlog_jepsen.checker.retention). Every `interval_s` (zlog_jepsen.sampling) the controller's
Metadata names each partition's leader and the worker serving it; each such worker is asked,
in one ListOffsets request, for the EARLIEST and the LATEST offset of every partition it
leads. A worker answers a request in one turn of its loop, so the log start and the high
watermark of one answer are of the same moment. A partition whose leader moved meanwhile
answers NOT_LEADER_OR_FOLLOWER and is left out of that sample.

Each answer is one line of `log-starts.jsonl`:

    {"asked_ns": ..., "answered_ns": ..., "key": 1, "leader": 2, "log_start": 310,
     "high_watermark": 355}
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from zlog.errors import ZlogError
from zlog.transport.messages.data import (
    ListOffsetsPartition,
    ListOffsetsRequestV0,
    ListOffsetsResponseV0,
    ListOffsetsResult,
)
from zlog.types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from zlog_jepsen.checker.retention import LogStartSample
from zlog_jepsen.sampling import CALL_TIMEOUT_MS, Sampler, read_samples


class LogStartWatch(Sampler):
    """Samples `topic`'s log starts and high watermarks into `path` from `start` until
    `stop`."""

    def _sample(self) -> list[str]:
        _, _, answer = self._controller_metadata()
        led: dict[str, dict[int, int]] = defaultdict(dict)  # endpoint -> partition -> leader
        for topic in answer.topics:
            for p in topic.partitions:
                if p.endpoint and p.leader >= 0:
                    led[p.endpoint][p.partition] = p.leader
        lines: list[str] = []
        for endpoint, leaders in sorted(led.items()):
            request = ListOffsetsRequestV0(self.topic, tuple(
                ListOffsetsPartition(partition, spec) for partition in sorted(leaders)
                for spec in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP)))
            asked_ns = time.time_ns()
            try:
                offsets = self._rpc(endpoint).call(request, CALL_TIMEOUT_MS)
            except ZlogError:
                self._drop(endpoint)  # that worker may be the one down: the others answer
                continue
            answered_ns = time.time_ns()
            if isinstance(offsets, ListOffsetsResponseV0):
                self.samples += 1
                lines += answer_lines(asked_ns, answered_ns, leaders, offsets.partitions)
        return lines


def answer_lines(asked_ns: int, answered_ns: int, leaders: dict[int, int],
                 results: tuple[ListOffsetsResult, ...]) -> list[str]:
    """The lines of one ListOffsets answer to EARLIEST then LATEST of each partition: one per
    partition both of whose offsets were answered."""
    lines = []
    for earliest, latest in zip(results[::2], results[1::2], strict=False):
        if earliest.partition != latest.partition or earliest.error_code or latest.error_code:
            continue
        lines.append(json.dumps({
            "asked_ns": asked_ns, "answered_ns": answered_ns, "key": earliest.partition,
            "leader": leaders.get(earliest.partition, -1), "log_start": earliest.offset,
            "high_watermark": latest.offset}) + "\n")
    return lines


def _log_start_sample(raw: dict[str, Any]) -> LogStartSample:
    return LogStartSample(int(raw["asked_ns"]), int(raw["answered_ns"]), int(raw["key"]),
                          int(raw["leader"]), int(raw["log_start"]), int(raw["high_watermark"]))


def read_log_start_samples(path: Path) -> list[LogStartSample]:
    """The samples of `path`; a line that is not one is refused with where and why."""
    return read_samples(path, "a log-start sample", _log_start_sample)
