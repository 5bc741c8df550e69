"""Placement decisions: replicas over brokers (the controller's), partitions over local workers.

Pure and deterministic: the same inputs give the same placement on every node and after every
restart, so a placement can be recomputed instead of stored, and tested without a cluster.

Replica placement follows Kafka's round-robin scheme: partition p of a topic gets the brokers
`live[(start + p + i) % n]` for i in 0..RF-1, so leaders (the first replica) spread over the
brokers and no broker holds two replicas of one partition. When every live broker names a rack,
the brokers are first ordered alternating between racks (Kafka's rack-aware assignment), and a
partition's followers skip brokers whose rack already holds one of its replicas until every rack
has one: a rack's loss (a switch, a power feed) then takes at most one replica of a partition
while there are at least as many racks as replicas. When only some brokers name a rack, racks are
ignored, as Kafka's automatic topic creation does. The new partition starts with leader
= its first replica, leader epoch 0 and ISR = every replica: nothing is written yet, so every
replica is trivially in sync. With one broker every partition's leader is that broker.

Worker placement is host-local: each partition this broker holds goes to one partition worker
process, one partition per worker until every worker has one, then the least loaded worker
(lowest id on ties). Partitions placed before keep their worker, so creating or deleting a
topic never moves a live partition between processes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from zlog.errors import ErrorCode, ZlogError
from zlog.types import TopicPartition


@dataclass(frozen=True, slots=True)
class InitialPartition:
    """A new partition's replication state, as the CreateTopic command records it."""

    partition: int
    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]


def place_replicas(
    partitions: int, replication_factor: int, live_brokers: Sequence[int], start_index: int,
    racks: Mapping[int, str] | None = None,
) -> list[InitialPartition]:
    """Round-robin replica lists over the live brokers (sorted first, so order never matters).

    `start_index` rotates where the first partition's leader lands; callers derive it from
    something deterministic (the topic's creation sequence number) so successive topics spread
    their leaders instead of all starting on the lowest broker id. `racks` maps a broker to its
    rack ("" or missing: none).
    """
    brokers = sorted(set(live_brokers))
    if not 1 <= replication_factor <= len(brokers):
        raise ZlogError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor {replication_factor} with {len(brokers)} live broker(s)",
        )
    assert partitions >= 1, "validated by topics.validate_partitions"
    assert start_index >= 0
    rack_of = {broker: (racks or {}).get(broker, "") for broker in brokers}
    rack_aware = all(rack_of.values())
    if rack_aware:
        brokers = _alternate_racks(rack_of)
    placed: list[InitialPartition] = []
    for partition in range(partitions):
        first = (start_index + partition) % len(brokers)
        ring = [brokers[(first + offset) % len(brokers)] for offset in range(len(brokers))]
        replicas = (_spread_over_racks(ring, rack_of, replication_factor) if rack_aware
                    else tuple(ring[:replication_factor]))
        assert len(set(replicas)) == replication_factor, "a broker holds one replica at most"
        placed.append(InitialPartition(partition, replicas, replicas[0], 0, replicas))
    assert len(placed) == partitions
    return placed


def _alternate_racks(rack_of: Mapping[int, str]) -> list[int]:
    """Brokers ordered rack by rack in turn (a1, b1, c1, a2, b2, ...), so that neighbours in
    the round robin sit on different racks and leaders spread over racks as well as brokers."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(rack_of):
        by_rack.setdefault(rack_of[broker], []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    deepest = max(len(column) for column in columns)
    return [column[row] for row in range(deepest) for column in columns if row < len(column)]


def _spread_over_racks(ring: list[int], rack_of: Mapping[int, str],
                       replication_factor: int) -> tuple[int, ...]:
    """The leader (ring[0]), then followers in ring order, each from a rack without a replica
    yet while one remains; once every rack holds one, any broker not chosen yet."""
    chosen = [ring[0]]
    racks_used = {rack_of[ring[0]]}
    all_racks = set(rack_of.values())
    for broker in ring[1:]:
        if len(chosen) == replication_factor:
            break
        if rack_of[broker] not in racks_used:
            chosen.append(broker)
            racks_used.add(rack_of[broker])
            if racks_used == all_racks:
                break
    for broker in ring[1:]:
        if len(chosen) == replication_factor:
            break
        if broker not in chosen:
            chosen.append(broker)
    return tuple(chosen)


def place_on_workers(
    partitions: Sequence[TopicPartition],
    worker_count: int,
    current: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """worker id (0-based) for every partition in `partitions` (given in creation order).

    Partitions already in `current` on a worker that still exists stay there; the others, in
    the given order, go to the least loaded worker. Partitions not in `partitions` (deleted)
    are dropped from the result and stop counting toward any worker's load.
    """
    assert worker_count >= 1
    wanted = set(partitions)
    placement: dict[TopicPartition, int] = {}
    load = [0] * worker_count
    for topic_partition in partitions:
        worker = current.get(topic_partition)
        if worker is not None and 0 <= worker < worker_count:
            placement[topic_partition] = worker
            load[worker] += 1
    for topic_partition in partitions:
        if topic_partition in placement:
            continue
        worker = min(range(worker_count), key=lambda index: (load[index], index))
        placement[topic_partition] = worker
        load[worker] += 1
    assert set(placement) == wanted
    assert sum(load) == len(wanted)
    return placement
