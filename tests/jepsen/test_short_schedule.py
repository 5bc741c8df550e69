"""The short schedule on a real three-broker cluster must pass: what `make jepsen` runs.

About two minutes: the fixed seed, 60 s of faults (kill -9 of a leader's worker and of a
leader's broker, a leader cut off from the other brokers) among four client processes
sending with acks=all to an idempotent producer and polling, then heal, final drain and the
checker; its partition is cut by nftables between network namespaces wherever those work.
Nothing acknowledged may be lost or doubled, no offset may hold two values, no
failed send may be read, and the run's directory must hold what a post-mortem needs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from zlog_jepsen.__main__ import first_config, parser
from zlog_jepsen.cluster import TCP_PROXY
from zlog_jepsen.history import read_history
from zlog_jepsen.netns import unavailable_reason
from zlog_jepsen.netns_cluster import NETNS_NFTABLES
from zlog_jepsen.plots import plots_available
from zlog_jepsen.runner import FINAL_READ, HISTORY, run

pytestmark = pytest.mark.slow


@pytest.mark.timeout(420)
def test_the_short_schedule_finds_nothing_wrong(tmp_path: Path) -> None:
    config = first_config(parser().parse_args(["--short", "--out-dir", str(tmp_path)]))
    outcome = run(config)
    summary = (outcome.run_dir / "summary.txt").read_text(encoding="utf-8")
    assert outcome.valid, summary
    numbers = outcome.numbers
    assert numbers["acked_writes"] > 100, summary
    for anomaly in ("acked_lost", "duplicates", "inconsistent_offsets", "aborted_reads"):
        assert numbers[anomaly] == 0, summary
    assert numbers["faults_injected"] >= 3, summary
    assert numbers["final_drain_complete"]
    # its partition is nftables rules between namespaces wherever those work
    assert numbers["network_faults"] == (
        NETNS_NFTABLES if unavailable_reason() is None else TCP_PROXY), summary
    history = read_history(outcome.run_dir / HISTORY)
    assert {e.f for e in history} >= {"send", "poll", "assign", "nemesis"}
    assert (outcome.run_dir / FINAL_READ).is_file()
    if plots_available():
        assert (outcome.run_dir / "latency.png").stat().st_size > 0
    # a valid run keeps its record, not the brokers' data
    assert not list(outcome.run_dir.glob("broker-*"))
