"""The faults of a run, injected on a seeded schedule and each recorded in the history.

Every fault is a start and an end: the start picks its target from the cluster as it is at
that moment (the leader of a random key's partition, or the metadata controller), breaks
it, and records `{"fault": kind, "phase": "start", "target": node, ...}` as a nemesis event;
the end undoes it and records the same with "end". One fault at a time: each is healed
before the next starts, so a run's faults never pile up beyond one node.

The kinds (docs/reliability.md, the harness's fault kinds):
- kill-worker (F1): kill -9 of the worker serving a partition leader; the broker's
  supervisor starts a new one, which replays the shared-memory ring.
- kill-broker (F2a): kill -9 of a leader's whole broker (supervisor and workers), held down,
  then started again on the same data and rings.
- pause-broker (F3): SIGSTOP of a leader's whole broker, held, then SIGCONT.
- isolate-leader, isolate-controller (F4): the broker cut off from the other brokers both
  ways (clients still reach it), held, then healed.
- one-way (F4): a leader hears no other broker ("in") or no other broker hears it ("out").
- power-loss (F2b): kill-broker, then the broker's rings and every partition data file it
  never fsynced are gone before it starts again (zlog_jepsen.storage_faults).
- damaged-tail (F5): kill-broker, then the newest segment of the key's partition on that
  broker is cut at a random byte, has a bit of its last batch flipped, or loses its indexes.
- minority (F4): a random minority of the brokers cut off from the majority.
- bridge (F4): two brokers cut off from each other, a third hearing both.
- clients-cut (F4): every client cut off from a leader, which still hears its followers.
- reassign, reassign-kill, drain (F7): replica sets change under load
  (zlog_jepsen.membership_faults).
- corrupt-follower (F5): kill -9 of a follower of a key's partition, one bit flipped in
  the middle of one of that partition's sealed segments there (or its index), held down,
  then started again: it must find the rot by CRC, cut and fetch again, never serve it.
- disk-full (F8): a leader's data disk (a tmpfs of its own, zlog_jepsen.small_disks) filled
  to the last byte by a ballast file, held, then the ballast deleted.
- wipe-disk (SC5): kill -9 of a leader's broker, everything it stored deleted (its directory
  id too), started again as the same node, at once or after the hold; it starts only while
  every replica is in sync and every voter counts, and its end waits until that holds again
  (zlog_jepsen.disk_wipe). In its sole-ISR shape the wiped broker was alone in sync, and the
  end brings its partitions back with the operator's unclean election (zlog_jepsen.sole_isr).
- retention-pressure (S8): the topic's segments and retention made tiny while a follower of
  a key's partition is paused or cut off from its leader (zlog_jepsen.retention_pressure).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from zlog.types import NO_LEADER
from zlog_jepsen.cluster import HarnessCluster
from zlog_jepsen.disk_wipe import SHAPES, WIPE_DISK, wipe
from zlog_jepsen.history import NEMESIS_PROCESS, FaultPhase, HistoryWriter, nemesis_value
from zlog_jepsen.membership_faults import MEMBERSHIP_KINDS, MEMBERSHIP_STARTS
from zlog_jepsen.retention_pressure import RETENTION_PRESSURE, retention_pressure
from zlog_jepsen.storage_faults import damage_tail, lose_power, rot_segment
from zlog_testbed.broker_process import START_TIMEOUT_S
from zlog_testbed.waiting import wait_until

KILL_WORKER: Final = "kill-worker"
KILL_BROKER: Final = "kill-broker"
PAUSE_BROKER: Final = "pause-broker"
ISOLATE_LEADER: Final = "isolate-leader"
ISOLATE_CONTROLLER: Final = "isolate-controller"
ONE_WAY: Final = "one-way"
POWER_LOSS: Final = "power-loss"
DAMAGED_TAIL: Final = "damaged-tail"
MINORITY: Final = "minority"
BRIDGE: Final = "bridge"
CLIENTS_CUT: Final = "clients-cut"
DISK_FULL: Final = "disk-full"
CORRUPT_FOLLOWER: Final = "corrupt-follower"
FAULT_KINDS: Final = (KILL_WORKER, KILL_BROKER, PAUSE_BROKER, ISOLATE_LEADER,
                      ISOLATE_CONTROLLER, ONE_WAY, POWER_LOSS, DAMAGED_TAIL, MINORITY, BRIDGE,
                      CLIENTS_CUT, DISK_FULL, CORRUPT_FOLLOWER, *MEMBERSHIP_KINDS, WIPE_DISK,
                      RETENTION_PRESSURE)


@dataclass(frozen=True)
class Schedule:
    """Which faults, how long each is held and how long the cluster rests between them; the
    shapes a wipe may take (zlog_jepsen.disk_wipe), one drawn at random, or one forced."""

    kinds: tuple[str, ...] = FAULT_KINDS
    hold_s: tuple[float, float] = (5.0, 20.0)
    rest_s: tuple[float, float] = (5.0, 15.0)
    wipe_shapes: tuple[str, ...] = SHAPES

    def __post_init__(self) -> None:
        unknown = sorted(set(self.kinds) - set(FAULT_KINDS))
        if unknown or not self.kinds:
            raise ValueError(f"fault kinds are some of {', '.join(FAULT_KINDS)}, "
                             f"not {', '.join(unknown) or 'none'}")
        strange = sorted(set(self.wipe_shapes) - set(SHAPES))
        if strange or not self.wipe_shapes:
            raise ValueError(f"wipe shapes are some of {', '.join(SHAPES)}, "
                             f"not {', '.join(strange) or 'none'}")


Heal = Callable[[], None]


class Nemesis:
    """Injects faults into `cluster` for the keys of `topic`, recording each in `writer`."""

    def __init__(self, cluster: HarnessCluster, topic: str, keys: int, writer: HistoryWriter,
                 seed: int) -> None:
        self.cluster = cluster
        self.topic = topic
        self.keys = keys
        self.writer = writer
        self.random = random.Random(seed)
        self.schedule = Schedule()
        self._heal: tuple[str, dict[str, Any], Heal] | None = None
        self.injected: dict[str, int] = {}

    def run(self, schedule: Schedule, duration_s: float, stop: threading.Event) -> None:
        """Faults one after another for `duration_s` (or until `stop`); healed at the end."""
        self.schedule = schedule
        deadline = time.monotonic() + duration_s
        try:
            while not stop.is_set():
                if stop.wait(self.random.uniform(*schedule.rest_s)) or time.monotonic() > deadline:
                    return
                self.start(self.random.choice(schedule.kinds))
                hold_s = min(self.random.uniform(*schedule.hold_s),
                             max(deadline - time.monotonic(), 0.0))
                stop.wait(hold_s)
                self.heal()
        finally:
            self.heal()

    def start(self, kind: str) -> None:
        assert self._heal is None, "one fault at a time"
        details, heal = _STARTS[kind](self)
        self.record(kind, "start", details)
        self._heal = (kind, details, heal)
        self.injected[kind] = self.injected.get(kind, 0) + 1

    def heal(self) -> None:
        """Undo the fault in force, if any, and record its end (with the details as the heal
        left them: a heal may add what it observed)."""
        if self._heal is None:
            return
        kind, details, heal = self._heal
        self._heal = None
        heal()
        self.record(kind, "end", details)

    def record(self, kind: str, phase: FaultPhase, details: dict[str, Any]) -> None:
        """A nemesis event; a heal records what it observed and did on the way ("observed",
        "operator") with this too."""
        self.writer.append(NEMESIS_PROCESS, "info", "nemesis",
                           nemesis_value(kind, phase, **details))

    # -- targets --------------------------------------------------------------------------

    def _leader(self) -> tuple[int, int]:
        """(key, the node leading its partition); a random broker when none leads it now."""
        key = self.random.randrange(self.keys)
        leader = self.cluster.partition(self.topic, key).leader
        if leader == NO_LEADER:
            leader = self.random.choice(sorted(self.cluster.brokers))
        return key, leader

    # -- the faults: each breaks something and returns what to record and how to undo it -----

    def _kill_worker(self) -> tuple[dict[str, Any], Heal]:
        key = self.random.randrange(self.keys)
        found = self.cluster.partition(self.topic, key)
        if found.leader != NO_LEADER and found.endpoint:
            node = found.leader
            broker = self.cluster.broker(node)
            broker.kill_worker(broker.worker_pid_for(found.endpoint))
        else:  # no leader now (an election under way): any worker of any broker
            node = self.random.choice(sorted(self.cluster.brokers))
            broker = self.cluster.broker(node)
            broker.kill_worker(self.random.choice(broker.worker_pids()))

        def restarted() -> None:
            wait_until(lambda: len(broker.worker_pids()) == broker.workers, START_TIMEOUT_S,
                       interval_s=0.05, what=f"broker {node}'s worker restarted")

        return {"target": node, "key": key}, restarted

    def _kill_broker(self) -> tuple[dict[str, Any], Heal]:
        key, node = self._leader()
        broker = self.cluster.broker(node)
        broker.kill_all()
        return {"target": node, "key": key}, broker.start

    def _power_loss(self) -> tuple[dict[str, Any], Heal]:
        key, node = self._leader()
        broker = self.cluster.broker(node)
        broker.kill_all()
        lost = lose_power(broker.data_dir, broker.ring_dir)
        return {"target": node, "key": key, **lost}, broker.start

    def _damaged_tail(self) -> tuple[dict[str, Any], Heal]:
        key, node = self._leader()
        broker = self.cluster.broker(node)
        broker.kill_all()
        done = damage_tail(broker.data_dir / f"{self.topic}-{key}", self.random)
        return {"target": node, "key": key, **done}, broker.start

    def _minority(self) -> tuple[dict[str, Any], Heal]:
        nodes = sorted(self.cluster.brokers)
        self.random.shuffle(nodes)
        minority, majority = nodes[:(len(nodes) - 1) // 2], nodes[(len(nodes) - 1) // 2:]
        self.cluster.split(minority, majority)
        return ({"minority": sorted(minority), "majority": sorted(majority),
                 "topology": "majority/minority"}, self.cluster.heal)

    def _bridge(self) -> tuple[dict[str, Any], Heal]:
        nodes = sorted(self.cluster.brokers)
        self.random.shuffle(nodes)
        bridge, (one, other) = nodes[2:], nodes[:2]
        self.cluster.split([one], [other])
        return ({"cut": sorted([one, other]), "bridge": sorted(bridge), "topology": "bridge"},
                self.cluster.heal)

    def _clients_cut(self) -> tuple[dict[str, Any], Heal]:
        key, node = self._leader()
        self.cluster.cut_clients(node)
        return ({"target": node, "key": key, "topology": "clients cut from the leader"},
                self.cluster.heal)

    def _corrupt_follower(self) -> tuple[dict[str, Any], Heal]:
        key, leader = self._leader()
        node = self.random.choice([n for n in sorted(self.cluster.brokers) if n != leader])
        broker = self.cluster.broker(node)
        broker.kill_all()
        done = rot_segment(broker.data_dir / f"{self.topic}-{key}", self.random)
        return {"target": node, "leader": leader, "key": key, **done}, broker.start

    def _disk_full(self) -> tuple[dict[str, Any], Heal]:
        key, node = self._leader()
        disks = self.cluster.small_disks
        assert disks is not None, "the runner mounts small disks for a schedule with disk-full"
        return {"target": node, "key": key, **disks.fill(node)}, lambda: disks.free(node)

    def _pause_broker(self) -> tuple[dict[str, Any], Heal]:
        key, node = self._leader()
        broker = self.cluster.broker(node)
        broker.pause()
        return {"target": node, "key": key}, broker.resume

    def _isolate_leader(self) -> tuple[dict[str, Any], Heal]:
        key, node = self._leader()
        self.cluster.isolate(node)
        return {"target": node, "key": key, "topology": "isolated leader"}, self.cluster.heal

    def _isolate_controller(self) -> tuple[dict[str, Any], Heal]:
        node = self.cluster.metadata().controller_id
        if node not in self.cluster.brokers:  # no controller known now (-1): an election
            node = self.random.choice(sorted(self.cluster.brokers))
        self.cluster.isolate(node)
        return {"target": node, "topology": "isolated controller"}, self.cluster.heal

    def _one_way(self) -> tuple[dict[str, Any], Heal]:
        key, node = self._leader()
        direction = self.random.choice(("in", "out"))
        self.cluster.isolate(node, direction="in" if direction == "in" else "out")
        return ({"target": node, "key": key, "topology": f"one-way {direction}"},
                self.cluster.heal)


_STARTS: Final[dict[str, Callable[[Nemesis], tuple[dict[str, Any], Heal]]]] = {
    KILL_WORKER: Nemesis._kill_worker,
    KILL_BROKER: Nemesis._kill_broker,
    PAUSE_BROKER: Nemesis._pause_broker,
    ISOLATE_LEADER: Nemesis._isolate_leader,
    ISOLATE_CONTROLLER: Nemesis._isolate_controller,
    ONE_WAY: Nemesis._one_way,
    POWER_LOSS: Nemesis._power_loss,
    DAMAGED_TAIL: Nemesis._damaged_tail,
    MINORITY: Nemesis._minority,
    BRIDGE: Nemesis._bridge,
    CLIENTS_CUT: Nemesis._clients_cut,
    DISK_FULL: Nemesis._disk_full,
    CORRUPT_FOLLOWER: Nemesis._corrupt_follower,
    **MEMBERSHIP_STARTS,
    WIPE_DISK: wipe,
    RETENTION_PRESSURE: retention_pressure,
}
