"""`zlog cluster health` against a real 3-broker cluster: 0 when healthy; 1, naming each
offline, under-replicated and under-min-ISR partition, while a broker is down; 0 again once
it is back and caught up (what a rolling restart waits for between hosts)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from zlog.client import Admin, NewTopic
from zlog_testbed.broker_process import REPO_ROOT, START_TIMEOUT_S
from zlog_testbed.cluster_processes import cluster_processes
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

DOWN = 3


def _health(bootstrap: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zlog.cli", "cluster", "health", "--bootstrap", bootstrap,
         "--request-timeout-ms", "5000"], capture_output=True, text=True, cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, timeout=60, check=False)


def test_health_follows_a_broker_going_down_and_coming_back(tmp_path: Path) -> None:
    with cluster_processes(3, tmp_path) as cluster:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics([NewTopic("replicated", 2, 3, {"min.insync.replicas": "3"}),
                                 NewTopic("single", 3, 1)])
        for partition in range(2):
            cluster.wait_isr("replicated", partition, {1, 2, 3})
        singles = {partition: cluster.partition("single", partition).replicas[0]
                   for partition in range(3)}
        assert DOWN in singles.values(), singles  # one replica a broker, as placed
        for partition, replica in singles.items():
            cluster.wait_isr("single", partition, {replica})
        healthy = _health(cluster.bootstrap)
        assert healthy.returncode == 0, healthy.stdout + healthy.stderr
        assert healthy.stdout.startswith("healthy: controller ")
        assert "5 partitions, 0 offline, 0 under-replicated, 0 under min ISR" in healthy.stdout

        cluster.broker(DOWN).kill_all()
        for partition in range(2):
            cluster.wait_isr("replicated", partition, {1, 2})
        lost = next(partition for partition, replica in singles.items() if replica == DOWN)
        cluster.wait_for(lambda p: p.leader < 0, "single", lost, "offline")
        sick = _health(cluster.bootstrap)
        assert sick.returncode == 1, sick.stdout + sick.stderr
        lines = sick.stdout.splitlines()
        assert lines[0].startswith("UNHEALTHY: ")
        assert f"offline: single-{lost} replicas [{DOWN}] isr [{DOWN}]" in lines
        for partition in range(2):
            assert any(line.startswith(f"under-replicated: replicated-{partition} ")
                       for line in lines), lines
            assert any(line.startswith(f"under min ISR: replicated-{partition} ")
                       for line in lines), lines

        cluster.broker(DOWN).start()
        wait_until(lambda: _health(cluster.bootstrap).returncode == 0, START_TIMEOUT_S,
                   interval_s=0.5, what="the cluster healthy again")
