"""Behaviour-cloning success against the number of demonstrations, per task and policy type.

python scripts/bc_demo_sweep.py [--tasks PushCube LiftCube PlaceCube] [--demos 5 10 20 50 100]
                                [--policies gaussian tokenized] [--seeds 200] [--token-sigma 8]

Each cell: demos from `collect_demos` (demo seed stream 0, no noise), a 128x128 policy cloned
with the default BCConfig, deterministic success on the first held-out evaluation seeds.
"""

from __future__ import annotations

import argparse

import grpo_robot  # noqa: F401  (before torch: sets the OpenMP wait policy)

# isort: split
import torch

from grpo_robot.batched import BatchedEnv
from grpo_robot.bc import behaviour_clone
from grpo_robot.config import BCConfig
from grpo_robot.demos import collect_demos
from grpo_robot.envs import TASKS
from grpo_robot.evaluation import evaluate
from grpo_robot.machine import one_line
from grpo_robot.policies import POLICIES, build_policy
from grpo_robot.rollout import eval_seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=["PushCube", "LiftCube", "PlaceCube"], choices=list(TASKS))
    parser.add_argument("--demos", nargs="+", type=int, default=[5, 10, 20, 50, 100])
    parser.add_argument("--policies", nargs="+", default=["gaussian", "tokenized"], choices=list(POLICIES))
    parser.add_argument("--seeds", type=int, default=200, help="held-out evaluation seeds")
    parser.add_argument("--token-sigma", type=float, default=BCConfig.token_sigma, help="bc.token_sigma (tokenized)")
    args = parser.parse_args()
    print(f"# {one_line()}; bc.token_sigma={args.token_sigma}")
    print("| task | policy | " + " | ".join(f"{n} demos" for n in args.demos) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in args.demos) + " |")
    for task in args.tasks:
        env = BatchedEnv(task, args.seeds)
        for kind in args.policies:
            cells = []
            for n in args.demos:
                data, _ = collect_demos(task, n)
                torch.manual_seed(0)
                policy = build_policy(kind, data.obs_dim, data.action_dim, hidden_sizes=[128, 128])
                behaviour_clone(policy, data, BCConfig(token_sigma=args.token_sigma))
                result = evaluate(env, policy, eval_seeds(args.seeds), torch.device("cpu"))
                low, high = result.interval
                cells.append(f"{result.rate:.0%} [{low:.0%}, {high:.0%}]")
            print(f"| {task} | {kind} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
