"""Assignors and ConsumerProtocol bytes: Kafka's layouts and each assignor's promises."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zlog.errors import ErrorCode, ZlogError
from zlog.groups.assignors import (
    ASSIGNORS,
    MemberSubscription,
    assign_classic_group,
    cooperative_sticky_assign,
    range_assign,
    roundrobin_assign,
    sticky_assign,
)
from zlog.groups.classic.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from zlog.types import TopicPartition as TP


def member(member_id: str, *topics: str, owned: set[TP] | None = None, generation: int = -1,
           instance_id: str | None = None) -> MemberSubscription:
    return MemberSubscription(member_id, frozenset(topics), instance_id,
                              frozenset(owned or ()), generation)


def tps(topic: str, *numbers: int) -> set[TP]:
    return {TP(topic, n) for n in numbers}


def test_subscription_v0_is_kafkas_layout() -> None:
    raw = encode_subscription(Subscription(("t",), b"u"), version=0)
    assert raw == b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x01u"


def test_subscription_and_assignment_round_trip_at_every_version() -> None:
    full = Subscription(("a", "b"), None, (TP("a", 0), TP("a", 2), TP("b", 1)), 5, "rack")
    expected = [
        Subscription(("a", "b")),
        Subscription(("a", "b"), None, full.owned_partitions),
        Subscription(("a", "b"), None, full.owned_partitions, 5),
        full,
    ]
    for version, want in enumerate(expected):
        assert decode_subscription(encode_subscription(full, version)) == want
    assignment = Assignment((TP("a", 1), TP("b", 0)), b"x")
    assert decode_assignment(encode_assignment(assignment)) == assignment


def test_newer_subscription_versions_are_read_as_far_as_known() -> None:
    raw = bytearray(encode_subscription(Subscription(("a",), None, (), 2, None)))
    raw[1] = 9  # version 9 with a future field appended
    assert decode_subscription(bytes(raw) + b"\x01\x02").generation == 2


def test_garbage_subscription_is_a_protocol_error() -> None:
    with pytest.raises(ZlogError) as caught:
        decode_subscription(b"\x00\x00\x7f\x00\x00\x00")
    assert caught.value.code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_range_gives_contiguous_runs_and_extras_to_the_first_members() -> None:
    result = range_assign([member("b", "t"), member("a", "t"), member("c", "t")], {"t": 7})
    assert result == {"a": tps("t", 0, 1, 2), "b": tps("t", 3, 4), "c": tps("t", 5, 6)}


def test_static_members_come_first_in_order() -> None:
    result = range_assign([member("a", "t"), member("z", "t", instance_id="i")], {"t": 3})
    assert result == {"z": tps("t", 0, 1), "a": tps("t", 2)}


def test_roundrobin_deals_and_skips_unsubscribed_members() -> None:
    result = roundrobin_assign([member("a", "x", "y"), member("b", "y")], {"x": 2, "y": 2})
    assert result == {"a": tps("x", 0, 1) | tps("y", 1), "b": tps("y", 0)}


def test_sticky_keeps_owners_and_balances() -> None:
    before = [member("a", "t", owned=tps("t", 0, 1, 2)), member("b", "t", owned=tps("t", 3, 4, 5))]
    result = sticky_assign([*before, member("c", "t")], {"t": 6})
    assert sorted(len(v) for v in result.values()) == [2, 2, 2]
    assert result["a"] <= tps("t", 0, 1, 2) and result["b"] <= tps("t", 3, 4, 5)


def test_conflicting_claims_go_to_the_higher_generation_or_to_nobody() -> None:
    newer = sticky_assign([member("a", "t", owned=tps("t", 0), generation=3),
                           member("b", "t", owned=tps("t", 0), generation=2)], {"t": 2})
    assert TP("t", 0) in newer["a"]
    tie = cooperative_sticky_assign([member("a", "t", owned=tps("t", 0), generation=3),
                                     member("b", "t", owned=tps("t", 0), generation=3)], {"t": 2})
    assert TP("t", 0) not in tie["a"] | tie["b"]


def test_cooperative_sticky_withholds_only_moving_partitions() -> None:
    before = [member("a", "t", owned=tps("t", 0, 1, 2)), member("b", "t", owned=tps("t", 3, 4, 5))]
    first = cooperative_sticky_assign([*before, member("c", "t")], {"t": 6})
    assert first["c"] == set()
    moving = (tps("t", 0, 1, 2) - first["a"]) | (tps("t", 3, 4, 5) - first["b"])
    assert len(moving) == 2
    after = [member("a", "t", owned=first["a"]), member("b", "t", owned=first["b"]),
             member("c", "t")]
    second = cooperative_sticky_assign(after, {"t": 6})
    assert second["a"] == first["a"] and second["b"] == first["b"] and second["c"] == moving


def test_leader_helper_runs_the_named_assignor_on_subscription_bytes() -> None:
    metadata = encode_subscription(Subscription(("t",)))
    out = assign_classic_group("range", [("m1", None, metadata), ("m2", None, metadata)], {"t": 3})
    assert decode_assignment(out["m1"]).partitions == (TP("t", 0), TP("t", 1))
    with pytest.raises(ZlogError) as caught:
        assign_classic_group("nope", [], {})
    assert caught.value.code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


counts_st = st.dictionaries(st.sampled_from("xyz"), st.integers(0, 12), min_size=1)


@given(st.sampled_from(sorted(ASSIGNORS)), counts_st, st.integers(1, 6), st.randoms())
def test_every_assignor_gives_each_partition_to_at_most_one_subscriber(
    name: str, counts: dict[str, int], size: int, rng: random.Random
) -> None:
    members = [member(f"m{i}", *rng.sample(sorted(counts), rng.randint(1, len(counts))))
               for i in range(size)]
    result = ASSIGNORS[name](members, counts)
    seen: set[TP] = set()
    for m in members:
        assert all(tp.topic in m.topics for tp in result[m.member_id])
        assert not seen & result[m.member_id]
        seen |= result[m.member_id]
    subscribed = {TP(t, p) for m in members for t in m.topics for p in range(counts[t])}
    assert seen == subscribed


@given(counts_st, st.integers(1, 6), st.randoms())
def test_sticky_with_equal_subscriptions_is_balanced_and_keeps_quota(
    counts: dict[str, int], size: int, rng: random.Random
) -> None:
    topics = sorted(counts)
    total = [TP(t, p) for t in topics for p in range(counts[t])]
    owners = {tp: rng.randrange(size + 2) for tp in total}  # some owners have left
    members = [member(f"m{i}", *topics, owned={tp for tp, o in owners.items() if o == i})
               for i in range(size)]
    result = sticky_assign(members, counts)
    sizes = [len(result[m.member_id]) for m in members]
    assert max(sizes) - min(sizes) <= 1
    quota = -(-len(total) // size)
    for m in members:
        assert len(result[m.member_id] & m.owned) >= min(len(m.owned), quota - 1)
