"""The three disjoint ranges of reset seeds (grpo_robot/seeding.py draws from them), apart from
the streams' torch code, so that the config's checks need no torch:

    training groups   [0, 1e9)      drawn per iteration from the run's `seed`
    evaluation        [1e9, 2e9)    the first n of the range, the same for every run
    demonstrations    [2e9, 3e9)    demo run `seed` in [0, 1000) owns 1e6 consecutive seeds
"""

TRAIN_SEED_END = 1_000_000_000
EVAL_SEED_START = 1_000_000_000
EVAL_SEED_END = 2_000_000_000
DEMO_SEED_START = 2_000_000_000
DEMO_RUNS = 1000  # demos.seed in [0, DEMO_RUNS)
DEMO_SEEDS_PER_RUN = 1_000_000
