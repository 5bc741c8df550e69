"""The local consumer's wait for a ring head to move (zlog/client/local_ring.py, Backoff)."""

from __future__ import annotations

import itertools

import pytest

from zlog.client import local_ring
from zlog.client.local_ring import PAUSE_FIRST_S, PAUSE_LAST_S, Backoff


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(local_ring.time, "sleep", slept.append)
    return slept


def news_after(calls: int) -> tuple[list[int], object]:
    seen = [0]

    def news() -> bool:
        seen[0] += 1
        return seen[0] > calls

    return seen, news


def test_news_ends_the_wait_without_a_sleep(sleeps: list[float]) -> None:
    seen, news = news_after(0)
    Backoff(spin_s=0.01).wait(1.0, news)  # type: ignore[arg-type]
    assert seen == [1]
    assert sleeps == []


def test_the_spin_watches_until_news_arrives(sleeps: list[float]) -> None:
    backoff = Backoff(spin_s=60.0, spin_allowed=lambda: True)
    backoff.window.note_wait(10.0)  # waits were short against the cap
    seen, news = news_after(3)
    backoff.wait(60.0, news)  # type: ignore[arg-type]
    assert seen == [4]
    assert sleeps == []


@pytest.mark.parametrize(("spin_s", "waited_s", "allowed"), [
    (60.0, 10.0, False),  # no core to spare beside the ring's writer
    (0.001, 10.0, True),  # waits longer than the spin: a quiet ring
    (60.0, None, True),  # nothing learnt yet
])
def test_no_spin_without_a_spare_core_or_short_waits(
        sleeps: list[float], spin_s: float, waited_s: float | None, allowed: bool) -> None:
    backoff = Backoff(spin_s=spin_s, spin_allowed=lambda: allowed)
    if waited_s is not None:
        backoff.window.note_wait(waited_s)
    seen, news = news_after(3)
    backoff.wait(60.0, news)  # type: ignore[arg-type]
    assert seen == [1]
    assert sleeps == [PAUSE_FIRST_S]


def test_without_spin_each_wait_is_one_sleep_that_doubles_up_to_the_last(
    sleeps: list[float],
) -> None:
    backoff = Backoff(spin_s=0)
    for _ in range(20):
        backoff.wait(60.0, lambda: False)
    assert sleeps[0] == PAUSE_FIRST_S
    assert all(b == min(2 * a, PAUSE_LAST_S) for a, b in itertools.pairwise(sleeps))
    assert sleeps[-1] == PAUSE_LAST_S
    backoff.reset()
    backoff.wait(60.0, lambda: False)
    assert sleeps[-1] == PAUSE_FIRST_S


def test_a_pause_never_outlasts_the_time_left(sleeps: list[float]) -> None:
    backoff = Backoff(spin_s=0)
    for _ in range(20):
        backoff.wait(0.0001, lambda: False)
    assert max(sleeps) == 0.0001


def test_a_negative_spin_is_a_programming_error() -> None:
    with pytest.raises(AssertionError):
        Backoff(spin_s=-1)
