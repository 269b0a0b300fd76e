"""GRPO's pieces as pure functions with hand-checkable numbers.

Shapes: group outcomes `rewards: [G, N]` (G groups of N members); per-step tensors are packed
over the valid steps of a batch, `[S]`, with `traj: [S]` naming each step's trajectory.
Advantage estimators are registered under the name the config uses (`algo.advantage`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

AdvantageFn = Callable[[torch.Tensor, float], torch.Tensor]
ADVANTAGE_ESTIMATORS: dict[str, AdvantageFn] = {}


def register_advantage(name: str) -> Callable[[AdvantageFn], AdvantageFn]:
    def deco(fn: AdvantageFn) -> AdvantageFn:
        ADVANTAGE_ESTIMATORS[name] = fn
        return fn

    return deco


@register_advantage("grpo")
def grpo_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """A_i = (r_i - mean(r)) / (std(r) + eps) within each group, population std.

    A group whose outcomes are all equal gets exactly zero advantage (even with eps = 0).
    """
    rewards = rewards.to(torch.float64)
    centred = rewards - rewards.mean(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, unbiased=False, keepdim=True)
    adv = centred / (std + eps)
    return torch.where(std > 0, adv, torch.zeros_like(adv))


def mixed_fraction(rewards: torch.Tensor) -> float:
    """Fraction of groups `[G, N]` whose outcomes are not all equal (the groups that teach)."""
    return (rewards.amax(-1) != rewards.amin(-1)).to(torch.float64).mean().item()


def broadcast_to_steps(advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Trajectory advantages `[B]` onto every valid step of a padded batch `mask: [T, B]` -> `[T, B]`,
    zero on padding."""
    return advantages.to(torch.float32)[None, :] * mask.to(torch.float32)


def clipped_surrogate(
    logp: torch.Tensor, logp_old: torch.Tensor, advantages: torch.Tensor, clip_eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PPO's clipped objective per step (to maximize): min(rho*A, clip(rho, 1-eps, 1+eps)*A).

    -> (objective [S], ratio [S], clipped [S] bool: the clip bound is the active term).
    """
    ratio = torch.exp(logp - logp_old)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    objective = torch.minimum(unclipped, clipped)
    return objective, ratio, clipped < unclipped


def kl_k3(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """Per-step estimate of KL(pi || pi_ref) from samples of pi: r - log r - 1 with
    r = pi_ref/pi. Non-negative, unbiased, zero where the two policies agree."""
    log_ratio = logp_ref - logp
    return torch.exp(log_ratio) - log_ratio - 1.0


def seq_mean_token_mean(values: torch.Tensor, traj: torch.Tensor, lengths: torch.Tensor, n_traj: int) -> torch.Tensor:
    """GRPO's aggregation: mean over each trajectory's steps, then mean over `n_traj` trajectories.

    `values, traj: [S]`, `lengths: [B]` steps per trajectory (indexed by `traj`).
    """
    return (values / lengths[traj].to(values.dtype)).sum() / n_traj
