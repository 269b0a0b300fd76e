"""Success rate of each task's scripted expert through the batched backend.

python scripts/check_experts.py [--seeds 1000] [--tasks Reach PushCube ...]
"""

from __future__ import annotations

import argparse

from grpo_robot.bench.experts import expert_row
from grpo_robot.envs import TASKS
from grpo_robot.machine import one_line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=1000, help="evaluate seeds 0..N-1")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    args = parser.parse_args()
    print(f"# {one_line()}")
    print("| task | seeds | success | failed | mean steps | seconds |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.tasks:
        print(expert_row(name, args.seeds), flush=True)


if __name__ == "__main__":
    main()
