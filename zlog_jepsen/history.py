"""The history of a run: one event per line of JSON, written as it happens, read back checked.

A history is what the checker judges, so it must outlive the run that wrote it: the writer
flushes every line, and a run killed at any moment leaves every event written before the
kill. The reader refuses anything it cannot vouch for (a line that is not JSON, a missing
field, a value of the wrong shape for its operation) with the file, the line number and the
reason, because a checker that silently skipped a line could call a broken run valid.

Format (docs/reliability.md §8.1), one object per line:

    {"index": 0, "time_ns": 1700000000000000000, "process": 3, "type": "invoke",
     "f": "send", "value": [["send", 1, 17]]}

- send:      invoke [["send", k, v], ...]; completion [["send", k, [offset, v]], ...], the
             offset null when unknown (a fail or info completion may keep the invoke's form)
- poll:      invoke [["poll"]]; completion [["poll", {"k": [[offset, v], ...]}], ...]
- assign, subscribe: [k, ...]; assign may carry "seek_to_beginning": true
- commit, committed: {"k": offset} (committed: what an OffsetFetch answered)
- crash:     null
- nemesis:   {"fault": kind, "phase": "start" | "observed" | "operator" | "end", ...anything
             else the nemesis adds}; between a fault's start and end, "observed" records
             what the cluster answered while it healed and "operator" an operator's action
             (zlog_jepsen.sole_isr)

Optional fields: "rebalance_log" [{"keys": [k, ...]}, ...] (partitions reassigned while a poll
ran), "error" (a Kafka error name or a client exception), "seek_to_beginning", "group".
Keys and values are integers; JSON object keys are their decimal strings.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, Literal, NamedTuple, cast, get_args

EventType = Literal["invoke", "ok", "fail", "info"]
Function = Literal[
    "send", "poll", "assign", "subscribe", "commit", "committed", "crash", "nemesis"
]
FaultPhase = Literal["start", "observed", "operator", "end"]

EVENT_TYPES: Final[tuple[EventType, ...]] = get_args(EventType)
FUNCTIONS: Final[tuple[Function, ...]] = get_args(Function)
FAULT_PHASES: Final[tuple[FaultPhase, ...]] = get_args(FaultPhase)
NEMESIS_PROCESS: Final = "nemesis"
"""The process name of fault events; client processes are integers."""
NS_PER_MS: Final = 1_000_000
"""Event times are nanoseconds (`time_ns`)."""

Process = int | str
Polled = dict[int, list[tuple[int, int]]]
"""key -> the (offset, value) pairs read, in the order they were read."""
FinalRead = dict[int, list[tuple[int, int]]]
"""key -> every (offset, value) of the partition, read from the beginning after the run."""

_REQUIRED: Final = ("index", "time_ns", "process", "type", "f", "value")
_OPTIONAL: Final = ("rebalance_log", "error", "seek_to_beginning", "group")


class HistoryFormatError(ValueError):
    """A history (or final read) that cannot be checked, with where and why."""


class SendRecord(NamedTuple):
    """One record of a send: its key, its value and, once acknowledged, its offset."""

    key: int
    value: int
    offset: int | None


class Fault(NamedTuple):
    """What a nemesis event says: which kind of fault, and whether it starts, ends, or
    records something in between."""

    kind: str
    phase: FaultPhase


@dataclass(frozen=True)
class Event:
    """One line of a history: an operation's invocation or completion, or a fault."""

    index: int
    time_ns: int
    process: Process
    type: EventType
    f: Function
    value: Any
    rebalance_log: tuple[tuple[int, ...], ...] = ()
    error: str | None = None
    seek_to_beginning: bool = False
    group: str | None = None

    @property
    def is_client(self) -> bool:
        return self.process != NEMESIS_PROCESS

    def rebalanced(self, key: int) -> bool:
        """Whether the partition of `key` was reassigned while this operation ran."""
        return any(key in keys for keys in self.rebalance_log)


