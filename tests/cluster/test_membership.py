"""Membership of the metadata log with real brokers (docs/raft.md §4.15, §4.16).

A learner: a fourth broker started with `--join` holds replicas like any broker but never
counts toward the metadata quorum; restarted with its data it rejoins without asking, and
restarted on an empty disk it is streamed the log again.

A wiped voter: three brokers, all voters. Topics are created all along; one voter (not the
controller) is kill -9'd, its data directory (and its rings) deleted, and it is started again
with the same flags. Every topic whose creation was acknowledged is still there, on every
broker, the restarted one included; the controller commits the swap to its new directory and
reports it as counting again; and it really votes: with the third broker down, the
controller and the restarted broker alone still commit a new topic.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Final

import pytest

from zlog.client import Admin, NewTopic
from zlog.errors import ErrorCode, ZlogError
from zlog_testbed.broker_process import BrokerProcess
from zlog_testbed.cluster_processes import cluster_processes
from zlog_testbed.waiting import wait_until

pytestmark = pytest.mark.slow

REQUEST_TIMEOUT_MS: Final = 5_000
DEADLINE_S: Final = 30.0


class TopicCreations:
    """Creates topics one after another on a thread; remembers those acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        self.acknowledged: list[str] = []
        self._bootstrap = bootstrap
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TopicCreations:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(DEADLINE_S)

    def _run(self) -> None:
        with Admin(self._bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS) as admin:
            index = 0
            while not self._stop.is_set():
                name = f"load-{index}"
                try:
                    error = admin.create_topics([NewTopic(name, 1, replication_factor=1)],
                                                raise_on_error=False)[name]
                except ZlogError:
                    continue  # retried under the same name: its outcome was unknown
                if error is not None and error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    continue
                self.acknowledged.append(name)
                index += 1

    def wait_for(self, count: int) -> None:
        target = len(self.acknowledged) + count
        wait_until(lambda: len(self.acknowledged) >= target, DEADLINE_S,
                   what=f"{count} more topic creations")


def wipe(broker: BrokerProcess) -> None:
    """kill -9, then lose the disk and the shared memory: a host replaced under the same id."""
    broker.kill_all()
    shutil.rmtree(broker.data_dir)
    shutil.rmtree(broker.ring_dir, ignore_errors=True)
    broker.ring_dir.mkdir()


def test_a_voter_restarted_on_a_wiped_disk_loses_no_metadata_and_votes_again(
    tmp_path: Path,
) -> None:
    with cluster_processes(3, tmp_path) as cluster, Admin(
            cluster.bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS) as admin:
        wait_until(lambda: admin.describe_cluster().controller_id > 0, DEADLINE_S,
                   what="a controller")
        controller = admin.describe_cluster().controller_id
        victim, other = [node for node in (1, 2, 3) if node != controller]
        with TopicCreations(cluster.bootstrap) as load:
            load.wait_for(5)
            broker = cluster.broker(victim)
            wipe(broker)
            load.wait_for(3)  # the two others keep committing while it is down
            broker.start()
            load.wait_for(5)
        created = set(load.acknowledged)
        assert len(created) >= 13

        def counts_again() -> bool:
            lag = admin.describe_cluster().voter_lag_blocks or {}
            return lag.get(victim, -1) >= 0

        wait_until(counts_again, DEADLINE_S, interval_s=0.1,
                   what=f"voter {victim} counted again")
        new_dir = json.loads((cluster.broker(victim).data_dir / "meta.json").read_text())["dir_id"]
        assert f"{victim}: '{new_dir}'" in cluster.broker(controller).log_text(), \
            "the controller committed the swap to the new directory"

        for node in (1, 2, 3):
            def has_all(node: int = node) -> bool:
                topics = cluster.broker(node).metadata(None).topics
                return created <= {topic.name for topic in topics}

            wait_until(has_all, DEADLINE_S, interval_s=0.1,
                       what=f"broker {node} holding every acknowledged topic")
        cluster.broker(other).kill_all()
        admin.create_topics([NewTopic("after-the-wipe", 1, replication_factor=1)])
        assert "after-the-wipe" in admin.list_topics()


def test_a_learner_holds_replicas_never_counts_toward_the_quorum_and_rejoins(
    tmp_path: Path,
) -> None:
    with cluster_processes(3, tmp_path) as cluster, Admin(
            cluster.bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS) as admin:
        learner = cluster.add_learner(4)
        learner.start()
        assert "added as a learner" in learner.log_text()
        described = admin.describe_cluster()
        assert 4 in {broker.node_id for broker in described.brokers}, "it registered"
        assert 4 not in (described.voter_lag_blocks or {}), "it is no voter"
        admin.create_topics([NewTopic("everywhere", 1, replication_factor=4)])
        cluster.wait_isr("everywhere", 0, {1, 2, 3, 4})

        # Restarted with its data: a member from its first moment, it asks nobody.
        learner.kill_all()
        learner.start()
        assert "added as a learner" not in learner.log_path.read_text()
        cluster.wait_isr("everywhere", 0, {1, 2, 3, 4})

        # Restarted on an empty disk: it asks again, is streamed the log, and holds its replica.
        wipe(learner)
        learner.start()
        assert "added as a learner" in learner.log_path.read_text()
        cluster.wait_isr("everywhere", 0, {1, 2, 3, 4})

        # Two voters down: the controller and the learner are no quorum.
        controller = admin.describe_cluster().controller_id
        for node in (1, 2, 3):
            if node != controller:
                cluster.broker(node).kill_all()
        with (Admin(cluster.broker(controller).endpoint, request_timeout_ms=3_000) as alone,
              pytest.raises(ZlogError)):
            alone.create_topics([NewTopic("no-quorum", 1, replication_factor=1)])
        assert "no-quorum" not in {t.name for t in learner.metadata(None).topics}
