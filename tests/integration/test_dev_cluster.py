"""`zlog dev-cluster`: three brokers on 127.0.0.1-3 that form a cluster; Ctrl-C stops them all."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.kafka.raw_kafka import wait_gateway_answers
from zlog.client import Admin, NewTopic
from zlog.shm_segments.log import default_ring_dir
from zlog_testbed.broker_process import REPO_ROOT
from zlog_testbed.free_ports import free_port_pair
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

WAIT_S = 60.0


def test_dev_cluster_starts_three_brokers_and_ctrl_c_stops_them(tmp_path: Path) -> None:
    hosts = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    port = free_port_pair(hosts)
    kafka_port = free_port_pair(hosts)
    out = tmp_path / "out.txt"
    with out.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "zlog.cli", "dev-cluster", "--brokers", "3",
             "--base-dir", str(tmp_path / "data"), "--port", str(port),
             "--kafka-port", str(kafka_port)],
            cwd=REPO_ROOT, stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: "Ctrl-C stops every broker" in out.read_text() or
                   process.poll() is not None, WAIT_S, interval_s=0.05,
                   what="the dev cluster to serve")
        banner = out.read_text()
        bootstrap = ",".join(f"tcp://{host}:{port}" for host in hosts)
        assert f"export ZLOG_BOOTSTRAP={bootstrap}" in banner, banner
        kafka_bootstrap = [f"{host}:{kafka_port}" for host in hosts]
        assert f"bootstrap.servers={','.join(kafka_bootstrap)}" in banner, banner
        brokers = psutil.Process(process.pid).children(recursive=True)
        assert len([p for p in brokers if "serve" in p.cmdline()]) == 3
        with Admin(bootstrap) as admin:
            admin.create_topics([NewTopic("dev", 3, replication_factor=3)])
            assert [b.state for b in admin.describe_cluster().brokers] == ["live"] * 3
        for address in kafka_bootstrap:  # each broker's Kafka gateway, on its own host
            wait_gateway_answers(address)
        for node in (1, 2, 3):
            assert (tmp_path / "data" / f"node-{node}" / "zlog.log").is_file()
        process.send_signal(signal.SIGINT)
        assert process.wait(WAIT_S) == 0
        assert "stopped every broker" in out.read_text()
        gone, alive = psutil.wait_procs(brokers, timeout=WAIT_S)
        assert not alive and gone
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for node in (1, 2, 3):  # the rings outlive a broker, as they should, but not a test
            shutil.rmtree(default_ring_dir(tmp_path / "data" / f"node-{node}"),
                          ignore_errors=True)
