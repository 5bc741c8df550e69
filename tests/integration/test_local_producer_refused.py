"""A local producer whose leader's worker takes no local producers uses the network.

Spec: zlog/client/local_produce.py ("Falling back to the network"), docs/local-path.md §5.
The worker's doorbell name is held by another process (this test) before the broker starts, so
the worker serves without local producers; the producer finds a doorbell that never answers
its hello, and every record still lands once, in order, over the network.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from zlog.client import Admin, NewTopic, Producer
from zlog.transport import local_channel
from zlog.transport.shm_queue import QUEUE_NAME_PREFIX, queue_directory
from zlog_testbed.broker_process import broker_process
from zlog_testbed.free_ports import free_port

pytestmark = pytest.mark.slow

WAIT_S = 60.0
RECORDS = 50


def test_no_doorbell_means_the_network(tmp_path: Path) -> None:
    port = free_port()
    with contextlib.ExitStack() as squatted:
        squatted.enter_context(local_channel.listen(f"tcp://127.0.0.1:{port}"))
        with broker_process(workers=1, extra_args=("--data-port-range", f"{port}-{port}")
                            ) as broker:
            with Admin(broker.endpoint) as admin:
                admin.create_topics([NewTopic("refused", 1)])
            endpoint = broker.data_endpoint("refused", 0)
            assert endpoint == f"tcp://127.0.0.1:{port}"
            worker = broker.worker_pid_for(endpoint)
            with Producer(broker.endpoint, local=True, linger_ms=0) as producer:
                offsets = [producer.send("refused", b"%d" % index, partition=0).result(WAIT_S)
                           .offset for index in range(RECORDS)]
            assert offsets == list(range(RECORDS))
            assert "no local producers for" in broker.log_text()
            maps = Path(f"/proc/{worker}/maps").read_text()
            assert QUEUE_NAME_PREFIX not in maps
            assert not list(queue_directory().glob(f"{QUEUE_NAME_PREFIX}{os.getpid()}-*")), \
                "the producer removes the queue file no worker took"
