"""The metrics endpoint of a real `zlog serve`: /metrics, /healthz and /readyz over HTTP.

Spec: docs/operations-metrics.md. One broker with two workers and the endpoint on a free port;
the figures are checked against what the test itself produced and consumed, and against what
a killed worker must not lose (its counters live in shared memory, docs/operations-metrics.md).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
import zmq

from zlog.cli_top import Scrape, scrape
from zlog.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from zlog.errors import ErrorCode
from zlog.transport.api import ApiKey
from zlog.transport.codec import REQUEST_HEADER, RESPONSE_HEADER
from zlog_testbed.broker_process import BrokerProcess, broker_process
from zlog_testbed.free_ports import free_port, free_port_pair
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RECORDS = 200
VALUE_BYTES = 100


@pytest.fixture(scope="module")
def metered() -> Iterator[tuple[BrokerProcess, str]]:
    address = f"127.0.0.1:{free_port()}"
    with broker_process(extra_args=["--metrics-listen", address]) as broker:
        url = f"http://{address}"
        # The endpoint opens once the broker serves, a loop turn after clients may call it.
        wait_until(lambda: _answers(url + "/healthz"), timeout_s=20, what="the endpoint opens")
        yield broker, url


def _answers(url: str) -> bool:
    try:
        return _get(url)[0] == 200
    except OSError:
        return False


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _partition_sum(result: Scrape, name: str, topic: str) -> float:
    return sum(value for labels, value in result.series(name) if labels.get("topic") == topic)


def test_health_and_readiness(metered: tuple[BrokerProcess, str]) -> None:
    _broker, url = metered
    assert _get(url + "/healthz") == (200, "ok\n")
    wait_until(lambda: _get(url + "/readyz")[0] == 200, timeout_s=20, what="/readyz answers 200")
    assert _get(url + "/nothing")[0] == 404


def test_produced_and_consumed_records_are_counted(metered: tuple[BrokerProcess, str]) -> None:
    broker, url = metered
    topic = "metered"
    with Admin(broker.endpoint) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
    # The worker reports a partition from its first publish on; records counted from there.
    wait_until(lambda: len({labels["partition"] for labels, _ in
                            scrape(url).series("zlog_partition_log_end_offset")
                            if labels["topic"] == topic}) == 2,
               timeout_s=20, what="both partitions reported")
    with Producer(broker.endpoint) as producer:
        for index in range(RECORDS):
            # Random bytes: the batches' LZ4 cannot shrink them below what was sent.
            producer.send(topic, os.urandom(VALUE_BYTES), key=str(index).encode())
        producer.flush()
    with Consumer(broker.endpoint, auto_offset_reset="earliest",
                  fetch_max_wait_ms=100) as consumer:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        seen = 0
        while seen < RECORDS:
            seen += len(consumer.poll(timeout_ms=1_000))

    def counted() -> bool:
        result = scrape(url)
        return (_partition_sum(result, "zlog_partition_records_in_total", topic) == RECORDS
                and _partition_sum(result, "zlog_partition_high_watermark", topic) == RECORDS)

    wait_until(counted, timeout_s=10, what=f"{RECORDS} records counted in")
    result = scrape(url)
    assert _partition_sum(result, "zlog_partition_log_end_offset", topic) == RECORDS
    assert _partition_sum(result, "zlog_partition_bytes_in_total", topic) > RECORDS * VALUE_BYTES
    assert _partition_sum(result, "zlog_partition_bytes_out_total", topic) >= (
        _partition_sum(result, "zlog_partition_bytes_in_total", topic))
    assert _partition_sum(result, "zlog_partition_leader", topic) == 2
    assert _partition_sum(result, "zlog_partition_isr_size", topic) == 2
    assert _partition_sum(result, "zlog_partition_flushes_total", topic) >= 1
    produce = result.value("zlog_requests_total", endpoint="data", api="produce")
    assert produce >= 1
    assert result.value("zlog_request_duration_seconds_count", endpoint="data",
                        api="produce") == produce
    assert result.value("zlog_request_duration_seconds_bucket", endpoint="data", api="fetch",
                        le="+Inf") >= 1
    assert result.value("zlog_requests_total", endpoint="control", api="metadata") >= 1
    assert result.value("zlog_controller_active") == 1
    assert result.value("zlog_broker_ready") == 1
    assert result.value("zlog_offline_partitions") == 0
    assert result.value("zlog_under_replicated_partitions") == 0
    assert result.value("zlog_disk_free_bytes") > 0
    assert result.value("zlog_raft_term") >= 1
    assert sum(value for _, value in result.series("zlog_worker_up")) == 2
    assert [labels["version"] for labels, _ in result.series("zlog_build_info")]


def test_a_topic_that_fsyncs_each_batch_counts_its_fsyncs(
        metered: tuple[BrokerProcess, str]) -> None:
    broker, url = metered
    topic = "metered-fsync"
    with Admin(broker.endpoint) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, {"flush.messages": "1"})])
    with Producer(broker.endpoint, linger_ms=0) as producer:
        for _ in range(5):
            producer.send(topic, b"durable").result(timeout=10)

    def synced() -> bool:
        result = scrape(url)
        return (_partition_sum(result, "zlog_partition_log_end_offset", topic) == 5
                and _partition_sum(result, "zlog_partition_fsyncs_total", topic) >= 5)

    wait_until(synced, timeout_s=10, what="an fsync per batch counted")
    result = scrape(url)
    assert _partition_sum(result, "zlog_partition_fsync_seconds_total", topic) > 0
    assert _partition_sum(result, "zlog_partition_flush_seconds_total", topic) > 0


def test_a_request_refused_is_an_error_of_its_api(metered: tuple[BrokerProcess, str]) -> None:
    """A Metadata request of a version nobody speaks: answered UNSUPPORTED_VERSION, and
    counted as one request and one error of the metadata API."""
    broker, url = metered
    before = scrape(url)
    socket = zmq.Context.instance().socket(zmq.DEALER)
    try:
        socket.connect(broker.endpoint)
        socket.send(REQUEST_HEADER.pack(int(ApiKey.METADATA), 99, 7, 0))
        assert socket.poll(10_000), "no answer"
        answer = socket.recv_multipart()
    finally:
        socket.close(linger=0)
    assert RESPONSE_HEADER.unpack_from(answer[0])[3] == ErrorCode.UNSUPPORTED_VERSION
    after = scrape(url)
    for name in ("zlog_requests_total", "zlog_request_errors_total"):
        assert (after.value(name, endpoint="control", api="metadata")
                == before.value(name, endpoint="control", api="metadata") + 1), name


def test_a_killed_workers_counters_survive_and_its_restart_counts(
        metered: tuple[BrokerProcess, str]) -> None:
    broker, url = metered
    topic = "metered-restart"
    with Admin(broker.endpoint) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    with Producer(broker.endpoint) as producer:
        for _ in range(10):
            producer.send(topic, b"x" * VALUE_BYTES)
        producer.flush()
    wait_until(lambda: _partition_sum(scrape(url), "zlog_partition_bytes_in_total", topic) > 0,
               timeout_s=10, what="bytes in counted")
    bytes_in = _partition_sum(scrape(url), "zlog_partition_bytes_in_total", topic)
    restarts = sum(value for _, value in scrape(url).series("zlog_worker_restarts_total"))
    pid = broker.worker_pid_for(broker.data_endpoint(topic, 0))
    broker.kill_worker(pid)  # SIGKILL

    def restarted() -> bool:
        result = scrape(url)
        return (sum(value for _, value in result.series("zlog_worker_restarts_total"))
                > restarts and sum(value for _, value in result.series("zlog_worker_up")) == 2)

    wait_until(restarted, timeout_s=20, what="the worker's restart counted")
    wait_until(lambda: _partition_sum(scrape(url), "zlog_partition_log_end_offset", topic) == 10,
               timeout_s=20, what="the partition reported again")
    assert _partition_sum(scrape(url), "zlog_partition_bytes_in_total", topic) == bytes_in


def test_a_groups_members_and_committed_offsets(metered: tuple[BrokerProcess, str]) -> None:
    broker, url = metered
    topic, group = "metered-group", "metered-readers"
    with Admin(broker.endpoint) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    with Producer(broker.endpoint) as producer:
        for _ in range(7):
            producer.send(topic, b"r")
        producer.flush()
    with Consumer(broker.endpoint, group_id=group, auto_offset_reset="earliest",
                  enable_auto_commit=False, fetch_max_wait_ms=100) as consumer:
        consumer.subscribe([topic])
        seen = 0
        while seen < 7:
            seen += len(consumer.poll(timeout_ms=1_000))
        consumer.commit()

        def reported() -> bool:
            result = scrape(url)
            try:
                return (result.value("zlog_group_members", group=group) == 1
                        and result.value("zlog_group_committed_offset", group=group,
                                         topic=topic, partition="0") == 7)
            except LookupError:
                return False

        wait_until(reported, timeout_s=20, what="the group's member and offset reported")


def _exported_names(exposition: str) -> set[str]:
    """Every series name the exposition declares, with the suffixes its type implies."""
    suffixes = {"counter": ("",), "histogram": ("_bucket", "_sum", "_count"),
                "gauge": ("",), "summary": ("_sum", "_count", "")}
    names: set[str] = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names.update(name + suffix for suffix in suffixes.get(kind, ("",)))
    return names


def _zlog_names(expressions: list[str]) -> set[str]:
    return {name for expression in expressions for name in re.findall(r"\bzlog_\w+", expression)}


def test_alert_rules_and_dashboards_name_only_exported_metrics(
        metered: tuple[BrokerProcess, str]) -> None:
    """deploy/: the alert rules and both dashboards parse, carry what Prometheus and Grafana
    need, and every zlog_ series they query is one this broker exports."""
    _broker, url = metered
    status, exposition = _get(url + "/metrics")
    assert status == 200
    exported = _exported_names(exposition)
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    alerts = [rule for group in rules["groups"] for rule in group["rules"]]
    for rule in alerts:
        assert {"alert", "expr", "labels", "annotations"} <= set(rule), rule
        assert rule["labels"]["severity"] in {"page", "warning"}, rule
        assert rule["annotations"]["summary"], rule
    named = {rule["alert"] for rule in alerts}
    assert {"ZlogBrokerDown", "ZlogUnderReplicatedPartitions", "ZlogOfflinePartitions",
            "ZlogUnderMinIsr", "ZlogNoActiveController", "ZlogSeveralActiveControllers",
            "ZlogDiskFreeLow", "ZlogDiskFullSoon", "ZlogLeadershipFlapping",
            "ZlogRequestErrorRatio", "ZlogProduceLatencyHigh", "ZlogFetchLatencyHigh",
            "ZlogWorkerCrashLoop"} <= named
    assert next(r for r in alerts if r["alert"] == "ZlogUnderReplicatedPartitions")["for"] == "5m"
    used = _zlog_names([rule["expr"] for rule in alerts])
    for path in sorted((DEPLOY / "grafana").glob("*.json")):
        dashboard = json.loads(path.read_text())
        assert dashboard["uid"] and dashboard["title"] and dashboard["panels"], path
        expressions = [target["expr"] for panel in dashboard["panels"]
                       for target in panel["targets"]]
        expressions += [variable.get("query", "") for variable in
                        dashboard["templating"]["list"]]
        assert expressions, path
        used |= _zlog_names(expressions)
    assert used
    assert not used - exported, f"not exported: {sorted(used - exported)}"
    assert len(list((DEPLOY / "grafana").glob("*.json"))) == 2


def test_zlog_top_shows_topics_requests_and_groups(metered: tuple[BrokerProcess, str]) -> None:
    broker, url = metered
    topic = "metered-top"
    with Admin(broker.endpoint) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    wait_until(lambda: _partition_sum(scrape(url), "zlog_partition_leader", topic) == 1,
               timeout_s=20, what="the topic reported")
    shown = subprocess.run(
        [sys.executable, "-m", "zlog.cli", "top", "--metrics", url, "--metrics",
         "http://127.0.0.1:1", "--once", "--interval-s", "0.2"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "200"},
        check=False)
    assert shown.returncode == 0, shown.stderr
    for expected in (url, "unreachable", topic, "produce", "metadata", "active controllers"):
        assert expected in shown.stdout, (expected, shown.stdout)


def test_zlog_top_without_any_endpoint_is_an_error_line() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "zlog.cli", "top", "--metrics", "http://127.0.0.1:1", "--once",
         "--interval-s", "0"], capture_output=True, text=True, timeout=60, check=False)
    assert shown.returncode == 1
    assert shown.stderr.startswith("error: NETWORK_EXCEPTION"), shown.stderr
    assert "Traceback" not in shown.stderr


def test_a_broker_without_a_controller_is_healthy_but_not_ready() -> None:
    """A voter of a two-voter metadata log whose other voter never comes: no quorum, no
    controller, never registered. Its process serves (/healthz 200); it is not ready (/readyz
    503, saying why) and counts no active controller."""
    port, other = free_port_pair(["127.0.0.1"]), free_port_pair(["127.0.0.1"])
    address = f"127.0.0.1:{free_port()}"
    voters = f"1@tcp://127.0.0.1:{port},2@tcp://127.0.0.1:{other}"
    broker = BrokerProcess(1, ["--metrics-listen", address, "--node-id", "1", "--voters", voters],
                           endpoint=f"tcp://127.0.0.1:{port}")
    try:
        broker.start(wait=False)
        url = f"http://{address}"

        wait_until(lambda: _answers(url + "/healthz"), timeout_s=20, what="/healthz answers")
        # "starting" until the loop's first view is published; then why it is not ready.
        wait_until(lambda: _get(url + "/readyz") == (
            503, "not ready: not registered with the controller (none elected yet?), or its "
            "metadata not caught up\n"), timeout_s=20, what="/readyz says why")
        result = scrape(url)
        assert result.value("zlog_broker_ready") == 0
        assert result.value("zlog_controller_active") == 0
        assert result.value("zlog_raft_leader") == -1
    finally:
        broker.close(None)
