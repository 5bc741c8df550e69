"""A worker's counters and gauges in shared memory, where the supervisor reads them.

The supervisor serves `/metrics` for the whole host (docs/operations-metrics.md), but what
operators graph happens in the workers: the requests they answer, the bytes they take in and
send out, the state of each partition they hold. Handing that over in messages would cost the
worker's loop an encode and a send per period, and the supervisor a decode; instead each
worker writes into a file under the broker's ring directory (`metrics_path`) that the
supervisor maps read-only and reads at a scrape. A counter's update on the hot path is one
add into a `memoryview` of 8-byte words; x86-64 and arm64 store an aligned word whole, so a
reader never sees half of one, and a reader only ever sees a counter that lags by a few
instructions. Nothing here takes a lock.

The supervisor makes each file (`MetricsFile.create`) before the worker starts and keeps it
across that worker's restarts, so the counters keep counting over a crash (Prometheus would
take a reset just as well, but a restart should not look like one).

Layout, all little-endian int64 words:

* a header: magic, layout version, partition slots, latency buckets, worker pid;
* per API the worker serves (every ApiKey has a row): requests, whole-request errors, the sum
  of the time spent on them (ns) and a cumulative count per latency bucket;
* per partition slot: a generation (0: free), the partition number, the topic's name (256
  bytes) and the partition's values (`PartitionField`). The worker takes a slot when it first
  sees the partition and frees it when it no longer holds it; a reader reads the generation,
  the name and the values, then the generation again, and skips the slot if it changed.
"""

from __future__ import annotations

import mmap
import os
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from time import perf_counter_ns
from typing import Final

from zlog.transport.api import ApiKey

MAGIC: Final = 0x7A6C_6F67_6D74_7231  # "zlogmtr1"
LAYOUT_VERSION: Final = 1
PARTITION_SLOTS: Final = 2_048
"""Partitions one worker can report; more are served but not reported (`slots_exhausted`)."""
TOPIC_NAME_BYTES: Final = 256  # a topic's name is at most 249 bytes (topic_configs.py)
METRICS_FILE_PREFIX: Final = "zlog-metrics-worker-"

REQUEST_LATENCY_BUCKETS_S: Final = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
)
"""Upper bounds of the request-latency histogram (seconds); the last bucket is +Inf."""
_BUCKET_BOUNDS_NS: Final = tuple(int(bound * 1e9) for bound in REQUEST_LATENCY_BUCKETS_S)

API_KEYS: Final = tuple(ApiKey)


class _Header(IntEnum):
    MAGIC = 0
    VERSION = 1
    SLOTS = 2
    BUCKETS = 3
    PID = 4
    SLOTS_EXHAUSTED = 5
    WORDS = 8


class SlotKind(IntEnum):
    """What a slot reports."""

    PARTITION = 1  # a replica this worker holds: PartitionField
    GROUP = 2  # a group this worker coordinates: GroupField (number -1)
    GROUP_OFFSET = 3  # a group's committed offset: name "group\0topic", number the partition


_PARTITION: Final = int(SlotKind.PARTITION)


class GroupField(IntEnum):
    MEMBERS = 0  # in a GROUP slot
    COMMITTED_OFFSET = 0  # in a GROUP_OFFSET slot


class PartitionField(IntEnum):
    """One partition's values in its slot, after its generation, number and name."""

    BYTES_IN = 0  # produced bytes appended (a leader's)
    BYTES_OUT = 1  # bytes sent to consumers' fetches
    RECORDS_IN = 2  # records appended, replicated ones included (the log end's advances)
    LOG_START_OFFSET = 3
    LOG_END_OFFSET = 4
    HIGH_WATERMARK = 5
    LEADER_EPOCH = 6
    IS_LEADER = 7
    REPLICAS = 8
    ISR = 9
    MIN_INSYNC_REPLICAS = 10
    SEGMENTS = 11
    PRODUCERS = 12  # producer ids in the partition's idempotence table
    SIZE_BYTES = 13
    RING_UNFLUSHED_BYTES = 14
    RING_CAPACITY_BYTES = 15
    FLUSHES = 16
    FLUSH_NS = 17
    FSYNCS = 18
    FSYNC_NS = 19


