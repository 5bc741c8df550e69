"""With security on, only a principal's key opens a ZeroMQ socket of a broker (docs/security.md).

A real broker with CURVE on every socket and the ZAP handler naming each peer: a client
holding a principal's key produces, fetches and reads metadata; a client with no key, or with a
key the broker does not know, gets SASL_AUTHENTICATION_FAILED on each of those, from the
control endpoint and from a worker's data endpoint alike, and is never served. Two voters whose
keys do not know each other never form a metadata log, and do once they share keys. A secret
key file others may read stops the broker at start, naming the chmod that fixes it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from tests.secure_broker import make_keys, secure_broker, security_args, speaking_as
from zlog.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.curve_keys import PRINCIPALS_DIR, generate_key_pair
from zlog.transport.messages.admin import MetadataRequestV0
from zlog.transport.messages.security import AclEntry, AlterSecurityRequestV0
from zlog.transport.rpc import RpcClient
from zlog_testbed.broker_process import REPO_ROOT, BrokerProcess
from zlog_testbed.free_ports import free_port, free_port_pair
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

TOPIC: Final = "guarded"
TIMEOUT_MS: Final = 5_000
WAIT_S: Final = 30.0
HOST: Final = "127.0.0.1"


def _produce(bootstrap: str, value: bytes) -> int:
    with Producer(bootstrap, acks="all", linger_ms=0, request_timeout_ms=TIMEOUT_MS,
                  delivery_timeout_ms=TIMEOUT_MS) as producer:
        return producer.send(TOPIC, value, partition=0).result(timeout=WAIT_S).offset


def _fetch_one(bootstrap: str) -> bytes | None:
    with Consumer(bootstrap, request_timeout_ms=TIMEOUT_MS) as consumer:
        consumer.assign([TopicPartition(TOPIC, 0)])
        consumer.seek(TopicPartition(TOPIC, 0), 0)
        for record in consumer.poll(timeout_ms=TIMEOUT_MS):
            return record.value
    return None


def _refused(call: object) -> ZlogError:
    assert callable(call)
    with pytest.raises(ZlogError) as caught:
        call()
    return caught.value


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    return make_keys(tmp_path / "keys", ["admin", "alice"])


def test_only_a_known_key_produces_fetches_and_reads_metadata(keys: Path, tmp_path: Path) -> None:
    stranger = tmp_path / "elsewhere"
    _public, stranger_secret = generate_key_pair(stranger, "mallory")
    with secure_broker(keys, tmp_path) as broker:
        with speaking_as(keys):
            with Admin(broker.endpoint, request_timeout_ms=TIMEOUT_MS) as admin:
                admin.create_topics([NewTopic(TOPIC, 1)])
                admin.alter_security(AlterSecurityRequestV0(
                    acls_add=(AclEntry("alice", "topic", TOPIC, "write"),)))
            data_endpoint = broker.data_endpoint(TOPIC, 0)
            assert _produce(broker.endpoint, b"kept") == 0
            assert _fetch_one(broker.endpoint) == b"kept"

        for who, key_file in (("no key", None), ("an unknown key", stranger_secret)):
            with speaking_as(None if key_file is None else keys, key_file=key_file):
                for endpoint in (broker.endpoint, data_endpoint):
                    with RpcClient(endpoint) as rpc:
                        error = _refused(lambda rpc=rpc: rpc.call(MetadataRequestV0(None),
                                                                    TIMEOUT_MS))
                    assert error.code == ErrorCode.SASL_AUTHENTICATION_FAILED, (who, error)
                with Admin(broker.endpoint, request_timeout_ms=TIMEOUT_MS) as admin:
                    error = _refused(admin.list_topics)
                assert error.code == ErrorCode.SASL_AUTHENTICATION_FAILED, (who, error)
                error = _refused(lambda: _produce(broker.endpoint, b"intruder"))
                assert error.code == ErrorCode.SASL_AUTHENTICATION_FAILED, (who, error)
                error = _refused(lambda: _fetch_one(broker.endpoint))
                assert error.code == ErrorCode.SASL_AUTHENTICATION_FAILED, (who, error)

        with speaking_as(keys, "alice"):  # a known principal, and nothing got in meanwhile
            assert _produce(broker.endpoint, b"after") == 1
        assert "mallory" not in broker.log_text()
        assert "is no known principal" in broker.log_text()


def _port_pairs(count: int) -> list[int]:
    """Ports p with p and p + 1 free (a voter's control and Raft ports), none overlapping."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port_pair([HOST])
        if all(abs(port - other) > 1 for other in ports):
            ports.append(port)
    return ports


def _voter(keys: Path, node: int, endpoints: dict[int, str]) -> BrokerProcess:
    voters = ",".join(f"{n}@{endpoint}" for n, endpoint in sorted(endpoints.items()))
    broker = BrokerProcess(1, ("--node-id", str(node), "--voters", voters,
                               *security_args(keys)), endpoint=endpoints[node])
    broker.start(wait=False)
    return broker


def _has_leader(keys: Path, broker: BrokerProcess) -> bool:
    with speaking_as(keys), RpcClient(broker.endpoint) as rpc:
        try:
            response = rpc.call(MetadataRequestV0(None), 500)
        except ZlogError:
            return False
    return getattr(response, "controller_id", -1) >= 0


def _replicated_write(keys: Path, first: BrokerProcess, second: BrokerProcess) -> None:
    """Over CURVE both ways: an ACL set through either broker (the one that is not the
    controller forwards it), a topic replicated on both, a write acknowledged by both."""
    bootstrap = f"{first.endpoint},{second.endpoint}"
    with speaking_as(keys):
        first.wait_ready()
        second.wait_ready()
        with Admin(second.endpoint, request_timeout_ms=WAIT_S * 1000) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, replication_factor=2)])
            admin.alter_security(AlterSecurityRequestV0(
                acls_add=(AclEntry("alice", "topic", TOPIC, "write"),)))

        def both_in_sync() -> bool:
            (topic,) = first.metadata([TOPIC]).topics
            return len(topic.partitions[0].isr) == 2

        wait_until(both_in_sync, WAIT_S, interval_s=0.1, what="both replicas in sync")
    with speaking_as(keys, "alice"):
        assert _produce(bootstrap, b"both") == 0


