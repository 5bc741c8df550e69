"""What a request handler is given: the gateway it runs in and the request with its client."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zlog.kafka.requests import KafkaRequest
from zlog.kafka_gateway.native import Native
from zlog.kafka_gateway.topology import KafkaNode


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    """This broker as its gateway answers for it."""

    node_id: int
    advertised: str  # host:port Kafka clients are told for this gateway
    default_partitions: int = 1
    default_replication_factor: int = 1


@dataclass(frozen=True, slots=True)
class Gateway:
    settings: GatewaySettings
    native: Native
    node: KafkaNode


@dataclass(frozen=True, slots=True)
class Call:
    request: KafkaRequest
    client_host: str  # the peer's address, as group descriptions show it

    @property
    def body(self) -> Any:
        return self.request.body

    @property
    def version(self) -> int:
        return self.request.api_version

    def field(self, *names: str, default: Any = None) -> Any:
        """The body's field under the first of `names` this version has (kio names a field
        differently across versions, e.g. topic_names and topics)."""
        for name in names:
            if hasattr(self.body, name):
                return getattr(self.body, name)
        return default


Handler = Callable[[Gateway, Call], dict[str, Any]]


def milliseconds(value: Any, default_ms: int) -> int:
    """kio's timedelta fields as int milliseconds; absent or negative: the default."""
    if isinstance(value, datetime.timedelta):
        ms = round(value.total_seconds() * 1000)
        return ms if ms >= 0 else default_ms
    return default_ms
