"""The three disjoint ranges of reset seeds (grpo_robot/seeding.py draws from them), apart from
the streams' torch code, so that the config's checks, and the environments that check the seeds
they are reset from, need no torch:

    training groups   [0, 1e9)      drawn per iteration from the run's `seed`
    evaluation        [1e9, 2e9)    held out from training, in two halves:
      validation      [1e9, 1.5e9)  the first n: a run's evaluations (`best.pt`, the target that
                                    stops it, the cloning stage's), the same for every run
      test            [1.5e9, 2e9)  the first n: `scripts/evaluate.py` by default; no choice a run
                                    makes (which checkpoint is best, when to stop) has seen them
    demonstrations    [2e9, 3e9)    demo run `seed` in [0, 1000) owns 1e6 consecutive seeds

A run that stops at its first evaluation at the target, or keeps its best evaluation, reports a
success rate chosen on the validation seeds, which tends to read high; the test seeds measure
the policy it chose without that bias.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

TRAIN_SEED_END = 1_000_000_000
EVAL_SEED_START = 1_000_000_000
TEST_SEED_START = 1_500_000_000  # the validation seeds end here
EVAL_SEED_END = 2_000_000_000
EVAL_SPLITS = ("validation", "test")  # the halves of the evaluation range
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
