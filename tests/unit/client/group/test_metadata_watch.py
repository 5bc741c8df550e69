"""When a member looks at metadata again, and which topics a pattern takes (time as input)."""

from __future__ import annotations

import pytest

from zlog.client.group.metadata_watch import MetadataWatch, compile_pattern, matching
from zlog.errors import ErrorCode, ZlogError


def test_a_look_is_due_every_max_age_and_after_a_backoff_when_it_failed() -> None:
    watch = MetadataWatch(metadata_max_age_ms=1_000)
    assert watch.due(0)
    watch.looked(5_000)
    assert not watch.due(5_999) and watch.due(6_000)
    watch.failed(6_000, retry_backoff_ms=100)
    assert not watch.due(6_099) and watch.due(6_100)


def test_a_pattern_matches_whole_topic_names() -> None:
    pattern = compile_pattern(r"orders-\d+")
    assert matching(pattern, ["orders-2", "orders-1", "orders-1x", "x-orders-3"]) == [
        "orders-1", "orders-2"]


def test_a_bad_pattern_or_max_age_is_a_clear_error() -> None:
    with pytest.raises(ZlogError, match="bad topic pattern") as bad:
        compile_pattern("orders-(")
    assert bad.value.code == ErrorCode.INVALID_REQUEST
    with pytest.raises(ZlogError, match="metadata_max_age_ms must be positive") as age:
        MetadataWatch(metadata_max_age_ms=0)
    assert age.value.code == ErrorCode.INVALID_CONFIG
