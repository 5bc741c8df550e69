"""Fixtures shared by every test tier: temporary directories, shm directories, seeds."""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# A property test asserts what its code does, never how fast: Hypothesis's per-example deadline
# (200 ms by default) is a wall-clock bound that a busy 2-core machine breaks at random.
settings.register_profile("zlog", deadline=None)
settings.load_profile("zlog")

# A broker a test starts by hand (`zlog serve` with the test's environment) opens no Kafka
# listener (one process less to start) unless the Kafka tests ask for one (tests/kafka).
os.environ.setdefault("ZLOG_KAFKA_LISTEN", "")


# The modules that take a minute or more (on the 2-core machine `make test` must finish on in 15
# minutes), longest first. `make test` runs the modules of real processes two or three at a
# time (pytest-xdist, whole modules to a worker, in collection order): started first, the long
# ones end while the short ones fill the other workers, and no worker is left running one long
# module alone at the end. A scheduling hint only: a module missing here, or renamed, runs
# all the same, in its place.
LONG_MODULES_FIRST = (
    "tests/spark/test_stream.py",
    "tests/cluster/test_partition.py",
    "tests/integration/test_cli.py",
    "tests/jepsen/test_short_schedule.py",
    "tests/cluster/test_client_retries.py",
    "tests/cluster/test_failover.py",
    "tests/cluster/test_replication.py",
    "tests/cluster/test_stuck_host.py",
    "tests/spark/test_errors.py",
    "tests/integration/test_group_guarantees.py",
    "tests/kafka/test_kafka_clients_data.py",
    "tests/integration/test_worker.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {module: index for index, module in enumerate(LONG_MODULES_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--seed",
        action="store",
        type=int,
        default=None,
        help="replay one simulation seed (printed by a failing simulation test)",
    )
    parser.addoption(
        "--rewrite",
        action="store_true",
        default=False,
        help="rewrite scenario transcripts with the observed output",
    )


@pytest.fixture
def seed_option(request: pytest.FixtureRequest) -> int | None:
    value = request.config.getoption("--seed")
    return None if value is None else int(value)


@pytest.fixture
def seed(seed_option: int | None) -> Iterator[int]:
    """A random seed for a randomised fault test, printed so `--seed N` reruns the case."""
    value = seed_option if seed_option is not None else random.SystemRandom().randrange(2**31)
    print(f"\nseed {value} (rerun with: pytest --seed {value})")
    yield value


@pytest.fixture
def rewrite(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--rewrite"))


@pytest.fixture
def shm_dir() -> Iterator[Path]:
    """A private directory on tmpfs for rings, removed afterwards."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    path = Path(tempfile.mkdtemp(prefix="zlog-test-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
