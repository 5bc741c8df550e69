"""`zlog dev-cluster`: a local cluster of N brokers on this machine, for trying zlog out.

Broker i listens on 127.0.0.i (Linux routes all of 127/8 to the loopback interface, so each
broker has an address of its own, as it would on its own host), keeps its data in
`<base-dir>/node-i` (its ring directory derives from that path, so brokers never share one) and
its log in `<base-dir>/node-i/zlog.log`. Every broker is a voter of the metadata log. The
command prints what it started and how to point the CLI at it, then waits; Ctrl-C (or SIGTERM)
stops every broker gracefully and exits 0. A broker that dies on its own stops the others and
the command exits 1 with that broker's log tail.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Final

from zlog.broker.config import METRICS_PORT_DEFAULT

BROKERS_MAX: Final = 9  # 127.0.0.1 .. 127.0.0.9
READY_TIMEOUT_S: Final = 60.0
STOP_TIMEOUT_S: Final = 40.0  # a controlled shutdown may take its timeout (30 s) and more
POLL_INTERVAL_S: Final = 0.1
LOG_TAIL_BYTES: Final = 4_000
LOG_FILE: Final = "zlog.log"


@dataclass(slots=True)
class _Broker:
    node_id: int
    endpoint: str
    data_dir: Path
    process: subprocess.Popen[bytes]

    @property
    def log_path(self) -> Path:
        return self.data_dir / LOG_FILE

    def log_tail(self) -> str:
        try:
            with self.log_path.open("rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - LOG_TAIL_BYTES))
                return log.read().decode(errors="replace")
        except OSError:
            return "(no log)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--brokers", type=int, default=3, metavar="N",
                        help=f"how many brokers, 1 to {BROKERS_MAX} (default 3)")
    parser.add_argument("--base-dir", type=Path, default=Path("zlog-data"), metavar="DIR",
                        help="broker i keeps its data in DIR/node-i (default ./zlog-data)")
    parser.add_argument("--kafka-port", type=int, default=9092,
                        help="every broker's Kafka port, on its own 127.0.0.N (0: none)")
    parser.add_argument("--port", type=int, default=7400,
                        help="every broker's control port; its metadata log uses the next "
                             "one (default 7400)")
    parser.add_argument("--workers", type=int, default=1,
                        help="partition workers per broker (default 1)")


def kafka_bootstrap_of(brokers: int, port: int) -> str:
    return ",".join(f"127.0.0.{node}:{port}" for node in range(1, brokers + 1))


def bootstrap_of(brokers: int, port: int) -> str:
    return ",".join(f"tcp://127.0.0.{node}:{port}" for node in range(1, brokers + 1))


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.brokers <= BROKERS_MAX:
        print(f"zlog dev-cluster: --brokers must be 1 to {BROKERS_MAX}", file=sys.stderr)
        return 2
    if not 1 <= args.port <= 65_534 or args.workers < 1:
        print("zlog dev-cluster: --port must be 1 to 65534 and --workers at least 1",
              file=sys.stderr)
        return 2
    stopping = False

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    brokers = _start(args)
    try:
        failed = _wait_ready(brokers, lambda: stopping)
        if failed is None and not stopping:
            _print_banner(args, brokers)
            failed = _watch(brokers, lambda: stopping)
    finally:
        _stop(brokers)
    if failed is not None:
        print(f"broker {failed.node_id} stopped (exit status {failed.process.returncode}); "
              f"its log ({failed.log_path}) ends:\n{failed.log_tail()}", file=sys.stderr)
        return 1
    print("stopped every broker", flush=True)
    return 0


def _start(args: argparse.Namespace) -> list[_Broker]:
    voters = ",".join(f"{node}@tcp://127.0.0.{node}:{args.port}"
                      for node in range(1, args.brokers + 1))
    brokers: list[_Broker] = []
    for node in range(1, args.brokers + 1):
        data_dir = (args.base_dir / f"node-{node}").resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
        endpoint = f"tcp://127.0.0.{node}:{args.port}"
        command = [sys.executable, "-P", "-m", "zlog.cli", "serve", "--node-id", str(node),
                   "--listen", endpoint, "--advertised-host", f"127.0.0.{node}",
                   "--voters", voters, "--data-dir", str(data_dir),
                   "--workers", str(args.workers), "--metrics-listen", _metrics_of(node),
                   "--kafka-listen", f"127.0.0.{node}:{args.kafka_port}" if args.kafka_port else ""]
        environ = {key: value for key, value in os.environ.items()
                   if key != "NOTIFY_SOCKET" and not key.startswith("ZLOG_")}
        with (data_dir / LOG_FILE).open("ab") as log:
            # Own process group: Ctrl-C reaches this command alone, which then stops every
            # broker in order instead of all at once.
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, env=environ, process_group=0)
        brokers.append(_Broker(node, endpoint, data_dir, process))
    return brokers


def _wait_ready(brokers: Sequence[_Broker], stopping: Callable[[], bool]) -> _Broker | None:
    """Until every broker printed that it serves; the first that died instead."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    waiting = list(brokers)
    while waiting and not stopping():
        for broker in list(waiting):
            if broker.process.poll() is not None:
                return broker
            if "serving: control" in broker.log_tail():
                waiting.remove(broker)
        if time.monotonic() > deadline:
            print(f"zlog dev-cluster: brokers {[b.node_id for b in waiting]} not serving "
                  f"after {READY_TIMEOUT_S:.0f} s; see their logs", file=sys.stderr)
            return waiting[0]
        time.sleep(POLL_INTERVAL_S)
    return None


def _metrics_of(node: int) -> str:
    """Broker `node`'s metrics endpoint: the default port, on its own loopback address."""
    return f"127.0.0.{node}:{METRICS_PORT_DEFAULT}"


def _print_banner(args: argparse.Namespace, brokers: Sequence[_Broker]) -> None:
    bootstrap = bootstrap_of(args.brokers, args.port)
    lines = [f"zlog dev-cluster: {len(brokers)} brokers serving"]
    lines += [f"  broker {b.node_id}: {b.endpoint}  data {b.data_dir}  log {b.log_path}"
              for b in brokers]
    lines += ["point the CLI at it:",
              f"  export ZLOG_BOOTSTRAP={bootstrap}",
              *([f"  Kafka clients: bootstrap.servers="
                 f"{kafka_bootstrap_of(args.brokers, args.kafka_port)}"]
                if args.kafka_port else []),
              f"  zlog topic create events --partitions 3 --replication-factor "
              f"{min(3, len(brokers))}",
              "  zlog cluster status",
              "  zlog top " + " ".join(f"--metrics http://{_metrics_of(b.node_id)}"
                                       for b in brokers),
              "Ctrl-C stops every broker"]
    print("\n".join(lines), flush=True)


def _watch(brokers: Sequence[_Broker], stopping: Callable[[], bool]) -> _Broker | None:
    while not stopping():
        for broker in brokers:
            if broker.process.poll() is not None:
                return broker
        time.sleep(POLL_INTERVAL_S)
    return None


def _stop(brokers: Sequence[_Broker]) -> None:
    """SIGTERM to all at once (each moves what leaderships it can, then stops), then wait."""
    for broker in brokers:
        if broker.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                broker.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for broker in brokers:
        try:
            broker.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            broker.process.kill()
            broker.process.wait()
