"""Where a record's CPU goes on the hot path: counts per record, and flame graphs.

The hot case: one `Producer.send` with linger 0 (acks=1) and one parked fetch answered by it
(`Consumer.poll_batches` at the tail). Records are sent at a low steady rate (100/s, at most
that in the passes whose instruments slow the processes down), one record per batch and per
fetch answer (the consumer's batch count, in the JSON, says how nearly: on a busy host a late
process sends or reads two at once), so each record makes the whole trip alone. For each
process (producer, consumer, and the broker's supervisor, fork server and partition worker) the
tool counts, over a window of `--records` records after a warm-up, divided by the records:

- Python calls: Python functions entered ("call") and C functions called ("c_call"), per
  thread, and the changes of running Python thread (GIL hand-offs) the profiler saw
  (bench/hot_path_hook/sitecustomize.py, loaded through PYTHONPATH; pass `calls`);
- wake-ups: each thread's voluntary context switches (it blocked, then was woken), its
  involuntary ones, and its CPU time from /proc/PID/task/TID/{status,schedstat} (pass `plain`:
  nothing attached, nothing slowed);
- system calls: `strace -c -f` attached to each process for the window (pass `syscalls`); poll
  returns are the epoll_wait/poll/ppoll/select calls among them.

Each pass runs its own broker, so that one pass's instrument never slows another's counts. The
counts are about the code, not the machine: they hold on a busy host, where CPU time does not.
Then (pass `flame`) py-spy samples the producer, the worker and the consumer at `--flame-rate`
(5,000/s) for `--flame-s` seconds into SVG flame graphs.

Self-contained: it needs zlog's public client, `python -m zlog serve`, psutil, and for its
passes strace and py-spy (a pass whose tool is missing is reported as skipped). It measures the
checkout it sits in: to measure another (the code before a change), copy this file and
bench/hot_path_hook/ into that checkout and run it there.

    python bench/hot_path_count.py --json bench/results/hot_path.json --flame-dir docs/img
    python bench/hot_path_count.py --role producer|consumer ...   (how it starts its clients)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

import psutil

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

HOOK_DIR: Final = Path(__file__).resolve().parent / "hot_path_hook"
TOPIC: Final = "hot"
VALUE_BYTES: Final = 100
START_TIMEOUT_S: Final = 60.0
STEP_TIMEOUT_S: Final = 120.0
POLL_SYSCALLS: Final = ("epoll_wait", "epoll_pwait", "poll", "ppoll", "select", "pselect6")
# strace and the call counter slow every call: a wider gap keeps one record per batch
INSTRUMENTED_RATE_MAX: Final = 100
PASSES: Final = ("plain", "calls", "syscalls", "flame")


# --------------------------------------------------------------------------- client roles


def _schedule(rate: int, count: int) -> Iterator[int]:
    """Yield 0..count-1, each at its turn of an open-loop schedule of `rate` per second."""
    interval_ns = round(1e9 / rate)
    start_ns = time.monotonic_ns()
    for index in range(count):
        remaining_ns = start_ns + index * interval_ns - time.monotonic_ns()
        if remaining_ns > 0:
            time.sleep(remaining_ns / 1e9)
        yield index


def role_producer(args: argparse.Namespace) -> None:
    """Warm-up records, wait for the window, the measured records at the same rate."""
    from zlog.client import Producer

    value = bytes(VALUE_BYTES)
    with Producer(args.endpoint, acks=1, linger_ms=0) as producer:
        producer.send(TOPIC, value, partition=0).result(30)
        say("ready")
        for phase, count in (("warm", args.warmup), ("sent", args.records)):
            wait_for_line(sys.stdin)
            for _ in _schedule(args.rate, count):
                producer.send(TOPIC, value, partition=0)
            producer.flush()
            say(phase)
        wait_for_line(sys.stdin)


def role_consumer(args: argparse.Namespace) -> None:
    """Read at the tail; say when the warm-up and the measured records have all arrived."""
    from zlog.client import Consumer, TopicPartition

    tp = TopicPartition(TOPIC, 0)
    with Consumer(args.endpoint, auto_offset_reset="latest") as consumer:
        consumer.assign([tp])
        consumer.position(tp)
        consumer.poll_batches(0)
        say("ready")
        received = 0
        for phase, count in (("warm", args.warmup), ("done", args.records)):
            batches = 0
            wanted = received + count
            while received < wanted:
                for _tp, view in consumer.poll_batches(1000):
                    received += len(view)
                    batches += 1
            say(f"{phase} {json.dumps({'records': count, 'batches': batches})}")
        wait_for_line(sys.stdin)


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def wait_for_line(stream: IO[str]) -> str:
    line = stream.readline()
    if not line:
        raise SystemExit(0)  # the tool is gone
    return line.strip()


# ----------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Child:
    """A client process of the tool, spoken to by lines on stdin and stdout."""

    role: str
    process: subprocess.Popen[str]

    def tell(self, word: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(word + "\n")
        self.process.stdin.flush()

    def expect(self, word: str, timeout_s: float = STEP_TIMEOUT_S) -> str:
        """The rest of the next line, which must start with `word`."""
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        line = self.process.stdout.readline() if ready else ""
        if not line.startswith(word):
            self.process.kill()
            _, error = self.process.communicate()
            raise RuntimeError(f"{self.role}: expected {word!r}, got {line!r}\n{error[-3000:]}")
        return line[len(word):].strip()

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.tell("quit")
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class Run:
    """One broker and its two clients; `processes` names every process counted."""

    scratch: Path
    env: dict[str, str]
    broker: subprocess.Popen[bytes] | None = None
    endpoint: str = ""
    children: dict[str, Child] = field(default_factory=dict)

    def start(self, args: argparse.Namespace) -> None:
        self.endpoint = f"tcp://127.0.0.1:{free_port()}"
        ring_dir = Path("/dev/shm") if Path("/dev/shm").is_dir() else self.scratch
        self.rings = ring_dir / f"zlog-hot-path-{self.scratch.name}"
        with (self.scratch / "broker.log").open("wb") as log:
            self.broker = subprocess.Popen(
                [sys.executable, "-m", "zlog", "serve", "--data-dir", str(self.scratch / "data"),
                 "--listen", self.endpoint, "--workers", "1", "--ring-dir", str(self.rings)],
                cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        self._create_topic()
        for role in ("producer", "consumer"):  # the consumer starts after the first record
            command = [sys.executable, str(Path(__file__).resolve()), "--role", role,
                       "--endpoint", self.endpoint, "--rate", str(args.rate),
                       "--records", str(args.records), "--warmup", str(args.warmup)]
            self.children[role] = Child(role, subprocess.Popen(
                command, cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, env=self.env))
            self.children[role].expect("ready", START_TIMEOUT_S)

    def _create_topic(self) -> None:
        from zlog.client import Admin, NewTopic
        from zlog.errors import ErrorCode, ZlogError

        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert self.broker is not None
            if self.broker.poll() is not None:
                log = (self.scratch / "broker.log").read_text()
                raise RuntimeError(f"the broker exited: {log[-3000:]}")
            try:
                with Admin(self.endpoint, request_timeout_ms=2000) as admin:
                    admin.create_topics([NewTopic(TOPIC, 1)])
                return
            except ZlogError as error:  # an earlier attempt that timed out made it
                if error.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                    return
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def processes(self) -> dict[str, int]:
        """Role -> pid: the clients, the broker's supervisor, its fork server and worker(s)."""
        assert self.broker is not None
        out = {role: child.process.pid for role, child in self.children.items()}
        out["broker supervisor"] = self.broker.pid
        workers: list[int] = []
        for child in psutil.Process(self.broker.pid).children():
            forked = child.children()
            if forked:  # a fork server: the workers are its children
                out["broker fork server"] = child.pid
                workers.extend(worker.pid for worker in forked)
            else:  # a worker started by the supervisor itself
                workers.append(child.pid)
        for index, pid in enumerate(workers):
            out["broker worker" + (f" {index}" if index else "")] = pid
        return out

    def warm_up(self) -> None:
        self.children["producer"].tell("go")
        self.children["producer"].expect("warm")
        self.children["consumer"].expect("warm")

    def measure(self) -> dict[str, Any]:
        """Send the measured records; return the consumer's counts once all arrived."""
        self.children["producer"].tell("go")
        done = json.loads(self.children["consumer"].expect("done"))
        self.children["producer"].expect("sent")
        return dict(done)

    def stop(self) -> None:
        for child in self.children.values():
            child.stop()
        if self.broker is not None and self.broker.poll() is None:
            self.broker.send_signal(signal.SIGTERM)
            try:
                self.broker.wait(30)
            except subprocess.TimeoutExpired:
                self.broker.kill()
                self.broker.wait()
        shutil.rmtree(getattr(self, "rings", self.scratch / "none"), ignore_errors=True)


