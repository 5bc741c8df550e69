"""What a client knows about the cluster, and its connections to it.

`MetadataCache` (pure) holds the last Metadata answer per topic: partition counts and, per
partition, the data endpoint of the worker that leads it. Clients talk to that worker
directly (DESIGN.md section 1); an answer saying the metadata is stale (NOT_LEADER_OR_FOLLOWER,
a lost connection...: retries.py), or a partition it names no leader for, makes the caller
`invalidate` the topic, and the next use refreshes it. A topic the control plane says does
not exist is a `DefiniteError`: it reaches the caller at once.

`Connections` owns one RpcClient per endpoint: the control endpoints (the bootstrap list, then
every broker's control endpoint learnt from metadata) and the data endpoints of workers.
Like RpcClient, it belongs to one thread. A client whose connection failed (`RpcClient.broken`)
is replaced by a fresh one the next time its endpoint is used, once its failures were read.

Bootstrap addresses are checked when the client is made, as Kafka's clients do: a malformed
address or port is INVALID_CONFIG at once, a host name that does not resolve is left out (and
INVALID_CONFIG when none is left). A control call tries each endpoint in turn within its one
timeout, and keeps going round (after `retry_backoff_ms`) while none answers.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Final

import zmq

from zlog.client.retries import Next, after_control_error, definite_if_control_says
from zlog.clock import monotonic_ms
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages import (
    Request,
    Response,
)
from zlog.transport.messages.admin import (
    BrokerMetadata,
    MetadataRequestV0,
    MetadataResponseV0,
)
from zlog.transport.rpc import RpcClient

if TYPE_CHECKING:
    from zlog.client.local_produce import LocalChannels

log = logging.getLogger("zlog.client")

CONTROL_CONNECT_TIMEOUT_MS: Final = 2_000
"""With other control endpoints left to try, one that has not connected by then is passed over."""
RETRY_BACKOFF_MS_DEFAULT: Final = 100
LOCAL_RETURN_LINGER_MS: Final = 1_000
"""How long a DEALER given up for a worker's shared-memory queue may still send what it holds."""


def _passed_over(error: ZlogError) -> bool:
    """A control endpoint failing a whole request with this is passed over for the next one
    (within the same call): it did not answer, it is stopping, or its error is retriable
    (NOT_CONTROLLER, a forward to the controller that failed...)."""
    return error.code == ErrorCode.BROKER_NOT_AVAILABLE or (
        error.retriable and after_control_error(error.code) is not Next.FAIL)


def parse_bootstrap(bootstrap: str | Sequence[str]) -> tuple[str, ...]:
    """Endpoints from "tcp://a:7400,b:7400" or a list; a bare host:port means tcp://.

    INVALID_CONFIG, with the offending address, for anything ZeroMQ could not connect to.
    """
    parts = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    endpoints = tuple(
        part if "://" in part else f"tcp://{part}" for part in (p.strip() for p in parts) if part
    )
    if not endpoints:
        raise ZlogError(ErrorCode.INVALID_CONFIG, f"no endpoint in bootstrap {bootstrap!r}")
    for endpoint in endpoints:
        _check_endpoint(endpoint)
    return endpoints


def _check_endpoint(endpoint: str) -> None:
    scheme, _, address = endpoint.partition("://")
    if scheme == "ipc" and address:
        return
    host, _, port = address.rpartition(":")
    if scheme != "tcp" or not host or not port.isdigit() or not 1 <= int(port) <= 65_535:
        raise ZlogError(
            ErrorCode.INVALID_CONFIG,
            f"bad bootstrap address {endpoint!r}: expected tcp://host:port with a port in "
            "1-65535 (or ipc://path)",
        )


def resolvable_endpoints(endpoints: Sequence[str]) -> tuple[str, ...]:
    """The endpoints whose host resolves; INVALID_CONFIG naming each failure if none does."""
    usable: list[str] = []
    failures: list[str] = []
    for endpoint in endpoints:
        problem = _resolution_problem(endpoint)
        if problem is None:
            usable.append(endpoint)
        else:
            failures.append(problem)
    if not usable:
        raise ZlogError(ErrorCode.INVALID_CONFIG,
                        "no bootstrap address resolves: " + "; ".join(failures))
    for problem in failures:
        log.warning("bootstrap address left out: %s", problem)
    return tuple(usable)


def _resolution_problem(endpoint: str) -> str | None:
    scheme, _, address = endpoint.partition("://")
    if scheme != "tcp":
        return None
    host = address.rpartition(":")[0].strip("[]")
    if host in {"*", "localhost"}:
        return None
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(host)
        return None
    try:
        socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError as error:
        return f"{endpoint}: cannot resolve host {host!r} ({error.strerror or error})"
    return None


@dataclass(frozen=True, slots=True)
class PartitionLeader:
    partition: int
    leader: int  # node id, -1 while there is none
    leader_epoch: int
    endpoint: str  # "" while there is no leader
    error_code: int
    ring_path: str = ""  # the leader's ring file on the leader's host, "" if unknown
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: tuple[PartitionLeader, ...]  # indexed by partition number


