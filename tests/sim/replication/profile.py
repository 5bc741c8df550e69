"""Everything a seed decides up front: cluster shape, timeouts, network, fault and load rates.

Timeouts are in ticks and much shorter than zlog's defaults (docs/replication.md §6) but keep
their ratios: heartbeat < session timeout < lag time, fetch backoff << lag time, so the same
races happen in a few hundred ticks instead of minutes of simulated time. About a third of the
seeds are hostile (more loss, longer delays, faults several times as often).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tests.sim.replication.network import NetworkProfile


@dataclass(slots=True)
class Profile:
    brokers: int
    partitions: int
    replication_factor: int
    min_insync: int
    network: NetworkProfile
    heartbeat_ticks: int
    session_ticks: int
    lag_max_ticks: int
    isr_check_ticks: int
    isr_answer_timeout_ticks: int
    isr_refused_backoff_ticks: int
    round_ticks: int
    commit_delay_max: int
    preferred_every_ticks: int
    fetch_backoff_ticks: int
    fetch_idle_ticks: int  # a long poll that found nothing: the next fetch waits this long
    fetch_timeout_ticks: int
    fetch_limit_bytes: int
    flush_every_ticks: int  # page-cache writeback
    produce_timeout_ticks: int
    chaos_ticks: int
    heal_ticks: int
    produce_p: float
    acks_all_p: float
    idempotent: bool
    consume_p: float
    crash_p: float
    power_loss_p: float
    pause_p: float
    cut_p: float
    failover_p: float
    churn_p: float  # a new leader is killed or cut off within a few ticks of its election
    # Drawn after the rest, from a generator of their own (sim.py), so that adding them left
    # the other draws of every seed as they were: a leader's worker alone killed (and restarted
    # by its supervisor at once), at random or right after it sent an ISR expansion.
    worker_crash_p: float = 0.0
    expansion_crash_p: float = 0.0

    def draw_worker_faults(self, rng: random.Random) -> None:
        self.worker_crash_p = rng.choice([0.0, 0.002, 0.005, 0.01])
        self.expansion_crash_p = rng.choice([0.0, 0.0, 0.3, 0.6])

    @classmethod
    def draw(cls, rng: random.Random) -> Profile:
        hostile = rng.random() < 0.35
        brokers = rng.choice([3, 3, 3, 4])
        factor = rng.choice([2, 3, 3, 3]) if brokers == 3 else rng.choice([3, 3, 4])
        heartbeat = rng.choice([2, 3, 4])
        session = heartbeat * rng.choice([4, 5, 6])
        network = NetworkProfile(
            drop_p=rng.choice([0.02, 0.05, 0.1] if hostile else [0.0, 0.0, 0.01, 0.03]),
            duplicate_p=rng.choice([0.0, 0.01, 0.05]),
            delay_max=rng.choice([2, 3, 5] if hostile else [1, 1, 2, 3]),
        )
        scale = 3.0 if hostile else 1.0
        return cls(
            brokers=brokers,
            partitions=rng.choice([1, 1, 2]),
            replication_factor=factor,
            min_insync=rng.choice([1, 2, 2, 2]) if factor > 2 else rng.choice([1, 2]),
            network=network,
            heartbeat_ticks=heartbeat,
            session_ticks=session,
            lag_max_ticks=rng.choice([15, 25, 40]),
            isr_check_ticks=rng.choice([2, 4]),
            isr_answer_timeout_ticks=60,
            isr_refused_backoff_ticks=rng.choice([4, 10]),
            round_ticks=rng.choice([1, 2, 3]),
            commit_delay_max=rng.choice([1, 2, 4]),
            preferred_every_ticks=rng.choice([40, 100, 10_000]),
            fetch_backoff_ticks=rng.choice([1, 3]),
            fetch_idle_ticks=rng.choice([1, 2]),
            fetch_timeout_ticks=30,
            fetch_limit_bytes=rng.choice([1, 300, 1 << 20]),  # 1: one batch per fetch
            flush_every_ticks=rng.choice([5, 20, 60]),
            produce_timeout_ticks=rng.choice([20, 40]),
            chaos_ticks=rng.randint(250, 450),
            heal_ticks=600,
            produce_p=rng.choice([0.2, 0.4, 0.7]),
            acks_all_p=rng.choice([0.5, 0.8, 1.0]),
            idempotent=rng.random() < 0.6,
            consume_p=rng.choice([0.0, 0.1, 0.3]),
            crash_p=min(1.0, scale * rng.choice([0.0, 0.002, 0.005])),
            power_loss_p=min(1.0, scale * rng.choice([0.0, 0.0, 0.001, 0.003])),
            pause_p=min(1.0, scale * rng.choice([0.0, 0.002, 0.005])),
            cut_p=min(1.0, scale * rng.choice([0.0, 0.005, 0.01])),
            failover_p=min(1.0, scale * rng.choice([0.0, 0.002, 0.005])),
            churn_p=rng.choice([0.0, 0.2, 0.5, 0.8]),
        )
