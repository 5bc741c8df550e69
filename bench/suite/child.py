"""One producer or consumer process: `python -m bench.suite.child SYSTEM ROLE SPEC_JSON`.

Prints its result as one JSON line on stdout; the parent reads the last line.
"""

from __future__ import annotations

import json
import sys

from bench.suite.adapters import adapter_module
from bench.suite.common import precise_sleeps


def main(argv: list[str]) -> int:
    system, role, spec = argv[0], argv[1], json.loads(argv[2])
    precise_sleeps()
    function = getattr(adapter_module(system), role)
    print(json.dumps(function(spec)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
