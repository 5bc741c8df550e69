"""Replay or explore seeds from the command line.

    python -m tests.sim.replication --seed 42              # one seed, zlog's own rules
    python -m tests.sim.replication --seed 42 --bug B3     # the same with a planted bug
    python -m tests.sim.replication --seed 0 --count 500   # a range; prints failing seeds
    python -m tests.sim.replication --seed 371 --spec-loss-bound  # the stricter loss bound
    python -m tests.sim.replication --scenario kip279 --bug B3   # a scripted scenario

A failure prints the same report the tests print: the check, the replay command, the profile
and the tail of the event trace.
"""

from __future__ import annotations

import argparse
import sys

from tests.sim.replication.bugs import BUGS
from tests.sim.replication.scenarios import SCENARIOS, run_scenario, scenario_sim
from tests.sim.replication.sim import ReplicationSim, SimFailure
from tests.sim.replication.wiring import REAL


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim.replication")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=1, help="seeds from --seed on")
    parser.add_argument("--bug", choices=sorted(BUGS), help="run with a planted bug")
    parser.add_argument("--spec-loss-bound", action="store_true",
                        help="allow acknowledged loss only at the stricter bound "
                             "(docs/simulation.md, Invariants)")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS),
                        help="run a scripted scenario (scenarios.py) instead of seeded chaos")
    args = parser.parse_args(argv)
    wiring = BUGS[args.bug] if args.bug else REAL
    failing: list[tuple[int, str]] = []
    for seed in range(args.seed, args.seed + args.count):
        if args.scenario:
            sim = scenario_sim(args.scenario, wiring, seed, spec_loss_bound=args.spec_loss_bound)
        else:
            sim = ReplicationSim(seed, wiring, spec_loss_bound=args.spec_loss_bound)
        try:
            if args.scenario:
                run_scenario(sim)
            else:
                sim.run()
        except SimFailure as failure:
            failing.append((seed, failure.check))
            if args.count == 1:
                print(failure)
        else:
            if args.count == 1:
                print(sim.summary())
    if args.count > 1:
        print(f"{len(failing)} of {args.count} seeds failed: {failing}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
