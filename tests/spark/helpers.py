"""Reading a topic back with the plain zlog Consumer: a check that does not go through Spark."""

from __future__ import annotations

from zlog.client import EARLIEST, LATEST, Admin, Consumer, ConsumerRecord, TopicPartition

READ_TIMEOUT_MS = 500


def read_all(bootstrap: str, topic: str) -> list[ConsumerRecord]:
    """Every record of `topic` below the high watermarks now, in offset order per partition."""
    with Admin(bootstrap) as admin:
        (description,) = admin.describe_topics([topic])
        partitions = [TopicPartition(topic, p.partition) for p in description.partitions]
        ends = {tp: found.offset
                for tp, found in admin.list_offsets(dict.fromkeys(partitions, LATEST)).items()}
        starts = {tp: found.offset
                  for tp, found in admin.list_offsets(dict.fromkeys(partitions, EARLIEST)).items()}
    records: list[ConsumerRecord] = []
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, starts[tp])
        pending = {tp for tp in partitions if ends[tp] > starts[tp]}
        while pending:
            polled = consumer.poll(READ_TIMEOUT_MS, max_records=10_000)
            assert polled or pending, "no records came"
            for record in polled:
                tp = TopicPartition(record.topic, record.partition)
                if record.offset < ends[tp]:
                    records.append(record)
            pending = {tp for tp in pending if consumer.position(tp) < ends[tp]}
    return records