# -- values: building them (for the workload) and reading them (for the checker) --


def send_value(records: Iterable[tuple[int, int]]) -> list[Any]:
    """A send's invoke value for (key, value) pairs."""
    return [["send", key, value] for key, value in records]


def send_ok_value(records: Iterable[SendRecord]) -> list[Any]:
    """A send's completion value: each record with the offset it was acknowledged at."""
    return [["send", r.key, [r.offset, r.value]] for r in records]


def poll_value(polled: Mapping[int, Iterable[tuple[int, int]]] | None = None) -> list[Any]:
    """A poll's value: [["poll"]] for the invocation, the records read for a completion."""
    if polled is None:
        return [["poll"]]
    return [["poll", {str(k): [[o, v] for o, v in pairs] for k, pairs in polled.items()}]]


def offsets_value(offsets: Mapping[int, int]) -> dict[str, int]:
    """A commit's or committed's value: key -> offset."""
    return {str(k): o for k, o in offsets.items()}


def nemesis_value(kind: str, phase: FaultPhase, **details: Any) -> dict[str, Any]:
    """A fault event's value; `details` (targets, topology) are kept for the reader."""
    return {"fault": kind, "phase": phase, **details}


def sends(event: Event) -> list[SendRecord]:
    """The records of a send event, with offsets where the completion carries them."""
    _expect_f(event, "send")
    records = []
    for item in _list(event.value, "a send value"):
        micro = _list(item, "a send micro-op")
        if len(micro) != 3 or micro[0] != "send":
            raise HistoryFormatError(f'a send micro-op is ["send", k, v], not {micro!r}')
        key = _int(micro[1], "a send's key")
        if isinstance(micro[2], list):
            pair = micro[2]
            if len(pair) != 2:
                raise HistoryFormatError(f"a send's [offset, value] has two items, not {pair!r}")
            offset = None if pair[0] is None else _int(pair[0], "a send's offset")
            records.append(SendRecord(key, _int(pair[1], "a send's value"), offset))
        else:
            records.append(SendRecord(key, _int(micro[2], "a send's value"), None))
    return records


def polled(event: Event) -> Polled:
    """The records a poll event read per key, all its poll micro-ops concatenated in order."""
    _expect_f(event, "poll")
    reads: Polled = {}
    for item in _list(event.value, "a poll value"):
        micro = _list(item, "a poll micro-op")
        if not micro or micro[0] != "poll" or len(micro) > 2:
            raise HistoryFormatError(
                f'a poll micro-op is ["poll"] or ["poll", {{...}}], not {micro!r}'
            )
        if len(micro) == 1:
            continue
        for key, pairs in _keyed(micro[1], "a poll's records").items():
            reads.setdefault(key, [])
            for pair in _list(pairs, "a poll's records of one key"):
                p = _list(pair, "a polled [offset, value]")
                if len(p) != 2:
                    raise HistoryFormatError(f"a polled record is [offset, value], not {p!r}")
                reads[key].append(
                    (_int(p[0], "a polled offset"), _int(p[1], "a polled value"))
                )
    return reads


def keys(event: Event) -> list[int]:
    """The keys an assign or subscribe event names."""
    if event.f not in ("assign", "subscribe"):
        raise HistoryFormatError(f"a {event.f} event names no keys")
    return [_int(k, f"an {event.f} key") for k in _list(event.value, f"an {event.f} value")]


def offsets(event: Event) -> dict[int, int]:
    """The key -> offset map of a commit or committed event."""
    if event.f not in ("commit", "committed"):
        raise HistoryFormatError(f"a {event.f} event carries no offsets")
    return {k: _int(o, "a committed offset") for k, o in _keyed(event.value, "offsets").items()}


