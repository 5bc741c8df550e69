"""The broker's metrics as Prometheus families: its workers', its control plane's, its host's.

Read at each scrape, on the metrics endpoint's thread (metrics_endpoint.py), from what other
threads publish whole, so a scrape never waits on the supervisor's loop nor holds it up:

* each worker's file of counters and gauges (zlog/broker/worker_metrics.py), and the control
  endpoint's own, which the supervisor's request path writes the same way;
* a `LoopView` the supervisor's loop publishes a few times a second: its workers, whether it
  is ready, the metadata it applied, its metadata-log node's status, and the counts of
  leader elections and ISR changes it saw in that metadata.

Cluster-wide counts (brokers, offline partitions, partitions) are exported by the active
controller only, as Kafka does, so that `sum()` over the brokers is the cluster's figure; the
under-replicated and under-min-ISR counts are each broker's for the partitions it leads.
docs/operations-metrics.md lists every family.
"""

from __future__ import annotations

import platform
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Final

import psutil
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

import zlog
from zlog.broker.control.loop_view import LoopView
from zlog.broker.worker_metrics import (
    REQUEST_LATENCY_BUCKETS_S,
    ApiSample,
    GroupField,
    MetricsFile,
    PartitionField,
    SlotKind,
    WorkerSample,
    read_sample,
)

DISK_FREE_ALERT_RATIO: Final = 0.15
"""The share of the data directory's disk below which operators are paged (the alert rules
compare with `zlog_disk_free_alert_ratio`, so the level is stated once, here)."""
NATIVE_LISTENER: Final = "native"  # the Kafka-protocol listener will add "kafka"


class HostMetrics(Collector):
    """Turns the metrics files of a broker's workers and control endpoint, and the loop's
    view, into families at each scrape."""

    def __init__(self, worker_files: Mapping[int, MetricsFile], control_file: MetricsFile,
                 data_dir: Path, view: Callable[[], LoopView]) -> None:
        self._files = worker_files
        self._control_file = control_file
        self._data_dir = data_dir
        self._view = view
        self._started_s = psutil.Process().create_time()  # the supervisor's own start

    def collect(self) -> Iterator[Metric]:
        view = self._view()
        samples = {worker_id: read_sample(f) for worker_id, f in self._files.items()}
        yield from _process_families(self._started_s)
        yield from _request_families(read_sample(self._control_file), samples)
        yield from _partition_families(samples)
        yield from _group_families(samples)
        yield from _worker_families(view, samples)
        yield from _cluster_families(view, samples)
        yield from _raft_families(view)
        yield from self._host_families()

    def _host_families(self) -> Iterator[Metric]:
        try:
            usage = shutil.disk_usage(self._data_dir)
        except OSError:
            usage = None
        free = GaugeMetricFamily("zlog_disk_free_bytes",
                                 "Free bytes on the data directory's file system")
        total = GaugeMetricFamily("zlog_disk_total_bytes",
                                  "Size of the data directory's file system")
        if usage is not None:
            free.add_metric([], usage.free)
            total.add_metric([], usage.total)
        yield free
        yield total
        yield GaugeMetricFamily("zlog_disk_free_alert_ratio",
                                "Free share of the disk below which the alert rules page",
                                value=DISK_FREE_ALERT_RATIO)
        connections = GaugeMetricFamily("zlog_open_connections",
                                        "Established TCP connections to this broker's ports",
                                        labels=["listener"])
        connections.add_metric([NATIVE_LISTENER], _established(self._view().ports))
        yield connections


def _established(ports: tuple[int, ...]) -> int:
    wanted = set(ports)
    try:
        table = psutil.net_connections(kind="tcp")
    except (OSError, psutil.Error):
        return 0
    return sum(1 for conn in table
               if conn.status == psutil.CONN_ESTABLISHED and conn.laddr
               and conn.laddr.port in wanted)


