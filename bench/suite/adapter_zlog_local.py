"""zlog with its local consumer: the same broker and producer as `adapter_zlog`, and a
`Consumer(local=True, local_zero_copy=True)` that reads the partition's shared-memory ring
directly (no fetch request, no socket, batches decoded in place), spinning on the ring head for
up to LOCAL_SPIN_US before it sleeps. Every batch it counts is checked with `views_intact()`.
"""

from __future__ import annotations

from typing import Any, Final

from bench.suite import adapter_zlog
from bench.suite.common import Spec

NAME: Final = "zlog_local"


class Server(adapter_zlog.Server):
    def version(self) -> str:
        return super().version() + ", local zero-copy consumer"


def produce(spec: Spec) -> dict[str, Any]:
    return adapter_zlog.produce(spec)


def consume(spec: Spec) -> dict[str, Any]:
    return adapter_zlog.consume(spec | {"local": True})


def latency_send(spec: Spec) -> dict[str, Any]:
    return adapter_zlog.latency_send(spec)


def latency_receive(spec: Spec) -> dict[str, Any]:
    return adapter_zlog.latency_receive(spec | {"local": True})
