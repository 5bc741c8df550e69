"""A test-only switch that breaks one of zlog's promises on purpose, off unless asked for.

A checker that has never caught a bug proves little: the harness (docs/reliability.md §9)
plants this one in a cluster and must then report acknowledged writes as lost within one
short run. The switch is an environment variable, read here once when a worker starts, so
nothing else in zlog knows about it and no configuration file or flag can turn it on:

    ZLOGTEST_PLANTED_BUG=ack-before-replication

answers acks=all as soon as the leader has appended the batches (acks=1's answer), without
waiting for the high watermark to cover them: a leader that is then cut off or killed takes
acknowledged writes with it. The name lies outside the broker's ZLOG_ settings on purpose:
it is not a setting, and `zlog serve` must never warn about it as an unknown one. An
unknown value stops the worker with a message naming the variable and its values.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Final

log = logging.getLogger(__name__)

PLANTED_BUG_ENV: Final = "ZLOGTEST_PLANTED_BUG"
ACK_BEFORE_REPLICATION: Final = "ack-before-replication"
PLANTED_BUGS: Final = (ACK_BEFORE_REPLICATION,)


def planted_bug(environ: Mapping[str, str]) -> str | None:
    """The bug `environ` plants, or None; ValueError for a value that names no bug."""
    value = environ.get(PLANTED_BUG_ENV, "")
    if not value:
        return None
    if value not in PLANTED_BUGS:
        raise ValueError(f"{PLANTED_BUG_ENV} is one of {', '.join(PLANTED_BUGS)} or unset, "
                         f"not {value!r}")
    log.warning("%s=%s: this broker breaks its acks=all promise on purpose (a test-only switch)",
                PLANTED_BUG_ENV, value)
    return value


ACKS_ALL_AT_APPEND: Final = planted_bug(os.environ) == ACK_BEFORE_REPLICATION
"""acks=all answered at the leader's append: the planted bug, False unless planted."""
