"""Running seeds in the simulators' tests: a range in which one failing seed does not hide
another, or one seed replayed with its summary."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

import pytest


class SeededRun(Protocol):
    @property
    def trace_digest(self) -> str: ...

    def run(self) -> None: ...

    def summary(self) -> str: ...


Run = TypeVar("Run", bound=SeededRun)


def run_seeds(make: Callable[[int], SeededRun], seeds: range,
              failure: type[AssertionError]) -> None:
    """Run each seed; fail with every failing seed and the first failure's full report
    (which names the command that replays it)."""
    failures: list[tuple[int, str]] = []
    for seed in seeds:
        try:
            make(seed).run()
        except failure as error:
            failures.append((seed, str(error)))
    if failures:
        failing = ", ".join(str(seed) for seed, _ in failures)
        pytest.fail(f"failing seeds: {failing}\n\n{failures[0][1]}", pytrace=False)


def replay_seed(make: Callable[[int], SeededRun], seed: int,
                failure: type[AssertionError]) -> None:
    """Run one seed: its report on failure, its summary otherwise."""
    sim = make(seed)
    try:
        sim.run()
    except failure as error:
        pytest.fail(str(error), pytrace=False)
    print(sim.summary())


def run_chunk(make: Callable[[int], SeededRun], chunk: int, chunk_seeds: int,
              seed_option: int | None, failure: type[AssertionError]) -> None:
    """Chunk `chunk` of the default range, so that a failure names its seed without waiting
    for the whole range; under `--seed N`, seed N alone, in chunk 0."""
    if seed_option is None:
        run_seeds(make, range(chunk * chunk_seeds, (chunk + 1) * chunk_seeds), failure)
    elif chunk == 0:
        replay_seed(make, seed_option, failure)
    else:
        pytest.skip("replaying one seed")


def run_twice(make: Callable[[int], Run], seed: int) -> tuple[Run, Run]:
    """Two runs of one seed, which must be the same run: same digest of every event line,
    same summary. Returned for the caller's own comparisons."""
    first, second = make(seed), make(seed)
    first.run()
    second.run()
    assert first.trace_digest == second.trace_digest
    assert first.summary() == second.summary()
    return first, second