BYTES_IN: Final = int(PartitionField.BYTES_IN)  # the hot path's two fields, as plain ints
BYTES_OUT: Final = int(PartitionField.BYTES_OUT)
_API_WORDS: Final = 2 + len(REQUEST_LATENCY_BUCKETS_S) + 1  # errors, ns, buckets and +Inf
_API_ERRORS, _API_NS, _API_BUCKETS = 0, 1, 2  # the requests are the buckets' sum
_NAME_WORDS: Final = TOPIC_NAME_BYTES // 8
_SLOT_GENERATION, _SLOT_KIND, _SLOT_NUMBER, _SLOT_NAME = 0, 1, 2, 3
_SLOT_VALUES: Final = _SLOT_NAME + _NAME_WORDS
_SLOT_WORDS: Final = _SLOT_VALUES + len(PartitionField)
GAUGES: Final = {
    SlotKind.PARTITION: tuple(PartitionField)[PartitionField.LOG_START_OFFSET:],
    SlotKind.GROUP: (GroupField.MEMBERS,),
    SlotKind.GROUP_OFFSET: (GroupField.COMMITTED_OFFSET,),
}
"""What `publish` takes of each kind, in this order: the fields from the first on."""
_FIRST_GAUGE: Final = {int(kind): int(fields[0]) for kind, fields in GAUGES.items()}
_LOG_END_INDEX: Final = PartitionField.LOG_END_OFFSET - PartitionField.LOG_START_OFFSET
_LOG_END_AT: Final = _SLOT_VALUES + PartitionField.LOG_END_OFFSET
_RECORDS_IN_AT: Final = _SLOT_VALUES + PartitionField.RECORDS_IN
_API_BASE: Final = _Header.WORDS
_SLOT_BASE: Final = _API_BASE + len(API_KEYS) * _API_WORDS
_API_BASES: Final = {int(key): _API_BASE + index * _API_WORDS for index, key in enumerate(API_KEYS)}
FILE_BYTES: Final = (_SLOT_BASE + PARTITION_SLOTS * _SLOT_WORDS) * 8


def metrics_path(ring_dir: Path, worker_id: int) -> Path:
    """Where worker `worker_id` of the broker whose rings are in `ring_dir` writes."""
    return ring_dir / f"{METRICS_FILE_PREFIX}{worker_id}"


class MetricsFile:
    """One worker's file, mapped: written by that worker, read by the supervisor."""

    def __init__(self, path: Path, *, writable: bool) -> None:
        flags = os.O_RDWR if writable else os.O_RDONLY
        fd = os.open(path, flags | os.O_CLOEXEC)
        try:
            if os.fstat(fd).st_size != FILE_BYTES:
                raise OSError(f"{path} is not a metrics file of this layout")
            access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
            self._mmap = mmap.mmap(fd, FILE_BYTES, access=access)
        finally:
            os.close(fd)
        self.path = path
        self.words = memoryview(self._mmap).cast("q")
        if self.words[_Header.MAGIC] != MAGIC or self.words[_Header.VERSION] != LAYOUT_VERSION:
            self.close()
            raise OSError(f"{path} is not a metrics file of this layout")

    @classmethod
    def create(cls, path: Path) -> MetricsFile:
        """A file of zeroed counters, or the one already there when its layout is this one
        (a restarted supervisor's workers go on counting)."""
        if path.exists():
            try:
                return cls(path, writable=True)
            except OSError:
                path.unlink()
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.ftruncate(fd, FILE_BYTES)
            header = memoryview(bytearray(_Header.WORDS * 8)).cast("q")
            header[_Header.MAGIC] = MAGIC
            header[_Header.VERSION] = LAYOUT_VERSION
            header[_Header.SLOTS] = PARTITION_SLOTS
            header[_Header.BUCKETS] = len(REQUEST_LATENCY_BUCKETS_S)
            os.pwrite(fd, header.cast("B"), 0)
        finally:
            os.close(fd)
        return cls(path, writable=True)

    def close(self) -> None:
        self.words.release()
        self._mmap.close()


