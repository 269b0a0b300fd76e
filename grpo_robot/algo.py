"""The GRPO family's pieces as pure functions with hand-checkable numbers.

Shapes: group outcomes `rewards: [G, N]` (G groups of N members). Loss terms are computed per
*element*: a token (`ratio=token`), an action step (`ratio=action`) or a whole trajectory
(`ratio=sequence`). Elements are packed, `[E]`, with `traj: [E]` naming each one's trajectory.
Advantage estimators, aggregations and KL estimators are registered under the names the config
uses (`algo.advantage`, `algo.aggregation`, `algo.kl_estimator`); adding a variant means adding
one function.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def _registrar(table: dict[str, Callable]) -> Callable[[str], Callable[[Callable], Callable]]:
    """A decorator factory that files functions in `table` under the config name given."""

    def register(name: str) -> Callable[[Callable], Callable]:
        def deco(fn: Callable) -> Callable:
            table[name] = fn
            return fn

        return deco

    return register


AdvantageFn = Callable[[torch.Tensor, float], torch.Tensor]
ADVANTAGE_ESTIMATORS: dict[str, AdvantageFn] = {}
register_advantage = _registrar(ADVANTAGE_ESTIMATORS)


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


@register_advantage("dr_grpo")
def dr_grpo_advantages(rewards: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """A_i = r_i - mean(r): Dr. GRPO drops the std division, which over-weights groups that
    are nearly all successes or all failures. `eps` is unused."""
    rewards = rewards.to(torch.float64)
    return rewards - rewards.mean(dim=-1, keepdim=True)


@register_advantage("rloo")
def rloo_advantages(rewards: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """A_i = r_i - mean_{j != i} r_j: each member's baseline excludes itself (leave-one-out),
    which equals N / (N - 1) * (r_i - mean(r)). `eps` is unused."""
    rewards = rewards.to(torch.float64)
    n = rewards.shape[-1]
    if n < 2:
        raise ValueError(f"rloo needs groups of at least 2, got {n}")
    others = (rewards.sum(dim=-1, keepdim=True) - rewards) / (n - 1)
    return rewards - others


def gae(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation (Schulman et al. 2016) over padded trajectories.

    `rewards, values: [T, B]` per step, `mask: [T, B]` valid steps (each trajectory's valid steps
    first). Every episode end is terminal: success, the horizon (an outcome-only task has failed
    by then) and a physics failure alike, so the value after a trajectory's last step is 0.
    -> (advantages [T, B], returns = advantages + values [T, B]), zero on padding.
    """
    mask_f = mask.to(values.dtype)
    adv = torch.zeros_like(values)
    next_adv = torch.zeros_like(values[0])
    next_value = torch.zeros_like(values[0])
    for t in range(values.shape[0] - 1, -1, -1):
        nonterminal = mask_f[t + 1] if t + 1 < values.shape[0] else torch.zeros_like(mask_f[t])
        delta = rewards[t] + gamma * next_value * nonterminal - values[t]
        adv[t] = (delta + gamma * lam * nonterminal * next_adv) * mask_f[t]
        next_adv, next_value = adv[t], values[t]
    return adv, (adv + values) * mask_f


def mixed_fraction(rewards: torch.Tensor) -> float:
    """Fraction of groups `[G, N]` whose outcomes are not all equal (the groups that teach)."""
    return (rewards.amax(-1) != rewards.amin(-1)).to(torch.float64).mean().item()


def broadcast_to_steps(advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Trajectory advantages `[B]` onto every valid step of a padded batch `mask: [T, B]` -> `[T, B]`,
    zero on padding."""
    return advantages.to(torch.float32)[None, :] * mask.to(torch.float32)


def clipped_surrogate(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    clip_low: float,
    clip_high: float | None = None,
    dual_clip: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PPO's clipped objective per element (to maximize): min(rho*A, clip(rho, 1-low, 1+high)*A).

    `clip_high` defaults to `clip_low` (symmetric); a larger one is DAPO's clip-higher. With
    `dual_clip = c > 1`, the objective of a negative advantage is bounded below by c*A, so a
    huge ratio on a bad action cannot dominate the batch.
    -> (objective [E], ratio [E], clipped [E] bool: a clip bound is the active term).
    """
    clip_high = clip_low if clip_high is None else clip_high
    ratio = torch.exp(logp - logp_old)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * advantages
    objective = torch.minimum(unclipped, clipped)
    active = clipped < unclipped
    if dual_clip is not None:
        floor = dual_clip * advantages
        dual = (advantages < 0) & (objective < floor)
        objective = torch.where(dual, floor, objective)
        active = active | dual
    return objective, ratio, active


KL_ESTIMATORS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {}
register_kl = _registrar(KL_ESTIMATORS)


@register_kl("k1")
def kl_k1(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """log(pi / pi_ref): unbiased for KL(pi || pi_ref) under samples of pi, but each sample can
    be negative and the variance is high."""
    return logp - logp_ref


@register_kl("k2")
def kl_k2(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """(log(pi / pi_ref))^2 / 2: non-negative, low variance, biased (exact to second order)."""
    return 0.5 * (logp - logp_ref) ** 2


@register_kl("k3")
def kl_k3(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """Per-step estimate of KL(pi || pi_ref) from samples of pi: r - log r - 1 with
    r = pi_ref/pi. Non-negative, unbiased, zero where the two policies agree."""
    log_ratio = logp_ref - logp
    return torch.exp(log_ratio) - log_ratio - 1.0


AggregateFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, float], torch.Tensor]
AGGREGATIONS: dict[str, AggregateFn] = {}
register_aggregation = _registrar(AGGREGATIONS)


# Every aggregation takes `values, traj: [E]` (the minibatch's elements, possibly without those
# that carry no gradient), `lengths: [B]` elements per trajectory, `members: [M]` the minibatch's
# trajectories, and `norm`, the constant of Dr. GRPO's normalizer.


@register_aggregation("seq-mean-token-mean")
def seq_mean_token_mean(
    values: torch.Tensor, traj: torch.Tensor, lengths: torch.Tensor, members: torch.Tensor, norm: float = 1.0
) -> torch.Tensor:
    """GRPO: mean over each trajectory's elements, then mean over the minibatch's trajectories."""
    return (values / lengths[traj].to(values.dtype)).sum() / len(members)


@register_aggregation("token-mean")
def token_mean(
    values: torch.Tensor, traj: torch.Tensor, lengths: torch.Tensor, members: torch.Tensor, norm: float = 1.0
) -> torch.Tensor:
    """DAPO: one mean over every element of the minibatch, so long trajectories weigh more."""
    return values.sum() / lengths[members].sum().to(values.dtype)


@register_aggregation("seq-mean-token-sum-norm")
def seq_mean_token_sum_norm(
    values: torch.Tensor, traj: torch.Tensor, lengths: torch.Tensor, members: torch.Tensor, norm: float = 1.0
) -> torch.Tensor:
    """Dr. GRPO: each trajectory's sum divided by one constant `norm` (max horizon x elements
    per step), then the mean over trajectories: no per-trajectory length bias."""
    return values.sum() / (norm * len(members))
