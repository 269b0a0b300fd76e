"""grpo-robot: GRPO for robot manipulation from outcome-only (success/failure) rewards."""

import os

# Rollouts alternate torch inference with MuJoCo's physics thread pool on the same cores. With
# OpenMP's default spin-waiting, torch's idle threads keep spinning and starve the physics threads
# (measured on 2 cores: rollout 5x, update 40x slower). Sleeping idle threads avoid that. This must
# be set before torch loads its OpenMP runtime, so import grpo_robot before torch.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from grpo_robot import envs  # noqa: E402
from grpo_robot.batched import BatchedEnv  # noqa: E402
from grpo_robot.seeding import group_seeds  # noqa: E402

__version__ = "0.1.0"

envs.register_all()

__all__ = ["BatchedEnv", "group_seeds", "envs", "__version__"]
