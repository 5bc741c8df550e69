"""The final read: fresh consumers read every key from the beginning to its end.

Run once the cluster has healed and every partition is fully replicated, as Jepsen's final
phase is: the checker's loss checks need every acknowledged value to have had its chance to
be read. The drain's operations go into the history under a process of their own (ok polls
bound Jepsen's lost-write check), and what they read, per key, is the final full read that
lost-acked-final and phantom-read compare against.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Final, NamedTuple

from zlog_jepsen.client_adapter import ClientAdapter
from zlog_jepsen.history import FinalRead, HistoryWriter, poll_value

POLL_TIMEOUT_MS: Final = 500


class LogBounds(NamedTuple):
    """Each key's log start and log end (its high watermark, once fully replicated)."""

    starts: Mapping[int, int]
    ends: Mapping[int, int]


def drain(client: ClientAdapter, bounds: LogBounds, writer: HistoryWriter,
          process: int, timeout_s: float) -> tuple[FinalRead, bool]:
    """Read each key from its log start to its end; the records read, and whether every key
    got there within `timeout_s`. A key whose log start is its end (retention deleted all it
    held) has nothing to read."""
    keys = sorted(bounds.ends)
    writer.append(process, "invoke", "assign", keys, seek_to_beginning=True)
    client.assign(keys, seek_to_beginning=True)
    writer.append(process, "ok", "assign", keys, seek_to_beginning=True)
    final: FinalRead = {key: [] for key in keys}
    deadline = time.monotonic() + timeout_s
    while not _complete(final, bounds) and time.monotonic() < deadline:
        writer.append(process, "invoke", "poll", poll_value())
        polled = client.poll(POLL_TIMEOUT_MS).polled
        writer.append(process, "ok", "poll", poll_value(polled))
        for key, pairs in polled.items():
            final.setdefault(key, []).extend(pairs)
    return final, _complete(final, bounds)


def _complete(final: FinalRead, bounds: LogBounds) -> bool:
    return all(end <= bounds.starts.get(key, 0)
               or (bool(final[key]) and final[key][-1][0] + 1 >= end)
               for key, end in bounds.ends.items())
