"""The checker's entry point: every check over one history, and the verdict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zlog_jepsen.checker.anomaly import Anomaly, Example, Findings
from zlog_jepsen.checker.derived import derive
from zlog_jepsen.checker.groups import find_group_anomalies
from zlog_jepsen.checker.loss import (
    find_aborted_reads,
    find_lost_after_final_read,
    find_lost_writes,
    find_unseen,
)
from zlog_jepsen.checker.min_isr import IsrHistory, find_acked_under_min_isr
from zlog_jepsen.checker.offsets import find_offset_anomalies
from zlog_jepsen.checker.ops import client_ops
from zlog_jepsen.checker.polls import find_poll_anomalies
from zlog_jepsen.checker.retention import NO_LOG_STARTS, LogStarts, find_log_start_past_hw
from zlog_jepsen.checker.sends import find_send_anomalies
from zlog_jepsen.checker.verdict import CheckConfig, errors
from zlog_jepsen.checker.wiped_replicas import find_wiped_replica_elected
from zlog_jepsen.history import Event, FinalRead

CHECKS = (
    find_offset_anomalies,
    find_lost_writes,
    find_lost_after_final_read,
    find_aborted_reads,
    find_unseen,
    find_poll_anomalies,
    find_send_anomalies,
    find_group_anomalies,
)


@dataclass(frozen=True)
class CheckResult:
    """Per anomaly a count and the first examples; `failed_by` are those that make it invalid."""

    valid: bool
    counts: dict[Anomaly, int]
    examples: dict[Anomaly, list[Example]]
    allowed: dict[Anomaly, int]
    failed_by: tuple[Anomaly, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "failed_by": [str(a) for a in self.failed_by],
            "anomalies": {
                str(a): {"count": n, "examples": self.examples[a]} for a, n in self.counts.items()
            },
            "allowed": {str(a): n for a, n in self.allowed.items() if n},
        }


def check(history: list[Event], final: FinalRead | None = None,
          config: CheckConfig | None = None, isr: IsrHistory | None = None,
          log_starts: LogStarts = NO_LOG_STARTS) -> CheckResult:
    """Judge a history. `final` is the full read of every key after the cluster healed and
    the final drain finished; without it the checks that need it (lost-acked-final,
    phantom-read, batch-tear) find nothing. `isr` is the committed ISR sampled during the
    run; without it acked-under-min-isr finds nothing. `log_starts` are the log starts and
    high watermarks the leaders answered during a run that shrank retention: what they show
    deleted as retention may is excused, and a log start past the HW is an anomaly; without
    them nothing is excused."""
    config = config or CheckConfig()
    derived = derive(client_ops(history), final, log_starts)
    findings = Findings()
    for find in CHECKS:
        find(derived, findings)
    if isr is not None:
        find_acked_under_min_isr(derived.ops, isr, findings)
    find_log_start_past_hw(derived.ops, log_starts, findings)
    find_wiped_replica_elected(history, findings)
    judged = errors(config, final_read=final is not None)
    failed_by = tuple(a for a in Anomaly if a in judged and findings.counts[a])
    return CheckResult(
        valid=not failed_by,
        counts=findings.counts,
        examples=findings.examples,
        allowed=findings.allowed,
        failed_by=failed_by,
    )
