"""What every running broker tells clients, asked of each on a thread of its own.

A heal that watches the brokers' Metadata answers (zlog_jepsen.sole_isr) must see a state
that lasts a few hundred milliseconds, and must not wait on a broker that does not answer (one
restarting, catching up on the metadata log) before asking the others. So each broker is asked
every `interval_s` on a thread of its own, over a connection kept from one question to the
next and dropped after a failure; a broker not running is skipped until it is. What `digest`
makes of each answer is kept, once per distinct item, until `take` hands it over.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from types import TracebackType
from typing import Final, Generic, TypeVar

from zlog.errors import ZlogError
from zlog.transport.messages.admin import MetadataRequestV0, MetadataResponseV0, TopicMetadata
from zlog.transport.rpc import RpcClient
from zlog_jepsen.cluster import HarnessCluster

CALL_TIMEOUT_MS: Final = 500
INTERVAL_S: Final = 0.05
T = TypeVar("T", bound=Hashable)


class BrokerWatch(Generic[T]):
    """Asks every broker of `cluster` for every topic's metadata until closed; `digest`
    turns broker `node`'s answer into the items kept."""

    def __init__(self, cluster: HarnessCluster,
                 digest: Callable[[int, tuple[TopicMetadata, ...]], Iterable[T]],
                 interval_s: float = INTERVAL_S) -> None:
        self.cluster = cluster
        self.digest = digest
        self.interval_s = interval_s
        self._kept: dict[T, None] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._watch, args=(node,), daemon=True,
                                          name=f"broker-watch-{node}")
                         for node in sorted(cluster.brokers)]
        for thread in self._threads:
            thread.start()

    def take(self) -> list[T]:
        """What the answers showed since the last take, in the order first seen."""
        with self._lock:
            kept, self._kept = list(self._kept), {}
        return kept

    def _watch(self, node: int) -> None:
        broker = self.cluster.broker(node)
        rpc: RpcClient | None = None
        while not self._stop.wait(self.interval_s):
            process = broker.process
            if process is None or process.poll() is not None:
                continue
            if rpc is None:
                rpc = RpcClient(broker.endpoint)
            try:
                answer = rpc.call(MetadataRequestV0(None), CALL_TIMEOUT_MS)
            except ZlogError:
                rpc.close()  # the broker may be the one restarting: ask afresh
                rpc = None
                continue
            if isinstance(answer, MetadataResponseV0):
                items = self.digest(node, answer.topics)
                with self._lock:
                    self._kept.update(dict.fromkeys(items))
        if rpc is not None:
            rpc.close()

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def __enter__(self) -> BrokerWatch[T]:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
