"""The control plane with security on (docs/security.md): Metadata shows a principal only the
topics it may describe, auto-creates a topic only for one that may create it, and ACL changes
are metadata-log commands, described without any credential."""

from __future__ import annotations

from pathlib import Path

from tests.unit.broker.control.test_control_plane import FakeBroker
from zlog.broker.control.metadata.commands import AlterSecurity, CreateTopic, encode_command
from zlog.client.scram import scram_user
from zlog.errors import ErrorCode
from zlog.transport.codec import RequestHeader
from zlog.transport.messages.admin import (
    CreateTopicsRequestV0,
    MetadataRequestV0,
    MetadataResponseV0,
    TopicSpec,
)
from zlog.transport.messages.security import (
    AclEntry,
    AlterSecurityRequestV0,
    AlterSecurityResponseV0,
    DescribeSecurityRequestV0,
    DescribeSecurityResponseV0,
)


def _secure() -> FakeBroker:
    return FakeBroker(security=True, security_keys_dir=Path("/keys"), super_users=("admin",),
                      auto_create_topics=True)


def _grant(broker: FakeBroker, *acls: AclEntry) -> None:
    broker.fsm.apply(encode_command(AlterSecurity(acls_add=acls)))


def _metadata(broker: FakeBroker, principal: str,
              topics: tuple[str, ...] | None) -> MetadataResponseV0:
    header = RequestHeader(3, 0, 1)
    broker.control.handle(b"client", header, MetadataRequestV0(topics), principal)
    response = broker.replies[-1][2]
    assert isinstance(response, MetadataResponseV0)
    return response


def test_metadata_shows_only_the_topics_the_principal_may_describe() -> None:
    broker = _secure()
    broker.request(CreateTopicsRequestV0((TopicSpec("mine", 1), TopicSpec("theirs", 1))))
    broker.commit()
    _grant(broker, AclEntry("alice", "topic", "mine", "read"))
    assert [t.name for t in _metadata(broker, "alice", None).topics] == ["mine"]
    assert [t.name for t in _metadata(broker, "admin", None).topics] == ["mine", "theirs"]
    (named,) = _metadata(broker, "alice", ("theirs",)).topics
    assert named.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    (absent,) = _metadata(broker, "alice", ("nowhere",)).topics  # existing or not: the same
    assert absent.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_a_topic_is_auto_created_only_for_a_principal_that_may_create_it() -> None:
    broker = _secure()
    _grant(broker, AclEntry("alice", "topic", "auto-", "describe", "prefixed"),
           AclEntry("bob", "topic", "auto-", "all", "prefixed"))
    (refused,) = _metadata(broker, "alice", ("auto-a",)).topics
    assert refused.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.proposed == []
    (created,) = _metadata(broker, "bob", ("auto-b",)).topics
    assert created.error_code == ErrorCode.LEADER_NOT_AVAILABLE
    assert [type(command) for command, _done in broker.proposed] == [CreateTopic]


def test_a_security_change_is_one_command_and_never_shows_a_credential() -> None:
    broker = _secure()
    user = scram_user("bob", "secret", iterations=4096)
    header = broker.request(AlterSecurityRequestV0(
        acls_add=(AclEntry("bob", "group", "g", "read"),), users_set=(user,)))
    assert [type(command) for command, _done in broker.proposed] == [AlterSecurity]
    broker.commit()
    assert broker.reply_to(header) == AlterSecurityResponseV0(0, "")
    described = broker.reply_to(broker.request(DescribeSecurityRequestV0()))
    assert isinstance(described, DescribeSecurityResponseV0)
    assert described.acls == (AclEntry("bob", "group", "g", "read"),)
    assert [(u.name, u.mechanisms) for u in described.users] == [("bob", ("SCRAM-SHA-256",))]
    assert user.stored_key not in repr(described)
