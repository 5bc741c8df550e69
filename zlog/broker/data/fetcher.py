"""The follower fetcher: how the replicas a worker follows copy their leaders' logs.

A follower partition lives in a worker on the follower's host. Its worker keeps one DEALER per
leader endpoint (one leader worker elsewhere) and one Fetch v1 in flight on it, covering every
partition it follows there (Kafka's one fetcher per source broker). Each entry says where the
follower's log ends (everything below is already in its ring: the promise its fetch offset
makes), the leader epoch it believes current, and the epoch of its last batch. The answer is
applied by `replica_sync.apply_replica_fetch`: batches appended byte for byte, or the log cut
where it diverges from the leader's; the next fetch leaves at once, so the leader learns the new
log end (and can move its high watermark) one round trip after it sent the batches. The batches
reach the ring before that fetch leaves (the ring is what its offset promises) and the segment
file only after: the write into the file, most of a catching-up follower's work, overlaps the
leader's next answer instead of delaying the request for it.

An answer is applied only if the partition is still a follower at the epoch and log end the
fetch was sent with (a leader change meanwhile makes it stale). Errors back a leader's link off
`backoff_ms`: a leader epoch the leader does not know yet (or an epoch of the follower's own
that the leader cannot place: asked again, never taken for "no divergence"), a topic id that is
not the leader's (UNKNOWN_TOPIC_ID: one of the two brokers has not applied the topic's
re-creation yet), a connection that failed, a leader that moved (the supervisor's next assign
says where). A follower below the leader's log start
starts over there; one above the leader's log end (only after an unclean election) is cut to it.

Runs on the worker's loop thread; nothing here blocks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import zmq

from zlog.broker.data.partition import Partition
from zlog.broker.data.producer_state import ProducerStateTable
from zlog.broker.data.replica_sync import apply_replica_fetch, reset_out_of_range
from zlog.errors import CorruptSegmentError, ErrorCode, ZlogError
from zlog.transport.messages.data import (
    FetchRequestV1,
    FetchResponseV1,
    ReplicaFetchEntry,
    ReplicaFetchResult,
)
from zlog.transport.rpc import RpcClient, RpcResult
from zlog.types import TopicPartition

log = logging.getLogger(__name__)

FETCH_TIMEOUT_MARGIN_MS: Final = 5_000  # beyond the long poll, before a fetch counts as lost


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    replica_id: int  # this broker
    wait_max_ms: int  # the long poll (replica_fetch_wait_max_ms)
    partition_max_bytes: int  # replica_fetch_max_bytes
    response_max_bytes: int  # replica_fetch_response_max_bytes
    backoff_ms: int  # after an error (replica_fetch_backoff_ms)


@dataclass(slots=True)
class _Link:
    """One leader endpoint: its client, the partitions followed there, the fetch in flight."""

    endpoint: str
    rpc: RpcClient | None = None
    partitions: set[TopicPartition] = field(default_factory=set)
    in_flight: dict[TopicPartition, tuple[int, int]] | None = None  # tp -> (offset, epoch)
    backoff_until_ms: int = 0


@dataclass(slots=True)
class FetchProgress:
    """What one round of answers did."""

    appended_bytes: int = 0
    errors: int = 0


class Fetchers:
    """Every follower partition of one worker, grouped by its leader's endpoint."""

    def __init__(
        self,
        partitions: dict[TopicPartition, Partition],
        settings: FetcherSettings,
        *,
        broker_epoch: Callable[[], int],
        rebuild_producers: Callable[[TopicPartition], ProducerStateTable],
        context: zmq.Context[Any] | None = None,
    ) -> None:
        self.partitions = partitions  # the worker's table, shared with the data plane
        self.settings = settings
        self._broker_epoch = broker_epoch
        self._rebuild_producers = rebuild_producers
        self._context = context
        self._links: dict[str, _Link] = {}
        self._leader_of: dict[TopicPartition, str] = {}
        self._unflushed: set[TopicPartition] = set()  # batches in the ring, not yet in a file

    # -- which partitions follow whom ---------------------------------------------------------

    def follow(self, tp: TopicPartition, leader_endpoint: str) -> None:
        """Fetch `tp` from `leader_endpoint` from now on (a new leader: a new link)."""
        current = self._leader_of.get(tp)
        if current == leader_endpoint:
            return
        if current is not None:
            self.unfollow(tp)
        link = self._links.get(leader_endpoint)
        if link is None:
            link = self._links[leader_endpoint] = _Link(leader_endpoint)
        link.partitions.add(tp)
        self._leader_of[tp] = leader_endpoint

    def unfollow(self, tp: TopicPartition) -> None:
        endpoint = self._leader_of.pop(tp, None)
        if endpoint is None:
            return
        link = self._links[endpoint]
        link.partitions.discard(tp)
        if not link.partitions:
            self._close(link)
            del self._links[endpoint]

    def followed(self) -> dict[TopicPartition, str]:
        return dict(self._leader_of)

    # -- the loop's part ----------------------------------------------------------------------

    def sockets(self) -> list[zmq.Socket[bytes]]:
        found: list[zmq.Socket[bytes]] = []
        for link in self._links.values():
            if link.rpc is not None:
                found.extend(link.rpc.sockets)
        return found

    def next_deadline_ms(self) -> int | None:
        """When a backed-off link may fetch again (None: nothing waits on a timer)."""
        waits = [link.backoff_until_ms for link in self._links.values()
                 if link.in_flight is None and link.backoff_until_ms > 0]
        return min(waits) if waits else None

    def run(self, now_ms: int) -> FetchProgress:
        """Take in every answer that arrived, apply it, and send the fetches now due."""
        progress = FetchProgress()
        for link in list(self._links.values()):
            if link.rpc is not None and link.in_flight is not None:
                for result in link.rpc.poll_responses(0):
                    self._on_result(link, result, now_ms, progress)
            if link.in_flight is None and now_ms >= link.backoff_until_ms:
                self._send(link, now_ms)
        self._flush_appended()
        return progress

    def _flush_appended(self) -> None:
        """Move what this round appended from the rings into the segment files, once the next
        fetches are out. A disk that refuses it leaves the batches in the ring (stored), and
        the log's own tick tries again."""
        for tp in self._unflushed:
            partition = self.partitions.get(tp)
            if partition is None:
                continue
            try:
                partition.log.tick()
            except (ZlogError, OSError) as error:
                log.warning("could not move %s-%d's batches into its segment: %s", *tp, error)
        self._unflushed.clear()

    def close(self) -> None:
        for link in self._links.values():
            self._close(link)
        self._links.clear()
        self._leader_of.clear()

    # -- one link -------------------------------------------------------------------------

    def _send(self, link: _Link, now_ms: int) -> None:
        entries: list[ReplicaFetchEntry] = []
        asked: dict[TopicPartition, tuple[int, int]] = {}
        for tp in sorted(link.partitions):
            partition = self.partitions.get(tp)
            if partition is None or partition.is_leader:
                continue
            if partition.corrupt_from is not None:
                self._cut_corrupt(tp, partition)
            log_end = partition.log.log_end_offset
            entries.append(ReplicaFetchEntry(
                tp.topic, tp.partition, log_end, partition.leader_epoch,
                partition.epochs.latest_epoch, partition.log.log_start_offset,
                self.settings.partition_max_bytes, partition.topic_id))
            asked[tp] = (log_end, partition.leader_epoch)
        if not entries:
            return
        request = FetchRequestV1(self.settings.replica_id, max(self._broker_epoch(), 0),
                                 self.settings.wait_max_ms, 1, self.settings.response_max_bytes,
                                 tuple(entries))
        try:
            if link.rpc is None:
                link.rpc = RpcClient(link.endpoint, max_in_flight=1, context=self._context)
            link.rpc.send(request, self.settings.wait_max_ms + FETCH_TIMEOUT_MARGIN_MS)
        except (ZlogError, zmq.ZMQError) as error:
            log.debug("fetch from %s not sent: %s", link.endpoint, error)
            self._back_off(link, now_ms)
            return
        link.in_flight = asked

    def _on_result(
        self, link: _Link, result: RpcResult, now_ms: int, progress: FetchProgress
    ) -> None:
        asked = link.in_flight or {}
        link.in_flight = None
        if result.error is not None or not isinstance(result.response, FetchResponseV1):
            log.debug("fetch from %s failed: %s", link.endpoint, result.error)
            progress.errors += 1
            self._back_off(link, now_ms)
            return
        backing_off = False
        for entry in result.response.entries:
            tp = TopicPartition(entry.topic, entry.partition)
            sent = asked.get(tp)
            if sent is None:
                continue
            if not self._apply(tp, entry, sent, progress):
                backing_off = True
        if backing_off:
            self._back_off(link, now_ms)

    def _apply(self, tp: TopicPartition, result: ReplicaFetchResult,
               sent: tuple[int, int], progress: FetchProgress) -> bool:
        """Apply one partition's answer; False when the link should back off."""
        partition = self.partitions.get(tp)
        fetch_offset, epoch = sent
        if (partition is None or partition.is_leader or partition.leader_epoch != epoch
                or partition.log.log_end_offset != fetch_offset):
            return True  # stale: the partition moved on since the fetch left
        try:
            code = ErrorCode(result.error_code)
        except ValueError:
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._reset_position(tp, partition, result, fetch_offset)
            return True
        if code != ErrorCode.NONE:
            log.debug("fetch of %s-%d: %s %s", *tp, code.name, result.error_message)
            progress.errors += 1
            return False
        self._unflushed.add(tp)  # even a response dropped halfway may have stored batches
        try:
            applied = apply_replica_fetch(partition, result, fetch_offset,
                                          lambda: self._rebuild_producers(tp),
                                          defer_flush=True)
        except ZlogError as error:
            log.warning("dropped a fetch answer for %s-%d: %s", *tp, error)
            progress.errors += 1
            return False
        except OSError as error:  # a full disk: the leader keeps the data; try again later
            log.warning("could not store %s-%d's batches: %s", *tp, error)
            progress.errors += 1
            return False
        if applied.truncated_to is not None:
            log.info("%s-%d cut at %d where it diverged from its leader", *tp,
                     applied.truncated_to)
        progress.appended_bytes += applied.appended_bytes
        return True

    def _cut_corrupt(self, tp: TopicPartition, partition: Partition) -> None:
        """Cut the log at its first corrupt batch, so the fetch asks for it again; a cut
        that meets more corruption on the way is made at that offset next time."""
        try:
            cut_at = partition.cut_corrupt(lambda: self._rebuild_producers(tp))
        except CorruptSegmentError as error:
            partition.note_corrupt(error)
            return
        log.warning("%s-%d cut at %d, its first corrupt batch, to fetch the rest again", *tp,
                    cut_at)

    def _reset_position(self, tp: TopicPartition, partition: Partition,
                        result: ReplicaFetchResult, fetch_offset: int) -> None:
        """Out of range (replica_sync.reset_out_of_range): past the leader's log end, cut to
        it; otherwise start over at the leader's log start."""
        done = reset_out_of_range(partition, result, fetch_offset,
                                  lambda: self._rebuild_producers(tp))
        if done:
            log.log(logging.INFO if done == "started over" else logging.WARNING,
                    "%s-%d at %d, out of the leader's range [%d, %d): %s", *tp, fetch_offset,
                    result.log_start_offset, result.log_end_offset, done)

    def _back_off(self, link: _Link, now_ms: int) -> None:
        link.backoff_until_ms = now_ms + self.settings.backoff_ms
        if link.rpc is not None and link.rpc.broken is not None:
            self._close(link)  # a failed connection: a fresh one next time

    @staticmethod
    def _close(link: _Link) -> None:
        if link.rpc is not None:
            link.rpc.close()
            link.rpc = None
        link.in_flight = None
