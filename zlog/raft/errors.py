"""Operating errors of the Raft core: what a caller of `RawNode` can get back and act on.

Each carries a Kafka error code (zlog.errors) so the runner can turn it into a wire reply
unchanged. Broken invariants are not errors here: they are assertions and crash the process.
"""

from __future__ import annotations

from zlog.errors import ErrorCode, ZlogError


class RaftError(ZlogError):
    """Base of the errors the Raft core raises to its caller."""


class NotLeaderError(RaftError):
    """The request needs the leader and this node is not it (or is handing leadership off):
    not applied, safe to retry at `leader_hint`, the leader this node knows of (None: none).

    The one "not the leader" of Raft, from the core to the runner's callers: NOT_LEADER_OR_FOLLOWER,
    as KRaft answers it. A host whose Raft leader plays another part names that part's code once,
    keeping the hint (`code`): the metadata log's leader is the controller, so the broker's
    metadata log turns it into NOT_CONTROLLER (broker/control/metadata/log.py).
    """

    def __init__(
        self, leader_hint: int | None, message: str = "",
        code: ErrorCode = ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ) -> None:
        hint = "unknown" if leader_hint is None else str(leader_hint)
        super().__init__(code, message or f"not the leader (leader: {hint})")
        self.leader_hint = leader_hint


class ProposalDroppedError(RaftError):
    """The leader refused the proposal for now: a transfer is under way or too much is
    uncommitted. Retriable: the caller should back off and try again."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.THROTTLING_QUOTA_EXCEEDED, message)


class ConfigChangeError(RaftError):
    """The membership change breaks a rule of docs/raft.md §4.11."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INVALID_REQUEST) -> None:
        super().__init__(code, message)


class LeaderTransferError(RaftError):
    """The transfer target cannot take over (not a voter in the current configuration)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_REQUEST, message)
