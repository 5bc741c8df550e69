"""A Consumer's reads from rings on its own host (`local=True`): which ring serves each
partition, reading it, waiting on it, and what zero-copy views are still out there.

The ring of a partition whose leader (or, with follower reads, an in-sync follower: KIP-392)
runs on this host is read straight from shared memory (local_ring.py), chosen by
local_replicas.py from the metadata. A ring whose writer is gone is not read: the network finds
out where the partition went. A ring tells nothing of leadership, so a local consumer forgets
its metadata every `local_metadata_max_age_ms` and asks again (`expire_metadata`), and asks each
broker on this host whose ring directory it has not learnt yet (`learn_ring_dirs`).

The Consumer keeps each partition's position, buffer and high watermark; this keeps the rings,
and hands back what a read found (`RingRead`) for the Consumer to apply, as a fetch answer is.
Everything here runs on the Consumer's thread.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from zlog.client.cluster import Connections
from zlog.client.fetch_buffer import PartitionBuffer
from zlog.client.local_replicas import (
    LocalReplicaPolicy,
    RingChoice,
    brokers_to_ask,
    choose_ring,
    local_ring_dirs,
)
from zlog.client.local_ring import Backoff, LocalRing, ring_exists
from zlog.client.ring_doorbells import RingDoorbells, RingNews, Wait
from zlog.errors import ErrorCode, ZlogError
from zlog.record.arrays import BatchView
from zlog.transport.messages.admin import (
    MetadataRequestV0,
    MetadataResponseV0,
)
from zlog.types import TopicPartition

log = logging.getLogger("zlog.client.consumer")

_RING_DIR_ASK_TIMEOUT_MS: Final = 1_000
_RING_DIR_ASK_INTERVAL_MS: Final = 10_000
LOCAL_METADATA_MAX_AGE_MS_DEFAULT: Final = 1_000
"""How stale a local consumer's metadata may get: bounds how long it keeps reading a ring
after leadership moved without an error telling it (see LocalReads.expire_metadata)."""


def local_policy(local: bool, ring_dir: str | Path | None, client_rack: str | None,
                 prefer_local_replica: bool, local_metadata_max_age_ms: int,
                 ) -> LocalReplicaPolicy:
    """The options of local and follower reads, checked: INVALID_CONFIG with a sentence."""
    if not local and (ring_dir is not None or client_rack is not None or prefer_local_replica):
        raise ZlogError(ErrorCode.INVALID_CONFIG,
                        "ring_dir, client_rack and prefer_local_replica need local=True "
                        "(zlog consume --local): "
                        "follower reads are served from a replica's ring on this host (brokers "
                        "do not yet name a preferred read replica)")
    if client_rack is not None and not client_rack.strip():
        raise ZlogError(ErrorCode.INVALID_CONFIG, "client_rack must not be empty")
    if local_metadata_max_age_ms <= 0:
        raise ZlogError(ErrorCode.INVALID_CONFIG,
                        f"local_metadata_max_age_ms must be positive, not "
                        f"{local_metadata_max_age_ms}")
    if ring_dir is not None and not Path(ring_dir).is_dir():
        raise ZlogError(ErrorCode.INVALID_CONFIG, f"ring_dir {str(ring_dir)!r} is not a "
                        "directory on this host")
    return LocalReplicaPolicy(None if ring_dir is None else Path(ring_dir), client_rack,
                              prefer_local_replica)


@dataclass(frozen=True, slots=True)
class RingRead:
    """What one read of a partition's ring found: decoded batches from the position asked
    for (none when caught up, or when only control batches were there), the offset after
    them, and the high watermark the ring showed."""

    views: list[BatchView]
    next_offset: int
    high_watermark: int | None


class LocalReads:
    """The rings a Consumer reads; see the module docstring."""

    def __init__(self, connections: Connections, policy: LocalReplicaPolicy, *,
                 zero_copy: bool, spin_us: int, metadata_max_age_ms: int) -> None:
        self._connections = connections
        self._policy = policy
        self.zero_copy = zero_copy
        self.metadata_max_age_ms = metadata_max_age_ms
        self._metadata_fetched_ms: dict[str, int] = {}  # per topic, for the rings' sake
        self._ring_dirs_asked_ms: dict[int, int] = {}  # per broker on this host
        self._rings: dict[TopicPartition, LocalRing] = {}
        self._ring_choices: dict[TopicPartition, RingChoice | None] = {}
        self._ring_choices_version = -1  # the metadata version they were chosen from
        self._local_dirs: dict[int, Path] = {}  # brokers whose rings are this host's (same version)
        self.backoff = Backoff(spin_s=spin_us / 1e6)
        self._doorbells = RingDoorbells()
        self._handed_out: list[tuple[LocalRing, int | None]] = []  # zero-copy views out there
        self.batches_read = 0  # batches taken from rings

    @property
    def open(self) -> bool:
        """Whether any partition's ring is open."""
        return bool(self._rings)

    # -- metadata -------------------------------------------------------------------------

    def metadata_fetched(self, topics: Iterable[str], now_ms: int) -> None:
        """The metadata of `topics` was asked for just now."""
        self._metadata_fetched_ms.update((topic, now_ms) for topic in topics)

    def expire_metadata(self, topics: set[str], now_ms: int) -> None:
        """Forget metadata older than local_metadata_max_age_ms.

        A ring tells nothing of leadership: a consumer reading a former leader's ring (now a
        follower's, still correct up to its high watermark) or fetching from a leader while a
        replica on this host caught up would otherwise never learn of the change, since no
        answer carries an error. So local consumers ask again now and then.
        """
        for topic in topics:
            fetched_ms = self._metadata_fetched_ms.get(topic)
            if fetched_ms is not None and now_ms - fetched_ms >= self.metadata_max_age_ms:
                self._connections.metadata.invalidate(topic)
                del self._metadata_fetched_ms[topic]

    def learn_ring_dirs(self, now_ms: int) -> None:
        """Ask each broker on this host whose ring directory is unknown for it (a Metadata
        request for no topic: its own answer names it). One that does not answer within
        _RING_DIR_ASK_TIMEOUT_MS is asked again _RING_DIR_ASK_INTERVAL_MS later at the earliest."""
        metadata = self._connections.metadata
        for broker in brokers_to_ask(metadata.brokers, metadata.ring_dirs, self._policy):
            if now_ms < self._ring_dirs_asked_ms.get(broker.node_id, -_RING_DIR_ASK_INTERVAL_MS
                                                     ) + _RING_DIR_ASK_INTERVAL_MS:
                continue
            self._ring_dirs_asked_ms[broker.node_id] = now_ms
            try:
                response = self._connections.call_endpoint(
                    broker.control_endpoint, MetadataRequestV0(()), _RING_DIR_ASK_TIMEOUT_MS)
            except ZlogError as error:
                log.debug("broker %d did not say where its rings are: %s", broker.node_id, error)
                continue
            if isinstance(response, MetadataResponseV0):
                metadata.update(response)

    # -- rings ----------------------------------------------------------------------------

    def _ring_for(self, tp: TopicPartition) -> LocalRing | None:
        """The ring to read `tp` from (local_replicas.py chooses), None to use the network.

        A ring whose writer is gone is not read: the network finds out where the partition
        went (the answer, or the failed connection, refreshes the metadata)."""
        choice = self._ring_choice(tp)
        ring = self._rings.get(tp)
        if ring is not None and (choice is None or ring.path != choice.path):
            ring.close()
            del self._rings[tp]
            ring = None
        if choice is None:
            return None
        if ring is None:
            if not ring_exists(str(choice.path)):
                return None
            ring = self._rings[tp] = LocalRing(choice.path)
        return None if ring.writer_gone() else ring

    def _ring_choice(self, tp: TopicPartition) -> RingChoice | None:
        """choose_ring's answer, kept until the metadata changes (it costs a few stats)."""
        metadata = self._connections.metadata
        if metadata.version != self._ring_choices_version:
            self._ring_choices.clear()
            self._ring_choices_version = metadata.version
            self._local_dirs = local_ring_dirs(metadata.brokers, metadata.ring_dirs,
                                               self._policy)
        if tp not in self._ring_choices:
            partition = metadata.partition(*tp)
            self._ring_choices[tp] = None if partition is None else choose_ring(
                tp.topic, partition, self._policy, leader_ring_path=metadata.ring_path(*tp),
                brokers=metadata.brokers, local_dirs=self._local_dirs)
        return self._ring_choices[tp]

    def ring_path(self, tp: TopicPartition, position: int | None) -> Path | None:
        """The ring file `tp` is read from right now, or None while it is fetched over the
        network."""
        ring = self._rings.get(tp)
        if ring is None or ring.writer_gone():
            return None
        return ring.path if position is None or ring.covers(position) else None

    def serves(self, tp: TopicPartition, position: int | None) -> bool:
        """Whether `tp`'s ring holds `position`, so the network need not be asked."""
        ring = self._ring_for(tp)
        return ring is not None and position is not None and ring.covers(position)

    def read(self, tp: TopicPartition, position: int, max_bytes: int, *, check_crc: bool,
             ) -> RingRead | None:
        """Batches of `tp` from `position` out of its ring; None when the ring cannot serve
        it (not on this host, or `position` not in it): the network is asked then."""
        ring = self._ring_for(tp)
        if ring is None:
            return None
        result = ring.read(position, max_bytes, check_crc=check_crc, copy=not self.zero_copy)
        if result is None:
            return None
        views, next_offset = result
        self.batches_read += len(views)
        return RingRead(views, next_offset, ring.high_watermark)

    def news(self, positions: Mapping[TopicPartition, int | None]) -> RingNews:
        """A cheap test (one state read per ring) of whether any ring moved past a position,
        and how to park until one does: on the doorbells of the leaders' workers
        (ring_doorbells.py).

        A ring whose writer is gone never moves: watching it would only spin."""
        watched = [(tp, ring, position) for tp, ring in self._rings.items()
                   if (position := positions.get(tp)) is not None
                   and not ring.writer_gone()]
        waits: list[Wait] = []
        for tp, _ring, position in watched:
            choice = self._ring_choices.get(tp)
            partition = self._connections.metadata.partition(*tp)
            if choice is not None and choice.is_leader and partition is not None:
                waits.append((partition.endpoint, tp, position))

        def news() -> bool:
            return any(ring.has_news(position) for _tp, ring, position in watched)

        def park(pause_s: float) -> None:
            self._doorbells.park(waits, pause_s, news, complete=len(waits) == len(watched))

        return RingNews(news, park)

    # -- zero-copy views ------------------------------------------------------------------

    def note_handed_out(self, buffers: Mapping[TopicPartition, PartitionBuffer]) -> None:
        """Remember where the zero-copy views just returned start, for views_intact()."""
        if not self.zero_copy:
            return
        self._handed_out = []
        for tp, ring in self._rings.items():
            if ring.read_from_position is None:
                continue
            self._handed_out.append((ring, ring.read_from_position))
            if not buffers[tp]:
                ring.forget_reads()  # the next poll's views start where the next read starts

    def views_intact(self) -> bool:
        """Whether every zero-copy view the last poll returned is still whole in shared
        memory."""
        return all(ring.intact(position) for ring, position in self._handed_out)

    # -- partitions leaving ---------------------------------------------------------------

    def forget(self, tp: TopicPartition) -> None:
        self._ring_choices.pop(tp, None)
        ring = self._rings.pop(tp, None)
        if ring is not None:
            ring.close()

    def close(self) -> None:
        for ring in self._rings.values():
            ring.close()
        self._rings.clear()
        self._doorbells.close()
