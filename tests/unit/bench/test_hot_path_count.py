"""The hot-path counter's strace summary parser: every row's calls, with or without errors."""

from __future__ import annotations

from bench.hot_path_count import parse_strace_summary

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
