"""The measuring tools' pure helpers: the strace summary parser, the flame graphs' path scrub,
py-spy's stacks counted per function, and the bulk-call fit."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.call_size_bench import ALL_SAMPLES, fit, inclusive_counts
from bench.hot_path_count import REPO_ROOT, parse_strace_summary, scrub_paths

SUMMARY = """% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 56.57    0.000361           4        84           clock_nanosleep
 30.00    0.000200           2       100        12 futex
 13.43    0.000056           0        84           getpid
------ ----------- ----------- --------- --------- ----------------
100.00    0.000617           2       268        12 total
"""


def test_parse_strace_summary_reads_calls_per_syscall_and_skips_the_total() -> None:
    assert parse_strace_summary(SUMMARY) == {"clock_nanosleep": 84, "futex": 100, "getpid": 84}


def test_parse_strace_summary_of_nothing_traced_is_empty() -> None:
    assert parse_strace_summary("") == {}


def test_scrub_paths_leaves_paths_as_the_repository_names_them(tmp_path: Path) -> None:
    svg = tmp_path / "flame.svg"
    svg.write_text(f"<text>{sys.executable} record --output {REPO_ROOT}/flame.svg</text>"
                   f"<title>run ({REPO_ROOT}/zlog/client/sender.py:1)</title>")
    scrub_paths(svg)
    assert svg.read_text() == ("<text>python record --output flame.svg</text>"
                               "<title>run (zlog/client/sender.py:1)</title>").replace(
        "python", Path(sys.executable).name)


def test_inclusive_counts_count_a_function_once_per_stack() -> None:
    collapsed = ("main (a.py:1);loop (a.py:2);loop (a.py:2);send (b.py:3) 5\n"
                 "main (a.py:1);recv (b.py:9) 3\n")
    assert inclusive_counts(collapsed) == {ALL_SAMPLES: 8, "main": 8, "loop": 5, "send": 5,
                                           "recv": 3}


def test_fit_splits_a_call_into_fixed_and_per_row_time() -> None:
    assert fit({1_000: 300.0, 10_000: 1_200.0}) == {"fixed_us_per_call": 200.0,
                                                    "ns_per_row": 100.0}
