"""The committed ISR of every key's partition, sampled from the controller while a run goes on.

The acked-under-min-isr check (zlog_jepsen.checker.min_isr) lays each acknowledged write's
window against the spans in which its partition's committed ISR was below
min.insync.replicas. The metadata log holds every committed ISR in order, but no time, so
after the run it could not say which writes fell inside a span; a sample taken during the run
can, on the history's own clock (`time.time_ns`). The controller is asked because it commits
ISR changes: its copy trails the committed state least. One thread of the harness's process
asks every `interval_s` (a DescribeCluster to find the controller, then a Metadata to it),
over direct connections the nemesis never cuts; a sample nobody answered is skipped.

Each sample is one line of `isr.jsonl`:

    {"asked_ns": ..., "answered_ns": ..., "key": 1, "isr": [1, 3], "leader_epoch": 4}
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from zlog.client import Admin
from zlog.errors import ZlogError
from zlog.transport.messages import MetadataRequestV0, MetadataResponseV0, PartitionMetadata
from zlog.transport.rpc import RpcClient
from zlog_jepsen.checker.min_isr import IsrSample
from zlog_jepsen.cluster import HarnessCluster
from zlog_jepsen.history import HistoryFormatError

INTERVAL_S: Final = 0.1
CALL_TIMEOUT_MS: Final = 1_000


class IsrWatch:
    """Samples `topic`'s ISRs into `path` from `start` until `stop`."""

    def __init__(self, cluster: HarnessCluster, topic: str, path: Path,
                 interval_s: float = INTERVAL_S) -> None:
        self.cluster = cluster
        self.topic = topic
        self.path = path
        self.interval_s = interval_s
        self.samples = 0
        self._admin: Admin | None = None
        self._rpcs: dict[str, RpcClient] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="isr-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with self.path.open("w", encoding="utf-8") as out:
            while not self._stop.wait(self.interval_s):
                try:
                    lines = self._sample()
                except (ZlogError, AssertionError, KeyError):
                    self._close()  # the broker it asked may be the one down: ask afresh
                    continue
                out.writelines(lines)
                out.flush()
        self._close()

    def _sample(self) -> list[str]:
        """One Metadata answer of the controller, as lines; one connection per broker kept
        from sample to sample (a new socket ten times a second only churns ZeroMQ)."""
        if self._admin is None:
            self._admin = Admin(self.cluster.bootstrap, request_timeout_ms=CALL_TIMEOUT_MS)
        controller = self.cluster.broker(self._admin.describe_cluster().controller_id)
        rpc = self._rpcs.get(controller.endpoint)
        if rpc is None:
            rpc = self._rpcs[controller.endpoint] = RpcClient(controller.endpoint)
        asked_ns = time.time_ns()
        answer = rpc.call(MetadataRequestV0((self.topic,)), CALL_TIMEOUT_MS)
        answered_ns = time.time_ns()
        if not isinstance(answer, MetadataResponseV0):
            raise AssertionError(f"Metadata answered with {type(answer).__name__}")
        self.samples += 1
        return [line for topic in answer.topics
                for line in sample_lines(asked_ns, answered_ns, topic.partitions)]

    def _close(self) -> None:
        if self._admin is not None:
            self._admin.close()
        for rpc in self._rpcs.values():
            rpc.close()
        self._admin = None
        self._rpcs.clear()


def sample_lines(asked_ns: int, answered_ns: int,
                 partitions: Iterable[PartitionMetadata]) -> list[str]:
    """One line of `isr.jsonl` per partition of a Metadata answer."""
    return [json.dumps({"asked_ns": asked_ns, "answered_ns": answered_ns,
                        "key": p.partition, "isr": sorted(p.isr),
                        "leader_epoch": p.leader_epoch}) + "\n"
            for p in partitions]


def read_isr_samples(path: Path) -> list[IsrSample]:
    """The samples of `path`; a line that is not one is refused with where and why."""
    samples: list[IsrSample] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            try:
                raw = json.loads(line)
                samples.append(IsrSample(int(raw["asked_ns"]), int(raw["answered_ns"]),
                                         int(raw["key"]), tuple(int(n) for n in raw["isr"]),
                                         int(raw["leader_epoch"])))
            except (ValueError, KeyError, TypeError) as error:
                raise HistoryFormatError(f"{path}:{number}: not an ISR sample: {error}") from None
    return samples
