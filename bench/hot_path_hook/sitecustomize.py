"""Python-call counting for `bench/hot_path_count.py`, loaded into every process it starts.

`hot_path_count.py` puts this directory first on PYTHONPATH and names a results directory in
ZLOG_HOT_PATH_DIR; Python imports `sitecustomize` at start, so the broker's supervisor, its fork
server (and the workers it forks, which inherit the main thread's profile function), the
producer and the consumer all count. Nothing is counted until the first SIGUSR2; the second
writes `<pid>.json` into that directory and stops. Counted: Python function calls ("call") and
calls of C functions ("c_call") per thread, and the changes of the running Python thread seen
between two events: a GIL hand-off from one Python thread to another, as often as the profiler
can see it. A process started without ZLOG_HOT_PATH_DIR is untouched.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

DIRECTORY = os.environ.get("ZLOG_HOT_PATH_DIR")
COUNTED_EVENTS = frozenset(("call", "c_call"))


class Counter:
    """The profile function and the counts of one process."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.active = False
        self.counts: dict[tuple[int, str], int] = {}
        self.names: dict[int, str] = {}
        self.last_thread = 0
        self.thread_changes = 0

    def profile(self, _frame: FrameType, event: str, _arg: Any) -> None:
        if not self.active or event not in COUNTED_EVENTS:
            return
        ident = threading.get_ident()
        if ident != self.last_thread:
            if self.last_thread:
                self.thread_changes += 1
            self.last_thread = ident
        key = (ident, event)
        self.counts[key] = self.counts.get(key, 0) + 1

    def toggle(self, _signum: int, _frame: FrameType | None) -> None:
        if not self.active:
            self.counts.clear()
            self.thread_changes = 0
            self.last_thread = 0
            self.active = True
            return
        self.active = False
        self.names = {thread.ident: thread.name for thread in threading.enumerate()
                      if thread.ident is not None}
        threads: dict[str, dict[str, int]] = {}
        for (ident, event), count in self.counts.items():
            name = f"{self.names.get(ident, 'ended thread')} ({ident})"
            threads.setdefault(name, {"call": 0, "c_call": 0})[event] += count
        result = {"pid": os.getpid(), "argv": sys.argv, "threads": threads,
                  "thread_changes": self.thread_changes}
        (self.directory / f"{os.getpid()}.json").write_text(json.dumps(result))


def install(directory: Path) -> None:
    counter = Counter(directory)
    signal.signal(signal.SIGUSR2, counter.toggle)
    threading.setprofile(counter.profile)
    sys.setprofile(counter.profile)


if DIRECTORY:
    install(Path(DIRECTORY))