@contextlib.contextmanager
def running(args: argparse.Namespace, extra_env: dict[str, str] | None = None) -> Iterator[Run]:
    with tempfile.TemporaryDirectory(prefix="zlog-hot-path-") as scratch:
        env = dict(os.environ) | (extra_env or {})
        run = Run(Path(scratch), env)
        try:
            run.start(args)
            run.warm_up()
            yield run
        finally:
            run.stop()


# --------------------------------------------------------------------------- the passes


def thread_counters(pid: int) -> dict[str, dict[str, int]]:
    """Per thread (name and tid): voluntary and involuntary switches, CPU ns."""
    out: dict[str, dict[str, int]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            name = (task / "comm").read_text().strip()
            status = (task / "status").read_text()
            run_ns = int((task / "schedstat").read_text().split()[0])
            label = "main thread" if task.name == str(pid) else f"{name} ({task.name})"
            out[label] = {
                "voluntary": int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status,
                                           re.M).group(1)),  # type: ignore[union-attr]
                "involuntary": int(re.search(r"^nonvoluntary_ctxt_switches:\s+(\d+)", status,
                                             re.M).group(1)),  # type: ignore[union-attr]
                "cpu_ns": run_ns}
    return out


def per_record(value: float, records: int) -> float:
    return round(value / records, 3)


