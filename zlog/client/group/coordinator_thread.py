"""A thread of a consumer's own for the calls to its group's coordinator that must not hold
up `poll`: the commit of revoked partitions, the committed offsets of gained ones, and
`commit_async` (docs/groups.md §11, "Client timing").

One thread runs the calls in the order they were submitted, over connections it opens and
closes itself (a zmq socket belongs to one thread), so an asynchronous commit never overtakes
an earlier one of the same partition, and the connection to the coordinator stays open from
one call to the next instead of being found again each time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from zlog.client.cluster import Connections
from zlog.client.group.coordinator import CoordinatorLink

T = TypeVar("T")


class CoordinatorThread:
    """Calls `fn(link)` one after the other on one thread; each submit returns its Future."""

    def __init__(self, bootstrap: str | Sequence[str], group_id: str, *,
                 request_timeout_ms: int, retry_backoff_ms: int) -> None:
        self._bootstrap = bootstrap
        self._group_id = group_id
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._link: CoordinatorLink | None = None  # only ever touched on the thread
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"zlog-group-{group_id}")

    def submit(self, fn: Callable[[CoordinatorLink], T]) -> Future[T]:
        return self._executor.submit(self._run, fn)

    def _run(self, fn: Callable[[CoordinatorLink], T]) -> T:
        if self._link is None:
            connections = Connections(self._bootstrap, retry_backoff_ms=self._retry_backoff_ms)
            self._link = CoordinatorLink(connections, self._group_id,
                                         request_timeout_ms=self._request_timeout_ms,
                                         retry_backoff_ms=self._retry_backoff_ms)
        return fn(self._link)

    def close(self) -> None:
        """Finish every call submitted so far, then close the thread's connections."""
        self._executor.submit(self._close_link)
        self._executor.shutdown(wait=True)

    def _close_link(self) -> None:
        if self._link is not None:
            self._link.connections.close()
            self._link = None
