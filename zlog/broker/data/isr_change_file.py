"""A leader's ISR change in flight, on disk: `<partition dir>/isr-change-in-flight`.

An expansion counts its new member in the high watermark from the moment it is proposed, and
the controller may commit it even if the leader never hears back. A leader worker killed with
the change in flight is started again by its supervisor at the same leader epoch; without the
change the new process would compute its high watermark without that member, which may
already be in the committed ISR, and acknowledge batches it lacks (docs/replication.md §3).
So the change is written here before it is sent, and the new process takes it back
(isr_proposals.py) if it was computed from the record the partition is opened with.

Why a file and not the ring header (which outlives the process too): the change is a list
of members with their broker epochs, of no fixed size, while the header's fields are fixed
8-byte words that local readers map; and it is written once per ISR change, which is rare.
It is replaced atomically but not fsynced: it has to outlive a killed process, whose writes
the page cache keeps; a host that loses power comes back as a new broker registration, which
moves its leaderships to a new leader epoch, so a change from before is never resumed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Final

from zlog.broker.data.isr import IsrChange
from zlog.shm_segments.durable_files import replace_atomically
from zlog.types import TopicPartition

log = logging.getLogger(__name__)

CHANGE_FILE: Final = "isr-change-in-flight"


def save_isr_change(directory: Path, change: IsrChange) -> None:
    text = json.dumps({"leader_epoch": change.leader_epoch,
                       "partition_epoch": change.partition_epoch,
                       "new_isr": list(change.new_isr),
                       "member_epochs": [list(pair) for pair in change.member_epochs]})
    replace_atomically(directory / CHANGE_FILE, text.encode())


def load_isr_change(directory: Path) -> IsrChange | None:
    """The stored change, or None (none, or one that does not read back: never resumed)."""
    path = directory / CHANGE_FILE
    try:
        fields = json.loads(path.read_text(encoding="utf-8"))
        return IsrChange(int(fields["leader_epoch"]), int(fields["partition_epoch"]),
                         tuple(int(member) for member in fields["new_isr"]),
                         tuple((int(broker), int(epoch))
                               for broker, epoch in fields["member_epochs"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as error:
        log.warning("%s unreadable (%s): not resumed", path, error)
        return None


def remove_isr_change(directory: Path) -> None:
    (directory / CHANGE_FILE).unlink(missing_ok=True)


class IsrChangeFiles:
    """isr_proposals.IsrChangeStore over the directories of a worker's partitions."""

    def __init__(self, directory_of: Callable[[TopicPartition], Path | None]) -> None:
        self._directory_of = directory_of

    def save(self, tp: TopicPartition, change: IsrChange) -> None:
        directory = self._directory_of(tp)
        if directory is None:
            raise FileNotFoundError(f"{tp.topic}-{tp.partition} is not open here")
        save_isr_change(directory, change)

    def load(self, tp: TopicPartition) -> IsrChange | None:
        directory = self._directory_of(tp)
        return None if directory is None else load_isr_change(directory)

    def remove(self, tp: TopicPartition) -> None:
        directory = self._directory_of(tp)
        if directory is not None:
            remove_isr_change(directory)