def fault(event: Event) -> Fault:
    """The kind and phase of a nemesis event."""
    _expect_f(event, "nemesis")
    if not isinstance(event.value, dict):
        raise HistoryFormatError(
            f'a nemesis value is {{"fault": ..., "phase": ...}}, not {event.value!r}'
        )
    kind, phase = event.value.get("fault"), event.value.get("phase")
    if not isinstance(kind, str) or not kind:
        raise HistoryFormatError(f"a nemesis event names its fault kind, not {kind!r}")
    if phase not in FAULT_PHASES:
        raise HistoryFormatError(f"a nemesis phase is one of {FAULT_PHASES}, not {phase!r}")
    return Fault(kind, cast(FaultPhase, phase))


_VALUE_CHECKS: Final[dict[str, Callable[[Event], object]]] = {
    "send": sends,
    "poll": polled,
    "assign": keys,
    "subscribe": keys,
    "commit": offsets,
    "committed": offsets,
    "nemesis": fault,
}


def validate(event: Event) -> None:
    """Raise HistoryFormatError unless the event's value has its operation's shape."""
    check = _VALUE_CHECKS.get(event.f)
    if check is not None:
        check(event)
    elif event.value is not None:
        raise HistoryFormatError(f"a {event.f} event has no value, not {event.value!r}")


# -- one line of JSON <-> an Event --


def to_json(event: Event) -> dict[str, Any]:
    """The event as the JSON object of its line; optional fields only when set."""
    obj: dict[str, Any] = {
        "index": event.index,
        "time_ns": event.time_ns,
        "process": event.process,
        "type": event.type,
        "f": event.f,
        "value": event.value,
    }
    if event.rebalance_log:
        obj["rebalance_log"] = [{"keys": list(ks)} for ks in event.rebalance_log]
    if event.error is not None:
        obj["error"] = event.error
    if event.seek_to_beginning:
        obj["seek_to_beginning"] = True
    if event.group is not None:
        obj["group"] = event.group
    return obj


