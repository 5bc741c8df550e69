"""One run of the harness, start to verdict, everything it saw kept in its directory.

A run starts a three-broker cluster (zlog_jepsen.cluster; a fourth, spare broker when the
schedule moves replicas), creates the topic (one partition per key, three replicas,
min.insync.replicas 2), starts the client processes, lets them warm up, runs the seeded fault
schedule, heals, stops the clients, waits until every partition is fully replicated, drains
every key from the beginning with a fresh client, and checks the history (and the committed
ISRs sampled meanwhile, zlog_jepsen.isr_watch; in a run that shrinks retention, the log
starts and high watermarks too, zlog_jepsen.log_start_watch). The directory then holds
history.jsonl, isr.jsonl, log-starts.jsonl when sampled, final-read.json, check.json (every
anomaly with examples), figures.json, summary.txt and the plots; a run that fails (an
anomaly that makes it invalid, or an error of the harness itself) also keeps each broker's
data directory, rings and logs, for the post-mortem.
"""

from __future__ import annotations

import json
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from zlog.client import Admin, TopicPartition
from zlog.types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from zlog_jepsen.checker import CheckConfig, check
from zlog_jepsen.checker.min_isr import IsrHistory
from zlog_jepsen.checker.retention import NO_LOG_STARTS, LogStarts
from zlog_jepsen.client_adapter import ClientFactory, ClientSettings, native_client
from zlog_jepsen.cluster import MIN_INSYNC_REPLICAS, HarnessCluster
from zlog_jepsen.final_drain import LogBounds, drain
from zlog_jepsen.history import HistoryWriter, read_history, write_final_read
from zlog_jepsen.isr_watch import IsrWatch, read_isr_samples
from zlog_jepsen.log_start_watch import LogStartWatch, read_log_start_samples
from zlog_jepsen.membership_faults import needs_spare
from zlog_jepsen.nemesis import DISK_FULL, Nemesis, Schedule
from zlog_jepsen.netns_cluster import choose_network, run_cluster
from zlog_jepsen.plots import draw, plots_available
from zlog_jepsen.report import figures, summary_table
from zlog_jepsen.retention_pressure import RETENTION_PRESSURE
from zlog_jepsen.sampling import Sampler
from zlog_jepsen.workload import WorkerSetup, Workload, WorkloadConfig, running

TOPIC: Final = "jepsen"
GROUP: Final = "jepsen-group"
DRAIN_TIMEOUT_S: Final = 120.0
DRAIN_PROCESS_BASE: Final = 1_000_000  # above every worker's process numbers
HISTORY: Final = "history.jsonl"
FINAL_READ: Final = "final-read.json"
ISR_SAMPLES: Final = "isr.jsonl"
LOG_STARTS: Final = "log-starts.jsonl"


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
    network: str = "auto"  # zlog_jepsen.netns_cluster.NETWORKS: namespaces where they work
    keep_data: bool = False  # keep the brokers' data, rings and logs of a valid run too


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
    network, fallback = choose_network(config.network)
    cluster = run_cluster(network, config.brokers, run_dir, config.planted_bug,
                          spares=needs_spare(config.schedule.kinds))
    valid = False
    numbers: dict[str, Any] = {"valid": False}
    try:
        if fallback is not None:
            print(f"{fallback}: network faults through the TCP fault proxy", flush=True)
        if DISK_FULL in config.schedule.kinds:
            cluster.mount_small_disks()
        cluster.start()
        numbers = _run_on(cluster, config, fallback)
        valid = bool(numbers["valid"])
    except Exception:
        (run_dir / "summary.txt").write_text(
            "the run broke before its verdict:\n" + traceback.format_exc(), encoding="utf-8")
    finally:
        cluster.close_keeping(not valid or config.keep_data)
    return RunOutcome(run_dir, valid, numbers)


def _run_on(cluster: HarnessCluster, config: RunConfig, fallback: str | None
            ) -> dict[str, Any]:
    run_dir = config.run_dir
    keys = config.workload.keys
    cluster.create_topic(TOPIC, keys)
    group = GROUP if config.workload.mode == "subscribe" else None
    settings = ClientSettings(cluster.bootstrap, TOPIC, group_id=group)
    stop = threading.Event()
    with HistoryWriter(run_dir / HISTORY) as writer:
        nemesis = Nemesis(cluster, TOPIC, keys, writer, config.workload.seed)
        watch = IsrWatch(cluster, TOPIC, run_dir / ISR_SAMPLES)
        log_starts = (LogStartWatch(cluster, TOPIC, run_dir / LOG_STARTS)
                      if RETENTION_PRESSURE in config.schedule.kinds else None)
        watches: list[Sampler] = [watch, *([log_starts] if log_starts else [])]
        for sampler in watches:
            sampler.start()
        try:
            with running(Workload(WorkerSetup(config.workload, settings, config.factory),
                                  writer)):
                stop.wait(config.warmup_s)
                nemesis.run(config.schedule, config.duration_s, stop)
        finally:
            for sampler in watches:
                sampler.stop()
        cluster.wait_fully_replicated(TOPIC, keys)
        if log_starts is not None:  # where the final read starts: the highest of the run
            log_starts.sample_once()
        client = config.factory(ClientSettings(cluster.bootstrap, TOPIC))
        try:
            final, complete = drain(client, _log_bounds(cluster, keys), writer,
                                    DRAIN_PROCESS_BASE, DRAIN_TIMEOUT_S)
        finally:
            client.close()
    write_final_read(run_dir / FINAL_READ, final)
    history = read_history(run_dir / HISTORY)
    isr = IsrHistory(read_isr_samples(run_dir / ISR_SAMPLES), MIN_INSYNC_REPLICAS)
    answered = (NO_LOG_STARTS if log_starts is None
                else LogStarts(read_log_start_samples(run_dir / LOG_STARTS)))
    result = check(history, final, CheckConfig(acks_all=True, idempotent=True), isr, answered)
    numbers = figures(history, result, final_read=True)
    numbers.update({"seed": config.workload.seed, "duration_s": config.duration_s,
                    "mode": config.workload.mode, "brokers": config.brokers,
                    "spare_brokers": needs_spare(config.schedule.kinds),
                    "isr_samples": watch.samples,
                    "log_start_samples": None if log_starts is None else log_starts.samples,
                    "final_drain_complete": complete,
                    "network_faults": cluster.network_faults,
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
        summary_table(numbers) + f"\nnetwork faults: {cluster.network_faults}"
        + (f" ({fallback})\n" if fallback else "\n")
        + (f"planted bug: {config.planted_bug} (a correct checker fails this run)\n"
           if config.planted_bug else "")
        + ("" if plotted else "no plots: matplotlib is not installed\n"), encoding="utf-8")
    return numbers


def _log_bounds(cluster: HarnessCluster, keys: int) -> LogBounds:
    """Each key's log start and high watermark: once fully replicated, where its log starts
    and ends."""
    with Admin(cluster.bootstrap) as admin:
        starts, ends = ({tp.partition: answer.offset for tp, answer in admin.list_offsets(
                            {TopicPartition(TOPIC, key): spec for key in range(keys)}).items()}
                        for spec in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP))
    return LogBounds(starts, ends)
