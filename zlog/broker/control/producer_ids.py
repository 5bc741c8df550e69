"""InitProducerId: producer ids handed out from blocks that the metadata log allocates.

One proposal (AllocateProducerIds) takes a block of `PRODUCER_ID_BLOCK_SIZE` ids, so a restart
never hands out an id twice and a thousand producers cost one commit. Requests that arrive
while no id is left wait for the next block, at most `limits.PRODUCER_ID_WAITERS_MAX` of them;
past that they are throttled. Called only from the supervisor's loop thread, like the rest of
the control plane; the answers go out through the control plane's `Reply`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Final

from zlog import limits
from zlog.broker.control.metadata.commands import (
    AllocateProducerIds,
    ProducerIdsAllocated,
    Propose,
    Result,
)
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.codec import RequestHeader
from zlog.transport.messages import (
    Response,
)
from zlog.transport.messages.admin import (
    InitProducerIdRequestV0,
    InitProducerIdResponseV0,
)

PRODUCER_ID_BLOCK_SIZE: Final = 1_000  # ids taken from the metadata log per proposal
assert PRODUCER_ID_BLOCK_SIZE <= limits.PRODUCER_IDS_PER_COMMAND_MAX



class ProducerIdBlocks:
    """The current block of ids and the InitProducerId requests waiting for one."""

    def __init__(self, propose: Propose,
                 reply: Callable[[bytes, RequestHeader, Response], None]) -> None:
        self._propose = propose  # commit a command; Done runs later on the loop thread
        self._reply = reply  # send a response to a client
        self._producer_ids = range(0)
        self._waiters: deque[tuple[bytes, RequestHeader]] = deque()
        self._allocating = False

    @property
    def waiting_count(self) -> int:
        return len(self._waiters)

    def init_producer_id(self, identity: bytes, header: RequestHeader,
                         request: InitProducerIdRequestV0) -> None:
        if request.transactional_id is not None:
            self._reply(identity, header, InitProducerIdResponseV0(
                int(ErrorCode.INVALID_REQUEST), -1, -1))
            return
        if len(self._waiters) >= limits.PRODUCER_ID_WAITERS_MAX:
            self._reply(identity, header, InitProducerIdResponseV0(
                int(ErrorCode.THROTTLING_QUOTA_EXCEEDED), -1, -1))
            return
        self._waiters.append((identity, header))
        self._hand_out()

    def shut_down(self) -> None:
        """Answer every waiting request: the broker is going away."""
        while self._waiters:
            identity, header = self._waiters.popleft()
            self._reply(identity, header, InitProducerIdResponseV0(
                int(ErrorCode.BROKER_NOT_AVAILABLE), -1, -1))

    def _hand_out(self) -> None:
        """Answer waiters from the current block; fetch a new block when it runs out."""
        while self._waiters and self._producer_ids:
            identity, header = self._waiters.popleft()
            producer_id = self._producer_ids[0]
            self._producer_ids = self._producer_ids[1:]
            self._reply(identity, header, InitProducerIdResponseV0(0, producer_id, 0))
        if self._waiters and not self._allocating:
            self._allocating = True
            self._propose(AllocateProducerIds(PRODUCER_ID_BLOCK_SIZE), self._allocated)

    def _allocated(self, result: Result | None, error: ZlogError | None) -> None:
        self._allocating = False
        if result is None:
            assert error is not None
            while self._waiters:
                identity, header = self._waiters.popleft()
                self._reply(identity, header,
                            InitProducerIdResponseV0(int(error.code), -1, -1))
            return
        assert isinstance(result, ProducerIdsAllocated)
        self._producer_ids = range(result.first_id, result.first_id + result.count)
        self._hand_out()
