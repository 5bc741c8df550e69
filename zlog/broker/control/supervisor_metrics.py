"""The supervisor's part in the metrics: the endpoint's life, and what its loop publishes.

Kept apart from supervisor.py so the loop's share is two calls: `publish` each turn (it
builds a view at most every `PUBLISH_INTERVAL_MS`) and `close` on the way out. A port that
cannot be bound costs the metrics, not the broker: it is logged and the broker serves on
without them, as several brokers of a development cluster on one host would otherwise all
need a port of their own configured.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Final

from zlog.broker.control.host_metrics import HostMetrics, LoopView, MetadataChanges
from zlog.broker.control.metrics_endpoint import MetricsEndpoint
from zlog.broker.worker_metrics import WorkerMetrics, metrics_path
from zlog.transport.server import RequestObserver

log = logging.getLogger(__name__)

PUBLISH_INTERVAL_MS: Final = 250


class SupervisorMetrics:
    def __init__(self, metrics: HostMetrics, endpoint: MetricsEndpoint) -> None:
        self.metrics = metrics
        self.endpoint = endpoint
        self.changes = MetadataChanges()
        self._control = WorkerMetrics(metrics.control_file)
        self._next_publish_ms = 0

    @classmethod
    def start(cls, listen: str, *, ring_dir: Path, data_dir: Path,
              workers: int) -> SupervisorMetrics | None:
        """The endpoint on `listen` (empty: none), with a metrics file per worker made."""
        if not listen:
            return None
        metrics = HostMetrics(ring_dir, {worker_id: metrics_path(ring_dir, worker_id)
                                         for worker_id in range(workers)}, data_dir)
        try:
            endpoint = MetricsEndpoint(listen, metrics)
        except OSError as error:
            log.warning("no metrics endpoint: cannot listen on %s (%s); serving without it",
                        listen, error.strerror or error)
            metrics.close()
            return None
        log.info("metrics on http://%s/metrics (and /healthz, /readyz)", endpoint.address)
        return cls(metrics, endpoint)

    @property
    def observe_control(self) -> RequestObserver:
        """The control endpoint's requests, counted as the workers count theirs."""
        return self._control

    def publish(self, now_ms: int, view: Callable[[MetadataChanges], LoopView],
                *, now: bool = False) -> None:
        """From the loop: a new view for the scrapes, every PUBLISH_INTERVAL_MS (or `now`)."""
        if now or now_ms >= self._next_publish_ms:
            self.metrics.view = view(self.changes)
            self._next_publish_ms = now_ms + PUBLISH_INTERVAL_MS

    def close(self) -> None:
        self.endpoint.close()
        self.metrics.close()
