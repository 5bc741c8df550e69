"""The local consumer (`Consumer(local=True)`) against a real `zlog serve` on this host.

Spec: zlog/client/local_ring.py and docs/protocol.md (Metadata `ring_path`). The broker runs
with the smallest ring (`--ring-bytes`), so a few hundred records wrap it several times; the
consumer must read every record exactly once and in order, from the ring when the ring holds
its position and over the network when it does not.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from zlog import limits
from zlog.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from zlog.client.cluster import MetadataCache
from zlog_testbed.broker_process import BrokerProcess, broker_process
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

CALL_TIMEOUT_MS = 10_000
VALUE_BYTES = 200
ROUND_RECORDS = 300  # ~70 KB a round: more than the ring holds
DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    args = ("--ring-bytes", str(limits.RING_SIZE_BYTES_MIN))
    with broker_process(workers=1, extra_args=args) as instance:
        yield instance


_names = iter(range(1_000_000))


def new_topic(broker: BrokerProcess) -> str:
    name = f"local-{next(_names)}"
    with Admin(broker.endpoint, request_timeout_ms=CALL_TIMEOUT_MS) as admin:
        admin.create_topics([NewTopic(name, 1)])
    broker.data_endpoint(name, 0)
    return name


def value(index: int) -> bytes:
    return f"{index:08d}".encode().ljust(VALUE_BYTES, b"x")


def produce(broker: BrokerProcess, topic: str, first: int, count: int) -> None:
    with Producer(broker.endpoint, linger_ms=1) as producer:
        futures = [producer.send(topic, value(i), partition=0) for i in range(first,
                                                                              first + count)]
        producer.flush(timeout_ms=20_000)
    assert [f.result().offset for f in futures] == list(range(first, first + count))


def consume(consumer: Consumer, count: int, *, more_to_come: bool = False) -> (
    list[tuple[int, bytes | None]]
):
    """Exactly `count` records (fails on a timeout), then checks that nothing more comes."""
    got: list[tuple[int, bytes | None]] = []

    def enough() -> bool:
        records = consumer.poll(timeout_ms=200, max_records=count - len(got))
        got.extend((r.offset, r.value) for r in records)
        return len(got) >= count

    wait_until(enough, DEADLINE_S, interval_s=0, what=f"{count} records")
    if not more_to_come:
        assert consumer.poll(timeout_ms=50) == []
    return got


def expected(first: int, count: int) -> list[tuple[int, bytes | None]]:
    return [(i, value(i)) for i in range(first, first + count)]


def test_metadata_names_the_ring_on_this_host(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    (found,) = broker.metadata([topic]).topics
    (partition,) = found.partitions
    assert partition.ring_path == str(broker.ring_dir.resolve() / f"{topic}-0.ring")
    assert os.path.exists(partition.ring_path)


def test_reads_everything_across_wraps_then_seeks_below_the_tail(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    tp = TopicPartition(topic, 0)
    total = 0
    with Consumer(broker.endpoint, local=True, auto_offset_reset="earliest",
                  fetch_max_wait_ms=100) as local:
        local.assign([tp])
        for _ in range(5):  # each round overwrites the ring more than once
            produce(broker, topic, total, ROUND_RECORDS)
            assert consume(local, ROUND_RECORDS) == expected(total, ROUND_RECORDS)
            total += ROUND_RECORDS
        from_ring = local.ring_batches_read
        assert from_ring > 0
        # Offset 0 was overwritten long ago: the network serves it, then the ring again.
        local.seek(tp, 0)
        assert consume(local, total) == expected(0, total)
        produce(broker, topic, total, ROUND_RECORDS)
        before = local.ring_batches_read
        assert consume(local, ROUND_RECORDS) == expected(total, ROUND_RECORDS)
        assert local.ring_batches_read > before
        total += ROUND_RECORDS
    with Consumer(broker.endpoint, auto_offset_reset="earliest", fetch_max_wait_ms=100) as net:
        net.assign([tp])
        assert consume(net, total) == expected(0, total)
        assert net.ring_batches_read == 0


def test_worker_kill_and_restart_loses_and_repeats_nothing(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    tp = TopicPartition(topic, 0)
    with Consumer(broker.endpoint, local=True, auto_offset_reset="earliest",
                  fetch_max_wait_ms=100, retry_backoff_ms=20) as local:
        local.assign([tp])
        produce(broker, topic, 0, ROUND_RECORDS)
        got = consume(local, ROUND_RECORDS // 2, more_to_come=True)  # stop halfway
        victim = broker.worker_pid_for(broker.data_endpoint(topic, 0))
        broker.kill_worker(victim)
        wait_until(lambda: broker.served_by_another_worker(topic, 1, victim),
                   DEADLINE_S, interval_s=0.02, what="a restarted worker")
        before = local.ring_batches_read
        produce(broker, topic, ROUND_RECORDS, ROUND_RECORDS)
        got += consume(local, ROUND_RECORDS + ROUND_RECORDS // 2)
        assert got == expected(0, 2 * ROUND_RECORDS)
        assert local.ring_batches_read > before  # back on the (restarted worker's) ring


def test_a_ring_on_another_host_falls_back_to_the_network(
    broker: BrokerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(MetadataCache, "ring_path",
                        lambda self, topic, partition: f"/elsewhere/{topic}-{partition}.ring")
    topic = new_topic(broker)
    tp = TopicPartition(topic, 0)
    produce(broker, topic, 0, ROUND_RECORDS)
    with Consumer(broker.endpoint, local=True, auto_offset_reset="earliest",
                  fetch_max_wait_ms=100) as local:
        local.assign([tp])
        assert consume(local, ROUND_RECORDS) == expected(0, ROUND_RECORDS)
        assert local.ring_batches_read == 0


def _batch_values(views: list[tuple[TopicPartition, object]]) -> list[bytes]:
    values: list[bytes] = []
    for _tp, view in views:
        values.extend(bytes(v) for v in view.values())  # type: ignore[attr-defined]
    return values


def _poll_batches_until(consumer: Consumer, count: int) -> list[tuple[TopicPartition, object]]:
    got: list[tuple[TopicPartition, object]] = []

    def enough() -> bool:
        got.extend(consumer.poll_batches(timeout_ms=200))
        return sum(len(view) for _tp, view in got) >= count  # type: ignore[arg-type]

    wait_until(enough, DEADLINE_S, interval_s=0, what=f"{count} records")
    return got


def produce_uncompressed(broker: BrokerProcess, topic: str, count: int) -> None:
    """Uncompressed batches: their decoded views are the ring's bytes (compressed ones are
    decompressed into the consumer's own memory)."""
    with Producer(broker.endpoint, linger_ms=1, compression=None) as producer:
        producer.send_many(topic, [value(i) for i in range(count)], partition=0).result(20)