def pass_plain(args: argparse.Namespace) -> dict[str, Any]:
    """Wake-ups and CPU per record per thread, from /proc, nothing attached."""
    with running(args) as run:
        pids = run.processes()
        before = {role: thread_counters(pid) for role, pid in pids.items()}
        started = time.monotonic()
        consumer = run.measure()
        wall_s = time.monotonic() - started
        after = {role: thread_counters(pid) for role, pid in pids.items()}
    out: dict[str, Any] = {"consumer": consumer, "window_s": round(wall_s, 3), "processes": {}}
    for role in pids:
        threads = {}
        for thread, end in after[role].items():
            start = before[role].get(thread, {"voluntary": 0, "involuntary": 0, "cpu_ns": 0})
            delta = {key: end[key] - start[key] for key in end}
            if any(delta.values()):
                threads[thread] = {"wakeups": per_record(delta["voluntary"], args.records),
                                   "involuntary": per_record(delta["involuntary"], args.records),
                                   "cpu_us": per_record(delta["cpu_ns"] / 1000, args.records)}
        out["processes"][role] = {
            "wakeups": round(sum(t["wakeups"] for t in threads.values()), 3),
            "threads_woken": sum(1 for t in threads.values() if t["wakeups"] >= 0.5),
            "cpu_us": round(sum(t["cpu_us"] for t in threads.values()), 1),
            "threads": threads}
    return out


def instrumented(args: argparse.Namespace) -> argparse.Namespace:
    """`args` at a rate an instrumented (slowed) process still sends one record per batch at."""
    slower = argparse.Namespace(**vars(args))
    slower.rate = min(args.rate, INSTRUMENTED_RATE_MAX)
    return slower


