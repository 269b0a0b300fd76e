"""Behaviour-cloning success against the number of demonstrations, per task and policy type.

python scripts/bc_demo_sweep.py [--tasks PushCube LiftCube PlaceCube] [--demos 5 10 20 50 100]
                                [--policies gaussian tokenized] [--seeds 200] [--token-sigma 8]

Each cell: demos from `collect_demos` (demo seed stream 0, no noise), a 128x128 policy cloned
with the default BCConfig, deterministic success on the first held-out evaluation seeds.
"""

from __future__ import annotations

import argparse

from grpo_robot.bench.bc_demos import sweep
from grpo_robot.config import BCConfig
from grpo_robot.envs import TASKS
from grpo_robot.policies import POLICIES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=["PushCube", "LiftCube", "PlaceCube"], choices=list(TASKS))
    parser.add_argument("--demos", nargs="+", type=int, default=[5, 10, 20, 50, 100])
    parser.add_argument("--policies", nargs="+", default=["gaussian", "tokenized"], choices=list(POLICIES))
    parser.add_argument("--seeds", type=int, default=200, help="held-out evaluation seeds")
    parser.add_argument("--token-sigma", type=float, default=BCConfig.token_sigma, help="bc.token_sigma (tokenized)")
    args = parser.parse_args()
    for line in sweep(args.tasks, args.policies, args.demos, args.seeds, args.token_sigma):
        print(line, flush=True)


if __name__ == "__main__":
    main()