class MetadataCache:
    """Topic -> partitions -> leader endpoint, as last answered by the control plane."""

    def __init__(self) -> None:
        self._topics: dict[str, TopicInfo] = {}
        self.control_endpoints: tuple[str, ...] = ()
        self.brokers: dict[int, BrokerMetadata] = {}  # as the last answer listed them
        # Where each broker keeps its rings, as far as answers told (a broker tells only its
        # own, and the leader's ring path tells the leader's): kept across answers.
        self.ring_dirs: dict[int, str] = {}
        self.version = 0  # moves at every update and invalidation: what was derived is stale

    def update(self, response: MetadataResponseV0) -> dict[str, ZlogError]:
        """Store every topic the answer describes; returns the errors of those it could not."""
        self.version += 1
        self.control_endpoints = tuple(b.control_endpoint for b in response.brokers)
        self.brokers = {b.node_id: b for b in response.brokers}
        self.ring_dirs.update((b.node_id, b.ring_dir) for b in response.brokers if b.ring_dir)
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
                                    p.error_code, p.ring_path, p.replicas, p.isr)
                    for p in ordered
                ),
            )
            self.ring_dirs.update((p.leader, str(PurePath(p.ring_path).parent))
                                  for p in ordered if p.ring_path and p.leader >= 0)
        return errors

    def topic_names(self) -> list[str]:
        """The topics known, sorted."""
        return sorted(self._topics)

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def partition_count(self, name: str) -> int | None:
        info = self._topics.get(name)
        return None if info is None else len(info.partitions)

    def partition(self, topic: str, partition: int) -> PartitionLeader | None:
        info = self._topics.get(topic)
        if info is None or not 0 <= partition < len(info.partitions):
            return None
        return info.partitions[partition]

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

    def is_data_endpoint(self, endpoint: str) -> bool:
        """Whether a partition's leader is served at `endpoint` (a worker's, not a broker's
        control endpoint)."""
        return any(p.endpoint == endpoint for info in self._topics.values()
                   for p in info.partitions)

    def invalidate(self, topic: str) -> None:
        self.version += 1
        self._topics.pop(topic, None)


def _sleep_ms(duration_ms: int, cancelled: Callable[[], bool] | None) -> None:
    """Sleep, in slices when the sleeper may be cancelled meanwhile."""
    end_ms = monotonic_ms() + duration_ms
    while (left_ms := end_ms - monotonic_ms()) > 0:
        if cancelled is not None and cancelled():
            return
        time.sleep(min(left_ms, 50) / 1000)


def _no_control_endpoint(failures: dict[str, ZlogError], timeout_ms: int) -> ZlogError:
    """The last failure's code, with what every endpoint said."""
    if not failures:
        return ZlogError(ErrorCode.REQUEST_TIMED_OUT,
                         f"no control endpoint answered within {timeout_ms} ms")
    last = list(failures.values())[-1]
    said = "; ".join(error.message for error in failures.values())
    return ZlogError(last.code, f"no control endpoint answered within {timeout_ms} ms: {said}")


def _error(code: int, message: str, topic: str) -> ZlogError:
    """A topic's error in a Metadata answer: the control plane's, so its "no such topic" is
    definite (retries.py)."""
    try:
        known = ErrorCode(code)
    except ValueError:
        known = ErrorCode.UNKNOWN_SERVER_ERROR
    if known == ErrorCode.NONE:
        known = ErrorCode.UNKNOWN_SERVER_ERROR
    return definite_if_control_says(
        ZlogError(known, message or f"topic {topic}: {known.name.lower()}"))


