"""Success rate of each task's scripted expert through the batched backend.

python scripts/check_experts.py [--seeds 1000] [--tasks Reach PushCube ...]
"""

from __future__ import annotations

import argparse
import platform
import time

import mujoco
import numpy as np

from grpo_robot import BatchedEnv
from grpo_robot.envs import TASKS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=1000, help="evaluate seeds 0..N-1")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    args = parser.parse_args()
    print(f"# mujoco {mujoco.__version__}, numpy {np.__version__}, {platform.machine()}")
    print("| task | seeds | success | failed | mean steps | seconds |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.tasks:
        env = BatchedEnv(name, args.seeds)
        obs = env.reset(np.arange(args.seeds))
        start = time.perf_counter()
        while not env.done.all():
            obs, *_ = env.step(env.task.expert(obs))
        seconds = time.perf_counter() - start
        print(
            f"| {name} | {args.seeds} | {env.terminated.mean():.1%} | {env.failed.sum()} | "
            f"{env.steps.mean():.1f} | {seconds:.1f} |"
        )


if __name__ == "__main__":
    main()
