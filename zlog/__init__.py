"""zlog: a distributed, replicated, partitioned event log."""

from typing import TYPE_CHECKING

from zlog.errors import ErrorCode, ZlogError

if TYPE_CHECKING:
    from zlog.client import (
        Admin,
        BatchMetadata,
        Consumer,
        ConsumerRecord,
        NewTopic,
        Producer,
        RecordMetadata,
        TopicPartition,
    )

__version__ = "0.1.0"

__all__ = [
    "Admin",
    "BatchMetadata",
    "Consumer",
    "ConsumerRecord",
    "ErrorCode",
    "NewTopic",
    "Producer",
    "RecordMetadata",
    "TopicPartition",
    "ZlogError",
]

# The client classes load on first use, so that the broker's processes, which import
# `zlog.errors` and the like, do not load the client library (and its sockets) as well.
_CLIENT_NAMES = frozenset(__all__) - {"ErrorCode", "ZlogError"}


def __getattr__(name: str) -> object:
    if name in _CLIENT_NAMES:
        from zlog import client  # noqa: PLC0415  (deferred on purpose, see above)

        return getattr(client, name)
    raise AttributeError(f"module 'zlog' has no attribute {name!r}")
