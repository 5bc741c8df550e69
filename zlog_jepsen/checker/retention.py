"""Records retention deleted, told apart from records lost; and a log start past the HW.

Retention deletes a partition's oldest segments and moves its log start up: a record below
the log start is gone from every read, and that is no loss as long as the record was
committed (below the high watermark) when it went. The history cannot tell, since nobody
reads a deleted record; the brokers can. While a run that shrinks retention goes on, the
harness asks each partition's leader for its log start and its high watermark in one
ListOffsets request (EARLIEST and LATEST of the same partition, answered in one turn of the
worker that leads it, zlog_jepsen.log_start_watch), and once more just before the final read.
From those answers:

- log-start-past-hw: an answer whose log start is above its high watermark. The leader has
  deleted records that were not committed yet: no reader could ever have seen them, and an
  acknowledgement that came later covers records nobody holds. One anomaly per episode (a
  key's consecutive answers showing it, from one leader).
- The retention floor of a key is the highest log start any answer showed. An acknowledged
  record below its key's floor that the final read lacks, a polled one the final read lacks
  (phantom-read), one nobody read (lost-write, unseen) and a batch only partly there
  (batch-tear) are excused, counted as allowed, unless an answer showed its offset deleted
  while above the HW (between that answer's HW and its log start): that record was acked,
  if at all, after it was gone, and its loss counts. Nor is a record excused whose offset
  was seen holding another value: it was truncated and replaced, not deleted. A record at
  or above the floor is held to every rule as before: missing from the final read while
  later offsets are there is a loss.
- A consumer whose position fell below the log start starts again at the log start
  (`auto_offset_reset=earliest`), skipping what was deleted. A poll skip, within a poll or
  between two, and a group member starting past its group's committed offset, are excused
  when every offset skipped lies below the log start when that poll ended: the highest log
  start answered up to the first answer asked more than the margin after the poll's
  completion (the history stamps an event a queue hop after the client saw it, and the
  sampler asks every 100 ms). That errs toward excusing a skip over records deleted within
  the margin after the poll, never toward a false anomaly.

Without answers (a run that does not shrink retention) every floor is 0 and nothing is
excused.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable
from itertools import accumulate
from typing import Final, NamedTuple

from zlog_jepsen.checker.anomaly import Anomaly, Findings
from zlog_jepsen.checker.ops import Op
from zlog_jepsen.history import NS_PER_MS

MARGIN_NS: Final = 1_000 * NS_PER_MS


class LogStartSample(NamedTuple):
    """One key's log start and high watermark, as its leader answered both in one request."""

    asked_ns: int
    answered_ns: int
    key: int
    leader: int
    log_start: int
    high_watermark: int

    @property
    def past_hw(self) -> bool:
        return self.log_start > self.high_watermark


class LogStarts:
    """A run's answers per key, and what they let the checker excuse."""

    def __init__(self, samples: Iterable[LogStartSample], margin_ns: int = MARGIN_NS) -> None:
        self.margin_ns = margin_ns
        self.by_key: dict[int, list[LogStartSample]] = defaultdict(list)
        for sample in sorted(samples, key=lambda s: s.asked_ns):
            self.by_key[sample.key].append(sample)
        self._asked_ns = {key: [s.asked_ns for s in samples]
                          for key, samples in self.by_key.items()}
        self._highest = {key: list(accumulate((s.log_start for s in samples), max))
                         for key, samples in self.by_key.items()}
        self._deleted_above_hw = {key: [(s.high_watermark, s.log_start)
                                        for s in samples if s.past_hw]
                                  for key, samples in self.by_key.items()}

    def floor(self, key: int) -> int:
        """The highest log start any answer showed for `key` (0 without answers)."""
        highest = self._highest.get(key)
        return highest[-1] if highest else 0

    def floor_at(self, key: int, time_ns: int) -> int:
        """At least the log start at `time_ns`: the highest answered up to the first answer
        asked more than the margin after it (the last one answered when none was)."""
        highest = self._highest.get(key)
        if not highest:
            return 0
        after = bisect.bisect_right(self._asked_ns[key], time_ns + self.margin_ns)
        return highest[min(after, len(highest) - 1)]

    def deleted_above_hw(self, key: int, offset: int) -> bool:
        """Whether an answer showed `offset` deleted while it was above the HW."""
        return any(hw <= offset < start for hw, start in self._deleted_above_hw.get(key, ()))

    def retained_away(self, key: int, offset: int) -> bool:
        """Whether retention may have deleted `offset` as it is allowed to."""
        return offset < self.floor(key) and not self.deleted_above_hw(key, offset)


NO_LOG_STARTS: Final = LogStarts(())


def find_log_start_past_hw(ops: Iterable[Op], log_starts: LogStarts,
                           findings: Findings) -> None:
    acked: dict[int, dict[int, int]] = defaultdict(dict)
    for op in ops:
        if op.f == "send" and op.type == "ok":
            for record in op.writes:
                if record.offset is not None:
                    acked[record.key][record.offset] = record.value
    for key, samples in sorted(log_starts.by_key.items()):
        episodes: list[list[LogStartSample]] = []
        previous: LogStartSample | None = None
        for sample in samples:
            if sample.past_hw:
                if (previous is None or not previous.past_hw
                        or previous.leader != sample.leader):
                    episodes.append([])
                episodes[-1].append(sample)
            previous = sample
        for episode in episodes:
            first, last = episode[0], episode[-1]
            findings.add(Anomaly.LOG_START_PAST_HW, {
                "key": key, "leader": first.leader, "answers": len(episode),
                "asked_ns": [first.asked_ns, last.asked_ns],
                "log_start": [first.log_start, last.log_start],
                "high_watermark": [first.high_watermark, last.high_watermark],
                "acked_values_deleted": [
                    v for o, v in sorted(acked[key].items())
                    if any(s.high_watermark <= o < s.log_start for s in episode)],
            })
