"""The committed ISR of every key's partition, sampled from the controller while a run goes on.

The acked-under-min-isr check (zlog_jepsen.checker.min_isr) lays each acknowledged write's
window against the spans in which its partition's committed ISR was below
min.insync.replicas. The metadata log holds every committed ISR in order, but no time, so
after the run it could not say which writes fell inside a span; a sample taken during the run
can, on the history's own clock. The controller is asked because it commits ISR changes: its
copy trails the committed state least. Every `interval_s` (zlog_jepsen.sampling) a
DescribeCluster finds the controller, then a Metadata to it answers.

Each sample is one line of `isr.jsonl`:

    {"asked_ns": ..., "answered_ns": ..., "key": 1, "isr": [1, 3], "leader_epoch": 4}
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from zlog.transport.messages.admin import PartitionMetadata
from zlog_jepsen.checker.min_isr import IsrSample
from zlog_jepsen.sampling import Sampler, read_samples


class IsrWatch(Sampler):
    """Samples `topic`'s committed ISRs into `path` from `start` until `stop`."""

    def _sample(self) -> list[str]:
        asked_ns, answered_ns, answer = self._controller_metadata()
        self.samples += 1
        return [line for topic in answer.topics
                for line in sample_lines(asked_ns, answered_ns, topic.partitions)]


def sample_lines(asked_ns: int, answered_ns: int,
                 partitions: Iterable[PartitionMetadata]) -> list[str]:
    """One line of `isr.jsonl` per partition of a Metadata answer."""
    return [json.dumps({"asked_ns": asked_ns, "answered_ns": answered_ns,
                        "key": p.partition, "isr": sorted(p.isr),
                        "leader_epoch": p.leader_epoch}) + "\n"
            for p in partitions]


def _isr_sample(raw: dict[str, Any]) -> IsrSample:
    return IsrSample(int(raw["asked_ns"]), int(raw["answered_ns"]), int(raw["key"]),
                     tuple(int(n) for n in raw["isr"]), int(raw["leader_epoch"]))


def read_isr_samples(path: Path) -> list[IsrSample]:
    """The samples of `path`; a line that is not one is refused with where and why."""
    return read_samples(path, "an ISR sample", _isr_sample)
