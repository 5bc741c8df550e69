"""Which ring a local consumer reads (zlog/client/local_replicas.py), and what it learns to
choose it: the brokers' ring directories from Metadata, the writer's liveness from the ring."""

from __future__ import annotations

import json
import mmap
import subprocess
from pathlib import Path

import psutil
import pytest

from zlog.client import Consumer
from zlog.client.cluster import MetadataCache, PartitionLeader
from zlog.client.local_replicas import (
    LocalReplicaPolicy,
    RingChoice,
    brokers_to_ask,
    choose_ring,
    local_ring_dirs,
)
from zlog.client.local_ring import LocalRing, ring_path_for
from zlog.errors import ErrorCode, ZlogError
from zlog.shm_segments.ring import RingWriter
from zlog.shm_segments.ring_header import write_writer_pid
from zlog.transport.json_codec import (
    decode_json_body,
    encode_json_body,
)
from zlog.transport.messages.admin import (
    BrokerMetadata,
    MetadataResponseV0,
    PartitionMetadata,
    TopicMetadata,
)
from zlog_testbed.waiting import wait_until

RING_BYTES = 1 << 16


def _brokers(racks: dict[int, str], hosts: dict[int, str] | None = None,
             ) -> dict[int, BrokerMetadata]:
    hosts = hosts or {}
    return {node: BrokerMetadata(node, hosts.get(node, f"127.0.0.{node}"),
                                 f"tcp://{hosts.get(node, f'127.0.0.{node}')}:7400", rack=rack)
            for node, rack in racks.items()}


def _dirs(tmp_path: Path, nodes: list[int]) -> dict[int, str]:
    made = {}
    for node in nodes:
        directory = tmp_path / f"rings-{node}"
        directory.mkdir()
        made[node] = str(directory)
    return made


def _partition(leader: int, isr: tuple[int, ...], *, ring_path: str = "",
               replicas: tuple[int, ...] = (1, 2, 3)) -> PartitionLeader:
    return PartitionLeader(0, leader, 5, f"tcp://127.0.0.{leader}:7500", 0, ring_path,
                           replicas, isr)


def _choose(partition: PartitionLeader, policy: LocalReplicaPolicy,
            local_dirs: dict[int, Path], leader_ring_path: str = "") -> RingChoice | None:
    return choose_ring("t", partition, policy, leader_ring_path=leader_ring_path,
                       brokers=_brokers({1: "r1", 2: "r2", 3: "r3"}), local_dirs=local_dirs)


def test_every_local_broker_counts_unless_a_ring_dir_or_rack_names_one(tmp_path: Path) -> None:
    brokers = _brokers({1: "r1", 2: "r2", 3: "r3"})
    dirs = _dirs(tmp_path, [1, 2, 3])
    assert set(local_ring_dirs(brokers, dirs, LocalReplicaPolicy())) == {1, 2, 3}
    assert set(local_ring_dirs(brokers, dirs, LocalReplicaPolicy(ring_dir=Path(dirs[2])))) == {2}
    assert set(local_ring_dirs(brokers, dirs, LocalReplicaPolicy(client_rack="r3"))) == {3}
    # A broker on another host, or whose directory is not here, is never local.
    remote = _brokers({1: "", 2: ""}, hosts={2: "192.0.2.7"})
    assert set(local_ring_dirs(remote, {1: str(tmp_path / "absent"), 2: dirs[2]},
                               LocalReplicaPolicy())) == set()
    assert local_ring_dirs(brokers, {4: dirs[1]}, LocalReplicaPolicy()) == {}  # not registered


def test_the_brokers_asked_for_their_ring_dir_are_those_on_this_host_not_yet_known() -> None:
    brokers = _brokers({1: "r1", 2: "r2", 3: "r2", 4: "r2"}, hosts={4: "192.0.2.7"})
    known = {1: "/dev/shm/b1"}
    assert [b.node_id for b in brokers_to_ask(brokers, known, LocalReplicaPolicy())] == [2, 3]
    asked = brokers_to_ask(brokers, known, LocalReplicaPolicy(client_rack="r1"))
    assert asked == []  # broker 1 is the one of rack r1, and it is known


def test_the_leaders_ring_first_then_an_in_sync_follower_only_when_asked(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path, [1, 2, 3])
    only_2 = {2: Path(dirs[2])}
    plain = LocalReplicaPolicy()
    follower_reads = LocalReplicaPolicy(prefer_local_replica=True)
    # Broker 2 leads: its ring, whatever the policy.
    led_by_2 = _partition(2, (1, 2, 3))
    expected = RingChoice(2, ring_path_for(Path(dirs[2]), "t", 0), is_leader=True)
    assert _choose(led_by_2, plain, only_2) == expected
    # Broker 1 leads, broker 2 follows in sync: its ring only with follower reads.
    led_by_1 = _partition(1, (1, 2, 3))
    assert _choose(led_by_1, plain, only_2) is None
    assert _choose(led_by_1, follower_reads, only_2) == RingChoice(
        2, ring_path_for(Path(dirs[2]), "t", 0), is_leader=False)
    # Naming a rack asks for follower reads too (Kafka's client.rack).
    assert _choose(led_by_1, LocalReplicaPolicy(client_rack="r2"), only_2) is not None
    # Out of the ISR, a follower may lag without bound: the leader serves.
    assert _choose(_partition(1, (1, 3)), follower_reads, only_2) is None
    # No leader, no read at all (a follower's HW stops moving without one).
    assert _choose(_partition(-1, (2,)), follower_reads, only_2) is None
    # With every broker local, the leader's ring is preferred over a follower's.
    every = {node: Path(path) for node, path in dirs.items()}
    choice = _choose(_partition(3, (1, 2, 3)), follower_reads, every)
    assert choice is not None and choice.broker == 3 and choice.is_leader


