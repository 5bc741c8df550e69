"""examples/spark_pipeline.py: where it connects, and that a failed query fails the run.

The pipeline runs on the shared SparkSession (`run`; `main` only adds a session of its own),
against the test broker, which it finds through ZLOG_BOOTSTRAP as the `zlog` command does.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.spark.conftest import REPO_ROOT

pytestmark = [pytest.mark.spark]

EXAMPLE = REPO_ROOT / "examples" / "spark_pipeline.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spark_pipeline", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bootstrap_comes_from_the_option_then_zlog_bootstrap_then_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    example = load_example()
    monkeypatch.delenv("ZLOG_BOOTSTRAP", raising=False)
    assert example.parse_args([]).bootstrap == "tcp://127.0.0.1:7400"
    monkeypatch.setenv("ZLOG_BOOTSTRAP", "tcp://10.0.0.7:7400")
    assert example.parse_args([]).bootstrap == "tcp://10.0.0.7:7400"
    assert example.parse_args(["--bootstrap", "tcp://10.0.0.8:7400"]).bootstrap == (
        "tcp://10.0.0.8:7400")


@pytest.mark.slow
def test_a_failed_query_is_printed_and_the_run_exits_1(
    spark: Any, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Every record batch of the counts exceeds the topic's max.message.bytes: the first
    # micro-batch's write fails, and with it the query.
    counts = make_topic(partitions=2, prefix="page-counts", configs={"max.message.bytes": "64"})
    clicks = make_topic(partitions=3, prefix="clicks")
    example = load_example()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ZLOG_BOOTSTRAP", bootstrap)
        args = example.parse_args(["--clicks-topic", clicks, "--counts-topic", counts,
                                   "--checkpoint", str(tmp_path / "checkpoint"),
                                   "--duration-s", "120"])

    assert example.run(spark, args) == 1

    err = capsys.readouterr().err
    assert "the streaming query failed: " in err
    assert "MESSAGE_TOO_LARGE (10): " in err and f"for topic {counts!r}" in err
    assert "=== Streaming Query ===" not in err, "the error, not Spark's whole query plan"
