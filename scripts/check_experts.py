"""Success rate of the scripted experts: the built-in tasks' (through the batched backend) and
the outside tasks' in grpo_robot/experts/ (through the Gymnasium backend).

python scripts/check_experts.py [--seeds 1000] [--tasks Reach PushCube ...]
python scripts/check_experts.py --outside [--seeds 200]     # FetchPush, FetchPickAndPlace, robosuite Lift
"""

from __future__ import annotations

import argparse

from grpo_robot.bench.experts import expert_row, gym_expert_row
from grpo_robot.envs import TASKS
from grpo_robot.machine import one_line

OUTSIDE = {  # conf/env preset -> its expert
    "fetch_push": "grpo_robot.experts.fetch:push",
    "fetch_pick_and_place": "grpo_robot.experts.fetch:pick_and_place",
    "robosuite_lift": "grpo_robot.experts.robosuite_lift:LiftExpert",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=None, help="reset seeds 0..N-1 (default 1000, --outside 200)")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--outside", nargs="*", choices=list(OUTSIDE), default=None,
                        help="the outside tasks' experts instead (all when none is named)")  # fmt: skip
    args = parser.parse_args()
    print(f"# {one_line()}")
    if args.outside is not None:
        print("| env | expert | seeds | success [Wilson 95%] | crashed | mean steps | seconds |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for preset in args.outside or OUTSIDE:
            print(gym_expert_row(preset, OUTSIDE[preset], args.seeds or 200), flush=True)
        return
    print("| task | seeds | success | failed | mean steps | seconds |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.tasks:
        print(expert_row(name, args.seeds or 1000), flush=True)


if __name__ == "__main__":
    main()
