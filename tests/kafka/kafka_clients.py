"""The Kafka clients the Kafka listener is tested with, besides the Python ones imported
directly: kcat (Debian's) and kafkajs (run with node from the directory `make kafka-clients`
fills). A test needing one that is not installed is skipped, naming the make target."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from zlog.transport.messages.admin import PartitionMetadata

REPOSITORY = Path(__file__).resolve().parents[2]
KAFKAJS_DIR = REPOSITORY / ".kafka-clients"
KAFKAJS_SCRIPTS = Path(__file__).resolve().parent / "kafkajs"
CLIENT_TIMEOUT_S = 60


def confluent_first_offset(bootstrap: str, topic: str, from_offset: int, *,
                           timeout_s: float = CLIENT_TIMEOUT_S) -> int:
    """The offset of the first record a confluent-kafka consumer assigned `topic`-0 at
    `from_offset` reads (OFFSET_BEGINNING: from the log start; a position out of range resets
    to the earliest): where the tests of deleted records find a consumer starts."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"first-{time.monotonic_ns()}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, from_offset)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                offset = message.offset()
                assert offset is not None, "a record read has an offset"
                return offset
        raise AssertionError(f"confluent-kafka read nothing from {topic}-0 at {from_offset}")
    finally:
        consumer.close()


def kcat(*arguments: str, stdin: bytes = b"") -> str:
    """kcat's output; fails the test with its stderr when it fails."""
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (make kafka-clients)")
    done = subprocess.run(["kcat", *arguments], input=stdin, capture_output=True,
                          timeout=CLIENT_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout.decode()


def kafkajs(script: str, bootstrap: str, *arguments: str) -> Any:
    """Run tests/kafka/kafkajs/<script>.js with node; its last stdout line, as JSON."""
    if shutil.which("node") is None or not (KAFKAJS_DIR / "node_modules" / "kafkajs").is_dir():
        pytest.skip("kafkajs is not installed (make kafka-clients)")
    done = subprocess.run(["node", str(KAFKAJS_SCRIPTS / f"{script}.js"), bootstrap, *arguments],
                          capture_output=True, timeout=CLIENT_TIMEOUT_S, check=False,
                          env={"NODE_PATH": str(KAFKAJS_DIR / "node_modules"),
                               "PATH": "/usr/bin:/bin", "KAFKAJS_NO_PARTITIONER_WARNING": "1"})
    assert done.returncode == 0, (done.stdout + done.stderr).decode(errors="replace")
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


WORKER_PORTS = "kafka_endpoint" in {field.name for field in dataclasses.fields(PartitionMetadata)}
needs_worker_ports = pytest.mark.skipif(
    not WORKER_PORTS, reason="needs the partition workers' Kafka ports (Metadata's leaders), "
                             "which this build's workers do not open")
"""For a client that will not go on without a leader for every partition it touches."""
