"""Tagged ~100 KB batches sent straight to a partition's worker and read back through a
consumer: what the disk-full tests acknowledge, and what the cluster then serves."""

from __future__ import annotations

from tests.storage_helpers import make_batch
from zlog.client import Consumer, TopicPartition
from zlog.transport.messages.data import (
    ProduceEntry,
    ProduceRequestV0,
    ProduceResponseV0,
    ProduceResult,
)
from zlog.transport.rpc import RpcClient
from zlog_testbed.waiting import wait_until

BATCH_VALUE_BYTES = 10_000
RECORDS_PER_BATCH = 10  # ~100 KB per batch


def tagged_batch(tag: int) -> bytes:
    return make_batch(tag, RECORDS_PER_BATCH, BATCH_VALUE_BYTES)


def produce_tagged(endpoint: str, topic: str, partition: int, tag: int) -> ProduceResult:
    """One acks=all Produce straight to the worker at `endpoint`: its answer, unretried."""
    request = ProduceRequestV0(-1, 5_000, (ProduceEntry(topic, partition, (tagged_batch(tag),)),))
    with RpcClient(endpoint) as rpc:
        response = rpc.call(request, 10_000)
    assert isinstance(response, ProduceResponseV0)
    (result,) = response.entries
    return result


def read_tags(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """The tags every partition of `topic` serves to consumers, from the start to its end."""
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        ends = consumer.list_offsets({TopicPartition(topic, p): -1 for p in range(partitions)})
        wanted = sum(ends.values())
        records: list[bytes] = []
        wait_until(lambda: bool(records.extend(r.value or b"" for r in consumer.poll(200)))
                   or len(records) >= wanted, 30, what=f"{wanted} records of {topic}")
    return sorted({int(value[:10]) for value in records})
