"""Retention pressure: tiny segments and retention on the workload's topic while a follower lags.

With `segment.bytes` a few batches and `retention.bytes` as small, every retention pass
(every 5 s in each worker) deletes all but the newest segments of each replica, so the log
start runs right behind the log end, near the high watermark. A follower of one key's
partition is made to lag meanwhile, paused (SIGSTOP of its broker) or cut off from that
partition's leader both ways, so that the HW stops until the leader drops it from the ISR and
the log grows above the HW: a leader must not delete what its HW does not cover yet. When
the follower comes back its fetch position may lie below the leader's log start, and it must
start again from there. Retention itself is the cluster's own, through the operator's path
(IncrementalAlterConfigs, zlog_jepsen.topic_alter).

The end lets the follower go first, under the tiny settings, so that it catches up while
retention still deletes right behind the log end, then gives the topic back the settings it
was created with (`retention.bytes`, which it did not set, is deleted: back to the default).

What the checker makes of the deleted records is zlog_jepsen.checker.retention's.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Final

from zlog.transport.messages.admin import PartitionMetadata
from zlog_jepsen.cluster import SEGMENT_BYTES_CONFIG, TOPIC_CONFIGS
from zlog_jepsen.topic_alter import alter_configs, restoring

if TYPE_CHECKING:
    from zlog_jepsen.nemesis import Heal, Nemesis

RETENTION_PRESSURE: Final = "retention-pressure"
PAUSE: Final = "pause"
CUT: Final = "cut"
LAGS: Final = (PAUSE, CUT)
RETENTION_BYTES_CONFIG: Final = "retention.bytes"
TINY_SEGMENT_BYTES: Final = (100, 400)
"""A batch of the workload (one small record) takes about 75 bytes: a segment per batch, or
one of about five."""
TINY_RETENTION_BYTES: Final = (1, 200)
"""Keep only the active segment, or about two batches more (a segment goes only while what
stays is still at least `retention.bytes`, docs/storage.md)."""


@dataclass(frozen=True)
class PressurePlan:
    """What one retention-pressure fault does: which follower of which key's partition lags,
    how, and the topic's settings meanwhile."""

    key: int
    leader: int
    follower: int
    lag: str
    segment_bytes: int
    retention_bytes: int


def plan_pressure(rng: random.Random, partitions: Mapping[int, PartitionMetadata],
                  controller: int, brokers: Collection[int]) -> PressurePlan:
    """The fault for the keys' partitions as they are now (key -> partition).

    The HW waits for a lagging follower only while it stays in the ISR: until
    `replica.lag.time.max.ms` if it goes on heartbeating to the controller, less than its
    session if it cannot. So a key whose leader is not the controller is preferred, and a
    follower that is not the controller either: cut off from the leader alone, it keeps its
    session. With none such, any key and any follower (a replica that does not lead it; any
    other broker when the partition has one replica)."""
    keys = sorted(partitions)
    apart = [k for k in keys if partitions[k].leader not in (controller, -1)]
    key = rng.choice(apart or keys)
    partition = partitions[key]
    replicas = sorted(partition.replicas) or sorted(brokers)
    leader = partition.leader if partition.leader in replicas else rng.choice(replicas)
    followers = [n for n in replicas if n != leader] or [n for n in sorted(brokers) if n != leader]
    follower = rng.choice([n for n in followers if n != controller] or followers)
    return PressurePlan(key, leader, follower, rng.choice(LAGS),
                        rng.choice(TINY_SEGMENT_BYTES), rng.choice(TINY_RETENTION_BYTES))


def retention_pressure(nemesis: Nemesis) -> tuple[dict[str, Any], Heal]:
    metadata = nemesis.cluster.metadata([nemesis.topic])
    (topic,) = metadata.topics
    plan = plan_pressure(nemesis.random, {p.partition: p for p in topic.partitions},
                         metadata.controller_id, nemesis.cluster.brokers)
    tiny = {SEGMENT_BYTES_CONFIG: str(plan.segment_bytes),
            RETENTION_BYTES_CONFIG: str(plan.retention_bytes)}
    alter_configs(nemesis.cluster.bootstrap, {nemesis.topic: tiny})
    follower = nemesis.cluster.broker(plan.follower)
    if plan.lag == PAUSE:
        follower.pause()
    else:
        nemesis.cluster.split([plan.follower], [plan.leader])

    def released() -> None:
        if plan.lag == PAUSE:
            follower.resume()
        else:
            nemesis.cluster.heal()
        alter_configs(nemesis.cluster.bootstrap,
                      {nemesis.topic: restoring(tiny, TOPIC_CONFIGS)})

    return {**asdict(plan), "target": plan.follower}, released
