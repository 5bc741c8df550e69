"""The client processes of a run: each sends and polls on the keys, every operation recorded.

Each worker is an OS process of its own (spawned, so that it shares no threads, sockets or
locks with the runner, whose fault proxies and nemesis keep running), doing one operation at
a time as a Jepsen client does: a send of one unique value to a random key, or a poll, and
now and then a new assignment. Every operation is recorded as an invocation before it
starts and a completion when it ends (ok, fail or info by the rule of zlog_jepsen.outcome).
Workers do not write the history themselves: they put each event on one queue, and the
runner's single writer numbers and stamps them in the order they arrive, so one process's
events keep their order and the file is never written by two processes at once.

After an info completion the operation may still happen later, so the process that issued
it must never issue another one (the checker's per-process orders assume it): the worker
drops its client and carries on as process p + concurrency (docs/reliability.md, the
history format).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.context import SpawnProcess
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event as StopEvent
from typing import Any, Final, Literal

from zlog_jepsen.client_adapter import ClientAdapter, ClientFactory, ClientSettings, SendResult
from zlog_jepsen.history import (
    EventType,
    Function,
    HistoryWriter,
    SendRecord,
    offsets_value,
    poll_value,
    send_ok_value,
    send_value,
)
from zlog_jepsen.outcome import error_name, outcome_of

Mode = Literal["assign", "subscribe"]
MODES: Final[tuple[Mode, ...]] = ("assign", "subscribe")
QueuedEvent = tuple[int, EventType, Function, Any, dict[str, Any]]
"""(process, type, f, value, the optional fields): one event on its way to the writer."""
_DRAIN_POLL_S: Final = 0.1
_WORKER_EXIT_S: Final = 15.0


@dataclass(frozen=True)
class WorkloadConfig:
    keys: int = 4
    concurrency: int = 4
    mode: Mode = "assign"
    seed: int = 0
    send_fraction: float = 0.6
    reassign_probability: float = 1 / 32
    poll_timeout_ms: int = 200
    op_interval_ms: int = 10  # a pause between one worker's operations, so 2 cores keep up


@dataclass(frozen=True)
class WorkerSetup:
    """What every worker process starts from (picklable: the factory is a module's
    function)."""

    config: WorkloadConfig
    settings: ClientSettings
    factory: ClientFactory


class Recorder:
    """One worker's events, under its current process number."""

    def __init__(self, events: Queue[QueuedEvent], process: int) -> None:
        self.events = events
        self.process = process

    def event(self, type: EventType, f: Function, value: Any, **extras: Any) -> None:
        self.events.put((self.process, type, f, value,
                         {k: v for k, v in extras.items() if v is not None}))


def send_outcome(results: list[SendResult]) -> tuple[EventType, str | None]:
    """ok when every record was acknowledged; fail only when each one failed definitely
    (nothing of the operation can be in the log); info otherwise."""
    errors = [r.error for r in results if r.error is not None]
    if not errors:
        return "ok", None
    definite = len(errors) == len(results) and all(outcome_of(e) == "fail" for e in errors)
    return ("fail" if definite else "info"), error_name(errors[0])


