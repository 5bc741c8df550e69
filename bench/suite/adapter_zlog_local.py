"""zlog's local path: the same broker as `adapter_zlog`; in the latency cases a
`Producer(local=True)` that hands its requests to the leader's worker through a shared-memory
queue, and in every case a `Consumer(local=True, local_zero_copy=True)` that reads the
partition's shared-memory ring directly (no fetch request, no socket, batches decoded in
place), woken by the worker's doorbell. Every batch it counts is checked with
`views_intact()`. The produce cases keep the network producer, to compare the readers alone.
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
    return adapter_zlog.latency_send(spec | {"local": True})


def latency_receive(spec: Spec) -> dict[str, Any]:
    return adapter_zlog.latency_receive(spec | {"local": True})
