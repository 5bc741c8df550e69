"""The ACL rules, default-deny (zlog/broker/authorizer.py, request_acls.py): what each kind of
ACL grants, what it implies, that a deny wins, and the code a refusal carries per resource."""

from __future__ import annotations

import pytest

from zlog.broker.authorizer import Authorizer
from zlog.broker.request_acls import check_request
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages.admin import CreateTopicsRequestV0, TopicSpec
from zlog.transport.messages.data import (
    DeleteRecordsEntry,
    DeleteRecordsRequestV0,
    FetchEntry,
    FetchRequestV0,
    ProduceEntry,
    ProduceRequestV0,
)
from zlog.transport.messages.groups import FindCoordinatorRequestV0
from zlog.transport.messages.security import AclEntry, DescribeSecurityRequestV0


def test_nothing_is_allowed_without_an_acl_but_to_a_super_user() -> None:
    authorizer = Authorizer((), ("admin",))
    assert not authorizer.allowed("alice", "read", "topic", "t")
    assert authorizer.allowed("admin", "delete", "cluster", "kafka-cluster")


def test_a_literal_acl_names_one_resource_and_a_prefixed_one_a_family() -> None:
    authorizer = Authorizer((AclEntry("alice", "topic", "orders", "write"),
                             AclEntry("alice", "group", "team-", "read", "prefixed")), ())
    assert authorizer.allowed("alice", "write", "topic", "orders")
    assert not authorizer.allowed("alice", "write", "topic", "orders-eu")
    assert authorizer.allowed("alice", "read", "group", "team-a")
    assert not authorizer.allowed("alice", "read", "group", "other")
    assert not authorizer.allowed("bob", "write", "topic", "orders")


def test_the_star_names_every_resource_and_every_principal() -> None:
    authorizer = Authorizer((AclEntry("*", "topic", "*", "describe"),), ())
    assert authorizer.allowed("anyone", "describe", "topic", "whatever")
    assert not authorizer.allowed("anyone", "read", "topic", "whatever")


def test_operations_imply_describe_and_all_grants_everything() -> None:
    authorizer = Authorizer((AclEntry("a", "topic", "t", "read"),
                             AclEntry("a", "topic", "c", "alter_configs"),
                             AclEntry("b", "topic", "t", "all")), ())
    assert authorizer.allowed("a", "describe", "topic", "t")
    assert not authorizer.allowed("a", "write", "topic", "t")
    assert authorizer.allowed("a", "describe_configs", "topic", "c")
    assert all(authorizer.allowed("b", op, "topic", "t") for op in ("read", "write", "delete"))


def test_a_deny_wins_over_any_allow() -> None:
    authorizer = Authorizer((AclEntry("a", "topic", "*", "all"),
                             AclEntry("a", "topic", "secret", "read", permission="deny")), ())
    assert authorizer.allowed("a", "write", "topic", "secret")
    assert not authorizer.allowed("a", "read", "topic", "secret")


@pytest.mark.parametrize(("request_", "code"), [
    (ProduceRequestV0(1, 100, (ProduceEntry("t", 0, ()),)), ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    (FetchRequestV0(-1, 0, 1, 100, (FetchEntry("t", 0, 0, 100),)),
     ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    (FindCoordinatorRequestV0("g"), ErrorCode.GROUP_AUTHORIZATION_FAILED),
    (DescribeSecurityRequestV0(), ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
])
def test_each_request_is_refused_with_its_resource_s_code(request_: object,
                                                          code: ErrorCode) -> None:
    with pytest.raises(ZlogError) as refused:
        check_request(Authorizer((), ()), "alice", request_)  # type: ignore[arg-type]
    assert refused.value.code == code
    assert "alice" in refused.value.message


def test_create_on_the_cluster_creates_any_topic() -> None:
    request = CreateTopicsRequestV0((TopicSpec("new", 1),))
    check_request(Authorizer((AclEntry("ops", "cluster", "kafka-cluster", "create"),), ()),
                  "ops", request)
    with pytest.raises(ZlogError):
        check_request(Authorizer((), ()), "ops", request)


def test_only_a_broker_reads_the_users_credentials() -> None:
    """DescribeSecurity with the credentials needs cluster_action (the brokers' own right);
    describe on the cluster, enough for the listing, is not enough for them."""
    ops = Authorizer((AclEntry("ops", "cluster", "kafka-cluster", "describe"),), ("broker",))
    check_request(ops, "ops", DescribeSecurityRequestV0())
    with pytest.raises(ZlogError) as caught:
        check_request(ops, "ops", DescribeSecurityRequestV0(credentials=True))
    assert caught.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    check_request(ops, "broker", DescribeSecurityRequestV0(credentials=True))


def test_delete_records_needs_delete_on_the_topic() -> None:
    """As in Kafka: reading or writing a topic does not let a principal delete its records."""
    request = DeleteRecordsRequestV0(1000, (DeleteRecordsEntry("orders", 0, 5),))
    writer = Authorizer(tuple(AclEntry("alice", "topic", "orders", operation)
                              for operation in ("read", "write")), ())
    with pytest.raises(ZlogError) as refused:
        check_request(writer, "alice", request)
    assert refused.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    check_request(Authorizer((AclEntry("alice", "topic", "orders", "delete"),), ()), "alice",
                  request)
