"""What the Gymnasium backend costs: env steps/s of `GymGroupEnv` against the same env stepped alone.

    python scripts/benchmark_gym_envs.py                                   # Fetch presets and robosuite Lift
    python scripts/benchmark_gym_envs.py --envs fetch_reach --worlds 64 --vector sync async

Env presets are those of conf/env/. The columns and how each figure is measured: the docstring
of grpo_robot/bench/gym_envs.py. The machine and versions are printed with the table.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from grpo_robot.bench import gym_envs


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    gym_envs.add_arguments(parser)
    for line in gym_envs.benchmark(parser.parse_args(argv)):
        print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
