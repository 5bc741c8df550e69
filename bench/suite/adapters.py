"""The systems the suite compares, by name, and what each of them can run."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Final

ZLOG: Final = "zlog"
ZLOG_LOCAL: Final = "zlog_local"  # zlog with Consumer(local=True, local_zero_copy=True)
ZLOG_TUNED: Final = "zlog_tuned"  # zlog with tuned client settings (zlog itself: the defaults)
ZMQ_RELAY: Final = "zmq_relay"  # the latency floor of a Python broker on ZeroMQ
PEERS: Final = ("redis", "nats", "zmq", ZMQ_RELAY)
ZLOG_SYSTEMS: Final = (ZLOG, ZLOG_TUNED, ZLOG_LOCAL)
ALL_SYSTEMS: Final = (*ZLOG_SYSTEMS, *PEERS)

# Rows per producer call (zlog's send_many, a Redis pipeline, a zmq frame; NATS's publish_async
# window is bounded by its pending limit instead).
PRODUCE_CHUNK: Final = {"zlog": 10_000, "zlog_tuned": 10_000, "zlog_local": 10_000,
                        "redis": 1_000, "nats": 1_000,
                        "zmq": 1_000, ZMQ_RELAY: 1_000}

# What a system cannot run, and why (the JSON and the table say so instead of a number).
NOT_APPLICABLE: Final = {
    ("redis", "acks=all"): "one node, no replicas: acks=all is the same write as acks=1",
    ("nats", "acks=all"): "a one-replica stream: acks=all is the same write as acks=1",
    ("zmq", "acks=all"): "no acknowledgements",
    ("zmq", "partitions"): "no partitions",
    ("redis", "batches"): "no batch-level read in Redis Streams",
    ("nats", "batches"): "no batch-level read in JetStream",
    ("zmq", "consume"): "nothing is stored: no consume from the beginning",
    (ZMQ_RELAY, "produce"): "a latency floor only: the relay stores nothing",
    (ZMQ_RELAY, "consume"): "a latency floor only: the relay stores nothing",
    ("zlog_local", "produce"): "the same producer as zlog (only the headline case runs, to "
                               "store what the local consumer reads)",
}


def adapter_module(system: str) -> ModuleType:
    return importlib.import_module(f"bench.suite.adapter_{system}")


def server_for(system: str) -> Any:
    server: Any = adapter_module(system).Server()
    return server
