"""A user's extensions in one module, as `plugins=[plugin_example]` and
`hooks=[plugin_example:EMASuccess]` name them (tests/test_registry.py): an advantage, a policy
loss that reports no entropy, a policy class with a constructor argument of its own, and hooks
that keep state."""

from __future__ import annotations

import numpy as np
import torch

from grpo_robot.algo import register_advantage, register_policy_loss
from grpo_robot.hooks import Hook
from grpo_robot.policies import GaussianPolicy
from grpo_robot.policies.base import register_policy

NAMES = {"ADVANTAGE_ESTIMATORS": "rank", "POLICY_LOSSES": "plain_pg", "POLICIES": "wide_gaussian"}


CALLS: list[dict] = []  # the options each call of `rank` was given


@register_advantage("rank")
def rank(rewards: torch.Tensor, eps: float, scale: float = 1.0) -> torch.Tensor:
    """Each member's rank in its group, centred and scaled to [-scale, scale]; 0 for a uniform
    group. `scale` comes from `algo.options.scale`."""
    CALLS.append({"scale": scale})
    r = rewards.to(torch.float64)
    n = r.shape[-1]
    ranks = r.argsort(-1).argsort(-1).to(torch.float64)
    centred = scale * (ranks - (n - 1) / 2) / max((n - 1) / 2, 1)
    return torch.where((r == r[..., :1]).all(-1, keepdim=True), torch.zeros_like(centred), centred)


@register_policy_loss("plain_pg")
def plain_pg(logp, logp_old, advantages, layout, cfg, logp_ref=None, entropy=None):
    """REINFORCE on the group advantage, with the entropy bonus, reporting its loss alone."""
    objective = logp.sum(-1) * advantages * cfg.options.get("gain", 1.0)
    if cfg.entropy_coef > 0 and entropy is not None:
        objective = objective + cfg.entropy_coef * entropy.sum(-1)
    loss = -objective.mean()
    return loss, {"policy_loss": loss.detach()}


@register_policy
class WideGaussian(GaussianPolicy):
    type = "wide_gaussian"

    def __init__(self, obs_dim: int, action_dim: int, width: int = 1, **kwargs):
        self.width = width  # hidden layers `width` times as wide as policy.hidden_sizes
        sizes = [width * size for size in kwargs.pop("hidden_sizes", [256, 256])]
        super().__init__(obs_dim, action_dim, hidden_sizes=sizes, **kwargs)


class EMASuccess(Hook):
    """A moving average of the training success, logged, and counted iterations: state to keep."""

    def __init__(self, alpha: float = 0.5) -> None:
        self.alpha, self.ema, self.n = alpha, 0.0, 0

    def after_iteration(self, trainer, record) -> None:
        self.ema = self.alpha * record.scalars["charts/train_success"] + (1 - self.alpha) * self.ema
        self.n += 1
        record.scalars["custom/ema_success"] = self.ema

    def state_dict(self) -> dict:
        return {"ema": self.ema, "n": self.n}

    def load_state_dict(self, state: dict) -> None:
        self.ema, self.n = state["ema"], state["n"]


class NumpyState(EMASuccess):
    """Keeps its average as a numpy scalar, which a checkpoint cannot keep."""

    def state_dict(self) -> dict:
        return {"ema": np.float64(self.ema), "n": self.n}
