"""One member of a consumer group, as its own process, for tests that kill members with -9.

Usage: group_member_main.py BOOTSTRAP GROUP TOPIC EVENTS_PATH PROTOCOL SESSION_MS [INSTANCE_ID]

Appends one JSON line per event to EVENTS_PATH, flushed at once, each stamped with
time.monotonic() (one clock for every process of the machine): "assign", "revoke" and "lost"
with the partitions, "record" with a partition and offset. Records are committed after they
are written down (auto commit off), so a member that dies leaves behind at most records that
its successor reads again, never a commit past a record nobody wrote down.
"""

from __future__ import annotations

import json
import sys
import time
from typing import IO

from zlog.client import Consumer, TopicPartition
from zlog.errors import ZlogError


def _event(out: IO[str], kind: str, **fields: object) -> None:
    out.write(json.dumps({"t": time.monotonic(), "event": kind, **fields}) + "\n")
    out.flush()


def main() -> None:
    bootstrap, group, topic, events_path, protocol = sys.argv[1:6]
    session_ms = int(sys.argv[6])
    instance_id = sys.argv[7] if len(sys.argv) > 7 else None
    with open(events_path, "a", encoding="utf-8") as out:
        def callback(kind: str) -> object:
            return lambda tps: _event(out, kind, partitions=sorted(p for _, p in tps))

        consumer = Consumer(bootstrap, group_id=group, group_protocol=protocol,
                            auto_offset_reset="earliest", enable_auto_commit=False,
                            session_timeout_ms=session_ms, heartbeat_interval_ms=500,
                            group_instance_id=instance_id, max_poll_interval_ms=60_000)
        consumer.subscribe([topic], on_assign=callback("assign"),  # type: ignore[arg-type]
                           on_revoke=callback("revoke"),  # type: ignore[arg-type]
                           on_lost=callback("lost"))  # type: ignore[arg-type]
        _event(out, "started")
        while True:
            records = consumer.poll(100)
            for record in records:
                _event(out, "record", partition=record.partition, offset=record.offset)
            if records:
                done: dict[TopicPartition, int] = {}
                for record in records:
                    done[TopicPartition(topic, record.partition)] = record.offset + 1
                try:
                    consumer.commit(done)
                except ZlogError as error:  # the next owner reads them again
                    _event(out, "commit_refused", code=error.code.name)


if __name__ == "__main__":
    main()
