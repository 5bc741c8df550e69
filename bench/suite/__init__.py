"""The side-by-side benchmark suite behind `python -m bench` (see bench/README.md)."""
