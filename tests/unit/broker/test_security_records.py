"""The metadata log's security records (security_state.py, the AlterSecurity command): one
change applies whole, equal changes give equal state, and a snapshot keeps them."""

from __future__ import annotations

import base64
import hashlib
import hmac

from zlog.broker.control.metadata.commands import AlterSecurity, encode_command
from zlog.broker.control.metadata.state_machine import MetadataStateMachine
from zlog.client.scram import scram_user
from zlog.transport.messages.security import AclEntry, QuotaEntry

READ = AclEntry("alice", "topic", "t", "read")
WRITE = AclEntry("alice", "topic", "t", "write")


def _apply(machine: MetadataStateMachine, command: AlterSecurity) -> bytes:
    return machine.apply(encode_command(command))


def test_a_change_adds_removes_and_survives_a_snapshot() -> None:
    machine = MetadataStateMachine()
    bob = scram_user("bob", "secret", iterations=4096)
    _apply(machine, AlterSecurity(acls_add=(WRITE, READ), users_set=(bob,),
                                  quotas_set=(QuotaEntry("principal", "alice", 10),)))
    _apply(machine, AlterSecurity(acls_remove=(WRITE,),
                                  quotas_set=(QuotaEntry("principal", "alice"),)))
    records = machine.state.security
    assert records.acls == (READ,)
    assert records.users == (bob,)
    assert records.quotas == ()  # all bounds 0: removed
    restored = MetadataStateMachine()
    restored.restore(machine.snapshot())
    assert restored.state.security == records
    assert restored.digest() == machine.digest()


def test_the_same_changes_in_any_order_of_entries_give_the_same_digest() -> None:
    first, second = MetadataStateMachine(), MetadataStateMachine()
    _apply(first, AlterSecurity(acls_add=(READ, WRITE)))
    _apply(second, AlterSecurity(acls_add=(WRITE, READ)))
    assert first.digest() == second.digest()


def test_a_stored_scram_credential_checks_a_client_proof_without_the_password() -> None:
    """RFC 5802: the server holds StoredKey; a client proof made from the right password
    recovers it, one made from another does not."""
    user = scram_user("bob", "pencil", "SCRAM-SHA-256", 4096)
    stored_key = base64.b64decode(user.stored_key)
    auth_message = b"n=bob,r=abc,r=abcdef,s=salt,i=4096,c=biws,r=abcdef"

    def proof(password: str) -> bytes:
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(user.salt),
                                     user.iterations)
        client_key = hmac.new(salted, b"Client Key", "sha256").digest()
        signature = hmac.new(hashlib.sha256(client_key).digest(), auth_message,
                             "sha256").digest()
        return bytes(a ^ b for a, b in zip(client_key, signature, strict=True))

    def recovered(client_proof: bytes) -> bytes:
        signature = hmac.new(stored_key, auth_message, "sha256").digest()
        client_key = bytes(a ^ b for a, b in zip(client_proof, signature, strict=True))
        return hashlib.sha256(client_key).digest()

    assert recovered(proof("pencil")) == stored_key
    assert recovered(proof("pencils")) != stored_key
