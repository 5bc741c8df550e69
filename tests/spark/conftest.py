"""One broker and one local SparkSession (`local[2]`) for the whole Spark test package.

A SparkSession takes seconds to start, so every Spark test shares it; each test uses its own
topics. Spark's Python workers run this interpreter (PYSPARK_PYTHON), so they import the zlog
under test. Waiting is on conditions with deadlines, never on bare sleeps.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from zlog.client import Admin, NewTopic
from zlog_testbed.broker_process import BrokerProcess, broker_process

REPO_ROOT = Path(__file__).resolve().parents[2]
CALL_TIMEOUT_MS = 10_000

_names = itertools.count()


@pytest.fixture(scope="session")
def spark_broker() -> Iterator[BrokerProcess]:
    with broker_process(workers=2) as instance:
        yield instance


@pytest.fixture(scope="session")
def bootstrap(spark_broker: BrokerProcess) -> str:
    return spark_broker.endpoint


@pytest.fixture(scope="session")
def admin(bootstrap: str) -> Iterator[Admin]:
    with Admin(bootstrap, request_timeout_ms=CALL_TIMEOUT_MS) as instance:
        yield instance


@pytest.fixture(scope="session")
def make_topic(admin: Admin) -> Callable[..., str]:
    """Create a fresh topic: make_topic(partitions=3, prefix="clicks") -> its name.

    `configs` are topic configs, e.g. {"max.message.bytes": "64"}.
    """

    def create(partitions: int = 1, prefix: str = "t",
               configs: Mapping[str, str] | None = None) -> str:
        name = f"{prefix}-{next(_names)}"
        admin.create_topics([NewTopic(name, partitions, configs=dict(configs or {}))])
        return name

    return create


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("no Java runtime: Spark needs one (`make test` installs "
                    "default-jre-headless with apt)")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    path = os.environ.get("PYTHONPATH", "")
    if str(REPO_ROOT) not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), path) if p)

    from pyspark.sql import SparkSession

    import zlog.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("zlog-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    zlog.spark.register(session)
    try:
        yield session
    finally:
        session.stop()
