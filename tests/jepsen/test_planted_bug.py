"""The checker must catch a broker that breaks its promise: a planted bug fails a short run.

The same short schedule twice on a real three-broker cluster: two partition leaders cut off
from the other brokers (clients still reach them) for 3 s each. With every broker answering
acks=all at the leader's append (zlog.broker.data.planted_bug), the writes an isolated leader
acknowledges are never replicated, and are truncated away once it rejoins under the new
leader: the checker must report acknowledged writes lost. Without the bug the same schedule
loses nothing. About 30 s per run here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from zlog.broker.data.planted_bug import ACK_BEFORE_REPLICATION
from zlog_jepsen.__main__ import first_config, parser
from zlog_jepsen.nemesis import ISOLATE_LEADER
from zlog_jepsen.runner import run

pytestmark = pytest.mark.slow

SCHEDULE_ARGS = ["--seed", "3", "--faults", ISOLATE_LEADER, "--hold-s", "3", "--rest-s", "2",
                 "--duration-s", "10", "--warmup-s", "3"]


def _short_run(out_dir: Path, *extra: str) -> tuple[bool, dict[str, object], str]:
    outcome = run(first_config(parser().parse_args([*SCHEDULE_ARGS, "--out-dir", str(out_dir),
                                                    *extra])))
    summary = (outcome.run_dir / "summary.txt").read_text(encoding="utf-8")
    return outcome.valid, outcome.numbers, summary


@pytest.mark.soak  # a harness self-check of a minute or more: make soak runs it with its twin;
@pytest.mark.timeout(180)  # make test keeps test_short_schedule, zlog's own clean run
def test_acks_all_answered_at_the_append_loses_acknowledged_writes(tmp_path: Path) -> None:
    valid, numbers, summary = _short_run(tmp_path, "--planted-bug", ACK_BEFORE_REPLICATION)
    assert "operations" in numbers, summary  # the run reached its verdict
    assert not valid, summary
    assert numbers["faults_by_kind"] == {ISOLATE_LEADER: 2}, summary
    assert isinstance(numbers["acked_lost"], int) and numbers["acked_lost"] > 0, summary
    assert f"planted bug: {ACK_BEFORE_REPLICATION}" in summary


@pytest.mark.soak  # the planted run's twin: the same schedule without the bug loses nothing
@pytest.mark.timeout(180)
def test_the_same_schedule_without_the_bug_loses_nothing(tmp_path: Path) -> None:
    valid, numbers, summary = _short_run(tmp_path)
    assert valid, summary
    assert numbers["faults_by_kind"] == {ISOLATE_LEADER: 2}, summary
    assert numbers["acked_lost"] == 0, summary
    assert isinstance(numbers["acked_writes"], int) and numbers["acked_writes"] > 20, summary
    assert numbers["planted_bug"] is None
