"""Which replicas move where when a broker leaves or joins: pure, deterministic planning.

Both planners take the partitions' replica lists (the preferred leader first; for a partition
being reassigned, its target), in a fixed order, and return the new replica lists of the
partitions that change, as reassignment targets (docs/replication.md, "Reassignment, drain and
add-broker"). The same input gives the same plan on every node and in every test.

* `drain_moves`: every partition with a replica on the leaving broker gets one on another
  broker instead, the one holding the fewest replicas so far (lowest id on ties), so the
  replication factor stays and the load spreads evenly. Where the leaving broker was the
  preferred leader, the member of the new list with the fewest preferred leaderships takes
  that place. No broker left to take a replica refuses the whole drain
  (INVALID_REPLICATION_FACTOR): a drain never lowers a replication factor.
* `join_moves`: the new broker takes replicas from the most loaded brokers until it holds its
  fair share (total replicas / brokers, rounded down), preferred leaderships first (until it
  has its fair share of those too), one replica per partition.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from zlog.errors import ErrorCode, ZlogError
from zlog.types import TopicPartition

Assignment = Mapping[TopicPartition, tuple[int, ...]]  # replica lists, preferred leader first


def _counts(assignment: Assignment, brokers: Sequence[int]) -> tuple[Counter[int], Counter[int]]:
    """(replicas per broker, preferred leaderships per broker), every broker counted."""
    load: Counter[int] = Counter(dict.fromkeys(brokers, 0))
    leaders: Counter[int] = Counter(dict.fromkeys(brokers, 0))
    for replicas in assignment.values():
        load.update(replicas)
        if replicas:
            leaders[replicas[0]] += 1
    return load, leaders


def drain_moves(
    assignment: Assignment, leaving: int, brokers: Sequence[int]
) -> dict[TopicPartition, tuple[int, ...]]:
    """New replica lists for every partition with a replica on `leaving`, each with the same
    number of replicas on `brokers` (those that may take one: live, not leaving themselves)."""
    others = sorted(set(brokers) - {leaving})
    load, leaders = _counts(assignment, others)
    moves: dict[TopicPartition, tuple[int, ...]] = {}
    for tp, replicas in assignment.items():
        if leaving not in replicas:
            continue
        candidates = [b for b in others if b not in replicas]
        if not candidates:
            raise ZlogError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"{tp.topic}-{tp.partition} has {len(replicas)} replicas, and only "
                f"{len(others)} live broker(s) other than broker {leaving} can hold them: "
                "removing it would lower the replication factor")
        chosen = min(candidates, key=lambda b: (load[b], b))
        load[chosen] += 1
        kept = [r for r in replicas if r != leaving]
        if replicas[0] == leaving:
            members = [*kept, chosen]
            first = min(members, key=lambda b: (leaders[b], members.index(b)))
            leaders[first] += 1
            target = (first, *(r for r in members if r != first))
        else:
            target = (*kept, chosen)
        moves[tp] = target
    return moves


def join_moves(
    assignment: Assignment, joining: int, brokers: Sequence[int]
) -> dict[TopicPartition, tuple[int, ...]]:
    """New replica lists that give `joining` its fair share of replicas and preferred
    leaderships, taken from the brokers that hold the most (`brokers`: every broker that keeps
    its replicas, `joining` included or not)."""
    everyone = sorted(set(brokers) | {joining})
    load, leaders = _counts(assignment, everyone)
    fair_replicas = sum(load.values()) // len(everyone)
    fair_leaders = sum(leaders.values()) // len(everyone)
    moves: dict[TopicPartition, tuple[int, ...]] = {}

    def movable(leading: bool) -> list[tuple[TopicPartition, int]]:
        """(partition, position) pairs `joining` could take: it holds no replica of the
        partition yet, nothing moved in it yet; position 0 only when taking leaderships."""
        return [(tp, position) for tp, replicas in assignment.items()
                if tp not in moves and joining not in replicas
                for position in ((0,) if leading else range(1, len(replicas)))]

    def take(leading: bool, wanted: int, counts: Counter[int]) -> None:
        while counts[joining] < wanted and load[joining] < fair_replicas:
            options = movable(leading)
            if not options:
                return
            tp, position = max(options, key=lambda option: (
                counts[assignment[option[0]][option[1]]],
                load[assignment[option[0]][option[1]]], -assignment[option[0]][option[1]]))
            replicas = assignment[tp]
            donor = replicas[position]
            if counts[donor] <= counts[joining] + 1:
                return  # evening out further would only move the imbalance
            moves[tp] = (*replicas[:position], joining, *replicas[position + 1:])
            load[donor] -= 1
            load[joining] += 1
            if position == 0:
                leaders[donor] -= 1
                leaders[joining] += 1

    take(True, fair_leaders, leaders)
    take(False, fair_replicas, load)
    return moves