class Worker:
    """The loop of one client process (`run` is what the spawned process executes)."""

    def __init__(self, slot: int, setup: WorkerSetup, events: Queue[QueuedEvent],
                 stop: StopEvent) -> None:
        self.slot = slot
        self.config = config = setup.config
        self.settings = setup.settings
        self.factory = setup.factory
        self.stop = stop
        self.random = random.Random(config.seed * 1_000 + slot)
        self.recorder = Recorder(events, slot)
        self.sent = 0
        self.client: ClientAdapter | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                if self.client is None:
                    self.client = self.factory(self.settings)
                    self._join()
                else:
                    self._one_operation()
                self.stop.wait(self.config.op_interval_ms / 1000)
        finally:
            if self.client is not None:
                self.client.close()

    def _one_operation(self) -> None:
        config = self.config
        if config.mode == "assign" and self.random.random() < config.reassign_probability:
            self._assign(self._some_keys())
        elif self.random.random() < config.send_fraction:
            self._send()
        else:
            self._poll()

    def _join(self) -> None:
        if self.config.mode == "subscribe":
            self._subscribe()
        else:
            self._assign(self._some_keys())

    def _some_keys(self) -> list[int]:
        keys = range(self.config.keys)
        return sorted(self.random.sample(keys, self.random.randint(1, len(keys))))

    def _next_value(self) -> int:
        """Unique across the run: every worker counts in its own residue class."""
        self.sent += 1
        return self.sent * self.config.concurrency + self.slot

    # -- operations -----------------------------------------------------------------------

    def _send(self) -> None:
        client = self._client()
        records = [(self.random.randrange(self.config.keys), self._next_value())]
        self.recorder.event("invoke", "send", send_value(records))
        try:
            results = client.send(records)
        except Exception as error:
            self._completed(outcome_of(error), "send", send_value(records), error)
            return
        type_, error_text = send_outcome(results)
        value = send_ok_value(SendRecord(r.key, r.value, r.offset) for r in results)
        self._completed(type_, "send", value, error_text)

    def _poll(self) -> None:
        client = self._client()
        self.recorder.event("invoke", "poll", poll_value())
        try:
            result = client.poll(self.config.poll_timeout_ms)
        except Exception as error:
            self._completed("info", "poll", poll_value(), error)
            return
        self.recorder.event("ok", "poll", poll_value(result.polled),
                            rebalance_log=result.rebalance_log or None)
        if self.config.mode == "subscribe" and result.polled:
            self._commit()

    def _commit(self) -> None:
        """As Jepsen's client does under subscribe: commit what was polled before going on."""
        client = self._client()
        try:
            offsets = client.positions()
        except Exception:  # nothing invoked yet: only the client is suspect
            self._drop_client()
            return
        value = offsets_value(offsets)
        self.recorder.event("invoke", "commit", value, group=self.settings.group_id)
        try:
            client.commit(offsets)
        except Exception as error:
            self._completed(outcome_of(error), "commit", value, error)
            return
        self.recorder.event("ok", "commit", value, group=self.settings.group_id)

    def _assign(self, keys: list[int]) -> None:
        client = self._client()
        self.recorder.event("invoke", "assign", keys)
        try:
            client.assign(keys)
        except Exception as error:
            self._completed("info", "assign", keys, error)
            return
        self.recorder.event("ok", "assign", keys)

    def _subscribe(self) -> None:
        client = self._client()
        keys = list(range(self.config.keys))
        group = self.settings.group_id
        self.recorder.event("invoke", "subscribe", keys, group=group)
        try:
            client.subscribe(keys)
        except Exception as error:
            self._completed("info", "subscribe", keys, error)
            return
        self.recorder.event("ok", "subscribe", keys, group=group)

    def _client(self) -> ClientAdapter:
        assert self.client is not None
        return self.client

    def _completed(self, type_: EventType, f: Function, value: Any,
                   error: BaseException | str | None) -> None:
        """Record a completion other than a plain ok; after an info, drop the client and go
        on as a new process (an operation of unknown outcome stays open for ever)."""
        text = error if isinstance(error, str) or error is None else error_name(error)
        group = self.settings.group_id if f in ("commit", "subscribe") else None
        self.recorder.event(type_, f, value, error=text, group=group)
        if type_ == "info":
            self._drop_client()
            self.recorder.process += self.config.concurrency

    def _drop_client(self) -> None:
        if self.client is not None:
            self.client.close()
        self.client = None


def _worker_main(slot: int, setup: WorkerSetup, events: Queue[QueuedEvent],
                 stop: StopEvent) -> None:
    Worker(slot, setup, events, stop).run()


class Workload:
    """The worker processes and the thread that writes their events into the history."""

    def __init__(self, setup: WorkerSetup, writer: HistoryWriter) -> None:
        self.writer = writer
        context = multiprocessing.get_context("spawn")
        self.events: Queue[QueuedEvent] = context.Queue()
        self.stop_event = context.Event()
        self.processes: list[SpawnProcess] = [
            context.Process(target=_worker_main, name=f"jepsen-worker-{slot}", daemon=True,
                            args=(slot, setup, self.events, self.stop_event))
            for slot in range(setup.config.concurrency)
        ]
        self._draining = threading.Event()
        self._drain = threading.Thread(target=self._write_events, name="history-writer",
                                       daemon=True)

    def start(self) -> None:
        self._draining.set()
        self._drain.start()
        for process in self.processes:
            process.start()

    def stop(self) -> None:
        """Each worker finishes the operation it is in (so its completion is recorded), then
        exits; one that does not within the deadline is killed (its open operation stays
        open in the history, as an info would)."""
        self.stop_event.set()
        for process in self.processes:
            process.join(_WORKER_EXIT_S)
            if process.is_alive():
                process.kill()
                process.join(_WORKER_EXIT_S)
        self._draining.clear()
        self._drain.join()

    def _write_events(self) -> None:
        while True:
            try:
                process, type_, f, value, extras = self.events.get(timeout=_DRAIN_POLL_S)
            except queue.Empty:
                if not self._draining.is_set():
                    return
                continue
            self.writer.append(process, type_, f, value, **extras)


@contextlib.contextmanager
def running(workload: Workload) -> Iterator[Workload]:
    workload.start()
    try:
        yield workload
    finally:
        workload.stop()
