"""`python -m bench [--peers] [--json PATH]`: the side-by-side suite (bench/suite/runner.py)."""

from __future__ import annotations

import sys

from bench.suite.runner import main

if __name__ == "__main__":
    sys.exit(main())
