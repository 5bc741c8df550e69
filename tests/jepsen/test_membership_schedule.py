"""The membership faults (F7) on a real cluster must pass: a soak test, not part of `make test`.

About two and a half minutes: three voters and a spare learner broker, 90 s of replica moves
(a partition's replica swapped for the spare's and back, the same with the receiving broker
killed mid-move, a leader's broker drained, restarted and given its share again) under the
acks=all workload, then heal, final drain and the checker, whose committed-ISR samples must
be there. With seed 3 the schedule draws drain, drain, reassign-kill, drain, reassign,
reassign: how many of them fit in 90 s depends on how fast the moves finish.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from zlog_jepsen.__main__ import first_config, parser
from zlog_jepsen.isr_watch import read_isr_samples
from zlog_jepsen.membership_faults import DRAIN, MEMBERSHIP_KINDS
from zlog_jepsen.runner import ISR_SAMPLES, run

pytestmark = [pytest.mark.slow, pytest.mark.soak]


@pytest.mark.timeout(900)
def test_replica_moves_and_drains_under_load_lose_nothing(tmp_path: Path) -> None:
    config = first_config(parser().parse_args([
        "--seed", "3", "--duration-s", "90", "--hold-s", "3,8", "--rest-s", "3,6",
        "--faults", ",".join(MEMBERSHIP_KINDS), "--out-dir", str(tmp_path)]))
    outcome = run(config)
    summary = (outcome.run_dir / "summary.txt").read_text(encoding="utf-8")
    assert outcome.valid, summary
    numbers = outcome.numbers
    assert numbers["spare_brokers"] == 1 and numbers["final_drain_complete"], summary
    assert numbers["acked_writes"] > 100, summary
    assert numbers["faults_by_kind"].get(DRAIN, 0) >= 1, summary
    assert set(numbers["faults_by_kind"]) <= set(MEMBERSHIP_KINDS), summary
    samples = read_isr_samples(outcome.run_dir / ISR_SAMPLES)
    assert numbers["isr_samples"] > 0 and samples, summary
    assert {s.key for s in samples} == set(range(config.workload.keys))
