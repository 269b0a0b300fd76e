"""Policies: a distribution over actions given observations.

Every policy samples a *raw* action (what its distribution draws: a pre-squash Gaussian sample,
or token indices) and maps it to the environment's action in [-1, 1]. Log-probabilities are
always of the raw sample, so the rollout stores raw actions and the update re-scores them.
"""

from grpo_robot.policies.base import POLICIES, Policy, build_policy
from grpo_robot.policies.gaussian import GaussianPolicy
from grpo_robot.policies.tokenized import TokenizedPolicy, bin_centres, to_tokens

__all__ = ["POLICIES", "Policy", "GaussianPolicy", "TokenizedPolicy", "bin_centres", "build_policy", "to_tokens"]
