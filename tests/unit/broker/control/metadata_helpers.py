"""Applying typed metadata commands to a state machine, as a committed proposal would."""

from __future__ import annotations

from zlog.broker.control.metadata.commands import (
    Command,
    Result,
    decode_result,
    encode_command,
)
from zlog.broker.control.metadata.state_machine import MetadataStateMachine


def apply_command(fsm: MetadataStateMachine, command: Command) -> Result:
    """The command's result; its error raised, as a proposer would hear it."""
    return decode_result(type(command).RESULT, fsm.apply(encode_command(command)))