def pass_calls(args: argparse.Namespace) -> dict[str, Any]:
    """Python calls per record per thread, counted by the sitecustomize hook."""
    with tempfile.TemporaryDirectory(prefix="zlog-hot-path-calls-") as results:
        env = {"ZLOG_HOT_PATH_DIR": results,
               "PYTHONPATH": os.pathsep.join(filter(None, (str(HOOK_DIR),
                                                           os.environ.get("PYTHONPATH"))))}
        with running(instrumented(args), env) as run:
            pids = run.processes()
            for pid in pids.values():
                os.kill(pid, signal.SIGUSR2)
            consumer = run.measure()
            for pid in pids.values():
                os.kill(pid, signal.SIGUSR2)
            files = {role: Path(results) / f"{pid}.json" for role, pid in pids.items()}
            deadline = time.monotonic() + 30
            while not all(path.exists() for path in files.values()):
                if time.monotonic() > deadline:
                    missing = [role for role, path in files.items() if not path.exists()]
                    raise RuntimeError(f"no call counts from {missing}")
                time.sleep(0.05)
            counted = {role: json.loads(path.read_text()) for role, path in files.items()}
    out: dict[str, Any] = {"rate": instrumented(args).rate, "consumer": consumer,
                           "processes": {}}
    for role, data in counted.items():
        threads = {name: {"python": per_record(c["call"], args.records),
                          "c": per_record(c["c_call"], args.records)}
                   for name, c in data["threads"].items()}
        out["processes"][role] = {
            "python_calls": round(sum(t["python"] for t in threads.values()), 1),
            "c_calls": round(sum(t["c"] for t in threads.values()), 1),
            "gil_handoffs": per_record(data["thread_changes"], args.records),
            "threads": threads}
    return out


STRACE_LINE: Final = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:(\d+)\s+)?(\w+)\s*$")


def parse_strace_summary(text: str) -> dict[str, int]:
    """`strace -c`'s table -> syscall name -> calls."""
    calls: dict[str, int] = {}
    for line in text.splitlines():
        match = STRACE_LINE.match(line)
        if match and match.group(3) != "total":
            calls[match.group(3)] = int(match.group(1))
    return calls


def pass_syscalls(args: argparse.Namespace) -> dict[str, Any]:
    """System calls per record per process, `strace -c -f` attached for the window."""
    strace = shutil.which("strace")
    if strace is None:
        return {"skipped": "strace is not installed (apt-get install strace)"}
    traced_args = instrumented(args)
    with (running(traced_args) as run,
          tempfile.TemporaryDirectory(prefix="zlog-hot-path-st-") as out_dir):
        pids = run.processes()
        tracers = {}
        for role, pid in pids.items():
            tracer = subprocess.Popen(
                [strace, "-c", "-f", "-p", str(pid), "-o", f"{out_dir}/{pid}"],
                stderr=subprocess.PIPE, text=True)
            assert tracer.stderr is not None
            tracer.stderr.readline()  # "Process N attached with M threads": all are traced
            tracers[role] = tracer
        consumer = run.measure()
        summaries = {}
        for role, tracer in tracers.items():
            tracer.send_signal(signal.SIGINT)
            tracer.wait(30)
            summaries[role] = parse_strace_summary(Path(f"{out_dir}/{pids[role]}").read_text())
    out: dict[str, Any] = {"rate": traced_args.rate, "consumer": consumer, "processes": {}}
    for role, calls in summaries.items():
        top = sorted(calls.items(), key=lambda item: -item[1])
        out["processes"][role] = {
            "syscalls": per_record(sum(calls.values()), args.records),
            "poll_returns": per_record(sum(calls.get(name, 0) for name in POLL_SYSCALLS),
                                       args.records),
            "futex": per_record(calls.get("futex", 0), args.records),
            "by_call": {name: per_record(count, args.records) for name, count in top[:12]}}
    return out


def pass_flame(args: argparse.Namespace) -> dict[str, Any]:
    """py-spy flame graphs of the producer, the worker and the consumer at `--flame-rate`."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(py_spy).exists():
        return {"skipped": "py-spy is not installed (pip install py-spy)"}
    args.flame_dir.mkdir(parents=True, exist_ok=True)
    flame_args = argparse.Namespace(**vars(args))
    flame_args.rate = args.flame_rate
    flame_args.warmup = args.flame_rate // 2
    flame_args.records = round(args.flame_rate * args.flame_s)
    out: dict[str, Any] = {"rate": args.flame_rate, "seconds": args.flame_s, "svg": {}}
    with running(flame_args) as run:
        pids = run.processes()
        samplers = {}
        for role in ("producer", "broker worker", "consumer"):
            path = args.flame_dir / f"hot-path-{role.split()[-1]}.svg"
            samplers[role] = (path, subprocess.Popen(
                [py_spy, "record", "--pid", str(pids[role]), "--rate", "250", "--nonblocking",
                 "--duration", str(max(1, int(args.flame_s))), "--format", "flamegraph",
                 "--output", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                text=True))
        out["consumer"] = run.measure()
        for role, (path, sampler) in samplers.items():
            _, error = sampler.communicate(timeout=STEP_TIMEOUT_S)
            if sampler.returncode == 0 and path.exists():
                scrub_paths(path)
                out["svg"][role] = str(path)
            else:
                out["svg"][role] = f"failed: {error.strip()[-500:]}"
    return out


def scrub_paths(svg: Path) -> None:
    """Make a flame graph name files as the repository does: py-spy's title line holds its
    command with the machine's paths (the tool's, the checkout's)."""
    text = svg.read_text()
    for prefix in sorted({str(REPO_ROOT), str(Path(sys.executable).parent),
                          str(Path(sys.prefix))}, key=len, reverse=True):
        text = text.replace(prefix + "/", "")
    svg.write_text(text)


