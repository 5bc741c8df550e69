"""Soak tests run only when asked for with `-m soak`; `--seed N` replays one seed only."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marker_expression = str(config.getoption("-m") or "")
    replaying = config.getoption("--seed") is not None
    skip_soak = pytest.mark.skip(reason="soak: run with -m soak")
    skip_other = pytest.mark.skip(reason="--seed replays one seed only")
    for item in items:
        if "tests/sim/" not in item.nodeid and not item.nodeid.startswith("sim/"):
            continue
        is_soak = item.get_closest_marker("soak") is not None
        if is_soak and "soak" not in marker_expression:
            item.add_marker(skip_soak)
        elif replaying and not is_soak and not item.nodeid.endswith("test_seeds[0]"):
            item.add_marker(skip_other)
