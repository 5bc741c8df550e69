"""Scenario 1, produce throughput: 100 B and 1 KiB values, acks=1 and all, 1 and 8 partitions,
1 and 2 producer processes, each case on a fresh topic, every producer in its own process.

A case's figure is the records every producer had acknowledged divided by the time from the
common go to the last producer's final acknowledgement (for zmq: to the last frame the PULL
process received). Peers run only the cases that mean something for them (see NOT_APPLICABLE).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Final

from bench.suite.adapters import NOT_APPLICABLE, PRODUCE_CHUNK, ZLOG, ZLOG_LOCAL, ZLOG_TUNED
from bench.suite.common import run_children

NAME: Final = "produce"
MB: Final = 1_000_000


@dataclass(frozen=True)
class ProduceCase:
    value_bytes: int
    acks: str
    partitions: int
    producers: int

    @property
    def key(self) -> str:
        return f"{self.value_bytes}B-{self.partitions}p-acks{self.acks}-{self.producers}proc"

    @property
    def headline(self) -> bool:
        return self.acks == "1" and self.partitions == 1 and self.producers == 1


def all_cases(value_sizes: list[int]) -> list[ProduceCase]:
    return [ProduceCase(size, acks, partitions, producers)
            for size in value_sizes for acks in ("1", "all") for partitions in (1, 8)
            for producers in (1, 2)]


def skip_reason(system: str, case: ProduceCase) -> str | None:
    if system == ZLOG_LOCAL:
        return None if case.headline else NOT_APPLICABLE[(system, "produce")]
    if (system, "produce") in NOT_APPLICABLE:
        return NOT_APPLICABLE[(system, "produce")]
    if case.acks == "all" and system not in (ZLOG, ZLOG_TUNED):
        return NOT_APPLICABLE[(system, "acks=all")]
    if case.partitions > 1 and (system, "partitions") in NOT_APPLICABLE:
        return NOT_APPLICABLE[(system, "partitions")]
    return None


def run(system: str, server: Any, case: ProduceCase, topic: str, duration_s: float) -> (
    dict[str, Any]
):
    """One run of one case on `topic` (already created); returns its figures."""
    spec = {"endpoint": server.endpoint, "topic": topic, "partitions": case.partitions,
            "acks": case.acks if case.acks == "all" else 1, "value_bytes": case.value_bytes,
            "chunk": PRODUCE_CHUNK[system], "duration_s": duration_s}
    children: list[tuple[str, str, dict[str, Any]]] = []
    if system == "zmq":
        children.append((system, "produce", {**spec, "receiver": True,
                                             "producers": case.producers}))
    for index in range(case.producers):
        children.append((system, "produce", {**spec, "process_index": index}))
    results = run_children(children, timeout_s=duration_s + 120)
    counted = [r for r in results if r.get("receiver")] or results
    records = sum(r["records"] for r in counted)
    elapsed_s = (max(r["end_ns"] for r in counted) - min(r["start_ns"] for r in counted)) / 1e9
    per_s = records / elapsed_s
    return {"records": records, "elapsed_s": elapsed_s, "records_per_s": per_s,
            "mb_per_s": per_s * case.value_bytes / MB,
            "stored_records": records + sum(r.get("warmup_records", 0) for r in results),
            "case": asdict(case)}
