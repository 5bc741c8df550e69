"""Which replica's ring a local consumer reads: the leader's, or an in-sync follower's (KIP-392).

Every replica of a partition keeps a ring on its broker's host, the follower's filled byte for
byte from the leader's and bounded by the high watermark the follower learnt from its leader
(never above the leader's, never above what the follower holds). So any in-sync replica's ring
on this host serves the same records at the same offsets as the leader, only possibly a little
later; reading it costs no request at all.

Which rings are "this host's": a broker tells in Metadata where it keeps its rings (its own
ring directory only), and a leader's broker names the leader's ring file; the client keeps what
it learnt per broker (MetadataCache.ring_dirs), and asks a broker on this host whose directory it
has not learnt yet (`brokers_to_ask`). A broker's rings count as local when its control
endpoint is on this host and the directory exists here, and, when the consumer names them, only
in its `ring_dir` and only on brokers of its `client_rack`. Several brokers on one machine (a
test cluster on loopback) each keep their own directory: `ring_dir` or `client_rack` then says
which of them is the consumer's, so that it never reads a ring of a broker it was not told to.

The choice, per partition: the leader's ring when the leader is local; otherwise, with follower
reads asked for (`prefer_local_replica` or `client_rack`), the first in-sync follower in
replica order that is local (only ISR members: a follower outside the ISR may lag without bound,
KAFKA-14372); otherwise none, and the consumer fetches from the leader over the network.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from zlog.client.cluster import PartitionLeader
from zlog.client.local_ring import is_local_endpoint, ring_exists, ring_path_for
from zlog.errors import ErrorCode
from zlog.transport.messages.admin import BrokerMetadata


@dataclass(frozen=True, slots=True)
class LocalReplicaPolicy:
    """What the consumer was told about where it runs and what it may read."""

    ring_dir: Path | None = None  # only rings in this directory are this host's
    client_rack: str | None = None  # only brokers of this rack are this host's
    prefer_local_replica: bool = False

    @property
    def follower_reads(self) -> bool:
        """Kafka's opt-in: a client that names its rack asks to be served by a replica there."""
        return self.prefer_local_replica or self.client_rack is not None


@dataclass(frozen=True, slots=True)
class RingChoice:
    broker: int
    path: Path
    is_leader: bool


def _same_directory(first: Path, second: Path) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False


def _broker_fits(broker: BrokerMetadata | None, policy: LocalReplicaPolicy) -> bool:
    if broker is None or not is_local_endpoint(broker.control_endpoint):
        return False
    return policy.client_rack is None or broker.rack == policy.client_rack


def _directory_fits(directory: Path, policy: LocalReplicaPolicy) -> bool:
    if not directory.is_dir():
        return False
    return policy.ring_dir is None or _same_directory(directory, policy.ring_dir)


def local_ring_dirs(brokers: Mapping[int, BrokerMetadata], ring_dirs: Mapping[int, str],
                    policy: LocalReplicaPolicy) -> dict[int, Path]:
    """The brokers whose rings this consumer may read, and where they keep them."""
    return {
        node: Path(directory) for node, directory in ring_dirs.items()
        if _broker_fits(brokers.get(node), policy) and _directory_fits(Path(directory), policy)
    }


def brokers_to_ask(brokers: Mapping[int, BrokerMetadata], ring_dirs: Mapping[int, str],
                   policy: LocalReplicaPolicy) -> list[BrokerMetadata]:
    """Brokers on this host (and of the client's rack) whose ring directory is not known yet:
    only a broker's own answer tells it, so the consumer asks each of them once."""
    return [broker for node, broker in sorted(brokers.items())
            if node not in ring_dirs and _broker_fits(broker, policy)]


def choose_ring(topic: str, partition: PartitionLeader, policy: LocalReplicaPolicy, *,
                leader_ring_path: str, brokers: Mapping[int, BrokerMetadata],
                local_dirs: Mapping[int, Path]) -> RingChoice | None:
    """The ring to read `partition` from, or None to fetch it from the leader (module doc).

    `leader_ring_path` (MetadataCache.ring_path, "" when not told) is the leader broker's own
    word: a path that is not on this host means the leader is elsewhere, whatever else was
    learnt.
    """
    leader = partition.leader
    if leader < 0 or not partition.endpoint or partition.error_code != ErrorCode.NONE:
        return None
    if leader_ring_path:
        path = Path(leader_ring_path)
        if (is_local_endpoint(partition.endpoint) and ring_exists(leader_ring_path)
                and _broker_fits(brokers.get(leader), policy)
                and _directory_fits(path.parent, policy)):
            return RingChoice(leader, path, is_leader=True)
    elif leader in local_dirs:
        return RingChoice(leader, ring_path_for(local_dirs[leader], topic, partition.partition),
                          is_leader=True)
    if not policy.follower_reads:
        return None
    for replica in partition.replicas:
        if replica != leader and replica in partition.isr and replica in local_dirs:
            path = ring_path_for(local_dirs[replica], topic, partition.partition)
            return RingChoice(replica, path, is_leader=False)
    return None
