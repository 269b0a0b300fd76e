"""Every variant of the objective as a registered pure function with hand-checkable numbers.

Shapes: group outcomes `rewards: [G, N]` (G groups of N members). Loss terms are computed per
*element*: a token (`ratio=token`), an action step (`ratio=action`) or a whole trajectory
(`ratio=sequence`, GSPO). Elements are packed, `[E]`, with `traj: [E]` naming each one's trajectory.

Registries (grpo_robot/registry.py, which declares the built-in names for the config), under
the names the config uses; adding a variant is one decorated function and the config value that
names it (a name registered twice raises):
  ADVANTAGE_ESTIMATORS  algo.advantage    group outcomes -> advantages; `gae` needs a critic
  RATIO_LEVELS          algo.ratio        per-step log-probs -> the elements that are clipped
  AGGREGATIONS          algo.aggregation  per-element objective -> the minibatch loss
  KL_ESTIMATORS         algo.kl.estimator
  POLICY_LOSSES         algo.policy_loss  (logp, logp_old, advantages, layout, cfg) -> (loss, metrics);
                                          metrics["approx_kl"] drives algo.lr_schedule=adaptive
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from grpo_robot.registry import (
    ADVANTAGE_ESTIMATORS,
    AGGREGATIONS,
    KL_ESTIMATORS,
    POLICY_LOSSES,
    RATIO_LEVELS,
    Registry,
)

if TYPE_CHECKING:
    from grpo_robot.config import AlgoConfig


def _registrar(table: Registry) -> Callable[[str], Callable[[Callable], Callable]]:
    """A decorator factory that files functions in `table` under the config name given."""

    def register(name: str) -> Callable[[Callable], Callable]:
        def deco(fn: Callable) -> Callable:
            table.file(name, fn)
            return fn

        return deco

    return register


@dataclass(frozen=True)
class AdvantageEstimator:
    """A registered advantage estimator. Group estimators (`needs_critic=False`) map outcomes
    `rewards [G, N], eps -> [G, N]`, one advantage per trajectory. An estimator that needs a
    critic maps per-step `rewards, values, mask [T, B], gamma, lam -> (advantages, returns)`
    (grpo_robot/critic.py calls it)."""

    fn: Callable[..., Any]
    needs_critic: bool = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


def register_advantage(name: str, needs_critic: bool = False) -> Callable[[Callable], Callable]:
    def deco(fn: Callable) -> Callable:
        ADVANTAGE_ESTIMATORS.file(name, AdvantageEstimator(fn, needs_critic))
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


@register_advantage("gae", needs_critic=True)
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
    -> (objective [E], ratio [E] (1 where the advantage is 0), clipped [E] bool: a clip bound is the
    active term).
    """
    clip_high = clip_low if clip_high is None else clip_high
    # a zero advantage's term is 0 whatever its ratio: its log-ratio is left out of exp, so a ratio
    # overflowing to inf cannot make it 0 * inf = NaN (a KL or entropy term still brings such rows in)
    ratio = torch.exp(torch.where(advantages == 0, 0.0, logp - logp_old))
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


register_kl = _registrar(KL_ESTIMATORS)