def produce_a_ring_full(broker: BrokerProcess, topic: str) -> int:
    """Incompressible values, uncompressed, twice the ring's bytes: every byte of it is reused.
    Batches of 16 KiB, well below the ring's size, so each goes through the ring."""
    count = 2 * limits.RING_SIZE_BYTES_MIN // VALUE_BYTES
    with Producer(broker.endpoint, linger_ms=1, compression=None,
                  bulk_batch_size=16 * 1024) as producer:
        producer.send_many(topic, [os.urandom(VALUE_BYTES) for _ in range(count)],
                           partition=0).result(timeout=20)
    return count


def test_zero_copy_views_are_the_ring_until_the_writer_reclaims_them(
    broker: BrokerProcess,
) -> None:
    topic = new_topic(broker)
    tp = TopicPartition(topic, 0)
    produce_uncompressed(broker, topic, 10)
    with Consumer(broker.endpoint, local=True, local_zero_copy=True,
                  auto_offset_reset="earliest", fetch_max_wait_ms=100) as local:
        local.assign([tp])
        held = _poll_batches_until(local, 10)
        assert local.ring_batches_read > 0
        assert _batch_values(held) == [value(i) for i in range(10)]
        assert local.views_intact()
        # A ring's worth of appends later the writer has reused that space: the views say so.
        end = 10 + produce_a_ring_full(broker, topic)
        assert not local.views_intact()
        assert _batch_values(held) != [value(i) for i in range(10)]  # really shared memory
        # Reading on is unaffected, and what is read now is whole.
        produce(broker, topic, end, 5)
        local.seek(tp, end)
        later = _poll_batches_until(local, 5)
        assert local.views_intact()
        assert len(_batch_values(later)) == 5


