"""What the cluster tests do to a running cluster besides faulting it: a batch sent straight
to a worker, as a client with stale metadata sends it; writes to an old and a new leader across
a leader change, and the check that they never both took writes at once; a stopped replica's
stored bytes. The cluster itself is zlog_testbed.cluster_processes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from zlog.errors import ErrorCode, ZlogError
from zlog.record.header import scan_batches
from zlog.record.records import NewRecord, build_batch
from zlog.shm_segments.log import PartitionLog
from zlog.transport.messages.data import (
    ProduceEntry,
    ProduceRequestV0,
    ProduceResponseV0,
)
from zlog.transport.rpc import RpcClient
from zlog_testbed.broker_process import BrokerProcess
from zlog_testbed.waiting import wait_until

STALE_VALUE = b"stale"
"""The value of `produce_to_worker`'s batch."""


def produce_to_worker(worker_endpoint: str, topic: str, partition: int, *, acks: int,
                      timeout_ms: int = 5_000) -> int:
    """One batch straight to a worker, as a client that has not refreshed its metadata sends
    it; the entry's error code (ErrorCode.NONE: acknowledged)."""
    batch = build_batch([NewRecord(STALE_VALUE)])
    with RpcClient(worker_endpoint) as client:
        response = client.call(
            ProduceRequestV0(acks, timeout_ms, (ProduceEntry(topic, partition, (batch,)),)),
            timeout_ms + 5_000)
    assert isinstance(response, ProduceResponseV0), response
    return response.entries[0].error_code


@dataclass(frozen=True, slots=True)
class TakenWrite:
    """An acks=1 batch a leader's worker acknowledged: when it was sent and answered
    (time.monotonic(), this process)."""

    sent_s: float
    answered_s: float


def _taken(endpoint: str, topic: str, taken: list[TakenWrite]) -> None:
    sent_s = time.monotonic()
    try:
        code = produce_to_worker(endpoint, topic, 0, acks=1, timeout_ms=1_000)
    except ZlogError:  # nothing listens there any more
        return
    if code == ErrorCode.NONE:
        taken.append(TakenWrite(sent_s, time.monotonic()))


def writes_across_a_leader_change(old_endpoint: str, topic: str,
                                  new_endpoint: Callable[[], str | None], *,
                                  new_writes: int, deadline_s: float
                                  ) -> tuple[list[TakenWrite], list[TakenWrite]]:
    """acks=1 batches to partition 0, one at a time, straight to the old leader's worker (a
    client whose metadata still names it) and, once `new_endpoint()` names the new leader's
    worker, to that one too, alternately, until the new leader took `new_writes` of them.
    What each leader acknowledged: (the old one's, the new one's)."""
    old: list[TakenWrite] = []
    new: list[TakenWrite] = []

    def new_leader_took_enough() -> bool:
        _taken(old_endpoint, topic, old)
        endpoint = new_endpoint()
        if endpoint and endpoint != old_endpoint:
            _taken(endpoint, topic, new)
        return len(new) >= new_writes

    wait_until(new_leader_took_enough, deadline_s, interval_s=0.0,
               what=f"{new_writes} writes taken by the new leader of {topic}-0")
    return old, new


def assert_one_writer_at_a_time(old: Sequence[TakenWrite], new: Sequence[TakenWrite]) -> None:
    """No write reached the old leader after the new one had acknowledged a write: such a
    write is proof that both led at once (the old leader took it while the new one led)."""
    first_new_answered_s = min(write.answered_s for write in new)
    late = [write for write in old if write.sent_s > first_new_answered_s]
    assert not late, (
        f"the old leader acknowledged {len(late)} of {len(old)} writes sent after the new "
        f"leader had acknowledged one, the last {late[-1].sent_s - first_new_answered_s:.3f} "
        "s after")


def log_bytes(broker: BrokerProcess, topic: str, partition: int) -> bytes:
    """Every batch of a stopped broker's replica, as stored."""
    log = PartitionLog(broker.data_dir, topic, partition, ring_dir=broker.ring_dir)
    try:
        stored = bytearray()
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            for view in log.read(offset, 1 << 20):
                stored += view
            batches, end = scan_batches(stored)
            assert end == len(stored), "a read returned whole batches"
            offset = batches[-1][1].last_offset + 1
        return bytes(stored)
    finally:
        log.close()
