"""What the Ray rollout backend costs and gains: env steps/s of one iteration's draw, local
against Ray workers.

    python scripts/benchmark_ray.py                                     # PushCube and robosuite Lift, 1 and 2 workers
    python scripts/benchmark_ray.py --envs robosuite_lift --workers 1 2 4 8 16 --json docs/bench/ray_16.json

How each figure is measured: the docstring of grpo_robot/bench/ray_scaling.py. The machine and
versions are printed with the table.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from grpo_robot.bench import ray_scaling


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ray_scaling.add_arguments(parser)
    for line in ray_scaling.benchmark(parser.parse_args(argv)):
        print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
