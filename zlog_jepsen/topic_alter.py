"""Topic configs changed as an operator changes them: IncrementalAlterConfigs through the
Admin API (`kafka-configs --alter` in Kafka).

A change is asked again while the controller does not answer (it is idempotent), until
ALTER_TIMEOUT_S. What a fault sets is given back as the topic was created, not as the
cluster answers: a broker whose metadata still lags would answer with the fault's values,
and the topic would keep them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Final

from zlog.client import Admin
from zlog.errors import ZlogError
from zlog_testbed.waiting import wait_until

ALTER_TIMEOUT_S: Final = 60.0
ADMIN_TIMEOUT_MS: Final = 5_000
POLL_INTERVAL_S: Final = 0.2


def restoring(configs: Collection[str], created: Mapping[str, str]) -> dict[str, str | None]:
    """The changes that give a topic back the `configs` it was `created` with: the value it
    was created with, or none (deleted, back to the broker's default)."""
    return {name: created.get(name) for name in configs}


def alter_configs(bootstrap: str, changes: Mapping[str, Mapping[str, str | None]]) -> None:
    """Set each topic's configs ({topic: {config: value}}, None deletes one); raises
    AssertionError with the last refusal when that has not happened by ALTER_TIMEOUT_S."""
    last: list[str] = []

    def altered() -> bool:
        try:
            admin.incremental_alter_configs(changes)
        except ZlogError as error:
            last[:] = [str(error)]
            return False
        return True

    with Admin(bootstrap, request_timeout_ms=ADMIN_TIMEOUT_MS) as admin:
        try:
            wait_until(altered, ALTER_TIMEOUT_S, POLL_INTERVAL_S,
                       f"topic configs set to {dict(changes)}")
        except AssertionError as error:
            raise AssertionError(f"{error}: {''.join(last)}") from None
