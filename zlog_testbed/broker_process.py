"""A real `zlog serve`: start, kill -9, freeze, restart on the same data dir.

The fault, cluster and integration tests and the fault harness start their brokers through
this one class, each with its own data and ring directories and a log per run. Everything
waits on a condition with a deadline (`zlog_testbed.waiting.wait_until`), never on a bare sleep.

    with broker_process(log_dir, workers=2) as broker:
        broker.endpoint            # the control endpoint, tcp://127.0.0.1:<free port>
        broker.data_endpoint(topic, partition)
        broker.kill_all()          # SIGKILL the supervisor and every worker
        broker.start()             # again, on the same data and ring directories
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

import psutil

from zlog.broker.control.kafka_gateway_process import GATEWAY_MODULE as KAFKA_GATEWAY_MODULE
from zlog.broker.control.workers.fork_server import FORKSERVER_MODULE
from zlog.errors import ErrorCode, ZlogError
from zlog.transport.messages.admin import (
    ApiVersionsRequestV0,
    ApiVersionsResponseV0,
    MetadataRequestV0,
    MetadataResponseV0,
)
from zlog.transport.rpc import RpcClient
from zlog_testbed.free_ports import free_port
from zlog_testbed.waiting import wait_until

REPO_ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 60.0  # generous: CI machines are shared
CALL_TIMEOUT_MS = 10_000
READY_RETRY_S = 0.02  # between two probes of a broker not listening yet
LOG_TAIL_CHARS = 6_000
_EXEC_WITH_OPEN_FILES_MAX = (
    "import os, resource, sys; limit = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)); "
    "os.execv(sys.argv[2], sys.argv[2:])"
)


RING_DIR_PREFIX = "zf-ring-"
_STALE_RING_DIR = re.compile(rf"^{RING_DIR_PREFIX}(\d+)-")


def _remove_stale_ring_dirs(base: Path) -> None:
    """Remove the ring dirs a killed test or harness process left in shared memory (named
    after its pid): a killed run's rings are memory, gigabytes of it for a cluster whose
    brokers hold the 50 offsets partitions, that nothing else would give back."""
    for path in base.glob(f"{RING_DIR_PREFIX}*"):
        found = _STALE_RING_DIR.match(path.name)
        if found is not None and not psutil.pid_exists(int(found.group(1))):
            shutil.rmtree(path, ignore_errors=True)


# Brokers of the testbed open their Kafka listener only where this is "1" (tests/kafka sets
# it): each listener is one more process (the gateway) to start, which the many brokers of the
# other tests, started two tests at a time, need not pay for.
KAFKA_SWITCH: Final = "ZLOG_TESTBED_KAFKA"


class BrokerProcess:
    """`python -m zlog.cli serve` with private data and ring dirs that outlive restarts."""

    def __init__(self, workers: int = 2, extra_args: Sequence[str] = (), *,
                 data_dir: Path | None = None, cwd: Path = REPO_ROOT,
                 open_files_max: int | None = None, endpoint: str | None = None) -> None:
        # Short paths: the supervisor keeps an ipc socket in the data dir.
        self.directory = Path(tempfile.mkdtemp(prefix="zf-", dir="/tmp"))
        shm_base = "/dev/shm" if Path("/dev/shm").is_dir() else None
        _remove_stale_ring_dirs(Path(shm_base or tempfile.gettempdir()))
        self.ring_dir = Path(tempfile.mkdtemp(prefix=f"{RING_DIR_PREFIX}{os.getpid()}-",
                                              dir=shm_base))
        self.data_dir = data_dir or self.directory / "data"
        self.endpoint = endpoint or f"tcp://127.0.0.1:{free_port()}"
        host = self.endpoint.partition("//")[2].rpartition(":")[0] or "127.0.0.1"
        # Kafka clients' bootstrap: a port of its own, kept across restarts as an operator's is.
        try:
            self.kafka_bootstrap = f"{host}:{free_port(host)}"
        except OSError:  # an address of another network namespace: its kernel picks the port
            self.kafka_bootstrap = f"{host}:0"
        self.workers = workers
        self.extra_args = tuple(extra_args)
        self.cwd = cwd
        self.open_files_max = open_files_max  # RLIMIT_NOFILE (soft and hard), as `ulimit -n`
        self.environment: dict[str, str] = {}  # set for every start, over the inherited one
        # Words run before the command, which they must exec (not fork) so that the pid is the
        # broker's: `ip netns exec NS` to start it in a network namespace.
        self.command_prefix: tuple[str, ...] = ()
        self.process: subprocess.Popen[bytes] | None = None
        self.runs = 0

    # -- processes ----------------------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        return self.directory / f"broker-{self.runs}.log"

    def start(self, *, wait: bool = True) -> None:
        """Start (or restart) the broker and wait until it answers (unless `wait` is False:
        a cluster's brokers start together, then each is waited for); the same dirs every run."""
        assert self.process is None, "already running"
        self.runs += 1
        # From another directory, start it as an operator would: the installed `zlog` script
        # (`python -m` would put that directory first on the module path).
        launcher = ([sys.executable, "-m", "zlog.cli"] if self.cwd == REPO_ROOT
                    else [str(Path(sys.executable).with_name("zlog"))])
        command = [*launcher, "serve",
                   "--data-dir", str(self.data_dir), "--listen", self.endpoint,
                   "--workers", str(self.workers), "--ring-dir", str(self.ring_dir),
                   "--worker-heartbeat-timeout-ms", "5000", "--worker-restart-backoff-initial-ms",
                   "50", "--kafka-listen",
                   self.kafka_bootstrap if os.environ.get(KAFKA_SWITCH) == "1" else "",
                   *self.extra_args]
        environ = {key: value for key, value in os.environ.items()
                   if key != "NOTIFY_SOCKET" and not key.startswith("ZLOG_")}
        environ["PYTHONUNBUFFERED"] = "1"
        environ["PYTHONPATH"] = str(REPO_ROOT)  # this checkout's zlog, whatever the cwd
        environ.update(self.environment)
        if self.open_files_max is not None:  # as `ulimit -n N` before the command
            command = [sys.executable, "-c", _EXEC_WITH_OPEN_FILES_MAX,
                       str(self.open_files_max), *command]
        command = [*self.command_prefix, *command]
        with self.log_path.open("wb") as log_file:
            self.process = subprocess.Popen(command, cwd=self.cwd, env=environ,
                                            stdout=log_file, stderr=subprocess.STDOUT)
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Until the control endpoint answers ApiVersions and Metadata, and every worker runs."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process is not None
            assert self.process.poll() is None, f"the broker exited:\n{self.log_tail()}"
            with RpcClient(self.endpoint) as rpc:
                try:
                    versions = rpc.call(ApiVersionsRequestV0(), 200)
                    metadata = rpc.call(MetadataRequestV0(None), 1000)
                except ZlogError:
                    # Refused at once while nothing listens: without a pause, a slow start
                    # opens sockets faster than ZeroMQ reaps them, past its 1023.
                    time.sleep(READY_RETRY_S)
                    continue
            if (isinstance(versions, ApiVersionsResponseV0)
                    and isinstance(metadata, MetadataResponseV0)
                    and len(self.worker_pids()) == self.workers):
                return
        raise AssertionError(f"the broker did not get ready in {START_TIMEOUT_S}s:\n"
                             f"{self.log_tail()}")

    @property
    def supervisor_pid(self) -> int:
        assert self.process is not None, "not running"
        return self.process.pid

    def worker_pids(self) -> list[int]:
        """The supervisor's live workers (in their own process groups)."""
        if self.process is None:
            return []
        alive = []
        for worker in worker_processes(self.process.pid):
            with contextlib.suppress(psutil.NoSuchProcess):
                if worker.status() != psutil.STATUS_ZOMBIE:  # killed, not yet reaped
                    alive.append(worker.pid)
        return sorted(alive)

    def worker_pid_for(self, data_endpoint: str) -> int:
        """The pid of the worker listening on `data_endpoint` (tcp://host:port)."""
        port = int(data_endpoint.rsplit(":", 1)[1])
        for pid in self.worker_pids():
            with contextlib.suppress(psutil.NoSuchProcess):
                for connection in psutil.Process(pid).net_connections(kind="tcp"):
                    if connection.status == psutil.CONN_LISTEN and connection.laddr.port == port:
                        return pid
        raise AssertionError(f"no worker listens on {data_endpoint}")

    def kill_worker(self, pid: int) -> None:
        assert pid in self.worker_pids(), (pid, self.worker_pids())
        os.kill(pid, signal.SIGKILL)

    def kill_all(self) -> None:
        """kill -9 of the whole broker: the supervisor and each worker (own process groups).

        The supervisor is frozen first so that it cannot start a replacement worker between
        the listing of its children and the kills.
        """
        assert self.process is not None, "not running"
        supervisor = psutil.Process(self.process.pid)
        supervisor.suspend()
        workers = supervisor.children(recursive=True)
        for worker in workers:
            with contextlib.suppress(psutil.NoSuchProcess):
                worker.kill()
        supervisor.kill()
        self.process.wait(START_TIMEOUT_S)
        wait_until(lambda: all(process_exited(worker) for worker in workers), START_TIMEOUT_S,
                   what="the killed workers to exit")
        self.process = None

    def pause(self) -> None:
        """SIGSTOP the supervisor and every worker (a frozen host: sockets stay open)."""
        assert self.process is not None, "not running"
        supervisor = psutil.Process(self.process.pid)
        supervisor.suspend()
        for worker in supervisor.children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                worker.suspend()

    def resume(self) -> None:
        """SIGCONT what `pause` stopped."""
        assert self.process is not None, "not running"
        supervisor = psutil.Process(self.process.pid)
        for worker in supervisor.children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                worker.resume()
        supervisor.resume()

    def stop(self) -> int:
        """SIGTERM and wait for the graceful stop; the exit status."""
        assert self.process is not None, "not running"
        self.process.send_signal(signal.SIGTERM)
        status = self.process.wait(START_TIMEOUT_S)
        self.process = None
        return status

    def close(self, keep_logs_in: Path | None = None) -> None:
        """Kill whatever still runs, keep the logs (for a failing test), remove the dirs."""
        if self.process is not None:
            with contextlib.suppress(psutil.NoSuchProcess):
                self.kill_all()
            self.process = None
        if keep_logs_in is not None:
            for path in self.directory.glob("broker-*.log"):
                with contextlib.suppress(OSError):
                    shutil.copy(path, keep_logs_in / path.name)
        shutil.rmtree(self.directory, ignore_errors=True)
        shutil.rmtree(self.ring_dir, ignore_errors=True)

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
        except OSError:
            return "(no log)"

    def log_text(self) -> str:
        """Every run's log, oldest first."""
        parts = []
        for run in range(1, self.runs + 1):
            path = self.directory / f"broker-{run}.log"
            with contextlib.suppress(OSError):
                parts.append(path.read_text(errors="replace"))
        return "".join(parts)

    # -- metadata -----------------------------------------------------------------------------

    def metadata(self, topics: Sequence[str] | None, *,
                 timeout_ms: int = CALL_TIMEOUT_MS) -> MetadataResponseV0:
        with RpcClient(self.endpoint) as rpc:
            response = rpc.call(MetadataRequestV0(None if topics is None else tuple(topics)),
                                timeout_ms)
        assert isinstance(response, MetadataResponseV0)
        return response

    def served_endpoints(self, topic: str) -> dict[int, str]:
        """partition -> data endpoint, for the partitions a worker serves right now."""
        (found,) = self.metadata([topic]).topics
        return {p.partition: p.endpoint for p in found.partitions
                if p.error_code == ErrorCode.NONE and p.endpoint}

    def served_by_another_worker(self, topic: str, partitions: int, killed_pid: int) -> bool:
        """Partitions 0..partitions-1 of `topic` all served, by workers other than the killed
        one. A replacement binds its predecessor's port again, so the endpoint alone does
        not tell them apart: the listening process does."""
        served = self.served_endpoints(topic)
        if sorted(served) != list(range(partitions)):
            return False
        try:
            return all(self.worker_pid_for(endpoint) != killed_pid
                       for endpoint in served.values())
        except AssertionError:  # nothing listens there yet
            return False

    def data_endpoint(self, topic: str, partition: int) -> str:
        """The data endpoint of the worker serving `partition` (waits for one)."""
        found: dict[int, str] = {}

        def served() -> bool:
            found.update(self.served_endpoints(topic))
            return partition in found

        wait_until(served, START_TIMEOUT_S, interval_s=0.02,
                   what=f"a worker serving {topic}-{partition}")
        return found[partition]


@contextlib.contextmanager
def broker_process(keep_logs_in: Path | None = None, *, workers: int = 2,
                   extra_args: Sequence[str] = (), data_dir: Path | None = None,
                   cwd: Path = REPO_ROOT, open_files_max: int | None = None,
                   ) -> Iterator[BrokerProcess]:
    """A started broker, killed and removed afterwards (its logs copied to `keep_logs_in`)."""
    broker = BrokerProcess(workers, extra_args, data_dir=data_dir, cwd=cwd,
                           open_files_max=open_files_max)
    try:
        broker.start()
        yield broker
    finally:
        if broker.process is not None and broker.process.poll() is None:
            print(f"\n--- broker log (tail) ---\n{broker.log_tail()}")
        broker.close(keep_logs_in)


def worker_processes(supervisor_pid: int) -> list[psutil.Process]:
    """A supervisor's workers: the children of its worker fork server, and any child started
    as a new interpreter (when no fork server runs) but its Kafka gateway."""
    workers: list[psutil.Process] = []
    try:
        children = psutil.Process(supervisor_pid).children()
    except psutil.NoSuchProcess:
        return []
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            command = child.cmdline()
            if not command or KAFKA_GATEWAY_MODULE in command:
                continue  # no command line: a process exiting (a fork server just killed)
            if FORKSERVER_MODULE in command:
                workers += child.children()
            else:
                workers.append(child)
    return workers


def process_exited(process: psutil.Process | int) -> bool:
    """Gone, or a zombie with no thread left: its descriptors, ports, locks and mappings are
    released already. Once its supervisor is killed, a worker is reaped by whatever adopts it,
    which may take seconds.

    The main thread of a killed process shows as a zombie while its other threads are still
    exiting (one in an fsync can take a while on a busy disk), and those still hold the shared
    descriptor table: a ring's lock outlived the "zombie" worker that way. Its thread count
    drops to one only once every other thread has let go of it.
    """
    try:
        if isinstance(process, int):
            process = psutil.Process(process)
        return bool(process.status() == psutil.STATUS_ZOMBIE and process.num_threads() <= 1)
    except psutil.NoSuchProcess:
        return True
