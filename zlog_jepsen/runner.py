"""One run of the harness, start to verdict, everything it saw kept in its directory.

A run starts a three-broker cluster (zlog_jepsen.cluster), creates the topic (one partition
per key, three replicas, min.insync.replicas 2), starts the client processes, lets them warm
up, runs the seeded fault schedule, heals, stops the clients, waits until every partition is
fully replicated, drains every key from the beginning with a fresh client, and checks the
history. The directory then holds history.jsonl, final-read.json, check.json (every anomaly
with examples), figures.json, summary.txt and the plots; a run that fails (an anomaly that
makes it invalid, or an error of the harness itself) also keeps each broker's data
directory, rings and logs, for the post-mortem.
"""

from __future__ import annotations

import json
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from zlog.client import Admin, TopicPartition
from zlog.types import LATEST_TIMESTAMP
from zlog_jepsen.checker import CheckConfig, check
from zlog_jepsen.client_adapter import ClientFactory, ClientSettings, native_client
from zlog_jepsen.cluster import NETWORK_FAULTS, RunCluster
from zlog_jepsen.final_drain import drain
from zlog_jepsen.history import HistoryWriter, read_history, write_final_read
from zlog_jepsen.nemesis import DISK_FULL, Nemesis, Schedule
from zlog_jepsen.plots import draw, plots_available
from zlog_jepsen.report import figures, summary_table
from zlog_jepsen.workload import WorkerSetup, Workload, WorkloadConfig, running

TOPIC: Final = "jepsen"
GROUP: Final = "jepsen-group"
DRAIN_TIMEOUT_S: Final = 120.0
DRAIN_PROCESS_BASE: Final = 1_000_000  # above every worker's process numbers
HISTORY: Final = "history.jsonl"
FINAL_READ: Final = "final-read.json"


@dataclass(frozen=True)
class RunConfig:
    run_dir: Path
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    schedule: Schedule = field(default_factory=Schedule)
    duration_s: float = 600.0
    warmup_s: float = 10.0
    brokers: int = 3
    factory: ClientFactory = native_client
    planted_bug: str | None = None  # zlog.broker.data.planted_bug, in every broker


@dataclass
class RunOutcome:
    run_dir: Path
    valid: bool
    numbers: dict[str, Any]


def run(config: RunConfig) -> RunOutcome:
    """One run; never raises for a failure of the cluster or the harness: that is an invalid
    run, with its traceback in summary.txt and everything kept."""
    run_dir = config.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    cluster = RunCluster(config.brokers, run_dir, config.planted_bug)
    valid = False
    numbers: dict[str, Any] = {"valid": False}
    try:
        if DISK_FULL in config.schedule.kinds:
            cluster.mount_small_disks()
        cluster.start()
        numbers = _run_on(cluster, config)
        valid = bool(numbers["valid"])
    except Exception:
        (run_dir / "summary.txt").write_text(
            "the run broke before its verdict:\n" + traceback.format_exc(), encoding="utf-8")
    finally:
        cluster.close_keeping(not valid)
    return RunOutcome(run_dir, valid, numbers)


def _run_on(cluster: RunCluster, config: RunConfig) -> dict[str, Any]:
    run_dir = config.run_dir
    keys = config.workload.keys
    cluster.create_topic(TOPIC, keys)
    group = GROUP if config.workload.mode == "subscribe" else None
    settings = ClientSettings(cluster.bootstrap, TOPIC, group_id=group)
    stop = threading.Event()
    with HistoryWriter(run_dir / HISTORY) as writer:
        nemesis = Nemesis(cluster, TOPIC, keys, writer, config.workload.seed)
        with running(Workload(WorkerSetup(config.workload, settings, config.factory),
                              writer)):
            stop.wait(config.warmup_s)
            nemesis.run(config.schedule, config.duration_s, stop)
        cluster.wait_fully_replicated(TOPIC, keys)
        client = config.factory(ClientSettings(cluster.bootstrap, TOPIC))
        try:
            final, complete = drain(client, _log_ends(cluster, keys), writer,
                                    DRAIN_PROCESS_BASE, DRAIN_TIMEOUT_S)
        finally:
            client.close()
    write_final_read(run_dir / FINAL_READ, final)
    history = read_history(run_dir / HISTORY)
    result = check(history, final, CheckConfig(acks_all=True, idempotent=True))
    numbers = figures(history, result, final_read=True)
    numbers.update({"seed": config.workload.seed, "duration_s": config.duration_s,
                    "mode": config.workload.mode, "brokers": config.brokers,
                    "final_drain_complete": complete, "network_faults": NETWORK_FAULTS,
                    "planted_bug": config.planted_bug})
    if not complete:
        numbers["valid"] = False
        numbers["failed_by"] = [*numbers["failed_by"], "final drain incomplete"]
    (run_dir / "check.json").write_text(json.dumps(result.to_json(), indent=1) + "\n",
                                        encoding="utf-8")
    (run_dir / "figures.json").write_text(json.dumps(numbers, indent=1) + "\n",
                                          encoding="utf-8")
    plotted = draw(history, run_dir) if plots_available() else []
    (run_dir / "summary.txt").write_text(
        summary_table(numbers) + f"\nnetwork faults: {NETWORK_FAULTS}\n"
        + (f"planted bug: {config.planted_bug} (a correct checker fails this run)\n"
           if config.planted_bug else "")
        + ("" if plotted else "no plots: matplotlib is not installed\n"), encoding="utf-8")
    return numbers


def _log_ends(cluster: RunCluster, keys: int) -> dict[int, int]:
    """Each key's high watermark: once fully replicated, the end of its log."""
    with Admin(cluster.bootstrap) as admin:
        found = admin.list_offsets({TopicPartition(TOPIC, key): LATEST_TIMESTAMP
                                    for key in range(keys)})
    return {tp.partition: answer.offset for tp, answer in found.items()}
