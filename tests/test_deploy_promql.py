"""deploy/'s alert rules and dashboards are valid for Prometheus itself: promtool checks the
rules file as it is, and every dashboard query as a recording rule (with the dashboards'
variables given a value), so a query Grafana would show as an error fails here.

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
