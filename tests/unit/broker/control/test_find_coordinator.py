"""FindCoordinator on the control endpoint: the first call creates `__consumer_offsets`, and
the answer is the worker leading the group's partition (docs/groups.md, "Finding the
coordinator"). Driven through ControlPlane with the fake supervisor of test_control_plane."""

from __future__ import annotations

from tests.unit.broker.control.test_control_plane import FakeBroker
from zlog.errors import ErrorCode
from zlog.groups.partitioning import OFFSETS_TOPIC, partition_for
from zlog.transport.messages.groups import (
    FindCoordinatorRequestV0,
    FindCoordinatorResponseV0,
)


def _find(broker: FakeBroker, group_id: str, key_type: int = 0) -> FindCoordinatorResponseV0:
    answer = broker.reply_to(broker.request(FindCoordinatorRequestV0(group_id, key_type)))
    assert isinstance(answer, FindCoordinatorResponseV0)
    return answer


def test_the_first_call_creates_the_compacted_offsets_topic_once() -> None:
    broker = FakeBroker(offsets_topic_num_partitions=4)
    first = _find(broker, "orders")
    assert first.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert _find(broker, "other").error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert len(broker.proposed) == 1  # asked twice, created once
    broker.commit()
    topic = broker.fsm.state.topics[OFFSETS_TOPIC]
    assert len(topic.partitions) == 4
    assert topic.configs["cleanup.policy"] == "compact"
    assert [len(p.replicas) for p in topic.partitions] == [1] * 4  # min(3, one broker)
    leaderless = _find(broker, "orders")
    assert leaderless.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert "no leader" in leaderless.error_message


def test_the_answer_is_the_worker_leading_the_groups_partition() -> None:
    broker = FakeBroker(offsets_topic_num_partitions=4)
    _find(broker, "orders")
    broker.commit()
    broker.open_all()
    index = partition_for("orders", 4)
    broker.endpoints[(OFFSETS_TOPIC, index)] = "tcp://127.0.0.1:7777"
    assert _find(broker, "orders") == FindCoordinatorResponseV0(0, "", 1, "tcp://127.0.0.1:7777")


def test_a_transaction_key_is_refused_and_creates_nothing() -> None:
    broker = FakeBroker()
    answer = _find(broker, "tx", key_type=1)
    assert answer.error_code == ErrorCode.INVALID_REQUEST and "key type 1" in answer.error_message
    assert broker.proposed == []