class Connections:
    """RpcClients by endpoint, plus the metadata they are chosen by. One owning thread."""

    def __init__(self, bootstrap: str | Sequence[str], *, max_in_flight: int = 64,
                 retry_backoff_ms: int = RETRY_BACKOFF_MS_DEFAULT,
                 local: LocalChannels | None = None) -> None:
        self.bootstrap = resolvable_endpoints(parse_bootstrap(bootstrap))
        self.metadata = MetadataCache()
        self.retry_backoff_ms = retry_backoff_ms
        self._max_in_flight = max_in_flight
        self._clients: dict[str, RpcClient] = {}
        self._control_index = 0
        self._local = local  # a local producer's: workers on this host through shared memory
        # Bumped whenever a client is opened, closed or broken, so that a caller polling the
        # clients' sockets rebuilds its poller only when the set of sockets changed.
        self.generation = 0

    def client(self, endpoint: str) -> RpcClient:
        """The client for `endpoint`: a fresh one in place of a broken one whose failures were
        all read (a broken one still holding results is returned; its sends fail at once)."""
        rpc = self._clients.get(endpoint)
        if rpc is not None and rpc.broken is not None and not rpc.has_results:
            rpc.close()
            rpc = None
        elif (rpc is not None and self._local is not None and not rpc.in_flight
              and self._local.may_return(endpoint, rpc)
              and self.metadata.is_data_endpoint(endpoint)):
            rpc = self._return_to_local(endpoint, rpc)
        if rpc is None:
            rpc = self._open(endpoint)
            self._clients[endpoint] = rpc
            self.generation += 1
        return rpc

    def _return_to_local(self, endpoint: str, network: RpcClient) -> RpcClient:
        """The worker at `endpoint` was not taking local producers a while ago: the local
        connection if it takes one now, else `network` still."""
        assert self._local is not None
        local = self._local.open(endpoint, max_in_flight=self._max_in_flight,
                                 on_broken=self._on_broken)
        if local is None:
            return network
        # Nothing is in flight on the DEALER, but an acks=0 request may still be queued.
        network.close(linger_ms=LOCAL_RETURN_LINGER_MS)
        self._clients[endpoint] = local
        self.generation += 1
        return local

    def _open(self, endpoint: str) -> RpcClient:
        """Through shared memory to a worker on this host that takes it (a local producer's
        connections, local_produce.py), else a DEALER."""
        if self._local is not None and self.metadata.is_data_endpoint(endpoint):
            local = self._local.open(endpoint, max_in_flight=self._max_in_flight,
                                     on_broken=self._on_broken)
            if local is not None:
                return local
        try:
            return RpcClient(endpoint, max_in_flight=self._max_in_flight,
                             on_broken=self._on_broken)
        except zmq.ZMQError as error:
            raise ZlogError(
                ErrorCode.NETWORK_EXCEPTION, f"cannot connect to {endpoint!r}: {error}"
            ) from None

    def _on_broken(self) -> None:
        self.generation += 1

    def clients(self) -> Iterable[RpcClient]:
        return self._clients.values()

    def _control_endpoints(self) -> tuple[str, ...]:
        learnt = tuple(e for e in self.metadata.control_endpoints if e not in self.bootstrap)
        return self.bootstrap + learnt

    def call_control(
        self, msg: Request, timeout_ms: int, *, cancelled: Callable[[], bool] | None = None
    ) -> Response:
        """A call to the control plane: each control endpoint in turn, round after round (with
        `retry_backoff_ms` between rounds), until one answers or `timeout_ms` is spent.

        An endpoint that refuses, drops, or does not connect within CONTROL_CONNECT_TIMEOUT_MS
        while others are left is passed over; the error at the end names what each said.
        `cancelled` ends the call early (the owner is closing).
        """
        deadline_ms = monotonic_ms() + timeout_ms
        failures: dict[str, ZlogError] = {}
        while True:
            endpoints = self._control_endpoints()
            for _ in range(len(endpoints)):
                endpoint = endpoints[self._control_index % len(endpoints)]
                remaining_ms = deadline_ms - monotonic_ms()
                if remaining_ms <= 0 or (cancelled is not None and cancelled()):
                    break
                connect_timeout_ms = (
                    min(remaining_ms, CONTROL_CONNECT_TIMEOUT_MS) if len(endpoints) > 1 else None
                )
                try:
                    return self.client(endpoint).call(
                        msg, remaining_ms, connect_timeout_ms=connect_timeout_ms,
                        cancelled=cancelled)
                except ZlogError as error:
                    if not _passed_over(error):
                        raise
                    failures[endpoint] = error
                    self._control_index += 1
                    self._drop(endpoint)  # a fresh socket drops replies meant for the old one
            remaining_ms = deadline_ms - monotonic_ms()
            if remaining_ms <= 0 or (cancelled is not None and cancelled()):
                raise _no_control_endpoint(failures, timeout_ms)
            _sleep_ms(min(self.retry_backoff_ms, remaining_ms), cancelled)

    def call_endpoint(self, endpoint: str, msg: Request, timeout_ms: int, *,
                      cancelled: Callable[[], bool] | None = None) -> Response:
        """One call to one endpoint, connected within the same timeout; a failure drops its
        client (a fresh socket drops replies meant for the old one) and raises. `cancelled`
        ends a long call early (the owner is closing)."""
        try:
            return self.client(endpoint).call(msg, timeout_ms, connect_timeout_ms=timeout_ms,
                                              cancelled=cancelled)
        except ZlogError:
            self._drop(endpoint)
            raise

    def refresh(
        self, topics: Sequence[str] | None, timeout_ms: int, *,
        cancelled: Callable[[], bool] | None = None, elsewhere: bool = False,
    ) -> dict[str, ZlogError]:
        """Ask for metadata of `topics` (None: all); returns per-topic errors.

        `elsewhere`: ask the next control endpoint first. After a leader refused a request
        (NOT_LEADER_OR_FOLLOWER), the broker whose answer named it may be cut off from the
        controller and answering from metadata it can no longer update: a client that kept
        asking it would never learn the new leader.
        """
        if elsewhere:
            self.skip_control_endpoint()
        response = self.call_control(
            MetadataRequestV0(None if topics is None else tuple(topics)), timeout_ms,
            cancelled=cancelled,
        )
        if not isinstance(response, MetadataResponseV0):
            raise ZlogError(ErrorCode.UNKNOWN_SERVER_ERROR, "metadata answered with the wrong api")
        return self.metadata.update(response)

    def skip_control_endpoint(self) -> None:
        """The next control call starts at the next control endpoint: the last one's answer
        may be stale (a broker cut off from the controller), or it could not help."""
        self._control_index += 1

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