def from_json(obj: object) -> Event:
    """The event of one line's JSON object, checked field by field and against its operation."""
    if not isinstance(obj, dict):
        raise HistoryFormatError(f"an event is a JSON object, not {type(obj).__name__}")
    missing = [name for name in _REQUIRED if name not in obj]
    if missing:
        raise HistoryFormatError(f"an event needs the fields {', '.join(missing)}")
    unknown = sorted(set(obj) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise HistoryFormatError(f"unknown fields {', '.join(unknown)}")
    process = obj["process"]
    if process != NEMESIS_PROCESS:
        process = _int(process, f'a process (an integer or "{NEMESIS_PROCESS}")')
    if obj["type"] not in EVENT_TYPES:
        raise HistoryFormatError(f"type is one of {', '.join(EVENT_TYPES)}, not {obj['type']!r}")
    if obj["f"] not in FUNCTIONS:
        raise HistoryFormatError(f"f is one of {', '.join(FUNCTIONS)}, not {obj['f']!r}")
    error = obj.get("error")
    if error is not None and not isinstance(error, str):
        raise HistoryFormatError(f"error is a string, not {error!r}")
    seek = obj.get("seek_to_beginning", False)
    if not isinstance(seek, bool):
        raise HistoryFormatError(f"seek_to_beginning is true or false, not {seek!r}")
    group = obj.get("group")
    if group is not None and not isinstance(group, str):
        raise HistoryFormatError(f"group is a string, not {group!r}")
    event = Event(
        index=_int(obj["index"], "index"),
        time_ns=_int(obj["time_ns"], "time_ns"),
        process=process,
        type=obj["type"],
        f=obj["f"],
        value=obj["value"],
        rebalance_log=_rebalance_log(obj.get("rebalance_log", [])),
        error=error,
        seek_to_beginning=seek,
        group=group,
    )
    validate(event)
    return event


def parse_line(line: str) -> Event:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise HistoryFormatError(f"not JSON ({e.msg} at column {e.colno})") from None
    return from_json(obj)


def format_line(event: Event) -> str:
    return json.dumps(to_json(event), separators=(",", ":")) + "\n"


# -- files --


class HistoryWriter:
    """Appends events to a JSONL file, numbering them, one flushed line each.

    Thread-safe, so the workload's client threads and the nemesis can share one writer and
    the indexes follow the order of the lines. `clock_ns` is the wall clock by default: the
    times in a history are real, to line them up with the brokers' logs.
    """

    def __init__(self, path: Path, clock_ns: Callable[[], int] = time.time_ns) -> None:
        self.path = path
        self._clock_ns = clock_ns
        self._file: IO[str] = path.open("w", encoding="utf-8")
        self._lock = threading.Lock()
        self._next_index = 0

    def append(
        self,
        process: Process,
        type: EventType,
        f: Function,
        value: Any = None,
        *,
        rebalance_log: Iterable[Iterable[int]] = (),
        error: str | None = None,
        seek_to_beginning: bool = False,
        group: str | None = None,
    ) -> Event:
        """Write one event, stamped now, and return it; a malformed one is refused unwritten."""
        with self._lock:
            event = Event(
                index=self._next_index,
                time_ns=self._clock_ns(),
                process=process,
                type=type,
                f=f,
                value=value,
                rebalance_log=tuple(tuple(ks) for ks in rebalance_log),
                error=error,
                seek_to_beginning=seek_to_beginning,
                group=group,
            )
            line = format_line(event)
            from_json(json.loads(line))  # what is written must read back
            self._file.write(line)
            self._file.flush()
            self._next_index += 1
            return event

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_history(path: Path) -> list[Event]:
    """Every event of a history file, in file order; a malformed line raises with its number."""
    return list(iter_history(path))


_TORN: Final = " (the last line is cut short: was the writer killed mid-line?)"


def iter_history(path: Path) -> Iterator[Event]:
    with path.open(encoding="utf-8") as file:
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                yield parse_line(line)
            except HistoryFormatError as e:
                torn = "" if line.endswith("\n") else _TORN
                raise HistoryFormatError(f"{path}:{number}: {e}{torn}") from None


def write_final_read(path: Path, final: FinalRead) -> None:
    """The final full read as one JSON object: {"k": [[offset, value], ...]}."""
    text = json.dumps({str(k): [[o, v] for o, v in pairs] for k, pairs in final.items()})
    path.write_text(text + "\n", encoding="utf-8")


def read_final_read(path: Path) -> FinalRead:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
        return polled(Event(0, 0, 0, "ok", "poll", [["poll", obj]]))
    except json.JSONDecodeError as e:
        raise HistoryFormatError(f"{path}: not JSON ({e.msg} at column {e.colno})") from None
    except HistoryFormatError as e:
        raise HistoryFormatError(f"{path}: {e}") from None


# -- shape checks --


def _expect_f(event: Event, f: Function) -> None:
    if event.f != f:
        raise HistoryFormatError(f"expected a {f} event, not {event.f}")


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise HistoryFormatError(f"{what} is an integer, not {value!r}")
    return value


def _list(value: object, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise HistoryFormatError(f"{what} is a list, not {value!r}")
    return value


def _keyed(value: object, what: str) -> dict[int, Any]:
    """A JSON object keyed by decimal key strings, as a dict keyed by int."""
    if not isinstance(value, dict):
        raise HistoryFormatError(f"{what} is an object keyed by key, not {value!r}")
    out: dict[int, Any] = {}
    for k, v in value.items():
        try:
            out[int(k)] = v
        except ValueError:
            raise HistoryFormatError(f"{what}: a key is an integer, not {k!r}") from None
    return out


def _rebalance_log(value: object) -> tuple[tuple[int, ...], ...]:
    entries = []
    for entry in _list(value, "rebalance_log"):
        if not isinstance(entry, dict) or set(entry) != {"keys"}:
            raise HistoryFormatError(f'a rebalance_log entry is {{"keys": [...]}}, not {entry!r}')
        entries.append(tuple(_int(k, "a rebalanced key") for k in _list(entry["keys"], "keys")))
    return tuple(entries)
