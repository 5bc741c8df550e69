"""`zlog top`: a live view of a cluster from its brokers' metrics endpoints.

    zlog top [--metrics http://HOST:9644 ...] [--interval-s S] [--once]

What an operator opens during an incident: per broker whether it serves, leads the metadata
log, and how its workers and disk fare; the cluster's offline, under-replicated and
under-min-ISR partitions; per topic the records and bytes in and out per second; per API the
request rate, error ratio and 99th percentile; per consumer group its members and lag. Rates
are the difference of two scrapes over the time between them, so the first frame shows none.
It reads only `/metrics` (docs/operations-metrics.md), as Prometheus would: nothing here talks
to the brokers' own ports. `--once` prints one frame (after two scrapes) and exits.
"""

from __future__ import annotations

import argparse
import math
import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from zlog.errors import ErrorCode, ZlogError

if TYPE_CHECKING:
    from rich.console import Group

DEFAULT_METRICS_URL: Final = "http://127.0.0.1:9644"
SCRAPE_TIMEOUT_S: Final = 5.0

Labels = dict[str, str]


@dataclass(frozen=True, slots=True)
class Scrape:
    """One scrape of one endpoint: every sample, by name."""

    url: str
    at_s: float
    samples: dict[str, list[tuple[Labels, float]]] = field(default_factory=dict)

    def series(self, name: str) -> list[tuple[Labels, float]]:
        return self.samples.get(name, [])

    def value(self, name: str, **labels: str) -> float:
        """The sum of the samples of `name` whose labels include `labels`; LookupError when
        there is none (a name or label the broker does not export)."""
        found = [value for have, value in self.series(name)
                 if all(have.get(key) == wanted for key, wanted in labels.items())]
        if not found:
            raise LookupError(f"{self.url} exports no {name} with {labels}")
        return sum(found)


def parse(url: str, text: str, at_s: float) -> Scrape:
    # Loaded here, not with the `zlog` command: the other commands need none of it.
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    samples: dict[str, list[tuple[Labels, float]]] = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name].append((dict(sample.labels), float(sample.value)))
    return Scrape(url, at_s, dict(samples))


def scrape(url: str) -> Scrape:
    """GET `url`/metrics (or `url` itself when it names a path), parsed."""
    target = url if url.rstrip("/").endswith("/metrics") else url.rstrip("/") + "/metrics"
    try:
        with urllib.request.urlopen(target, timeout=SCRAPE_TIMEOUT_S) as answer:
            text = answer.read().decode()
    except (urllib.error.URLError, OSError) as error:
        raise ZlogError(ErrorCode.NETWORK_EXCEPTION, f"cannot scrape {target}: {error}") from None
    return parse(url, text, time.monotonic())


# -- the view -------------------------------------------------------------------------------------


def _total(scrapes: Iterable[Scrape], name: str) -> float:
    return sum(value for one in scrapes for _, value in one.series(name))


def _by(scrapes: Iterable[Scrape], name: str, *keys: str) -> dict[tuple[str, ...], float]:
    sums: dict[tuple[str, ...], float] = defaultdict(float)
    for one in scrapes:
        for labels, value in one.series(name):
            sums[tuple(labels.get(key, "") for key in keys)] += value
    return sums


def _rates(before: Sequence[Scrape], after: Sequence[Scrape], name: str,
           *keys: str) -> dict[tuple[str, ...], float]:
    """Per second between the two rounds of scrapes (a counter that went back: from zero)."""
    if not before:
        return {}
    elapsed_s = max(1e-3, after[0].at_s - before[0].at_s)
    old = _by(before, name, *keys)
    return {key: (value - old.get(key, 0.0) if value >= old.get(key, 0.0) else value) / elapsed_s
            for key, value in _by(after, name, *keys).items()}


def _p99_ms(before: Sequence[Scrape], after: Sequence[Scrape], api: str) -> float | None:
    """The 99th percentile of the requests between two rounds, from the histograms' buckets."""
    def buckets(scrapes: Sequence[Scrape]) -> dict[float, float]:
        found: dict[float, float] = defaultdict(float)
        for one in scrapes:
            for labels, value in one.series("zlog_request_duration_seconds_bucket"):
                if labels.get("api") == api:
                    found[float(labels["le"])] += value
        return found

    new, old = buckets(after), buckets(before)
    counts = sorted((bound, new[bound] - old.get(bound, 0.0)) for bound in new)
    if not counts or counts[-1][1] <= 0:
        return None
    wanted = 0.99 * counts[-1][1]
    for bound, count in counts:
        if count >= wanted:
            return math.inf if math.isinf(bound) else bound * 1000
    return None


def _human(value: float) -> str:
    for unit in ("", "k", "M", "G", "T"):
        if abs(value) < 1000:
            return f"{value:.1f}{unit}"
        value /= 1000
    return f"{value:.1f}P"