# -------------------------------------------------------------------------------- report


def table(results: dict[str, Any]) -> str:
    """One row per process: the counts per record of every pass that ran."""
    plain = results.get("plain", {}).get("processes", {})
    calls = results.get("calls", {}).get("processes", {})
    syscalls = results.get("syscalls", {}).get("processes", {})
    roles = list(dict.fromkeys([*plain, *calls, *syscalls]))
    lines = ["| per record | Python calls | C calls | GIL hand-offs | wake-ups | threads woken "
             "| syscalls | poll returns | futex | CPU us (busy host) |",
             "|---|---|---|---|---|---|---|---|---|---|"]

    def cell(source: dict[str, Any], role: str, key: str) -> str:
        value = source.get(role, {}).get(key)
        return "-" if value is None else f"{value:g}"

    for role in roles:
        lines.append(
            f"| {role} | {cell(calls, role, 'python_calls')} | {cell(calls, role, 'c_calls')} "
            f"| {cell(calls, role, 'gil_handoffs')} | {cell(plain, role, 'wakeups')} "
            f"| {cell(plain, role, 'threads_woken')} | {cell(syscalls, role, 'syscalls')} "
            f"| {cell(syscalls, role, 'poll_returns')} | {cell(syscalls, role, 'futex')} "
            f"| {cell(plain, role, 'cpu_us')} |")
    return "\n".join(lines)


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, default=None, help="write the counts here")
    parser.add_argument("--rate", type=int, default=100, help="records/s of the counted window")
    parser.add_argument("--records", type=int, default=1000, help="records counted")
    parser.add_argument("--warmup", type=int, default=200, help="records before the window")
    parser.add_argument("--passes", default=",".join(PASSES),
                        help=f"comma-separated subset of {','.join(PASSES)}")
    parser.add_argument("--flame-dir", type=Path, default=REPO_ROOT / "bench/results/hot_path",
                        help="write hot-path-{producer,worker,consumer}.svg here (docs: docs/img)")
    parser.add_argument("--flame-rate", type=int, default=5000, help="records/s while sampled")
    parser.add_argument("--flame-s", type=float, default=5.0, help="seconds sampled")
    parser.add_argument("--role", choices=("producer", "consumer"), help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.passes = [name.strip() for name in args.passes.split(",")]
    unknown = set(args.passes) - set(PASSES)
    if unknown:
        parser.error(f"unknown passes: {', '.join(sorted(unknown))}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    if args.role == "producer":
        role_producer(args)
        return 0
    if args.role == "consumer":
        role_consumer(args)
        return 0
    runners = {"plain": pass_plain, "calls": pass_calls, "syscalls": pass_syscalls,
               "flame": pass_flame}
    load_before = os.getloadavg()
    results: dict[str, Any] = {"settings": {"rate": args.rate, "records": args.records,
                                            "warmup": args.warmup, "value_bytes": VALUE_BYTES,
                                            "acks": 1, "linger_ms": 0},
                               "cpus": os.cpu_count()}
    for name in args.passes:
        print(f"pass {name} ...", file=sys.stderr, flush=True)
        try:
            results[name] = runners[name](args)
        except Exception as error:
            results[name] = {"error": f"{type(error).__name__}: {error}"}
            print(f"pass {name}: FAILED: {error}", file=sys.stderr, flush=True)
    results["loadavg_before_after"] = [load_before, os.getloadavg()]
    results["table"] = table(results)
    print(results["table"])
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
