"""The learned state-value function of `algo=ppo` (advantage `gae`); GRPO needs none."""

from __future__ import annotations

import torch
from torch import nn

from grpo_robot.policies.base import mlp


class ValueFunction(nn.Module):
    """V(s): an MLP on the policy's normalized observation (the caller normalizes), `[S, obs_dim] -> [S]`."""

    def __init__(self, obs_dim: int, hidden_sizes: list[int], activation: str) -> None:
        super().__init__()
        self.net = mlp([obs_dim, *hidden_sizes, 1], activation, out_scale=1.0)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs).squeeze(-1)
