"""acked-under-min-isr: an acks=all write acknowledged while its partition's committed ISR was
below min.insync.replicas (docs/reliability.md §8.3).

The history cannot say what the ISR was; the metadata can. The harness samples the committed
ISR of every key's partition from the controller while the run goes on (zlog_jepsen.isr_watch),
each sample stamped with when it was asked and when it was answered, on the history's clock.
The metadata log itself holds every committed ISR in order but no time, so it cannot be laid
against the operations' windows; the samples can.

A **below-min span** is a run of consecutive samples of one key that all show the same ISR,
smaller than the minimum, in the same leader epoch. It runs from the first sample's answer
(the state was committed by then) to the last sample's question, both pulled in by
`margin_ns`. At the end, because the answer came from the controller's applied copy, which
may trail the committed state (a controller cut off from the quorum serves its last state
until it steps down, two metadata election timeouts). At the start, because the history's
times are when the harness wrote each event, one queue hop after the client process saw it:
an invocation written inside the span may have been sent just before it.

An ISR that grew back to the minimum and shrank to the same members again between two samples
would be missed and could make a span too long: a shrink needs a follower lagging for
replica.lag.time.max.ms or a broker fenced, and the nemesis rests for seconds between faults,
so within one sampling interval (100 ms) after a growth that does not happen.

A send is flagged when it completed ok and its whole invoke..ok window lies inside a span of
its key: then the leader acknowledged it at a moment the ISR was below the minimum. A window
that only overlaps a span is not: the write may have been acknowledged before the shrink.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from zlog_jepsen.checker.anomaly import Anomaly, Findings
from zlog_jepsen.checker.ops import Op
from zlog_jepsen.history import NS_PER_MS


class IsrSample(NamedTuple):
    """One key's committed ISR as the controller answered it."""

    asked_ns: int
    answered_ns: int
    key: int
    isr: tuple[int, ...]
    leader_epoch: int


@dataclass(frozen=True)
class IsrHistory:
    """The samples of a run, the topic's minimum and the allowance for a stale answer."""

    samples: Sequence[IsrSample]
    min_insync_replicas: int
    margin_ns: int = 1_000 * NS_PER_MS


class Span(NamedTuple):
    start_ns: int
    end_ns: int
    isr: tuple[int, ...]


def below_min_spans(history: IsrHistory) -> dict[int, list[Span]]:
    """Per key, the spans in which its committed ISR was surely below the minimum."""
    by_key: dict[int, list[IsrSample]] = defaultdict(list)
    for sample in history.samples:
        by_key[sample.key].append(sample)
    spans: dict[int, list[Span]] = {}
    for key, samples in by_key.items():
        samples.sort(key=lambda s: s.asked_ns)
        spans[key] = [
            Span(run[0].answered_ns + history.margin_ns,
                 run[-1].asked_ns - history.margin_ns, run[0].isr)
            for run in _runs(samples)
            if len(run[0].isr) < history.min_insync_replicas
        ]
    return spans


def _runs(samples: Iterable[IsrSample]) -> list[list[IsrSample]]:
    """Consecutive samples showing one state (the same ISR in the same leader epoch)."""
    runs: list[list[IsrSample]] = []
    for sample in samples:
        if runs and (runs[-1][-1].isr, runs[-1][-1].leader_epoch) == (
                sample.isr, sample.leader_epoch):
            runs[-1].append(sample)
        else:
            runs.append([sample])
    return runs


def find_acked_under_min_isr(ops: Iterable[Op], history: IsrHistory,
                             findings: Findings) -> None:
    spans = below_min_spans(history)
    for op in ops:
        if op.f != "send" or op.type != "ok" or op.completion is None:
            continue
        invoked_ns, acked_ns = op.invoke.time_ns, op.completion.time_ns
        for key in sorted({r.key for r in op.writes}):
            inside = next((s for s in spans.get(key, ())
                           if s.start_ns <= invoked_ns and acked_ns <= s.end_ns), None)
            if inside is not None:
                findings.add(Anomaly.ACKED_UNDER_MIN_ISR, {
                    "key": key, "op": op.index, "process": op.process,
                    "values": [r.value for r in op.writes if r.key == key],
                    "window_ns": [invoked_ns, acked_ns], "isr": list(inside.isr),
                    "span_ns": [inside.start_ns, inside.end_ns],
                    "min_insync_replicas": history.min_insync_replicas,
                })
