"""Throughput of the batched MuJoCo backend against the physics alone and against Gymnasium's
SyncVectorEnv, for every built-in task and several batch sizes B.

Run from the repository root (about 3-4 minutes on 2 cores with the defaults):

    python scripts/benchmark_envs.py
    python scripts/benchmark_envs.py --tasks Reach LiftCube --worlds 256 --min-time 3
    python scripts/benchmark_envs.py --quick          # smoke run, a few seconds per task

The columns and how each figure is measured: the docstring of grpo_robot/bench/envs.py.
Progress goes to stderr, the tables to stdout.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from grpo_robot.bench import envs


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    envs.add_arguments(parser)
    settings = envs.settings_from_args(parser.parse_args(argv), parser.error)
    print(envs.benchmark(settings))


if __name__ == "__main__":
    main()
