"""grpo-robot: GRPO for robot manipulation from outcome-only (success/failure) rewards."""

from grpo_robot import envs
from grpo_robot.batched import BatchedEnv, group_seeds

__version__ = "0.1.0"

envs.register_all()

__all__ = ["BatchedEnv", "group_seeds", "envs", "__version__"]
