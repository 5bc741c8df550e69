"""Sends that wait for their topic's partition count, because `Producer.send` never waits for
metadata: queued once the sender learns the count, failed once the cluster says the topic does
not exist or max_block_ms passes, naming the last reason heard.

They live in the producer's shared state (`sender.SharedState.deferred`), in send order per
topic, and hold their bytes of buffer_memory until placed. Everything here runs with the shared
lock held; what comes back to be failed, the caller fails outside it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zlog.errors import ErrorCode, ZlogError

if TYPE_CHECKING:
    from zlog.client.sender import SharedState


@dataclass(slots=True, eq=False)
class DeferredSend:
    """A send whose topic's partition count is not known yet (`Producer.send` never waits)."""

    size_bytes: int  # held of buffer_memory until placed
    deadline_ms: int  # monotonic: max_block_ms after the send; then it fails
    place: Callable[[int], object]  # with the lock held, given the partition count: queue it
    fail: Callable[[BaseException], None]  # outside the lock: fail its future
    failed: bool = False


Failed = list[tuple[DeferredSend, ZlogError]]


def place_deferred(shared: SharedState, topic: str, count: int) -> Failed:
    """Queue the sends that waited for `topic`, in order; those that cannot be placed (a
    partition the topic does not have) come back to be failed."""
    refused: Failed = []
    for send in shared.deferred.pop(topic, []):
        shared.deferred_bytes -= send.size_bytes
        try:
            send.place(count)
        except ZlogError as error:
            send.failed = True
            refused.append((send, error))
    return refused


def take_deferred(shared: SharedState, topic: str, error: ZlogError) -> Failed:
    """Remove the sends waiting for `topic`, to be failed with `error`."""
    taken = shared.deferred.pop(topic, [])
    for send in taken:
        send.failed = True
        shared.deferred_bytes -= send.size_bytes
    return [(send, error) for send in taken]


def expire_deferred(shared: SharedState, now_ms: int) -> Failed:
    """Remove the sends that waited max_block_ms for metadata, to be failed."""
    expired: Failed = []
    for topic in list(shared.deferred):
        sends = shared.deferred[topic]
        due = [send for send in sends if send.deadline_ms <= now_ms]
        if not due:
            continue
        error = _metadata_wait_error(topic, shared.topic_errors.get(topic))
        for send in due:
            send.failed = True
            shared.deferred_bytes -= send.size_bytes
            expired.append((send, error))
        sends[:] = [send for send in sends if send.deadline_ms > now_ms]
        if not sends:
            del shared.deferred[topic]
            shared.wanted_topics.discard(topic)
    return expired


def _metadata_wait_error(topic: str, last: ZlogError | None) -> ZlogError:
    reason = f"no metadata for topic {topic!r} within max_block_ms"
    if last is None:
        return ZlogError(ErrorCode.REQUEST_TIMED_OUT, reason)
    return ZlogError(last.code, f"{reason}: {last.message}")