def test_a_leaders_ring_path_elsewhere_means_the_network(tmp_path: Path) -> None:
    """The leader's broker named its ring: if that file is not here, the leader is not on
    this host, whatever directory was learnt for it."""
    dirs = _dirs(tmp_path, [1, 2])
    local = {node: Path(path) for node, path in dirs.items()}
    named = _partition(1, (1, 2), ring_path="/elsewhere/t-0.ring")
    assert _choose(named, LocalReplicaPolicy(), local, leader_ring_path=named.ring_path) is None
    ring = ring_path_for(Path(dirs[1]), "t", 0)
    ring.write_bytes(b"")
    here = _partition(1, (1, 2), ring_path=str(ring))
    assert _choose(here, LocalReplicaPolicy(), local,
                   leader_ring_path=here.ring_path) == RingChoice(1, ring, is_leader=True)
    assert _choose(here, LocalReplicaPolicy(ring_dir=Path(dirs[2])), local,
                   leader_ring_path=here.ring_path) is None


def test_metadata_brings_racks_and_ring_dirs_and_the_cache_keeps_them(tmp_path: Path) -> None:
    response = MetadataResponseV0(
        "c", 1,
        (BrokerMetadata(1, "h1", "tcp://h1:1", rack="r1", ring_dir="/dev/shm/b1"),
         BrokerMetadata(2, "h2", "tcp://h2:1", rack="r2")),
        (TopicMetadata("t", 0, "", {}, (
            PartitionMetadata(0, 2, 3, (2, 1), (2, 1), "tcp://h2:2", 0, "/dev/shm/b2/t-0.ring"),
        )),))
    body = encode_json_body(response)
    decoded = decode_json_body(MetadataResponseV0, memoryview(body), ErrorCode.INVALID_REQUEST)
    assert decoded == response
    older = json.loads(body)  # a broker from before these fields
    for broker in older["brokers"]:
        del broker["rack"], broker["ring_dir"]
    decoded_older = decode_json_body(MetadataResponseV0, memoryview(json.dumps(older).encode()),
                                     ErrorCode.INVALID_REQUEST)
    assert [(b.rack, b.ring_dir) for b in decoded_older.brokers] == [("", ""), ("", "")]

    cache = MetadataCache()
    cache.update(decoded)
    assert cache.ring_dirs == {1: "/dev/shm/b1", 2: "/dev/shm/b2"}
    partition = cache.partition("t", 0)
    assert partition is not None and partition.replicas == (2, 1) and partition.isr == (2, 1)
    # Another broker's answer tells only its own directory: what was learnt stays.
    cache.update(MetadataResponseV0("c", 1, (BrokerMetadata(1, "h1", "tcp://h1:1"),
                                             BrokerMetadata(2, "h2", "tcp://h2:1",
                                                            ring_dir="/dev/shm/b2-new")), ()))
    assert cache.ring_dirs == {1: "/dev/shm/b1", 2: "/dev/shm/b2-new"}
    assert cache.partition("t", 1) is None and cache.partition("u", 0) is None


def _record_writer_pid(path: Path, pid: int) -> None:
    """Make the ring's header name `pid` as its writer, as a writer that was killed leaves it."""
    with path.open("r+b") as file, mmap.mmap(file.fileno(), 0) as mapping:
        view = memoryview(mapping)
        write_writer_pid(view, pid)
        view.release()


def test_a_ring_whose_writer_closed_or_died_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "w-0.ring"
    assert LocalRing(path).writer_gone()  # no file at all
    with RingWriter(path, RING_BYTES):
        assert not LocalRing(path).writer_gone()
    assert LocalRing(path).writer_gone()  # closed: the pid was cleared
    writer = subprocess.Popen(["sleep", "60"])
    try:
        _record_writer_pid(path, writer.pid)
        assert not LocalRing(path).writer_gone()
        writer.kill()
        wait_until(lambda: psutil.Process(writer.pid).status() == psutil.STATUS_ZOMBIE,
                   10, what="the killed writer a zombie")
        assert LocalRing(path).writer_gone()  # killed, not reaped yet
    finally:
        writer.kill()
        writer.wait(10)
    assert LocalRing(path).writer_gone()  # no such process at all


@pytest.mark.parametrize("options", [
    {"prefer_local_replica": True}, {"client_rack": "r1"}, {"ring_dir": "/"},
])
def test_follower_read_options_need_local(options: dict[str, object]) -> None:
    with pytest.raises(ZlogError) as raised:
        Consumer("tcp://127.0.0.1:1", **options)  # type: ignore[arg-type]
    assert raised.value.code == ErrorCode.INVALID_CONFIG
    assert "local=True" in raised.value.message


@pytest.mark.parametrize(("options", "words"), [
    ({"client_rack": " "}, "client_rack"),
    ({"ring_dir": "/nonexistent/rings"}, "not a directory"),
    ({"local_metadata_max_age_ms": 0}, "local_metadata_max_age_ms"),
])
def test_bad_local_options_are_refused(options: dict[str, object], words: str) -> None:
    with pytest.raises(ZlogError) as raised:
        Consumer("tcp://127.0.0.1:1", local=True, **options)  # type: ignore[arg-type]
    assert raised.value.code == ErrorCode.INVALID_CONFIG
    assert words in raised.value.message
