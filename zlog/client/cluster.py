"""What a client knows about the cluster, and its connections to it.

`MetadataCache` (pure) holds the last Metadata answer per topic: partition counts and, per
partition, the data endpoint of the worker that leads it. Clients talk to that worker
directly (DESIGN.md section 1); a NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION answer
makes the caller `invalidate` the topic, and the next use refreshes it.

`Connections` owns one RpcClient per endpoint: the control endpoints (the bootstrap list, then
every broker's control endpoint learnt from metadata) and the data endpoints of workers.
Like RpcClient, it belongs to one thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import zmq

from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages import MetadataRequestV0, MetadataResponseV0, Request, Response
from zlog.transport.rpc import RpcClient

DEFAULT_BOOTSTRAP = "tcp://127.0.0.1:7400"


def parse_bootstrap(bootstrap: str | Sequence[str]) -> tuple[str, ...]:
    """Endpoints from "tcp://a:7400,b:7400" or a list; a bare host:port means tcp://."""
    parts = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    endpoints = tuple(
        part if "://" in part else f"tcp://{part}" for part in (p.strip() for p in parts) if part
    )
    if not endpoints:
        raise ZlogError(ErrorCode.INVALID_REQUEST, f"no endpoint in bootstrap {bootstrap!r}")
    return endpoints


@dataclass(frozen=True, slots=True)
class PartitionLeader:
    partition: int
    leader: int  # node id, -1 while there is none
    leader_epoch: int
    endpoint: str  # "" while there is no leader
    error_code: int
    ring_path: str = ""  # the leader's ring file on the leader's host, "" if unknown


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: tuple[PartitionLeader, ...]  # indexed by partition number


class MetadataCache:
    """Topic -> partitions -> leader endpoint, as last answered by the control plane."""

    def __init__(self) -> None:
        self._topics: dict[str, TopicInfo] = {}
        self.control_endpoints: tuple[str, ...] = ()

    def update(self, response: MetadataResponseV0) -> dict[str, ZlogError]:
        """Store every topic the answer describes; returns the errors of those it could not."""
        self.control_endpoints = tuple(b.control_endpoint for b in response.brokers)
        errors: dict[str, ZlogError] = {}
        for topic in response.topics:
            if topic.error_code != ErrorCode.NONE:
                self._topics.pop(topic.name, None)
                errors[topic.name] = _error(topic.error_code, topic.error_message, topic.name)
                continue
            ordered = sorted(topic.partitions, key=lambda p: p.partition)
            if [p.partition for p in ordered] != list(range(len(ordered))) or not ordered:
                errors[topic.name] = ZlogError(
                    ErrorCode.LEADER_NOT_AVAILABLE, f"topic {topic.name} has no partition map yet"
                )
                self._topics.pop(topic.name, None)
                continue
            self._topics[topic.name] = TopicInfo(
                topic.name,
                tuple(
                    PartitionLeader(p.partition, p.leader, p.leader_epoch, p.endpoint,
                                    p.error_code, p.ring_path)
                    for p in ordered
                ),
            )
        return errors

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def partition_count(self, name: str) -> int | None:
        info = self._topics.get(name)
        return None if info is None else len(info.partitions)

    def leader_endpoint(self, topic: str, partition: int) -> str | None:
        """The data endpoint to send to, or None when it is not known (refresh metadata)."""
        info = self._topics.get(topic)
        if info is None or not 0 <= partition < len(info.partitions):
            return None
        leader = info.partitions[partition]
        if leader.leader < 0 or not leader.endpoint or leader.error_code != ErrorCode.NONE:
            return None
        return leader.endpoint

    def ring_path(self, topic: str, partition: int) -> str:
        """The leader's ring file for a partition with a known leader, else ""."""
        info = self._topics.get(topic)
        if self.leader_endpoint(topic, partition) is None or info is None:
            return ""
        return info.partitions[partition].ring_path

    def invalidate(self, topic: str) -> None:
        self._topics.pop(topic, None)

    def known_topics(self) -> Iterable[str]:
        return self._topics.keys()


def _error(code: int, message: str, topic: str) -> ZlogError:
    try:
        known = ErrorCode(code)
    except ValueError:
        known = ErrorCode.UNKNOWN_SERVER_ERROR
    if known == ErrorCode.NONE:
        known = ErrorCode.UNKNOWN_SERVER_ERROR
    return ZlogError(known, message or f"topic {topic}: {known.name.lower()}")


class Connections:
    """RpcClients by endpoint, plus the metadata they are chosen by. One owning thread."""

    def __init__(self, bootstrap: str | Sequence[str], *, max_in_flight: int = 64) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.metadata = MetadataCache()
        self._max_in_flight = max_in_flight
        self._clients: dict[str, RpcClient] = {}
        self._control_index = 0
        # Bumped whenever a client is opened or closed, so that a caller polling the clients'
        # sockets rebuilds its poller only when the set of sockets changed.
        self.generation = 0

    def client(self, endpoint: str) -> RpcClient:
        rpc = self._clients.get(endpoint)
        if rpc is None:
            try:
                rpc = RpcClient(endpoint, max_in_flight=self._max_in_flight)
            except zmq.ZMQError as error:
                raise ZlogError(
                    ErrorCode.NETWORK_EXCEPTION, f"cannot connect to {endpoint!r}: {error}"
                ) from None
            self._clients[endpoint] = rpc
            self.generation += 1
        return rpc

    def clients(self) -> Iterable[RpcClient]:
        return self._clients.values()

    def _control_endpoints(self) -> tuple[str, ...]:
        learnt = tuple(e for e in self.metadata.control_endpoints if e not in self.bootstrap)
        return self.bootstrap + learnt

    def call_control(self, msg: Request, timeout_ms: int) -> Response:
        """One call to a control endpoint; on a network failure the next call tries another."""
        endpoints = self._control_endpoints()
        endpoint = endpoints[self._control_index % len(endpoints)]
        try:
            return self.client(endpoint).call(msg, timeout_ms)
        except ZlogError as error:
            if error.code in (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION,
                              ErrorCode.NOT_CONTROLLER):
                self._control_index += 1
                self._drop(endpoint)  # a fresh socket drops replies meant for the old one
            raise

    def refresh(self, topics: Sequence[str] | None, timeout_ms: int) -> dict[str, ZlogError]:
        """Ask for metadata of `topics` (None: all); returns per-topic errors."""
        response = self.call_control(
            MetadataRequestV0(None if topics is None else tuple(topics)), timeout_ms
        )
        if not isinstance(response, MetadataResponseV0):
            raise ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR, "metadata answered with the wrong api")
        return self.metadata.update(response)

    def _drop(self, endpoint: str) -> None:
        rpc = self._clients.pop(endpoint, None)
        if rpc is not None:
            rpc.close()
            self.generation += 1

    def close(self, linger_ms: int = 0) -> None:
        for rpc in self._clients.values():
            rpc.close(linger_ms)
        self._clients.clear()
        self.generation += 1
