"""The supervisor's part in the metrics: the workers' files, the endpoint's life, and what
its loop publishes.

Kept apart from supervisor.py so the loop's share is two calls: `publish` each turn (it
builds a view at most every `PUBLISH_INTERVAL_MS`) and `close` on the way out. The files are
made at start, before the workers that write them; the HTTP endpoint, and the imports it
needs (prometheus_client, the standard library's HTTP server: a fifth of a second of a busy
host's start), only once the broker serves, or `OPEN_AT_LATEST_MS` after its start if it
does not (a broker that cannot register still says why on /readyz). A port that cannot be
bound, or files that cannot be made, cost the metrics, not the broker: it is logged and the
broker serves on without them, as several brokers of a development cluster on one host would
otherwise all need a port of their own configured.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from zlog.broker.control.loop_view import LoopView, MetadataChanges
from zlog.broker.worker_metrics import MetricsFile, WorkerMetrics, metrics_path
from zlog.transport.server import RequestObserver

if TYPE_CHECKING:
    from zlog.broker.control.metrics_endpoint import MetricsEndpoint

log = logging.getLogger(__name__)

PUBLISH_INTERVAL_MS: Final = 250
OPEN_AT_LATEST_MS: Final = 2_000
CONTROL_METRICS_FILE: Final = "zlog-metrics-control"


class SupervisorMetrics:
    def __init__(self, listen: str, data_dir: Path, worker_files: dict[int, MetricsFile],
                 control_file: MetricsFile, now_ms: int) -> None:
        self.listen = listen
        self.data_dir = data_dir
        self.worker_files = worker_files
        self.control_file = control_file
        self.view = LoopView(node_id=-1)  # swapped whole by the loop, read by the endpoint
        self.changes = MetadataChanges()
        self.endpoint: MetricsEndpoint | None = None
        self._control = WorkerMetrics(control_file)
        self._open_at_ms: int | None = now_ms + OPEN_AT_LATEST_MS  # None: opened, or given up
        self._next_publish_ms = 0

    @classmethod
    def start(cls, listen: str, *, ring_dir: Path, data_dir: Path, workers: int,
              now_ms: int) -> SupervisorMetrics | None:
        """The metrics file of each worker and of the control endpoint; None without
        `listen` (metrics off) or when they cannot be made."""
        if not listen:
            return None
        made: list[MetricsFile] = []
        try:
            ring_dir.mkdir(parents=True, exist_ok=True)
            for worker_id in range(workers):
                made.append(MetricsFile.create(metrics_path(ring_dir, worker_id)))
            made.append(MetricsFile.create(ring_dir / CONTROL_METRICS_FILE))
        except OSError as error:
            log.warning("no metrics: cannot make their files in %s (%s)", ring_dir,
                        error.strerror or error)
            _remove(made)
            return None
        return cls(listen, data_dir, dict(enumerate(made[:-1])), made[-1], now_ms)

    @property
    def observe_control(self) -> RequestObserver:
        """The control endpoint's requests, counted as the workers count theirs."""
        return self._control

    def publish(self, now_ms: int, view: Callable[[MetadataChanges], LoopView], *,
                serving: bool) -> None:
        """From the loop: a new view for the scrapes every PUBLISH_INTERVAL_MS, and the
        endpoint opened once the broker serves (or waited long enough)."""
        if now_ms >= self._next_publish_ms:
            self.view = view(self.changes)
            self._next_publish_ms = now_ms + PUBLISH_INTERVAL_MS
        if self._open_at_ms is not None and (serving or now_ms >= self._open_at_ms):
            self._open_at_ms = None
            self._open()

    def _open(self) -> None:
        # Imported here, not with the supervisor: see the module's docstring.
        from zlog.broker.control.host_metrics import HostMetrics  # noqa: PLC0415
        from zlog.broker.control.metrics_endpoint import MetricsEndpoint  # noqa: PLC0415

        collector = HostMetrics(self.worker_files, self.control_file, self.data_dir,
                                lambda: self.view)
        try:
            self.endpoint = MetricsEndpoint(self.listen, collector, lambda: self.view)
        except OSError as error:
            log.warning("no metrics endpoint: cannot listen on %s (%s); serving without it",
                        self.listen, error.strerror or error)
            return
        log.info("metrics on http://%s/metrics (and /healthz, /readyz)", self.endpoint.address)

    def close(self) -> None:
        if self.endpoint is not None:
            self.endpoint.close()
            self.endpoint = None
        _remove([*self.worker_files.values(), self.control_file])


def _remove(files: list[MetricsFile]) -> None:
    for metrics_file in files:
        metrics_file.close()
        metrics_file.path.unlink(missing_ok=True)
