"""The three disjoint ranges of reset seeds (grpo_robot/seeding.py draws from them), apart from
the streams' torch code, so that the config's checks, and the environments that check the seeds
they are reset from, need no torch:

    training groups   [0, 1e9)      drawn per iteration from the run's `seed`
    evaluation        [1e9, 2e9)    the first n of the range, the same for every run
    demonstrations    [2e9, 3e9)    demo run `seed` in [0, 1000) owns 1e6 consecutive seeds
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

TRAIN_SEED_END = 1_000_000_000
EVAL_SEED_START = 1_000_000_000
EVAL_SEED_END = 2_000_000_000
DEMO_SEED_START = 2_000_000_000
DEMO_RUNS = 1000  # demos.seed in [0, DEMO_RUNS)
DEMO_SEEDS_PER_RUN = 1_000_000


def check_seeds(seeds: Sequence[int], num_worlds: int) -> np.ndarray:
    """`seeds` as an integer array of one non-negative seed per world, else `ValueError`."""
    seeds = np.asarray(seeds)
    if seeds.shape != (num_worlds,) or not np.issubdtype(seeds.dtype, np.integer):
        raise ValueError(
            f"seeds must be {num_worlds} integers (one per world), got shape {seeds.shape} and dtype {seeds.dtype}"
        )
    if (seeds < 0).any():
        raise ValueError(f"seeds must be >= 0, got {seeds[seeds < 0][0]}")
    return seeds
