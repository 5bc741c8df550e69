"""zlog with the client settings a bulk user would tune: the same broker as `adapter_zlog`, and
a producer cutting send_many into 1 MiB batches with linger 5 ms and a consumer fetching 4 MiB
per partition. The suite reports it beside zlog at the client's defaults, labelled.
"""

from __future__ import annotations

from typing import Any, Final

from bench.suite import adapter_zlog
from bench.suite.common import Spec

NAME: Final = "zlog_tuned"


class Server(adapter_zlog.Server):
    def version(self) -> str:
        return super().version() + ", tuned client (1 MiB batches and fetches)"


def produce(spec: Spec) -> dict[str, Any]:
    return adapter_zlog.produce(spec | {"tuned": True})


def consume(spec: Spec) -> dict[str, Any]:
    return adapter_zlog.consume(spec | {"tuned": True})


def latency_send(spec: Spec) -> dict[str, Any]:
    return adapter_zlog.latency_send(spec | {"tuned": True})


def latency_receive(spec: Spec) -> dict[str, Any]:
    return adapter_zlog.latency_receive(spec | {"tuned": True})