# -- the worker's side ---------------------------------------------------------------------------


class WorkerMetrics:
    """What a worker writes: its requests as they are answered, its partitions' traffic as it
    happens, and the state of its partitions and groups at each `publish` (with each heartbeat
    to its supervisor, every 500 ms)."""

    def __init__(self, metrics_file: MetricsFile) -> None:
        self._file = metrics_file
        self._words = metrics_file.words
        self.clock_ns: Callable[[], int] = perf_counter_ns  # the request path's clock
        self._words[_Header.PID] = os.getpid()
        self._slots: dict[tuple[int, str, int], int] = {}  # (kind, name, number) -> word
        self._partition_values: dict[tuple[str, int], int] = {}  # where its values start
        self._free: list[int] = []
        # What an earlier process of this worker reported, hidden until this one reports the
        # same thing again, which then goes on counting from there (a restarted worker is
        # given back its partitions); reused for others only once no slot is free.
        self._dormant: dict[tuple[int, str, int], int] = {}
        generations = [0]
        for slot in range(PARTITION_SLOTS - 1, -1, -1):
            base = _slot_base(slot)
            generation = self._words[base + _SLOT_GENERATION]
            if not generation:
                self._free.append(slot)
                continue
            generations.append(generation)
            self._words[base + _SLOT_GENERATION] = 0
            self._dormant[_slot_key(self._words, base)] = base
        self._generation = 1 + max(generations)

    def request(self, api_key: int, error: bool, elapsed_ns: int) -> None:
        """One request answered: counted under its API, with its time in the histogram."""
        base = _API_BASES.get(api_key)
        if base is None:
            return
        words = self._words
        words[base + _API_NS] += elapsed_ns
        words[base + _API_BUCKETS + bisect_left(_BUCKET_BOUNDS_NS, elapsed_ns)] += 1
        if error:
            words[base + _API_ERRORS] += 1

    def add(self, topic: str, partition: int, field: int, amount: int) -> None:
        """Count traffic of a partition (a PartitionField: bytes in, bytes out) on the hot
        path: one dictionary look-up and one add."""
        base = self._partition_values.get((topic, partition))
        if base is None:
            base = self._take_slot((_PARTITION, topic, partition))
            if base is None:
                return
            base += _SLOT_VALUES
        self._words[base + field] += amount

    def publish(self, kind: SlotKind, entries: Iterable[SlotValues]) -> None:
        """Everything of one kind this worker reports now, each with its gauges (`GAUGES`
        gives their order); a slot of that kind not among them is freed. A partition's
        records in are counted here, as the advances of its log end."""
        held: set[tuple[int, str, int]] = set()
        words = self._words
        first = _SLOT_VALUES + _FIRST_GAUGE[kind]
        is_partition = kind == _PARTITION
        for name, number, values in entries:
            key = (int(kind), name, number)
            held.add(key)
            base = self._slots.get(key)
            if base is None:
                base = self._take_slot(key)
                if base is None:
                    continue
            if is_partition:
                before, after = words[base + _LOG_END_AT], values[_LOG_END_INDEX]
                if after > before >= 0:
                    words[base + _RECORDS_IN_AT] += after - before
            words[base + first: base + first + len(values)] = values
        for key in [key for key in self._slots if key[0] == kind and key not in held]:
            base = self._slots.pop(key)
            self._partition_values.pop((key[1], key[2]), None)
            words[base + _SLOT_GENERATION] = 0
            self._free.append((base - _SLOT_BASE) // _SLOT_WORDS)

    def _take_slot(self, key: tuple[int, str, int]) -> int | None:
        words = self._words
        base = self._dormant.pop(key, None)
        if base is None:
            base = self._fresh_slot(key)
            if base is None:
                return None
        words[base + _SLOT_GENERATION] = self._generation  # last: the slot is whole now
        self._generation += 1
        self._slots[key] = base
        if key[0] == _PARTITION:
            self._partition_values[(key[1], key[2])] = base + _SLOT_VALUES
        return base

    def _fresh_slot(self, key: tuple[int, str, int]) -> int | None:
        if not self._free and self._dormant:
            self._free.append((self._dormant.popitem()[1] - _SLOT_BASE) // _SLOT_WORDS)
        if not self._free:
            self._words[_Header.SLOTS_EXHAUSTED] = 1
            return None
        kind, name, number = key
        base = _slot_base(self._free.pop())
        words = self._words
        for index in range(_SLOT_WORDS - _SLOT_VALUES):
            words[base + _SLOT_VALUES + index] = 0
        # A new partition's log end is unknown until its first publish: none of the records
        # it held before counts as coming in.
        words[base + _SLOT_VALUES + PartitionField.LOG_END_OFFSET] = -1
        encoded = name.encode()[:TOPIC_NAME_BYTES].ljust(TOPIC_NAME_BYTES, b"\0")
        words[base + _SLOT_NAME: base + _SLOT_NAME + _NAME_WORDS] = memoryview(encoded).cast("q")
        words[base + _SLOT_NUMBER] = number
        words[base + _SLOT_KIND] = kind
        return base


# -- the supervisor's side -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApiSample:
    api_key: ApiKey
    requests: int
    errors: int
    seconds_total: float
    bucket_counts: tuple[int, ...]  # per bucket of REQUEST_LATENCY_BUCKETS_S, then +Inf


SlotValues = tuple[str, int, "array[int]"]
"""(name, number, its gauges in `GAUGES` order, as an array('q')): one thing a worker
reports, as `publish` takes it (one copy into the slot)."""


@dataclass(frozen=True, slots=True)
class SlotSample:
    kind: SlotKind
    name: str  # a topic, a group, or "group\0topic"
    number: int  # the partition; -1 for a group
    values: tuple[int, ...]  # by PartitionField or GroupField


@dataclass(frozen=True, slots=True)
class WorkerSample:
    """One worker's file as read at one scrape."""

    pid: int
    apis: tuple[ApiSample, ...]
    slots: tuple[SlotSample, ...]
    slots_exhausted: bool

    def of_kind(self, kind: SlotKind) -> Iterator[SlotSample]:
        return (slot for slot in self.slots if slot.kind == kind)


def read_sample(metrics_file: MetricsFile) -> WorkerSample:
    words = metrics_file.words
    apis: list[ApiSample] = []
    for index, key in enumerate(API_KEYS):
        base = _API_BASE + index * _API_WORDS
        buckets = tuple(words[base + _API_BUCKETS: base + _API_BUCKETS
                              + len(REQUEST_LATENCY_BUCKETS_S) + 1])
        requests = sum(buckets)
        if not requests:
            continue
        apis.append(ApiSample(key, requests, words[base + _API_ERRORS],
                              words[base + _API_NS] / 1e9, buckets))
    return WorkerSample(words[_Header.PID], tuple(apis), tuple(_read_slots(words)),
                        bool(words[_Header.SLOTS_EXHAUSTED]))


def _read_slots(words: memoryview) -> Iterator[SlotSample]:
    for slot in range(PARTITION_SLOTS):
        base = _slot_base(slot)
        generation = words[base + _SLOT_GENERATION]
        if not generation:
            continue
        kind, name, number = _slot_key(words, base)
        values = tuple(words[base + _SLOT_VALUES: base + _SLOT_WORDS])
        if words[base + _SLOT_GENERATION] == generation and name and kind in _KINDS:
            yield SlotSample(SlotKind(kind), name, number, values)


_KINDS: Final = frozenset(int(kind) for kind in SlotKind)


def _slot_key(words: memoryview, base: int) -> tuple[int, str, int]:
    return words[base + _SLOT_KIND], _read_name(words, base), words[base + _SLOT_NUMBER]


def _slot_base(slot: int) -> int:
    return _SLOT_BASE + slot * _SLOT_WORDS


def _read_name(words: memoryview, base: int) -> str:
    raw = words[base + _SLOT_NAME: base + _SLOT_NAME + _NAME_WORDS].cast("B").tobytes()
    return raw.rstrip(b"\0").decode(errors="replace")
