"""Members of a consumer group run as processes of their own (group_member_main.py), and what
they wrote down: every assignment, revocation and record, stamped with a machine-wide monotonic
time, so a test can check that no partition had two owners at one instant and that nothing was
skipped, across kills of members and of brokers."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from zlog_testbed.broker_process import REPO_ROOT


@dataclass
class MemberProcess:
    """A member in its own process, and what it wrote down."""

    events_path: Path
    process: subprocess.Popen[bytes]
    killed_at: float | None = None

    def events(self) -> list[dict[str, object]]:
        if not self.events_path.exists():
            return []
        lines = self.events_path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def owned(self) -> set[int]:
        held: set[int] = set()
        for event in self.events():
            partitions = set(event.get("partitions", []))  # type: ignore[call-overload]
            if event["event"] == "assign":
                held |= partitions
            elif event["event"] in ("revoke", "lost"):
                held -= partitions
        return held

    def records(self) -> set[tuple[int, int]]:
        return {(int(e["partition"]), int(e["offset"]))  # type: ignore[call-overload]
                for e in self.events() if e["event"] == "record"}

    def kill(self) -> None:
        self.killed_at = time.monotonic()
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)


@dataclass
class Members:
    bootstrap: str
    directory: Path
    group: str
    topic: str
    protocol: str
    session_ms: int
    partitions: int
    started: list[MemberProcess] = field(default_factory=list)

    def start(self, instance_id: str | None = None) -> MemberProcess:
        path = self.directory / f"member-{len(self.started)}.jsonl"
        command = [sys.executable, "-m", "tests.integration.group_member_main",
                   self.bootstrap, self.group, self.topic, str(path), self.protocol,
                   str(self.session_ms)]
        if instance_id is not None:
            command.append(instance_id)
        environ = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        member = MemberProcess(path, subprocess.Popen(command, cwd=REPO_ROOT, env=environ))
        self.started.append(member)
        return member

    def stop(self) -> None:
        for member in self.started:
            if member.process.poll() is None:
                member.kill()

    def alive(self) -> list[MemberProcess]:
        return [m for m in self.started if m.killed_at is None]

    def split_evenly(self) -> bool:
        owned = [m.owned() for m in self.alive()]
        return sorted(len(o) for o in owned) == [self.partitions // len(owned)] * len(owned) \
            and set().union(*owned) == set(range(self.partitions))

    def consumed(self) -> set[tuple[int, int]]:
        return set().union(*(m.records() for m in self.started))

    def assert_no_overlap(self) -> None:
        """Each partition had at most one owner at any instant: the intervals between an
        assign and the revoke/lost (or the kill, or now) never overlap across members."""
        intervals: dict[int, list[tuple[float, float, int]]] = {}
        for index, member in enumerate(self.started):
            since: dict[int, float] = {}
            end = member.killed_at or time.monotonic()
            for event in member.events():
                kind, at = event["event"], float(event["t"])  # type: ignore[arg-type]
                for partition in event.get("partitions", []):  # type: ignore[attr-defined]
                    if kind == "assign":
                        since[partition] = at
                    elif kind in ("revoke", "lost") and partition in since:
                        intervals.setdefault(partition, []).append(
                            (since.pop(partition), at, index))
            for partition, start in since.items():
                intervals.setdefault(partition, []).append((start, end, index))
        for partition, spans in intervals.items():
            spans.sort()
            for (_, end, first), (start, _, second) in itertools.pairwise(spans):
                assert end <= start, (f"partition {partition} owned by members {first} and "
                                      f"{second} at once: {spans}")
