"""deploy/'s alert rules and dashboards are valid for Prometheus itself: promtool checks the
rules file as it is, and every dashboard query as a recording rule (with the dashboards'
variables given a value), so a query Grafana would show as an error fails here; and each
alert fires on made-up series when it should, and not before (`promtool test rules`).

Which series they name is checked against a real broker in
tests/integration/test_metrics_endpoint.py; this checks the PromQL. promtool comes from
`make promtool` (the Makefile's `test` gets it); without it this test skips and says why.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
DEPLOY = REPO_ROOT / "deploy"
VARIABLES = {"$instance": ".*", "$group": ".*"}  # the dashboards' template variables


def _promtool() -> str:
    found = shutil.which("promtool") or shutil.which("promtool", path=str(Path(sys.executable)
                                                                          .parent))
    if found is None:
        pytest.skip("promtool is not installed (make promtool)")
    return found


def _check_rules(promtool: str, path: Path) -> str:
    checked = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True,
                             text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return checked.stdout


def test_the_alert_rules_pass_promtool() -> None:
    output = _check_rules(_promtool(), DEPLOY / "prometheus" / "alerts.yml")
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    count = sum(len(group["rules"]) for group in rules["groups"])
    assert f"SUCCESS: {count} rules found" in output


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    promtool = _promtool()
    expressions = []
    for path in sorted((DEPLOY / "grafana").glob("*.json")):
        dashboard = json.loads(path.read_text())
        expressions += [target["expr"] for panel in dashboard["panels"]
                        for target in panel["targets"]]
    assert expressions
    for variable, value in VARIABLES.items():
        expressions = [expression.replace(variable, value) for expression in expressions]
    assert not [e for e in expressions if "$" in e], "a dashboard variable left unset"
    rules = {"groups": [{"name": "dashboards", "rules": [
        {"record": f"zlog:dashboard_query:{index}", "expr": expression}
        for index, expression in enumerate(expressions)]}]}
    path = tmp_path / "dashboards.yml"
    path.write_text(yaml.safe_dump(rules))
    assert f"SUCCESS: {len(expressions)} rules found" in _check_rules(promtool, path)


# Each alert's firing, on series made up for it: (series, values every minute), then when
# it must be quiet and when it must fire, with the labels it fires with. The annotations are
# left out of the copy of the rules promtool runs: their wording is the operators' to change.
ALERT_CASES = [
    ("ZlogBrokerDown", {'up{job="zlog",instance="b1"}': "1 0x9"},
     "1m", "3m", {"job": "zlog", "instance": "b1"}),
    ("ZlogUnderReplicatedPartitions",
     {'zlog_under_replicated_partitions{job="zlog",instance="b1"}': "0 1x9",
      'zlog_under_replicated_partitions{job="zlog",instance="b2"}': "0x10"},
     "4m", "7m", {}),
    ("ZlogOfflinePartitions", {'zlog_offline_partitions{job="zlog",instance="b1"}': "0 2x9"},
     "1m", "3m", {}),
    ("ZlogUnderMinIsr", {'zlog_under_min_isr_partitions{job="zlog",instance="b1"}': "0 1x9"},
     "1m", "3m", {}),
    ("ZlogNoActiveController",
     {'zlog_controller_active{job="zlog",instance="b1"}': "1 0x9",
      'zlog_controller_active{job="zlog",instance="b2"}': "0x10"},
     "1m", "3m", {}),
    ("ZlogNoActiveController", {'zlog_broker_ready{job="zlog",instance="b1"}': "1x10"},
     None, "2m", {"job": "zlog"}),  # no broker exports it at all
    ("ZlogSeveralActiveControllers",
     {'zlog_controller_active{job="zlog",instance="b1"}': "1x10",
      'zlog_controller_active{job="zlog",instance="b2"}': "0 1x9"},
     "1m", "3m", {}),
    ("ZlogDiskFreeLow",
     {'zlog_disk_free_bytes{job="zlog",instance="b1"}': "50 10x9",
      'zlog_disk_total_bytes{job="zlog",instance="b1"}': "100x10",
      'zlog_disk_free_alert_ratio{job="zlog",instance="b1"}': "0.15x10"},
     "4m", "7m", {"job": "zlog", "instance": "b1"}),
    ("ZlogDiskFullSoon",
     {'zlog_disk_free_bytes{job="zlog",instance="b1"}': "1000000-10000x90"},
     None, "80m", {"job": "zlog", "instance": "b1"}),
    ("ZlogLeadershipFlapping",
     {'zlog_raft_leader_changes_total{job="zlog",instance="b1"}': "0+1x30",
      'zlog_leader_elections_total{job="zlog",instance="b1"}': "0x30"},
     None, "15m", {}),
    ("ZlogRequestErrorRatio",
     {'zlog_requests_total{job="zlog",instance="b1",api="produce"}': "0+100x20",
      'zlog_request_errors_total{job="zlog",instance="b1",api="produce"}': "0x5 5+5x14"},
     "5m", "15m", {"instance": "b1", "api": "produce"}),
    ("ZlogProduceLatencyHigh",
     {'zlog_request_duration_seconds_bucket{job="zlog",instance="b1",api="produce",le="0.05"}':
      "0x20",
      'zlog_request_duration_seconds_bucket{job="zlog",instance="b1",api="produce",le="0.25"}':
      "0+100x20",
      'zlog_request_duration_seconds_bucket{job="zlog",instance="b1",api="produce",le="+Inf"}':
      "0+100x20"},
     None, "10m", {"instance": "b1"}),
    ("ZlogFetchLatencyHigh",
     {'zlog_request_duration_seconds_bucket{job="zlog",instance="b1",api="fetch",le="0.05"}':
      "0+100x20",
      'zlog_request_duration_seconds_bucket{job="zlog",instance="b1",api="fetch",le="0.25"}':
      "0+100x10 1000+200x10",
      'zlog_request_duration_seconds_bucket{job="zlog",instance="b1",api="fetch",le="+Inf"}':
      "0+100x10 1000+200x10"},
     "9m", "20m", {"instance": "b1"}),  # slow from the 11th minute on
    ("ZlogWorkerCrashLoop",
     {'zlog_worker_restarts_total{job="zlog",instance="b1",worker="0"}': "0x5 1+1x10"},
     "5m", "14m", {"job": "zlog", "instance": "b1", "worker": "0"}),
]


def test_each_alert_fires_when_it_should_and_not_before(tmp_path: Path) -> None:
    promtool = _promtool()
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations")
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(rules))
    named = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    assert {case[0] for case in ALERT_CASES} == named, "a case for every alert"
    tests = []
    for alert, series, quiet_at, fires_at, labels in ALERT_CASES:
        severity = next(rule["labels"]["severity"] for group in rules["groups"]
                        for rule in group["rules"] if rule["alert"] == alert)
        checks = [{"eval_time": fires_at, "alertname": alert,
                   "exp_alerts": [{"exp_labels": {"severity": severity, **labels}}]}]
        if quiet_at is not None:
            checks.insert(0, {"eval_time": quiet_at, "alertname": alert, "exp_alerts": []})
        tests.append({"interval": "1m", "alert_rule_test": checks, "input_series": [
            {"series": name, "values": values} for name, values in series.items()]})
    (tmp_path / "alerts_test.yml").write_text(yaml.safe_dump(
        {"rule_files": ["alerts.yml"], "evaluation_interval": "1m", "tests": tests}))
    tested = subprocess.run([promtool, "test", "rules", str(tmp_path / "alerts_test.yml")],
                            capture_output=True, text=True, timeout=120, check=False)
    assert tested.returncode == 0, tested.stdout + tested.stderr
