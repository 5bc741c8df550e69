"""The cluster's metadata: a deterministic state machine fed by the Chained-Raft log.

Every change to cluster state is a command (`commands.py`: one typed class each)
committed in the metadata log and applied here, in log order, on every supervisor
(zlog.raft.fsm.StateMachine). Apply is deterministic and never raises: a malformed or refused
command becomes the same error result on every node, and the proposer learns the outcome from
that result.

The state's records are `state.py`'s; what each command does to them, `apply.py`'s.

Apply never mutates published state: it builds a new frozen ClusterState and swaps it in with
one attribute store, so another thread may read `state` at any time and sees one consistent
version (the supervisor's loop reads it while the Raft thread applies).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Final

from zlog.broker.control.metadata.apply import apply_command
from zlog.broker.control.metadata.commands import (
    decode_command,
    encode_error_result,
    encode_result,
)
from zlog.broker.control.metadata.state import ClusterState, state_from_json, state_to_json
from zlog.errors import ZlogError

_JSON_SEPARATORS: Final = (",", ":")


class MetadataStateMachine:
    """zlog.raft.fsm.StateMachine over ClusterState. Only the Raft loop thread calls apply."""

    def __init__(self) -> None:
        self.state = ClusterState()

    def apply(self, command: bytes) -> bytes:
        state = replace(self.state, applied_commands=self.state.applied_commands + 1)
        try:
            state, result = apply_command(state, decode_command(command))
            encoded = encode_result(result)
        except ZlogError as error:  # refused: the state stays as it was, but for the count
            encoded = encode_error_result(error.code, error.message)
        assert state.applied_commands == self.state.applied_commands + 1
        self.state = state
        return encoded

    def query(self, query: bytes) -> bytes:
        """Every query reads the whole state: metadata is small, and reads are rare."""
        del query
        return self.snapshot()

    def snapshot(self) -> bytes:
        return json.dumps(state_to_json(self.state), sort_keys=True,
                          separators=_JSON_SEPARATORS).encode()

    def restore(self, data: bytes) -> None:
        self.state = state_from_json(json.loads(data))

    def digest(self) -> str:
        """Equal on every node that applied the same commands (the Raft runner reports it)."""
        return hashlib.sha256(self.snapshot()).hexdigest()[:16]
