"""`python bench/broker_bench.py --security`: what CURVE and the ACLs cost, off vs on.

Each run starts two fresh brokers in turn, the first with security off and the second on
(CURVE on every socket, ACLs checked, the clients speaking as a principal that is not a
super-user, so every request takes the ACL path), and runs the same phases against each:
`Producer.send_many` throughput (the tuned profile) and end-to-end latency at `--rate`
(default 5,000 records/s) with a network consumer. The report gives both and the cost:
send_many's throughput lost to security (the goal: at most 25 %) and the latency change.
The phases' children find the principal's key in $ZLOG_KEY_FILE and $ZLOG_SERVER_KEY_FILE,
as any zlog client does (cli_security.install_client_keys).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from bench.broker_bench import (
    Broker,
    create_topic,
    run_latency_figures,
    run_phase,
)
from zlog import cli_security
from zlog.client import Admin
from zlog.transport import curve
from zlog.transport.curve_keys import PRINCIPALS_DIR, client_security, generate_key_pair
from zlog.transport.messages.security import AclEntry, AlterSecurityRequestV0

BENCH_PRINCIPAL: Final = "bench"  # no super-user: the ACL check runs on every request
ADMIN: Final = "admin"
CALL_TIMEOUT_MS: Final = 10_000


@contextlib.contextmanager
def _environment(changes: dict[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _keys(directory: Path) -> Path:
    generate_key_pair(directory, "server")
    for name in ("broker", ADMIN, BENCH_PRINCIPAL):
        generate_key_pair(directory / PRINCIPALS_DIR, name)
    return directory


def _secret(keys: Path, principal: str) -> Path:
    return keys / PRINCIPALS_DIR / f"{principal}.key_secret"


def _one_mode(args: argparse.Namespace, keys: Path | None, run: int) -> dict[str, Any]:
    extra: tuple[str, ...] = ()
    client_env: dict[str, str] = {}
    if keys is not None:
        extra = ("--security", "true", "--security-keys-dir", str(keys),
                 "--super-users", ADMIN)
        client_env = {cli_security.KEY_FILE_ENV: str(_secret(keys, BENCH_PRINCIPAL)),
                      cli_security.SERVER_KEY_FILE_ENV: str(keys / "server.key")}
        curve.install(client_security(_secret(keys, ADMIN), keys / "server.key"))
    mode = "on" if keys is not None else "off"
    many, latency = f"many-{mode}-{run}", f"latency-{mode}-{run}"
    broker = Broker(args.workers, extra_args=extra)
    try:
        broker.wait_ready()
        for topic in (many, latency):
            create_topic(broker.endpoint, topic)
        if keys is not None:
            with Admin(broker.endpoint, request_timeout_ms=CALL_TIMEOUT_MS) as admin:
                admin.alter_security(AlterSecurityRequestV0(acls_add=tuple(
                    AclEntry(BENCH_PRINCIPAL, "topic", "*", operation)
                    for operation in ("read", "write"))))
        curve.install(None)
        with _environment(client_env), tempfile.TemporaryDirectory() as scratch:
            # The principal's children and this process's readiness probes alike.
            cli_security.install_client_keys(argparse.Namespace())
            produced = run_phase(args, "produce-many", many, broker.endpoint)
            figures: dict[str, Any] = {
                "send_many_records_per_s": produced["measured_records"] / produced["elapsed_s"]}
            figures.update(run_latency_figures(args, latency, broker, Path(scratch)))
    finally:
        curve.install(None)
        broker.stop()
    return figures


def run_security_ab(args: argparse.Namespace) -> dict[str, Any]:
    """Off then on, `args.repeat` times; the medians, each run, and the costs."""
    args.profile = "tuned"
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="zb-keys-") as directory:
        keys = _keys(Path(directory))
        for run in range(args.repeat):
            off, on = _one_mode(args, None, run), _one_mode(args, keys, run)
            runs.append({"off": off, "on": on})
            print(f"run {run}: send_many off {off['send_many_records_per_s']:,.0f} on "
                  f"{on['send_many_records_per_s']:,.0f} records/s; latency p50 "
                  f"{off['latency_p50_us']:,.0f} -> {on['latency_p50_us']:,.0f} us",
                  flush=True)
    summary: dict[str, Any] = {"runs": runs}
    for mode in ("off", "on"):
        for key in ("send_many_records_per_s", "latency_p50_us", "latency_p99_us",
                    "latency_p999_us", "latency_cpu_us_per_record_broker"):
            values = [run[mode][key] for run in runs if run[mode].get(key) is not None]
            if values:
                summary[f"{mode}_{key}"] = statistics.median(values)
    summary["send_many_cost_percent"] = 100 * (
        1 - summary["on_send_many_records_per_s"] / summary["off_send_many_records_per_s"])
    for key in ("latency_p50_us", "latency_p99_us"):
        summary[f"{key}_change"] = summary[f"on_{key}"] - summary[f"off_{key}"]
    summary["settings"] = {"rate": args.rate, "duration_s": args.duration_s,
                           "batch_size": args.batch_size, "workers": args.workers,
                           "repeat": args.repeat}
    return summary


def report_security(summary: dict[str, Any]) -> None:
    print(f"send_many records/s   off {summary['off_send_many_records_per_s']:>12,.0f}   "
          f"on {summary['on_send_many_records_per_s']:>12,.0f}   "
          f"cost {summary['send_many_cost_percent']:.1f} % (goal <= 25 %)")
    for key in ("latency_p50_us", "latency_p99_us", "latency_p999_us"):
        if f"off_{key}" in summary and f"on_{key}" in summary:
            print(f"{key:21} off {summary[f'off_{key}']:>12,.0f}   "
                  f"on {summary[f'on_{key}']:>12,.0f}")
