"""How long a waiter on a local queue spins: a few of its recent waits, capped, none once
waits are long, and never on a machine without a core beside the queue's two sides.

Spec: zlog/transport/spin_window.py.
"""

from __future__ import annotations

import pytest

from zlog.transport.spin_window import SpinWindow, spin_allowed


def window(*waits_s: float, allowed: bool = True) -> float:
    spin = SpinWindow(cap_s=200e-6, waits=3)
    spin.allowed = allowed
    for waited_s in waits_s:
        spin.note_wait(waited_s)
    return spin.window_s()


def test_a_few_recent_waits_capped() -> None:
    assert window(20e-6) == pytest.approx(60e-6)
    assert window(100e-6) == pytest.approx(200e-6)


def test_no_spin_before_a_wait_is_known_or_once_waits_are_long() -> None:
    assert window() == 0.0
    assert window(5e-3) == 0.0
    assert window(5e-3, *[20e-6] * 30) > 0.0  # it comes back once waits are short again


def test_no_spin_when_the_machine_forbids_it() -> None:
    assert window(20e-6, allowed=False) == 0.0


@pytest.mark.parametrize(("cores", "load", "allowed"), [
    (1, 0.0, False), (2, 0.0, False),  # the two sides of the queue take both cores
    (3, 0.5, True), (3, 1.5, False), (16, 3.0, True), (16, 14.5, False),
])
def test_a_third_core_must_be_free(cores: int, load: float, allowed: bool) -> None:
    assert spin_allowed(cores, load) is allowed
