"""Unit tests of the benchmark suite's pure helpers."""
