"""`retention.disk.percent` as bytes: each topic's budget on a broker, and each partition's share.

Pure: the supervisor passes in the metadata's topics, this broker's id and the size of its
data disk, and sends each partition's share to the worker that holds it, where retention keeps
the log within it (`LogConfig.disk_share_bytes`). The shares are computed again from each new
version of the metadata, so a topic grown, created or deleted, or a replica moved here or away,
changes them at the next reconcile. docs/storage.md has the rules and why:

* a topic's budget is its percent of the disk's size, so it does not depend on what else is
  stored there;
* when the percents of the topics this broker holds add up to more than 100, every budget is
  scaled down by the same factor, so that together they never exceed the disk: adding a topic
  then shrinks the others' budgets instead of promising the same bytes twice;
* the budget is divided evenly over the topic's partitions this broker holds (leader or
  follower), so adding partitions, or moving replicas here, shrinks each share and never
  multiplies the bytes the topic may take.

Every division rounds down, so the shares never add up to more than the budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from zlog.broker.control.metadata.state import TopicInfo
from zlog.broker.topic_configs import (
    RETENTION_DISK_PERCENT,
    effective_topic_configs,
    validate_topic_configs,
)
from zlog.errors import ZlogError

NO_SHARE: Final = -1
"""`disk_share_bytes` of a partition whose topic has no disk budget."""
PERCENT_TOTAL_MAX: Final = 100.0
"""What the budgets of the topics on one broker may add up to, as a percentage of the disk."""


def disk_budget_percent(configs: Mapping[str, str]) -> float:
    """The topic's retention.disk.percent when it applies, else -1.

    It applies only to a topic that deletes (cleanup.policy includes delete), as every
    retention rule. Configs that do not validate give no budget: the worker refuses to open
    such a partition anyway, and says why."""
    if configs.get(RETENTION_DISK_PERCENT, "-1") == "-1":
        return -1.0  # the default, and the common case: nothing to parse
    try:
        config = validate_topic_configs(configs)
    except ZlogError:
        return -1.0
    return config.retention_disk_percent if config.deletes else -1.0


def topic_budgets_bytes(percents: Mapping[str, float], disk_bytes: int) -> dict[str, int]:
    """Each topic's budget on this broker (bytes), for the topics with a percent above 0."""
    assert disk_bytes >= 0
    budgeted = {topic: percent for topic, percent in percents.items() if percent > 0}
    divisor = max(PERCENT_TOTAL_MAX, sum(budgeted.values()))
    return {topic: int(disk_bytes * percent / divisor) for topic, percent in budgeted.items()}


def partition_shares_bytes(
    percents: Mapping[str, float], held_partitions: Mapping[str, int], disk_bytes: int
) -> dict[str, int]:
    """Each topic's share per partition held here (bytes), for the topics with a budget.

    `percents` and `held_partitions` are keyed by the topics this broker holds at least one
    partition of; a topic absent from `percents`, or with a percent of -1, has no budget."""
    held = {topic: count for topic, count in held_partitions.items() if count > 0}
    budgets = topic_budgets_bytes(
        {topic: percent for topic, percent in percents.items() if topic in held}, disk_bytes
    )
    return {topic: budget // held[topic] for topic, budget in budgets.items()}


def broker_shares_bytes(
    topics: Iterable[TopicInfo], broker_id: int, topic_defaults: Mapping[str, str],
    disk_bytes: int,
) -> dict[str, int]:
    """Per topic with a budget on this broker: the share of each of its partitions held here.

    A partition counts when this broker is one of its replicas, leader or follower, including
    a replica a reassignment is adding or removing: its files are on this disk until it goes."""
    held: dict[str, int] = {}
    percents: dict[str, float] = {}
    for topic in topics:
        count = sum(1 for partition in topic.partitions if broker_id in partition.replicas)
        if count:
            held[topic.name] = count
            percents[topic.name] = disk_budget_percent(
                effective_topic_configs(topic_defaults, topic.configs)
            )
    return partition_shares_bytes(percents, held, disk_bytes)
