"""Which anomalies make a run invalid, given how its producers were configured.

Some anomalies are bugs under any setting: two values at one offset, a read of a failed
write, a torn batch, a committed offset going back, a consumer skipping records, a leader
deleting records its HW does not cover yet, a replica back on an empty disk elected where it
was the only one in sync. Others are
what the settings allow: without idempotence a retry may append twice, and with acks=1 a
leader failover may lose acknowledged writes (except when the only faults are worker kills,
which the shared-memory ring survives: the run says so with `loss_is_error`). Those are still
counted, only not held against the run. min.insync.replicas binds only acks=all writes, so an
acknowledgement under it (acked-under-min-isr) is an error exactly then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from zlog_jepsen.checker.anomaly import Anomaly

ALWAYS_ERRORS: Final = frozenset(
    {
        Anomaly.INCONSISTENT_OFFSET,
        Anomaly.ABORTED_READ,
        Anomaly.POLL_SKIP,
        Anomaly.NONMONOTONIC_POLL,
        Anomaly.INT_POLL_SKIP,
        Anomaly.INT_NONMONOTONIC_POLL,
        Anomaly.BATCH_TEAR,
        Anomaly.INT_SEND_SKIP,
        Anomaly.INT_NONMONOTONIC_SEND,
        Anomaly.COMMITTED_OFFSET_REGRESSION,
        Anomaly.GROUP_SKIP,
        Anomaly.LOG_START_PAST_HW,
        Anomaly.WIPED_REPLICA_ELECTED,
    }
)
"""Errors under any producer settings (excused poll jumps are never counted as these)."""

LOSS: Final = frozenset({Anomaly.LOST_WRITE, Anomaly.LOST_ACKED_FINAL, Anomaly.PHANTOM_READ})


@dataclass(frozen=True)
class CheckConfig:
    """The producer settings of the run, which decide the verdict matrix."""

    acks_all: bool = True
    idempotent: bool = True
    max_in_flight: int = 5
    loss_is_error: bool | None = None
    """Whether lost writes fail the run; by default exactly when acks=all."""


def errors(config: CheckConfig, *, final_read: bool) -> frozenset[Anomaly]:
    """The anomalies that make a run invalid under `config`.

    `unseen` (acknowledged, never polled) cannot tell lost from late; when the run has a
    final full read, lost-acked-final decides instead and unseen is only counted.
    """
    found = set(ALWAYS_ERRORS)
    loss = config.acks_all if config.loss_is_error is None else config.loss_is_error
    if config.acks_all:
        found.add(Anomaly.ACKED_UNDER_MIN_ISR)
    if loss:
        found |= LOSS
        if not final_read:
            found.add(Anomaly.UNSEEN)
    if config.idempotent:
        found.add(Anomaly.DUPLICATE)
    if config.idempotent or config.max_in_flight == 1:
        found.add(Anomaly.NONMONOTONIC_SEND)
    return frozenset(found)
