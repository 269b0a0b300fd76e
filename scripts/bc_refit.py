"""Behaviour cloning with `bc.refit` against without, per run seed of the demo pipelines.

    python scripts/bc_refit.py                                  # the three cube pipelines, seeds 0-9
    python scripts/bc_refit.py --experiments push_cube_bc --seeds 0 1 2
    python scripts/bc_refit.py bc.eval_every=10 --experiments push_cube_bc   # overrides for every run, first

Each seed draws its demos, split and initial weights as `scripts/train.py experiment=<name>
seed=<seed>` does; the clone is fitted on the split (early stopping on the held-out episodes),
then again with the refit on every episode for the steps the split chose; each is evaluated
deterministically on the held-out seeds. Prints a JSON line per seed, then a Markdown table.
"""

from __future__ import annotations

import argparse
import json

from grpo_robot.bench.bc_demos import refit_config, refit_pairs, refit_summary
from grpo_robot.machine import one_line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiments", nargs="+", default=["push_cube_bc", "place_cube_bc", "lift_cube_bc"])
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(10)))
    parser.add_argument("--eval-seeds", type=int, default=200, help="held-out evaluation seeds")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides for every run")
    args = parser.parse_args()
    if args.eval_seeds < 1:
        parser.error(f"--eval-seeds={args.eval_seeds} is invalid: must be >= 1")
    for name in args.experiments:  # every experiment and seed checked before any clone
        for seed in args.seeds:
            try:
                refit_config(name, seed, args.overrides)
            except ValueError as err:
                parser.error(f"--experiments {name} --seeds {seed}: {err}")
    records = []
    for name in args.experiments:
        for record in refit_pairs(name, args.seeds, args.eval_seeds, args.overrides):
            print(json.dumps(record), flush=True)
            records.append(record)
    print(f"\n{one_line()}" + (f"; overrides: {' '.join(args.overrides)}" if args.overrides else "") + "\n")
    print("\n".join(refit_summary(records)))


if __name__ == "__main__":
    main()
