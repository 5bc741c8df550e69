"""Consumer groups against a real broker: splitting partitions, hand-over, commits, the CLI.

One broker, the server-side protocol. Consumers poll on this thread; each wait has a deadline.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from zlog.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from zlog.client.records import ConsumerRecord
from zlog_testbed.broker_process import REPO_ROOT, BrokerProcess, broker_process

pytestmark = pytest.mark.slow

PARTITIONS = 6
RECORDS_PER_PARTITION = 20
WAIT_S = 60.0


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with broker_process(workers=2) as instance:
        yield instance


def _topic(broker: BrokerProcess, name: str) -> None:
    with Admin(broker.endpoint) as admin:
        admin.create_topics([NewTopic(name, PARTITIONS)])
    with Producer(broker.endpoint) as producer:
        for partition in range(PARTITIONS):
            for i in range(RECORDS_PER_PARTITION):
                producer.send(name, f"{partition}-{i}".encode(), partition=partition)
        producer.flush()


def _consumer(broker: BrokerProcess, group: str, **settings: object) -> Consumer:
    return Consumer(broker.endpoint, group_id=group, auto_offset_reset="earliest",
                    **settings)  # type: ignore[arg-type]


def _poll_until(consumers: list[Consumer], done: Callable[[], bool], seen: list[ConsumerRecord],
                what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        if time.monotonic() > deadline:
            assignments = [sorted(c.assignment()) for c in consumers]
            raise AssertionError(f"timed out waiting for {what}: {len(seen)} records, "
                                 f"assignments {assignments}")
        for consumer in consumers:
            seen.extend(consumer.poll(50))


def test_two_members_split_the_topic_and_read_every_record_once(broker: BrokerProcess) -> None:
    _topic(broker, "split")
    first, second = _consumer(broker, "splitters"), _consumer(broker, "splitters")
    try:
        first.subscribe(["split"])
        second.subscribe(["split"])
        seen: list[ConsumerRecord] = []
        _poll_until([first, second], lambda: len(seen) >= PARTITIONS * RECORDS_PER_PARTITION
                    and len(first.assignment()) == len(second.assignment()) == 3, seen,
                    "both members to hold 3 partitions and read everything")
        assert not first.assignment() & second.assignment()
        keys = [(r.partition, r.offset) for r in seen]
        assert len(keys) == len(set(keys)) == PARTITIONS * RECORDS_PER_PARTITION

        first.close()
        everything = {TopicPartition("split", p) for p in range(PARTITIONS)}
        _poll_until([second], lambda: second.assignment() == everything, [],
                    "the remaining member to take every partition")
    finally:
        first.close()
        second.close()


def test_a_new_member_resumes_from_the_committed_offsets(broker: BrokerProcess) -> None:
    _topic(broker, "resume")
    tp = TopicPartition("resume", 0)
    with _consumer(broker, "resumers", enable_auto_commit=False) as consumer:
        consumer.subscribe(["resume"])
        seen: list[ConsumerRecord] = []
        _poll_until([consumer], lambda: len(seen) >= PARTITIONS * RECORDS_PER_PARTITION, seen,
                    "every record")
        consumer.commit({tp: 7, **{TopicPartition("resume", p): RECORDS_PER_PARTITION
                                   for p in range(1, PARTITIONS)}})
        assert consumer.committed([tp]) == {tp: 7}
    with _consumer(broker, "resumers") as successor:
        successor.subscribe(["resume"])
        again: list[ConsumerRecord] = []
        _poll_until([successor], lambda: len(again) >= RECORDS_PER_PARTITION - 7, again,
                    "the records after the commit")
        assert sorted(r.offset for r in again if r.partition == 0) == list(range(7, 20))
        assert all(r.partition == 0 for r in again)


def test_close_auto_commits_what_was_read(broker: BrokerProcess) -> None:
    _topic(broker, "autocommit")
    with _consumer(broker, "auto") as consumer:
        consumer.subscribe(["autocommit"])
        seen: list[ConsumerRecord] = []
        _poll_until([consumer], lambda: len(seen) >= PARTITIONS * RECORDS_PER_PARTITION, seen,
                    "every record")
    with Admin(broker.endpoint) as admin:
        committed = admin.list_group_offsets("auto")
    assert committed == {TopicPartition("autocommit", p): RECORDS_PER_PARTITION
                         for p in range(PARTITIONS)}


def _zlog(broker: BrokerProcess, *arguments: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "zlog.cli", *arguments, "--bootstrap",
                           broker.endpoint], capture_output=True, cwd=REPO_ROOT, timeout=60,
                          check=False)


def test_cli_describe_shows_lag_and_reset_offsets_applies_only_with_execute(
        broker: BrokerProcess) -> None:
    _topic(broker, "clitopic")
    with Admin(broker.endpoint) as admin:
        admin.alter_group_offsets("cligroup", {TopicPartition("clitopic", p): 5
                                               for p in range(PARTITIONS)})
    described = _zlog(broker, "group", "describe", "cligroup")
    assert described.returncode == 0, described.stderr.decode()
    rows = [line.split("\t") for line in described.stdout.decode().splitlines()
            if line.startswith("clitopic\t")]
    assert [(row[2], row[3], row[4]) for row in rows] == [("5", "20", "15")] * PARTITIONS

    dry = _zlog(broker, "group", "reset-offsets", "cligroup", "--topic", "clitopic",
                "--to-earliest")
    assert dry.returncode == 0, dry.stderr.decode()
    assert b"dry run" in dry.stdout
    with Admin(broker.endpoint) as admin:
        assert set(admin.list_group_offsets("cligroup").values()) == {5}
    done = _zlog(broker, "group", "reset-offsets", "cligroup", "--topic", "clitopic",
                 "--to-earliest", "--execute")
    assert done.returncode == 0, done.stderr.decode()
    with Admin(broker.endpoint) as admin:
        assert set(admin.list_group_offsets("cligroup").values()) == {0}
    listed = _zlog(broker, "group", "list")
    assert b"cligroup" in listed.stdout, listed.stderr.decode()


def test_cli_reset_offsets_is_refused_while_the_group_has_members(
        broker: BrokerProcess) -> None:
    _topic(broker, "busy")
    with _consumer(broker, "busygroup") as consumer:
        consumer.subscribe(["busy"])
        seen: list[ConsumerRecord] = []
        _poll_until([consumer], lambda: len(consumer.assignment()) == PARTITIONS, seen,
                    "the member to hold every partition")
        refused = _zlog(broker, "group", "reset-offsets", "busygroup", "--topic", "busy",
                        "--to-latest", "--execute")
    assert refused.returncode == 1
    assert b"NON_EMPTY_GROUP" in refused.stderr


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_position_seek_and_committed_in_a_group_and_the_reset_only_without_a_commit(
        broker: BrokerProcess, protocol: str) -> None:
    """A member starts each assigned partition at the group's committed offset; only where
    there is none does auto_offset_reset (latest here) decide. position(), committed() and the
    seeks then behave as for assign()."""
    topic, group = f"positions-{protocol}", f"positioners-{protocol}"
    _topic(broker, topic)
    everything = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    committed_one, fresh = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with Admin(broker.endpoint) as admin:
        admin.alter_group_offsets(group, {committed_one: 5})
    with Consumer(broker.endpoint, group_id=group, auto_offset_reset="latest",
                  enable_auto_commit=False, group_protocol=protocol) as consumer:
        started: dict[TopicPartition, int] = {}

        def on_assign(partitions: set[TopicPartition]) -> None:
            started.update({tp: consumer.position(tp) for tp in partitions})

        consumer.subscribe([topic], on_assign=on_assign)
        read: list[ConsumerRecord] = []
        _poll_until([consumer], lambda: consumer.assignment() == everything
                    and len(read) >= RECORDS_PER_PARTITION - 5, read,
                    "the member to hold every partition and read past the commit")
        assert started == {tp: 5 if tp == committed_one else RECORDS_PER_PARTITION
                           for tp in everything}, "the committed offset, else latest"
        assert sorted({(r.partition, r.offset) for r in read}) == [
            (0, offset) for offset in range(5, RECORDS_PER_PARTITION)]
        assert consumer.position(committed_one) == RECORDS_PER_PARTITION
        assert consumer.committed() == {tp: 5 if tp == committed_one else None
                                        for tp in everything}

        consumer.seek_to_beginning([fresh])
        consumer.seek_to_end([committed_one])
        assert (consumer.position(fresh), consumer.position(committed_one)) == (
            0, RECORDS_PER_PARTITION)
        seen: list[ConsumerRecord] = []
        _poll_until([consumer], lambda: len(seen) >= RECORDS_PER_PARTITION, seen,
                    "the records of the partition sought to its beginning")
        assert [(r.partition, r.offset) for r in seen] == [
            (1, offset) for offset in range(RECORDS_PER_PARTITION)]
        consumer.seek(fresh, 3)
        assert consumer.position(fresh) == 3
        consumer.commit()
        assert consumer.committed() == {tp: 3 if tp == fresh else RECORDS_PER_PARTITION
                                        for tp in everything}
    with Admin(broker.endpoint) as admin:
        assert admin.list_group_offsets(group) == {
            tp: 3 if tp == fresh else RECORDS_PER_PARTITION for tp in everything}


def test_a_member_waiting_in_a_long_poll_hands_partitions_over_within_that_poll(
        broker: BrokerProcess) -> None:
    """A poll waiting for records that do not come still reconciles: the revocation a joiner
    waits for happens inside the holder's poll(60 s), not at its next poll."""
    _topic(broker, "handover")
    holder, joiner = _consumer(broker, "handovers"), _consumer(broker, "handovers")
    revoked: list[set[TopicPartition]] = []
    returned: list[list[ConsumerRecord]] = []
    polling = threading.Thread(target=lambda: returned.append(holder.poll(int(WAIT_S * 1000))),
                               daemon=True)
    try:
        holder.subscribe(["handover"], on_revoke=revoked.append)
        seen: list[ConsumerRecord] = []
        _poll_until([holder], lambda: len(seen) >= PARTITIONS * RECORDS_PER_PARTITION, seen,
                    "the only member to read everything")
        polling.start()  # nothing is written meanwhile: this poll waits
        joiner.subscribe(["handover"])
        _poll_until([joiner], lambda: len(joiner.assignment()) == PARTITIONS // 2, [],
                    "the joiner to take half the partitions during the holder's poll")
        assert polling.is_alive() and not returned, "the holder's poll ended before"
        assert len(revoked) == 1 and len(revoked[0]) == PARTITIONS // 2
    finally:
        with Producer(broker.endpoint) as producer:  # ends the holder's poll
            for partition in range(PARTITIONS):
                producer.send("handover", b"last", partition=partition)
        polling.join(WAIT_S)
        kept = holder.assignment()
        joiner.close()
        holder.close()
    assert not polling.is_alive() and returned and returned[0], "the poll ended with records"
    assert {TopicPartition(r.topic, r.partition) for r in returned[0]} <= kept, (
        "after the hand-over within the poll, it returned only the partitions it kept")
    assert len(kept) == PARTITIONS // 2 and not kept & revoked[0]
