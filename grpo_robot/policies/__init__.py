"""Policies: a distribution over actions given observations.

Every policy samples a *raw* action (what its distribution draws: a pre-squash Gaussian sample,
or token indices) and maps it to the environment's action in [-1, 1]. Log-probabilities are
always of the raw sample, so the rollout stores raw actions and the update re-scores them.
"""

from grpo_robot.policies.base import Policy, build_policy
from grpo_robot.policies.gaussian import GaussianPolicy

__all__ = ["Policy", "GaussianPolicy", "build_policy"]