def test_a_voter_with_a_key_the_others_do_not_know_cannot_join_the_metadata_log(
        keys: Path, tmp_path: Path) -> None:
    """Two voters need each other for a quorum: with broker 2 presenting a key broker 1 does
    not know (the cluster's public server key is no secret), broker 1 refuses its Raft
    connections and no leader is elected; once both hold the same keys they elect one and
    replicate a write."""
    other_keys = tmp_path / "other-keys"  # the cluster's keys, but its own broker principal
    shutil.copytree(keys, other_keys)
    for path in (other_keys / PRINCIPALS_DIR).glob("broker.*"):
        path.unlink()
    generate_key_pair(other_keys / PRINCIPALS_DIR, "broker")
    endpoints = {node: f"tcp://{HOST}:{port}" for node, port in zip((1, 2), _port_pairs(2),
                                                                    strict=True)}
    first = _voter(keys, 1, endpoints)
    intruder = _voter(other_keys, 2, endpoints)
    try:
        wait_until(lambda: "is no known principal" in first.log_text(), WAIT_S,
                   interval_s=0.1, what="broker 1 refusing broker 2's connections")
        # Said once election timeouts have passed with no leader: none could be elected.
        wait_until(lambda: "no controller is known yet" in first.log_text(), WAIT_S,
                   interval_s=0.1, what="broker 1 still without a controller")
        assert not _has_leader(keys, first)
        intruder.close()
        member = _voter(keys, 2, endpoints)
        try:
            wait_until(lambda: _has_leader(keys, first), WAIT_S, interval_s=0.1,
                       what="a metadata-log leader once both voters share keys")
            _replicated_write(keys, first, member)
        finally:
            member.close()
    except AssertionError:
        print(f"--- broker 1 ---\n{first.log_tail()}\n--- broker 2 ---\n{intruder.log_tail()}")
        raise
    finally:
        intruder.close()
        first.close()


def test_a_secret_key_file_others_may_read_stops_the_broker(keys: Path, tmp_path: Path) -> None:
    os.chmod(keys / "server.key_secret", 0o644)
    command = [sys.executable, "-m", "zlog.cli", "serve", "--data-dir", str(tmp_path / "data"),
               "--listen", f"tcp://127.0.0.1:{free_port()}", "--workers", "1",
               *security_args(keys)]
    done = subprocess.run(command, check=False, cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=WAIT_S, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 1, done.stderr
    assert f"chmod 600 {keys / 'server.key_secret'}" in done.stderr
