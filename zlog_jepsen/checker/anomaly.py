"""The anomalies' names and the collector each check reports into."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Final


class Anomaly(StrEnum):
    """Every anomaly the checker reports (docs/reliability.md §8.3), Jepsen's name if it has one."""

    INCONSISTENT_OFFSET = "inconsistent-offset"
    DUPLICATE = "duplicate"
    LOST_WRITE = "lost-write"
    LOST_ACKED_FINAL = "lost-acked-final"
    PHANTOM_READ = "phantom-read"
    ABORTED_READ = "aborted-read"
    POLL_SKIP = "poll-skip"
    NONMONOTONIC_POLL = "nonmonotonic-poll"
    INT_POLL_SKIP = "int-poll-skip"
    INT_NONMONOTONIC_POLL = "int-nonmonotonic-poll"
    NONMONOTONIC_SEND = "nonmonotonic-send"
    BATCH_TEAR = "batch-tear"
    INT_SEND_SKIP = "int-send-skip"
    INT_NONMONOTONIC_SEND = "int-nonmonotonic-send"
    COMMITTED_OFFSET_REGRESSION = "committed-offset-regression"
    GROUP_SKIP = "group-skip"
    ACKED_UNDER_MIN_ISR = "acked-under-min-isr"
    LOG_START_PAST_HW = "log-start-past-hw"
    WIPED_REPLICA_ELECTED = "wiped-replica-elected"
    UNSEEN = "unseen"


MAX_EXAMPLES: Final = 10
"""Examples kept per anomaly; the count is always complete."""

Example = dict[str, Any]


class Findings:
    """What the checks found: per anomaly, a count and the first examples.

    `allow` records a case the rules excuse (a poll skip across a rebalance under subscribe,
    a record retention deleted as it may), so that a run shows how often the excuse was used
    without it counting against the run.
    """

    def __init__(self) -> None:
        self.counts: dict[Anomaly, int] = dict.fromkeys(Anomaly, 0)
        self.examples: dict[Anomaly, list[Example]] = {a: [] for a in Anomaly}
        self.allowed: dict[Anomaly, int] = dict.fromkeys(Anomaly, 0)

    def add(self, anomaly: Anomaly, example: Example, count: int = 1) -> None:
        self.counts[anomaly] += count
        if len(self.examples[anomaly]) < MAX_EXAMPLES:
            self.examples[anomaly].append(example)

    def allow(self, anomaly: Anomaly, count: int = 1) -> None:
        self.allowed[anomaly] += count
