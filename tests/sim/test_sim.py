"""Seeded whole-cluster simulation of Chained Raft (docs/raft.md §6).

- `pytest tests/sim` runs DEFAULT_SEEDS seeds (about 35 seconds on the reference machine,
  two cores), in chunks so that a failure names its seed without hiding the others.
- `pytest tests/sim --seed N` replays exactly seed N (and prints its summary).
- `pytest -m soak tests/sim` runs ZLOG_SOAK_SEEDS seeds (default 2000) after the default
  range, and prints every failing seed.

Every run checks the nine invariants of section 6 after every event; see checker.py.
"""

from __future__ import annotations

import os

import pytest

from tests.sim.cluster import Sim, SimFailure
from tests.sim.seeds import run_chunk, run_seeds, run_twice

DEFAULT_SEEDS = 300  # about 35 s on two cores; the suite must fit its 15 minutes, soak runs more
CHUNK_SEEDS = 100
SOAK_FIRST_SEED = 1_000_000


@pytest.mark.parametrize("chunk", range(DEFAULT_SEEDS // CHUNK_SEEDS))
def test_seeds(chunk: int, seed_option: int | None) -> None:
    """All invariants of section 6 hold over seeded chaos, then the healed cluster commits."""
    run_chunk(Sim, chunk, CHUNK_SEEDS, seed_option, SimFailure)


@pytest.mark.parametrize("seed", [0, 7, 12345])
def test_same_seed_same_run(seed: int) -> None:
    """Section 6: the same seed reproduces the run byte for byte (digest of every event)."""
    first, second = run_twice(Sim, seed)
    assert first.checker.committed == second.checker.committed


def test_different_seeds_differ() -> None:
    """The digest really covers the run: two seeds do not collide."""
    first, second = Sim(1), Sim(2)
    first.run()
    second.run()
    assert first.trace_digest != second.trace_digest


def test_failure_report_names_seed_and_trace() -> None:
    """A failing run prints its seed, the replay command and the tail of the event trace."""
    sim = Sim(3)
    for _ in range(50):
        sim.step_tick()
    report = sim.report(AssertionError("example"))
    assert "seed 3" in report
    assert "--seed 3" in report
    assert report.count("\n") > 10


@pytest.mark.soak
@pytest.mark.timeout(0)  # as long as ZLOG_SOAK_SEEDS asks for
def test_soak(seed_option: int | None) -> None:
    """Many more seeds than the default run; every failing seed is printed."""
    count = int(os.environ.get("ZLOG_SOAK_SEEDS", "2000"))
    first = SOAK_FIRST_SEED if seed_option is None else seed_option
    run_seeds(Sim, range(first, first + count), SimFailure)