@register_kl("k1")
def kl_k1(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """log(pi / pi_ref): unbiased for KL(pi || pi_ref) under samples of pi, but each sample can
    be negative and the variance is high. As a loss on pi's samples its expected gradient is zero
    (E_pi[grad log pi] = 0): it reports the KL but does not pull toward the reference."""
    return logp - logp_ref


@register_kl("k2")
def kl_k2(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """(log(pi / pi_ref))^2 / 2: non-negative, low variance, biased (exact to second order). As
    a loss on pi's samples its expected gradient is that of KL(pi || pi_ref)."""
    return 0.5 * (logp - logp_ref) ** 2


@register_kl("k3")
def kl_k3(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """Per-step estimate of KL(pi || pi_ref) from samples of pi: r - log r - 1 with
    r = pi_ref/pi. Non-negative, unbiased, zero where the two policies agree. As a loss on pi's
    samples its expected gradient is that of the reverse KL(pi_ref || pi), as in DeepSeekMath's GRPO.
    Above a log-ratio of `K3_LOG_RATIO_MAX` the exponential goes on as its tangent there: a narrow
    policy's sample far out in the reference's tail (a log-ratio of a few hundred) made the loss
    inf, and every such step was undone; now it is large, finite, and still pulls toward the
    reference."""
    log_ratio = logp_ref - logp
    capped = log_ratio.clamp(max=K3_LOG_RATIO_MAX)
    return torch.exp(capped) * (1.0 + (log_ratio - capped)) - log_ratio - 1.0


K3_LOG_RATIO_MAX = 20.0  # exp(20) = 4.9e8: finite in float32, with room for the sum over steps


AggregateFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, float], torch.Tensor]
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


# -- ratio levels --------------------------------------------------------------------------------


@dataclass
class Elements:
    """A minibatch's steps regrouped into the elements that are clipped, `[E]` each."""

    log_ratio: torch.Tensor  # log(pi / pi_old) per element
    advantages: torch.Tensor
    kl_ref: torch.Tensor  # KL estimate to the reference per element (zeros without one)
    entropy: torch.Tensor
    traj: torch.Tensor  # [E] trajectory of each element
    lengths: torch.Tensor  # [B] elements per trajectory
    norm: float  # Dr. GRPO's constant: the most elements a trajectory can have


@dataclass
class Layout:
    """Where a minibatch's steps sit: `traj [s]` each step's trajectory, `lengths [B]` valid steps
    per trajectory of the batch, `members [M]` the minibatch's trajectories, `horizon` the most
    steps an episode can have."""

    traj: torch.Tensor
    lengths: torch.Tensor
    members: torch.Tensor
    horizon: int


RatioLevelFn = Callable[..., Elements]
register_ratio_level = _registrar(RATIO_LEVELS)

# A ratio level takes per-step token log-probs `logp, logp_old, logp_ref (or None), entropy:
# [s, n_tokens]`, per-step `advantages: [s]`, the `layout` and a KL estimator.


def _kl_or_zeros(kl_fn, logp, logp_ref):
    return kl_fn(logp, logp_ref) if logp_ref is not None else torch.zeros_like(logp)


@register_ratio_level("action")
def action_ratio(logp, logp_old, logp_ref, entropy, advantages, layout: Layout, kl_fn) -> Elements:
    """One ratio per action step: the product of its tokens' ratios."""
    logp = logp.sum(-1)
    logp_ref = None if logp_ref is None else logp_ref.sum(-1)
    return Elements(logp - logp_old.sum(-1), advantages, _kl_or_zeros(kl_fn, logp, logp_ref), entropy.sum(-1),
                    layout.traj, layout.lengths, float(layout.horizon))  # fmt: skip


@register_ratio_level("token")
def token_ratio(logp, logp_old, logp_ref, entropy, advantages, layout: Layout, kl_fn) -> Elements:
    """Every token its own clipped term (each action dimension of a tokenized policy)."""
    n_tok = logp.shape[-1]
    logp = logp.flatten()
    logp_ref = None if logp_ref is None else logp_ref.flatten()
    return Elements(logp - logp_old.flatten(), advantages.repeat_interleave(n_tok),
                    _kl_or_zeros(kl_fn, logp, logp_ref), entropy.flatten(), layout.traj.repeat_interleave(n_tok),
                    layout.lengths * n_tok, float(layout.horizon * n_tok))  # fmt: skip


@register_ratio_level("sequence")
def sequence_ratio(logp, logp_old, logp_ref, entropy, advantages, layout: Layout, kl_fn) -> Elements:
    """GSPO: one ratio per trajectory, the geometric mean of its token ratios; its advantage,
    KL and entropy are the means over its steps (tokens)."""
    members, elem_traj = torch.unique(layout.traj, return_inverse=True)
    lengths = layout.lengths
    tokens = (lengths[members] * logp.shape[-1]).to(logp.dtype)
    per_traj = torch.zeros(len(members), dtype=logp.dtype, device=logp.device)

    def traj_mean(x):  # mean over each trajectory's tokens, [s, n_tok] -> [M]
        return per_traj.index_add(0, elem_traj, x.sum(-1)) / tokens

    adv = torch.zeros_like(per_traj).index_add(0, elem_traj, advantages) / lengths[members].to(advantages.dtype)
    kl_ref = traj_mean(kl_fn(logp, logp_ref)) if logp_ref is not None else torch.zeros_like(per_traj)
    return Elements(traj_mean(logp - logp_old), adv, kl_ref, traj_mean(entropy), members, torch.ones_like(lengths), 1.0)


def gradient_steps(advantages: torch.Tensor, every_step: bool) -> torch.Tensor:
    """`[S]` bool, the steps a minibatch must score. A zero-advantage step adds nothing to the
    clipped surrogate's gradient, so it is left out unless `every_step` (a KL or entropy term, a
    value loss, or advantages standardized per minibatch need it); every aggregation keeps its full
    denominator either way."""
    return torch.ones_like(advantages, dtype=torch.bool) if every_step else advantages != 0


# -- the policy loss -----------------------------------------------------------------------------
PolicyLossFn = Callable[..., tuple[torch.Tensor, dict[str, torch.Tensor]]]
register_policy_loss = _registrar(POLICY_LOSSES)


@register_policy_loss("clipped")
def clipped_policy_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    layout: Layout,
    cfg: AlgoConfig,
    logp_ref: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO's clipped surrogate at `cfg.ratio`'s level, minus `cfg.kl.beta` x KL to the reference,
    plus `cfg.entropy_coef` x entropy, aggregated by `cfg.aggregation`, negated (to minimize).

    `logp, logp_old, logp_ref, entropy: [s, n_tokens]` and `advantages: [s]` per step of the
    minibatch. -> (loss, metrics as 0-d tensors: policy_loss (the surrogate alone),
    clip_fraction, approx_kl (to the rollout policy, per action step: k3 of the step's ratio),
    kl_ref, entropy)."""
    entropy = torch.zeros_like(logp) if entropy is None else entropy
    clip = cfg.clip
    low = clip.low if clip.low is not None else clip.eps
    high = clip.high if clip.high is not None else clip.eps
    el = RATIO_LEVELS[cfg.ratio](logp, logp_old, logp_ref, entropy, advantages, layout, KL_ESTIMATORS[cfg.kl.estimator])
    surrogate, ratio, clipped = clipped_surrogate(
        el.log_ratio, torch.zeros_like(el.log_ratio), el.advantages, low, high, clip.dual
    )
    objective = surrogate
    # terms with a zero weight stay out of the graph: backward would still walk them
    if cfg.kl.beta > 0:
        objective = objective - cfg.kl.beta * el.kl_ref
    if cfg.entropy_coef > 0:
        objective = objective + cfg.entropy_coef * el.entropy
    aggregate = AGGREGATIONS[cfg.aggregation]
    loss = -aggregate(objective, el.traj, el.lengths, layout.members, el.norm)
    with torch.no_grad():
        # per action step at every ratio level (what algo.lr_schedule=adaptive steers by): a token's
        # ratio gave about 1/n_tokens of it, a trajectory's geometric-mean ratio almost nothing
        step_log_ratio = (logp - logp_old).sum(-1)
        metrics = {
            "policy_loss": -aggregate(surrogate, el.traj, el.lengths, layout.members, el.norm),
            "clip_fraction": clipped.float().mean(),
            "approx_kl": (torch.expm1(step_log_ratio) - step_log_ratio).mean(),
            "kl_ref": el.kl_ref.mean(),
            "entropy": entropy.sum(-1).mean(),
        }
    return loss, metrics


def group_relative(name: str, rewards: torch.Tensor, eps: float, options: dict[str, Any] | None = None) -> torch.Tensor:
    """The registered group estimator `name` on outcomes `[G, N]` -> float32 `[G * N]`; `options`
    (`algo.options`) are its keyword arguments."""
    estimator = ADVANTAGE_ESTIMATORS[name]
    if estimator.needs_critic:
        raise ValueError(f"advantage={name} needs a critic; it cannot score groups of outcomes")
    return estimator(rewards, eps, **(options or {})).reshape(-1).to(torch.float32)


def estimator_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """The `options` (`algo.options`) that estimator `name` takes as keyword arguments (all of them
    where it takes **kwargs): the rest are a policy loss's, which reads `cfg.options`."""
    import inspect

    fn = ADVANTAGE_ESTIMATORS[name]
    params = inspect.signature(getattr(fn, "fn", fn)).parameters.values()  # a registered estimator's function
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return dict(options)
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return {k: v for k, v in options.items() if k in names}