def _process_families(started_s: float) -> Iterator[Metric]:
    info = GaugeMetricFamily("zlog_build_info", "zlog's version and the Python running it",
                             labels=["version", "python"])
    info.add_metric([zlog.__version__, platform.python_version()], 1)
    yield info
    yield GaugeMetricFamily("zlog_start_time_seconds", "When this broker's supervisor started "
                            "(Unix time)", value=started_s)
    yield GaugeMetricFamily("zlog_uptime_seconds", "Seconds since this broker's supervisor "
                            "started", value=time.time() - started_s)


def _request_families(control: WorkerSample,
                      workers: Mapping[int, WorkerSample]) -> Iterator[Metric]:
    labels = ["listener", "endpoint", "api"]
    requests = CounterMetricFamily("zlog_requests", "Requests answered, per API",
                                   labels=labels)
    errors = CounterMetricFamily("zlog_request_errors", "Requests answered with a "
                                 "whole-request error code, per API", labels=labels)
    latency = HistogramMetricFamily("zlog_request_duration_seconds", "Time from a request's "
                                    "arrival in the server's loop to its answer (a long "
                                    "poll's or acks=all's wait excluded)", labels=labels)
    per_endpoint = {"control": [control], "data": list(workers.values())}
    for endpoint, samples in per_endpoint.items():
        for api in _summed_apis(samples):
            name = api.api_key.name.lower()
            key = [NATIVE_LISTENER, endpoint, name]
            requests.add_metric(key, api.requests)
            errors.add_metric(key, api.errors)
            cumulative, running = [], 0
            for bound, count in zip((*REQUEST_LATENCY_BUCKETS_S, float("inf")),
                                    api.bucket_counts, strict=True):
                running += count
                cumulative.append((_bucket_label(bound), running))
            latency.add_metric(key, cumulative, api.seconds_total)
    yield requests
    yield errors
    yield latency