def render(before: Sequence[Scrape], after: Sequence[Scrape],
           unreachable: Sequence[str]) -> Group:
    """One frame: brokers, cluster health, topics, requests, groups."""
    from rich.console import Group  # noqa: PLC0415 (see parse)
    from rich.table import Table  # noqa: PLC0415
    brokers = Table(title="brokers", expand=True)
    for column in ("endpoint", "ready", "controller", "raft term", "workers up",
                   "worker restarts", "connections", "disk free"):
        brokers.add_column(column)
    for one in after:
        total = _total([one], "zlog_disk_total_bytes")
        free = _total([one], "zlog_disk_free_bytes")
        brokers.add_row(
            one.url, "yes" if _total([one], "zlog_broker_ready") else "[red]no[/]",
            "yes" if _total([one], "zlog_controller_active") else "",
            f"{_total([one], 'zlog_raft_term'):.0f}",
            f"{_total([one], 'zlog_worker_up'):.0f}",
            f"{_total([one], 'zlog_worker_restarts_total'):.0f}",
            f"{_total([one], 'zlog_open_connections'):.0f}",
            f"{100 * free / total:.0f} %" if total else "?")
    for url in unreachable:
        brokers.add_row(url, "[red]unreachable[/]", "", "", "", "", "", "")

    controllers = _total(after, "zlog_controller_active")
    health = Table(title="cluster", expand=True)
    for column in ("active controllers", "offline", "under-replicated", "under min ISR"):
        health.add_column(column)

    def flag(value: float, good: Callable[[float], bool]) -> str:
        return f"{value:.0f}" if good(value) else f"[red]{value:.0f}[/]"

    health.add_row(flag(controllers, lambda v: v == 1),
                   flag(_total(after, "zlog_offline_partitions"), lambda v: v == 0),
                   flag(_total(after, "zlog_under_replicated_partitions"), lambda v: v == 0),
                   flag(_total(after, "zlog_under_min_isr_partitions"), lambda v: v == 0))

    topics = Table(title="topics (per second)", expand=True)
    for column in ("topic", "records in", "bytes in", "bytes out", "high watermark"):
        topics.add_column(column)
    records_in = _rates(before, after, "zlog_partition_records_in_total", "topic")
    bytes_in = _rates(before, after, "zlog_partition_bytes_in_total", "topic")
    bytes_out = _rates(before, after, "zlog_partition_bytes_out_total", "topic")
    high = _leader_watermarks(after)
    for (topic,) in sorted(_by(after, "zlog_partition_log_end_offset", "topic")):
        if topic.startswith("__"):
            continue
        topics.add_row(topic, _human(records_in.get((topic,), 0.0)),
                       _human(bytes_in.get((topic,), 0.0)), _human(bytes_out.get((topic,), 0.0)),
                       f"{sum(v for (t, _), v in high.items() if t == topic):.0f}")

    requests = Table(title="requests", expand=True)
    for column in ("api", "per second", "errors", "p99"):
        requests.add_column(column)
    rates = _rates(before, after, "zlog_requests_total", "api")
    errors = _rates(before, after, "zlog_request_errors_total", "api")
    for (api,) in sorted(_by(after, "zlog_requests_total", "api")):
        rate = rates.get((api,), 0.0)
        p99 = _p99_ms(before, after, api)
        ratio = errors.get((api,), 0.0) / rate if rate else 0.0
        requests.add_row(api, _human(rate), f"{100 * ratio:.1f} %",
                         "-" if p99 is None else f"<= {p99:g} ms")

    groups = Table(title="consumer groups", expand=True)
    for column in ("group", "members", "lag"):
        groups.add_column(column)
    members = _by(after, "zlog_group_members", "group")
    lag: dict[str, float] = defaultdict(float)
    for (group, topic, partition), offset in _by(after, "zlog_group_committed_offset", "group",
                                                 "topic", "partition").items():
        end = high.get((topic, partition))
        if end is not None:
            lag[group] += max(0.0, end - offset)
    for group in sorted(set(lag) | {key[0] for key in members}):
        groups.add_row(group, f"{members.get((group,), 0):.0f}",
                       f"{lag[group]:.0f}" if group in lag else "-")
    return Group(brokers, health, topics, requests, groups)


def _leader_watermarks(scrapes: Sequence[Scrape]) -> dict[tuple[str, str], float]:
    """Each partition's high watermark: the highest any replica reports (its leader's)."""
    high: dict[tuple[str, str], float] = {}
    for one in scrapes:
        for labels, value in one.series("zlog_partition_high_watermark"):
            key = (labels["topic"], labels["partition"])
            high[key] = max(value, high.get(key, value))
    return high


def _round(urls: Sequence[str]) -> tuple[list[Scrape], list[str]]:
    scrapes: list[Scrape] = []
    unreachable: list[str] = []
    for url in urls:
        try:
            scrapes.append(scrape(url))
        except ZlogError:
            unreachable.append(url)
    return scrapes, unreachable


def top(args: argparse.Namespace) -> int:
    from rich.console import Console  # noqa: PLC0415 (see parse)
    from rich.live import Live  # noqa: PLC0415

    urls: list[str] = args.metrics or [DEFAULT_METRICS_URL]
    console = Console()
    before, unreachable = _round(urls)
    if args.once:
        time.sleep(args.interval_s)
        after, unreachable = _round(urls)
        if not after:
            raise ZlogError(ErrorCode.NETWORK_EXCEPTION,
                            f"no metrics endpoint answered: {', '.join(unreachable)}")
        console.print(render(before, after, unreachable))
        return 0
    with Live(render([], before, unreachable), console=console, screen=True,
              auto_refresh=False) as live:
        while True:
            time.sleep(args.interval_s)
            after, unreachable = _round(urls)
            live.update(render(before, after, unreachable), refresh=True)
            before = after


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("top", help="a live view of the cluster from its metrics "
                                 "endpoints", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metrics", action="append", default=[], metavar="URL",
                        help=f"a broker's metrics endpoint, repeated for each broker "
                             f"(default {DEFAULT_METRICS_URL})")
    parser.add_argument("--interval-s", type=float, default=2.0, metavar="S",
                        help="between two scrapes (default 2)")
    parser.add_argument("--once", action="store_true", help="print one frame and exit")
    parser.set_defaults(handler=top, command_parser=parser)
