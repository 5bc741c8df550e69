"""The planted-bug switch is off unless its variable names a bug, and refuses a misspelling."""

from __future__ import annotations

import pytest

from zlog.broker.data import planted_bug as switch


def test_off_without_the_variable_or_with_it_empty() -> None:
    assert switch.planted_bug({}) is None
    assert switch.planted_bug({switch.PLANTED_BUG_ENV: ""}) is None
    assert switch.planted_bug({"ZLOG_PLANTED_BUG": switch.ACK_BEFORE_REPLICATION}) is None


def test_names_the_bug_it_plants() -> None:
    environ = {switch.PLANTED_BUG_ENV: switch.ACK_BEFORE_REPLICATION}
    assert switch.planted_bug(environ) == switch.ACK_BEFORE_REPLICATION


def test_a_value_naming_no_bug_is_refused_with_the_variable_and_the_choices() -> None:
    with pytest.raises(ValueError, match=f"{switch.PLANTED_BUG_ENV} is one of "
                                         f"{switch.ACK_BEFORE_REPLICATION} or unset"):
        switch.planted_bug({switch.PLANTED_BUG_ENV: "ack-early"})


def test_off_in_this_process() -> None:
    """The test suite's own brokers run without it: only the harness plants it."""
    assert switch.ACKS_ALL_AT_APPEND is False