def _bucket_label(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


def _summed_apis(samples: list[WorkerSample]) -> list[ApiSample]:
    totals: dict[int, ApiSample] = {}
    for sample in samples:
        for api in sample.apis:
            seen = totals.get(api.api_key)
            if seen is None:
                totals[api.api_key] = api
                continue
            totals[api.api_key] = ApiSample(
                api.api_key, seen.requests + api.requests, seen.errors + api.errors,
                seen.seconds_total + api.seconds_total,
                tuple(a + b for a, b in zip(seen.bucket_counts, api.bucket_counts,
                                            strict=True)))
    return [totals[key] for key in sorted(totals)]


_PARTITION_FAMILIES: Final = (
    # (field, name, help, is a counter, scale)
    (PartitionField.RECORDS_IN, "zlog_partition_records_in", "Records appended to this "
     "replica's log (its log end's advances)", True, 1.0),
    (PartitionField.BYTES_IN, "zlog_partition_bytes_in", "Produced bytes appended", True, 1.0),
    (PartitionField.BYTES_OUT, "zlog_partition_bytes_out", "Bytes sent to consumers", True, 1.0),
    (PartitionField.LOG_START_OFFSET, "zlog_partition_log_start_offset", "The log's first "
     "offset", False, 1.0),
    (PartitionField.LOG_END_OFFSET, "zlog_partition_log_end_offset", "The offset the next "
     "record gets", False, 1.0),
    (PartitionField.HIGH_WATERMARK, "zlog_partition_high_watermark", "The high watermark: "
     "where committed records end (the basis of consumer lag)", False, 1.0),
    (PartitionField.IS_LEADER, "zlog_partition_leader", "1 where this broker leads the "
     "partition", False, 1.0),
    (PartitionField.LEADER_EPOCH, "zlog_partition_leader_epoch", "The partition's leader "
     "epoch as this replica knows it", False, 1.0),
    (PartitionField.REPLICAS, "zlog_partition_replicas", "Replicas of the partition", False,
     1.0),
    (PartitionField.ISR, "zlog_partition_isr_size", "In-sync replicas", False, 1.0),
    (PartitionField.MIN_INSYNC_REPLICAS, "zlog_partition_min_insync_replicas", "The topic's "
     "min.insync.replicas", False, 1.0),
    (PartitionField.SEGMENTS, "zlog_partition_segments", "Segment files", False, 1.0),
    (PartitionField.SIZE_BYTES, "zlog_partition_size_bytes", "Bytes in segment files",
     False, 1.0),
    (PartitionField.PRODUCERS, "zlog_partition_producer_ids", "Producer ids in the "
     "partition's idempotence table (producer-state size)", False, 1.0),
    (PartitionField.RING_UNFLUSHED_BYTES, "zlog_partition_ring_unflushed_bytes", "Bytes in "
     "the shared-memory ring not yet written to a segment", False, 1.0),
    (PartitionField.RING_CAPACITY_BYTES, "zlog_partition_ring_capacity_bytes", "The ring's "
     "capacity", False, 1.0),
    (PartitionField.FLUSHES, "zlog_partition_flushes", "Writes from the ring into a segment",
     True, 1.0),
    (PartitionField.FLUSH_NS, "zlog_partition_flush_seconds", "Time spent writing from the "
     "ring into segments", True, 1e-9),
    (PartitionField.FSYNCS, "zlog_partition_fsyncs", "fsyncs of the active segment", True,
     1.0),
    (PartitionField.FSYNC_NS, "zlog_partition_fsync_seconds", "Time spent in fsync", True,
     1e-9),
)


def _partition_families(workers: Mapping[int, WorkerSample]) -> Iterator[Metric]:
    families: list[tuple[PartitionField, float, GaugeMetricFamily | CounterMetricFamily]] = []
    for part, name, text, is_counter, scale in _PARTITION_FAMILIES:
        family_type = CounterMetricFamily if is_counter else GaugeMetricFamily
        families.append((part, scale, family_type(name, text, labels=["topic", "partition"])))
    for sample in workers.values():
        for partition in sample.of_kind(SlotKind.PARTITION):
            labels = [partition.name, str(partition.number)]
            for part, scale, family in families:
                family.add_metric(labels, partition.values[part] * scale)
    for _, _, family in families:
        yield family


def _group_families(workers: Mapping[int, WorkerSample]) -> Iterator[Metric]:
    """The groups this broker coordinates. Their lag is the partition's high watermark (on
    the broker leading it) less the committed offset: the dashboards join the two."""
    members = GaugeMetricFamily("zlog_group_members", "Members of each consumer group this "
                                "broker coordinates", labels=["group"])
    committed = GaugeMetricFamily("zlog_group_committed_offset", "A group's committed offset "
                                  "of a partition", labels=["group", "topic", "partition"])
    for sample in workers.values():
        for group in sample.of_kind(SlotKind.GROUP):
            members.add_metric([group.name], group.values[GroupField.MEMBERS])
        for offset in sample.of_kind(SlotKind.GROUP_OFFSET):
            group_id, _, topic = offset.name.partition("\0")
            committed.add_metric([group_id, topic, str(offset.number)],
                                 offset.values[GroupField.COMMITTED_OFFSET])
    yield members
    yield committed


def _worker_families(view: LoopView, workers: Mapping[int, WorkerSample]) -> Iterator[Metric]:
    restarts = CounterMetricFamily("zlog_worker_restarts", "Restarts of each partition "
                                   "worker (a crash loop shows here)", labels=["worker"])
    up = GaugeMetricFamily("zlog_worker_up", "1 while the worker serves", labels=["worker"])
    for worker in view.workers:
        restarts.add_metric([str(worker.worker_id)], worker.restarts)
        up.add_metric([str(worker.worker_id)], 1 if worker.state == "ready" else 0)
    yield restarts
    yield up
    exhausted = GaugeMetricFamily("zlog_worker_metrics_slots_exhausted", "1 where a worker "
                                  "holds more partitions than its metrics file reports",
                                  labels=["worker"])
    for worker_id, sample in workers.items():
        exhausted.add_metric([str(worker_id)], int(sample.slots_exhausted))
    yield exhausted


def _cluster_families(view: LoopView, workers: Mapping[int, WorkerSample]) -> Iterator[Metric]:
    state = view.state
    raft = view.raft
    active = raft is not None and raft.role == "leader" and raft.leader == view.node_id
    yield GaugeMetricFamily("zlog_controller_active", "1 on the active controller (the sum "
                            "over the cluster must be 1)", value=int(active))
    yield GaugeMetricFamily("zlog_broker_ready", "1 once the broker serves with its "
                            "metadata caught up (registered and unfenced)",
                            value=int(view.ready))
    under_replicated = under_min_isr = 0
    for sample in workers.values():
        for partition in sample.of_kind(SlotKind.PARTITION):
            values = partition.values
            if not values[PartitionField.IS_LEADER]:
                continue
            under_replicated += values[PartitionField.ISR] < values[PartitionField.REPLICAS]
            under_min_isr += (values[PartitionField.ISR]
                              < values[PartitionField.MIN_INSYNC_REPLICAS])
    yield GaugeMetricFamily("zlog_under_replicated_partitions", "Partitions this broker leads "
                            "with fewer in-sync replicas than replicas", value=under_replicated)
    yield GaugeMetricFamily("zlog_under_min_isr_partitions", "Partitions this broker leads "
                            "with fewer in-sync replicas than min.insync.replicas (acks=all "
                            "refused)", value=under_min_isr)
    brokers = GaugeMetricFamily("zlog_cluster_brokers", "Registered brokers by state (active "
                                "controller only)", labels=["state"])
    offline = partitions = 0
    counts = {"serving": 0, "fenced": 0, "shutting_down": 0}
    if active:
        for broker in state.brokers.values():
            kind = ("fenced" if broker.fenced else "shutting_down" if broker.shutting_down
                    else "serving")
            counts[kind] += 1
        for topic in state.topics.values():
            if topic.name in state.deleting:
                continue
            partitions += len(topic.partitions)
            offline += sum(1 for info in topic.partitions if info.leader < 0)
    for kind, count in counts.items():
        brokers.add_metric([kind], count)
    yield brokers
    yield GaugeMetricFamily("zlog_cluster_partitions", "Partitions in the cluster (active "
                            "controller only)", value=partitions)
    yield GaugeMetricFamily("zlog_offline_partitions", "Partitions without a leader (active "
                            "controller only)", value=offline)
    yield CounterMetricFamily("zlog_leader_elections", "Partition leader changes this broker "
                              "applied from the metadata log", value=view.leader_elections)
    yield CounterMetricFamily("zlog_isr_shrinks", "ISR shrinks this broker applied from the "
                              "metadata log", value=view.isr_shrinks)
    yield CounterMetricFamily("zlog_isr_expands", "ISR expansions this broker applied from "
                              "the metadata log", value=view.isr_expands)


def _raft_families(view: LoopView) -> Iterator[Metric]:
    raft = view.raft
    yield CounterMetricFamily("zlog_raft_leader_changes", "Changes of the metadata log's "
                              "leader (the controller) this node saw",
                              value=view.raft_leader_changes)
    if raft is None:
        return
    yield GaugeMetricFamily("zlog_raft_term", "The metadata log's term at this node",
                            value=raft.term)
    yield GaugeMetricFamily("zlog_raft_commit_index", "Height of the last committed block",
                            value=raft.commit.height)
    yield GaugeMetricFamily("zlog_raft_applied_index", "Height of the last applied block",
                            value=raft.applied.height)
    yield GaugeMetricFamily("zlog_raft_apply_lag", "Committed blocks not applied yet",
                            value=max(0, raft.commit.height - raft.applied.height))
    yield GaugeMetricFamily("zlog_raft_leader", "The node this one follows or is (-1: none)",
                            value=-1 if raft.leader is None else raft.leader)
    role = GaugeMetricFamily("zlog_raft_role", "1 for this node's role", labels=["role"])
    for name in ("follower", "pre-candidate", "candidate", "leader"):
        role.add_metric([name], int(raft.role == name))
    yield role
    yield CounterMetricFamily("zlog_raft_fsyncs", "fsyncs of the metadata log",
                              value=raft.fsyncs)
    yield CounterMetricFamily("zlog_raft_fsync_seconds", "Time in the metadata log's fsyncs",
                              value=raft.fsync_ms_total / 1000)
