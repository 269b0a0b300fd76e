"""PPO's critic: the learned state-value function, the per-step advantages it gives through a
registered critic estimator (GAE), its value loss, and the potential-based reward shaping kept
as a dense reference. The GRPO family has none of this: it scores groups of outcomes instead."""

from __future__ import annotations

import torch
from torch import nn

from grpo_robot.algo import ADVANTAGE_ESTIMATORS
from grpo_robot.config import AlgoConfig
from grpo_robot.envs.task import Task
from grpo_robot.policies import Policy
from grpo_robot.policies.base import mlp
from grpo_robot.rollout import Batch


class ValueFunction(nn.Module):
    """V(s): an MLP on the policy's normalized observation (the caller normalizes), `[S, obs_dim] -> [S]`."""

    def __init__(self, obs_dim: int, hidden_sizes: list[int], activation: str) -> None:
        super().__init__()
        self.net = mlp([obs_dim, *hidden_sizes, 1], activation, out_scale=1.0)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs).squeeze(-1)


def shaping(task: Task, batch: Batch, gamma: float) -> torch.Tensor:
    """Potential-based shaping (Ng et al. 1999), `[T, B]`: gamma * phi(s_t+1) - phi(s_t) between
    consecutive observations of a trajectory, 0 on padding and on its last step, whose next
    observation a batch does not keep. Over an episode it adds about phi(last) - phi(first);
    in the textbook setting (phi = 0 at termination) such shaping leaves the optimal policy
    unchanged, here it is close to that."""
    obs = batch.obs.cpu().numpy()
    phi = torch.as_tensor(task.potential(obs.reshape(-1, obs.shape[-1])).reshape(obs.shape[:2]))
    phi = phi.to(device=batch.mask.device, dtype=torch.float32)
    shaped = torch.zeros_like(phi)
    shaped[:-1] = (gamma * phi[1:] - phi[:-1]) * batch.mask[1:]
    return shaped


class Critic(nn.Module):
    """The value function and what PPO does with it. The reward is the binary outcome on a
    trajectory's last step (plus shaping with `critic.reward=shaped`); every episode end is terminal."""

    every_step = True  # the value loss trains on every step, zero advantage or not

    def __init__(self, obs_dim: int, hidden_sizes: list[int], activation: str, cfg: AlgoConfig, task: Task | None):
        super().__init__()
        self.value = ValueFunction(obs_dim, hidden_sizes, activation)
        self.cfg, self.task = cfg, task
        self.estimator = ADVANTAGE_ESTIMATORS[cfg.advantage]
        self.returns = torch.zeros(0)  # [S] value targets of the batch last scored

    def advantages(self, batch: Batch, policy: Policy) -> tuple[torch.Tensor, dict[str, float]]:
        """-> (advantages [S] over `batch.packed()` steps, metrics); keeps the value targets for `loss`."""
        cfg = self.cfg.critic
        with torch.no_grad():
            values = self.value(policy.inputs(batch.obs))  # [T, B]
        last = batch.mask.sum(0) - 1  # [B] index of each trajectory's last step
        rewards = torch.zeros_like(values)
        rewards[last.clamp(min=0), torch.arange(values.shape[1], device=values.device)] = batch.success
        if cfg.reward == "shaped":
            rewards += cfg.shaping_coef * shaping(self.task, batch, cfg.gamma)
        adv, returns = self.estimator(rewards, values, batch.mask, cfg.gamma, cfg.gae_lambda)
        t_idx, traj = batch.mask.nonzero(as_tuple=True)
        adv, self.returns, values = adv[t_idx, traj], returns[t_idx, traj], values[t_idx, traj]
        residual = (self.returns - values).var() / self.returns.var().clamp(min=1e-12)
        metrics = {"mean_abs_advantage": adv.abs().mean().item(), "explained_variance": 1.0 - residual.item()}
        return adv, metrics

    def loss(self, policy: Policy, obs: torch.Tensor, sel: torch.Tensor) -> tuple[torch.Tensor, dict]:
        """`vf_coef` x the squared error to the value targets of the packed steps `sel`."""
        value_loss = 0.5 * (self.value(policy.inputs(obs)) - self.returns[sel]).pow(2).mean()
        return self.cfg.critic.vf_coef * value_loss, {"value_loss": value_loss.detach()}
