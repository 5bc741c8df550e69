"""A raw Kafka connection for tests: requests written with kio, answers read with kio, and
record batches built by kafka-python, an encoder independent of zlog's."""

from __future__ import annotations

import io
import socket
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from zlog.kafka.responses import build

Header = tuple[str, bytes]
RecordSpec = tuple[bytes | None, bytes | None, Sequence[Header], int]
"""key, value, headers, timestamp in ms"""


def kafka_python_batch(records: Sequence[RecordSpec], *, codec: int = 0, producer_id: int = -1,
                       producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """A RecordBatch v2 as kafka-python writes it (codecs 0 none, 1 gzip, 3 lz4)."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence, batch_size=1 << 24)
    for offset, (key, value, headers, timestamp_ms) in enumerate(records):
        builder.append(offset, timestamp=timestamp_ms, key=key, value=value,
                       headers=list(headers))
    return bytes(builder.build())


def kafka_python_records(stored: bytes) -> list[tuple[int, RecordSpec]]:
    """(offset, record) of every record in back-to-back batches, read by kafka-python."""
    found: list[tuple[int, RecordSpec]] = []
    pos = 0
    while pos < len(stored):
        (length,) = struct.unpack_from(">i", stored, pos + 8)
        batch = DefaultRecordBatch(stored[pos:pos + 12 + length])
        assert batch.validate_crc()
        found += [(r.offset, (r.key, r.value, tuple(r.headers), r.timestamp)) for r in batch]
        pos += 12 + length
    return found


class KafkaWire:
    """One Kafka connection; requests are sent at the version asked, one at a time."""

    def __init__(self, address: str, timeout_s: float = 30.0) -> None:
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self._correlation_id = 0

    def __enter__(self) -> KafkaWire:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, values: Mapping[str, Any]) -> int:
        """Write one request; returns its correlation id."""
        self._correlation_id += 1
        schema = load_request_schema(api_key, version)
        header = schema.__header_schema__(request_api_key=api_key, request_api_version=version,
                                          correlation_id=self._correlation_id,
                                          client_id="zlog-tests")
        out = io.BytesIO()
        entity_writer(type(header))(out, header)
        entity_writer(schema)(out, build(schema, values))
        payload = out.getvalue()
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        return self._correlation_id

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def receive(self, api_key: int, version: int, correlation_id: int) -> Any:
        """The next answer, read with kio, which must be the one to `correlation_id`."""
        payload = self.receive_frame()
        schema = load_response_schema(api_key, version)
        header, header_bytes = entity_reader(schema.__header_schema__)(payload, 0)
        assert header.correlation_id == correlation_id
        body, body_bytes = entity_reader(schema)(payload, header_bytes)
        assert header_bytes + body_bytes == len(payload), "the answer is exactly one body"
        return body

    def receive_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._exactly(4))
        return self._exactly(size)

    def call(self, api_key: int, version: int, values: Mapping[str, Any]) -> Any:
        return self.receive(api_key, version, self.send(api_key, version, values))

    def closed_by_peer(self) -> bool:
        """Whether the broker closed this connection (waits up to the socket's timeout)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def _exactly(self, size: int) -> bytes:
        parts: list[bytes] = []
        remaining = size
        while remaining:
            chunk = self.sock.recv(min(remaining, 1 << 20))
            if not chunk:
                raise ConnectionError(f"connection closed with {remaining} bytes to come")
            parts.append(chunk)
            remaining -= len(chunk)
        return b"".join(parts)


def produce_values(topic: str, partition: int, records: bytes, *, acks: int = 1,
                   timeout_ms: int = 10_000) -> dict[str, Any]:
    return {"acks": acks, "timeout_ms": timeout_ms, "transactional_id": None,
            "topic_data": [{"name": topic,
                            "partition_data": [{"index": partition, "records": records}]}]}


def fetch_values(topic: str, partition: int, offset: int, *, max_wait_ms: int = 0,
                 min_bytes: int = 1, partition_max_bytes: int = 1 << 20,
                 current_leader_epoch: int = -1) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
            "max_bytes": 1 << 24, "isolation_level": 1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "fetch_offset": offset,
                "partition_max_bytes": partition_max_bytes,
                "current_leader_epoch": current_leader_epoch}]}]}
