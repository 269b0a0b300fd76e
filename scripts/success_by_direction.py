"""Where a PushCube or PlaceCube policy fails: an evaluation's success by the direction the cube
must travel (from the cube to the goal or pad at the start), in eight 45-degree sectors.

    python scripts/success_by_direction.py runs/train/<run>/eval.json
    python scripts/success_by_direction.py <run>/eval.json <other run>/eval.json

It reads the episodes an `eval.json` records (each seed and its outcome, as training's own
evaluation and `scripts/evaluate.py` write them) and draws each seed's start again. A policy that
has learned some directions and not others shows it here; docs/algorithms.md ("Mirror symmetry")
reads the default job's runs with it.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from grpo_robot.envs import make_task

TARGETS = {"PushCube": "goal_pos", "PlaceCube": "target_pos"}
SECTORS = 8


def directions(task_id: str, seeds: list[int]) -> np.ndarray:
    """Degrees in [-180, 180): the direction from the cube to the goal (or pad) at each seed's start."""
    task = make_task(task_id)
    if task.name not in TARGETS:
        raise ValueError(f"{task_id} has no cube to move towards a target; this reads {', '.join(TARGETS)}")
    starts = np.stack([task.initial_condition(int(seed))[2] for seed in seeds])
    travel = task.read(starts, TARGETS[task.name])[:, :2] - task.read(starts, "cube_pos")[:, :2]
    return np.degrees(np.arctan2(travel[:, 1], travel[:, 0]))


def table(record: dict) -> list[str]:
    episodes = record["episodes"]
    angles = directions(record["task"], [e["seed"] for e in episodes])
    success = np.array([e["success"] for e in episodes], dtype=bool)
    width = 360 // SECTORS
    lines = ["| direction (degrees) | episodes | success |", "| --- | ---: | ---: |"]
    for low in range(-180, 180, width):
        inside = (angles >= low) & (angles < low + width)
        rate = f"{success[inside].mean():.1%}" if inside.any() else "-"
        lines.append(f"| [{low}, {low + width}) | {int(inside.sum())} | {rate} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("evals", nargs="+", help="eval.json files (a run's own, or scripts/evaluate.py's)")
    args = parser.parse_args(argv)
    for path in args.evals:
        try:
            with open(path) as f:
                record = json.load(f)
            lines = table(record)
        except (OSError, ValueError, KeyError) as err:
            sys.exit(f"{path}: {err}")
        rate = np.mean([e["success"] for e in record["episodes"]])
        print(f"{path}: {record['task']}, {len(record['episodes'])} episodes, success {rate:.1%}")
        print("\n".join(lines))


if __name__ == "__main__":
    main()
