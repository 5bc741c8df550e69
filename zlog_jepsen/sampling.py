"""What the harness samples from the cluster while a run goes on, one JSON line per answer.

Some checks need the cluster's state over time, which the history does not hold: the
committed ISR (zlog_jepsen.isr_watch) and each partition's log start and high watermark
(zlog_jepsen.log_start_watch). A `Sampler` asks every `interval_s` on a thread of the
harness's own process, over direct connections the nemesis never cuts, and writes each answer
as lines stamped on the history's clock (`time.time_ns`); a sample nobody answered is skipped.
Connections are kept from sample to sample (a new socket ten times a second only churns
ZeroMQ) and dropped after a failure, since the broker asked may be the one down.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

from zlog.client import Admin
from zlog.errors import ZlogError
from zlog.transport.messages.admin import (
    MetadataRequestV0,
    MetadataResponseV0,
)
from zlog.transport.rpc import RpcClient
from zlog_jepsen.cluster import HarnessCluster
from zlog_jepsen.history import HistoryFormatError
from zlog_testbed.waiting import wait_until

INTERVAL_S: Final = 0.1
CALL_TIMEOUT_MS: Final = 1_000
LAST_SAMPLE_TIMEOUT_S: Final = 30.0
T = TypeVar("T")


class Sampler:
    """Samples `topic` into `path` from `start` until `stop` (`_sample` says what)."""

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
        self._thread = threading.Thread(target=self._run, name=type(self).__name__,
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def sample_once(self, timeout_s: float = LAST_SAMPLE_TIMEOUT_S) -> None:
        """One more sample after `stop`, appended, asked again until one is answered."""
        def answered() -> bool:
            lines = self._try_sample()
            if lines:
                with self.path.open("a", encoding="utf-8") as out:
                    out.writelines(lines)
            return bool(lines)

        try:
            wait_until(answered, timeout_s, interval_s=self.interval_s,
                       what=f"a last sample of {self.topic} for {self.path.name}")
        finally:
            self._close()

    def _run(self) -> None:
        with self.path.open("w", encoding="utf-8") as out:
            while not self._stop.wait(self.interval_s):
                out.writelines(self._try_sample())
                out.flush()
        self._close()

    def _try_sample(self) -> list[str]:
        try:
            return self._sample()
        except (ZlogError, AssertionError, KeyError):
            self._close()  # the broker it asked may be the one down: ask afresh
            return []

    def _sample(self) -> list[str]:
        """The lines of one sample; raises ZlogError (or AssertionError) when unanswered."""
        raise NotImplementedError

    def _controller_metadata(self) -> tuple[int, int, MetadataResponseV0]:
        """(asked_ns, answered_ns, the topic's Metadata as the controller answered it): the
        controller commits ISR changes, so its copy trails the committed state least."""
        if self._admin is None:
            self._admin = Admin(self.cluster.bootstrap, request_timeout_ms=CALL_TIMEOUT_MS)
        controller = self.cluster.broker(self._admin.describe_cluster().controller_id)
        asked_ns = time.time_ns()
        answer = self._rpc(controller.endpoint).call(MetadataRequestV0((self.topic,)),
                                                     CALL_TIMEOUT_MS)
        answered_ns = time.time_ns()
        if not isinstance(answer, MetadataResponseV0):
            raise AssertionError(f"Metadata answered with {type(answer).__name__}")
        return asked_ns, answered_ns, answer

    def _rpc(self, endpoint: str) -> RpcClient:
        rpc = self._rpcs.get(endpoint)
        if rpc is None:
            rpc = self._rpcs[endpoint] = RpcClient(endpoint)
        return rpc

    def _drop(self, endpoint: str) -> None:
        rpc = self._rpcs.pop(endpoint, None)
        if rpc is not None:
            rpc.close()

    def _close(self) -> None:
        if self._admin is not None:
            self._admin.close()
        for rpc in self._rpcs.values():
            rpc.close()
        self._admin = None
        self._rpcs.clear()


def read_samples(path: Path, what: str, build: Callable[[dict[str, Any]], T]) -> list[T]:
    """Every sample of `path`, each line's object made one by `build`; a line that is not one
    is refused with where and why."""
    samples: list[T] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            try:
                samples.append(build(json.loads(line)))
            except (ValueError, KeyError, TypeError) as error:
                raise HistoryFormatError(f"{path}:{number}: not {what}: {error}") from None
    return samples
