"""The supervisor's loop watch (zlog/broker/control/loop_watch.py), on a clock of its own."""

from __future__ import annotations

import pytest

from zlog.broker.config import BrokerConfig, ConfigError
from zlog.broker.control.loop_watch import LoopWatch


def test_a_loop_is_stalled_only_past_the_timeout_since_its_last_turn() -> None:
    watch = LoopWatch(stall_timeout_ms=1_000, turned_ms=5_000)
    assert not watch.stalled(5_000)
    assert not watch.stalled(6_000), "exactly the timeout: not yet"
    assert watch.stalled(6_001)
    watch.turned(6_001)
    assert not watch.stalled(7_001)
    assert watch.stalled(7_002)


def test_the_default_bound_is_twice_the_election_timeout() -> None:
    assert BrokerConfig().controller_stall_timeout_effective_ms == 2 * 50 * 10
    assert BrokerConfig(raft_tick_ms=100).controller_stall_timeout_effective_ms == 2_000
    assert BrokerConfig(controller_stall_timeout_ms=700).controller_stall_timeout_effective_ms \
        == 700


def test_a_bound_below_the_election_timeout_is_refused() -> None:
    with pytest.raises(ConfigError, match="controller_stall_timeout_ms"):
        BrokerConfig(controller_stall_timeout_ms=499)