def test_copied_views_stay_whole_after_the_ring_moves_on(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    tp = TopicPartition(topic, 0)
    produce_uncompressed(broker, topic, 10)
    with Consumer(broker.endpoint, local=True, auto_offset_reset="earliest",
                  fetch_max_wait_ms=100) as local:
        local.assign([tp])
        held = _poll_batches_until(local, 10)
        assert local.ring_batches_read > 0
        produce_a_ring_full(broker, topic)
        assert local.views_intact()
        assert _batch_values(held) == [value(i) for i in range(10)]


GROUP_PARTITIONS = 4
GROUP_RECORDS_PER_PARTITION = 40


def _produce_group_round(broker: BrokerProcess, topic: str, first: int) -> None:
    with Producer(broker.endpoint, linger_ms=1) as producer:
        for partition in range(GROUP_PARTITIONS):
            for i in range(first, first + GROUP_RECORDS_PER_PARTITION):
                producer.send(topic, value(i), partition=partition)
        producer.flush(timeout_ms=20_000)


def _poll_and_commit(members: list[Consumer], seen: list[tuple[int, int]], count: int,
                     what: str, done: Callable[[], object] | None = None) -> None:
    """Poll each member in turn, committing after each poll what it processed, until `count`
    records in all were seen (and `done()`, if given, holds)."""
    def enough() -> bool:
        for member in members:
            records = member.poll(timeout_ms=50)
            seen.extend((r.partition, r.offset) for r in records)
            if records:
                member.commit()
        return len(seen) >= count and (done is None or bool(done()))

    wait_until(enough, DEADLINE_S * 2, interval_s=0, what=what)


def test_a_local_member_and_a_network_member_share_a_group(broker: BrokerProcess) -> None:
    """The local consumer works in a group: it reads the partitions assigned to it from the
    rings, the other member reads its own over the network, commits after processing hand
    partitions over, and no record is skipped or read twice."""
    topic = f"local-group-{next(_names)}"
    with Admin(broker.endpoint, request_timeout_ms=CALL_TIMEOUT_MS) as admin:
        admin.create_topics([NewTopic(topic, GROUP_PARTITIONS)])
    for partition in range(GROUP_PARTITIONS):
        broker.data_endpoint(topic, partition)
    everything = {TopicPartition(topic, p) for p in range(GROUP_PARTITIONS)}
    settings: dict[str, object] = {"group_id": "local-and-remote", "enable_auto_commit": False,
                                   "auto_offset_reset": "earliest"}
    local = Consumer(broker.endpoint, local=True, **settings)  # type: ignore[arg-type]
    remote = Consumer(broker.endpoint, **settings)  # type: ignore[arg-type]
    seen: list[tuple[int, int]] = []
    try:
        local.subscribe([topic])
        remote.subscribe([topic])
        # The split first, then the records: each member reads its own partitions' records
        # (produced before the split, they could all go to whichever member joined first).
        _poll_and_commit([local, remote], seen, 0, "the partitions split between the two",
                         lambda: local.assignment() and remote.assignment()
                         and local.assignment() | remote.assignment() == everything)
        _produce_group_round(broker, topic, 0)
        round_records = GROUP_PARTITIONS * GROUP_RECORDS_PER_PARTITION
        _poll_and_commit([local, remote], seen, round_records, "the first round, split")
        assert not local.assignment() & remote.assignment()
        assert local.assignment() | remote.assignment() == everything
        assert local.ring_batches_read > 0, "the local member read its partitions from rings"
        local_partitions = {tp.partition for tp in local.assignment()}
        local.close()  # hands its partitions over at the offsets it committed
        _produce_group_round(broker, topic, GROUP_RECORDS_PER_PARTITION)
        _poll_and_commit([remote], seen, 2 * round_records,
                         "the second round, all at the remaining member",
                         lambda: remote.assignment() == everything)
        assert local_partitions, "the local member had partitions to hand over"
    finally:
        local.close()
        remote.close()
    assert sorted(seen) == sorted(set(seen)), "nothing read twice"
    assert sorted(seen) == [(p, o) for p in range(GROUP_PARTITIONS)
                            for o in range(2 * GROUP_RECORDS_PER_PARTITION)], "nothing skipped"
    with Admin(broker.endpoint, request_timeout_ms=CALL_TIMEOUT_MS) as admin:
        assert admin.list_group_offsets("local-and-remote") == dict.fromkeys(
            everything, 2 * GROUP_RECORDS_PER_PARTITION)
