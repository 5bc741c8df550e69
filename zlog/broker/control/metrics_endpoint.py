"""The broker's HTTP port for operators: `/metrics`, `/healthz` and `/readyz`.

One small threaded HTTP server (the standard library's) on `metrics_listen`, beside the
supervisor's loop and never in it: a scrape reads what the loop and the workers publish
(host_metrics.py) and the loop never waits on a scrape. `/healthz` answers 200 as long as
the process serves HTTP; `/readyz` answers 200 once the broker serves clients with its
metadata caught up (on a cluster: registered, and unfenced), else 503 with the reason, so
a load balancer or a rolling restart can wait on it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Final

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from zlog.broker.control.host_metrics import HostMetrics
from zlog.broker.control.loop_view import LoopView

log = logging.getLogger(__name__)

TEXT: Final = "text/plain; charset=utf-8"


class MetricsEndpoint:
    """Serves until `close()`; `address` is where it listens (the port chosen when 0)."""

    def __init__(self, listen: str, metrics: HostMetrics, view: Callable[[], LoopView]) -> None:
        host, _, port = listen.rpartition(":")
        self._view = view
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(metrics)
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                endpoint.answer(self)

            def log_message(self, format: str, *args: object) -> None:
                return  # a scrape every few seconds is no event worth a log line

        self._server = ThreadingHTTPServer((host.strip("[]"), int(port)), Handler)
        self._server.daemon_threads = True
        bound = self._server.server_address
        self.address = f"{bound[0]!s}:{bound[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="zlog-metrics-http", daemon=True)
        self._thread.start()

    def answer(self, request: BaseHTTPRequestHandler) -> None:
        path = request.path.split("?", 1)[0]
        if path == "/metrics":
            try:
                body, status, kind = generate_latest(self._registry), 200, CONTENT_TYPE_LATEST
            except Exception as error:  # a bug here must cost the scrape, never the broker
                log.exception("metrics scrape failed")
                body, status, kind = f"metrics failed: {error!r}\n".encode(), 500, TEXT
        elif path == "/healthz":
            body, status, kind = b"ok\n", 200, TEXT
        elif path == "/readyz":
            view = self._view()
            if view.ready:
                body, status = b"ready\n", 200
            else:
                body, status = f"not ready: {view.not_ready_why}\n".encode(), 503
            kind = TEXT
        else:
            body, status, kind = b"not found: /metrics, /healthz or /readyz\n", 404, TEXT
        request.send_response(status)
        request.send_header("Content-Type", kind)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
