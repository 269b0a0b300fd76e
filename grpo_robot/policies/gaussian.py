"""Diagonal Gaussian policy over continuous actions, optionally tanh-squashed."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from grpo_robot.policies.base import ACTIVATIONS, Policy, mlp, register_policy
from grpo_robot.seeding import normal

LOG_STD_MIN, LOG_STD_MAX = -5.0, 1.0
HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
SQUASH_EDGE = 1e-3  # a saturated target action a = +-1 is cloned as tanh(raw) = +-(1 - SQUASH_EDGE)


def tanh_log_det(raw: torch.Tensor) -> torch.Tensor:
    """log |d tanh(u)/du| = log(1 - tanh(u)^2), in a form that stays finite for large |u|."""
    return 2.0 * (math.log(2.0) - raw - F.softplus(-2.0 * raw))


class _InwardClamp(torch.autograd.Function):
    """`x.clamp(low, high)` whose gradient also passes where `x` is past a bound and a descent step
    would bring it back in. A plain clamp gives no gradient there: a std head pushed past a bound
    for every state stayed at it for good, whatever the objective wanted later. The values are
    the clamp's, so a policy samples and scores exactly as before."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, low: float, high: float) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.low, ctx.high = low, high
        return x.clamp(low, high)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (x,) = ctx.saved_tensors
        inward = ((x <= ctx.high) | (grad > 0)) & ((x >= ctx.low) | (grad < 0))  # descent moves x by -grad
        return torch.where(inward, grad, torch.zeros_like(grad)), None, None


@register_policy
class GaussianPolicy(Policy):
    """MLP mean; log-std a learned vector (default) or a second head (`state_dependent_std`),
    in [log(`min_std`), log(`max_std`)] (default: [-5, 1], std 0.007 to 2.7).

    Unsquashed: raw ~ N(mu, sigma) and the env receives clip(raw, -1, 1); the log-prob is the
    Gaussian density of raw. Squashed: the env receives tanh(raw) and the log-prob includes the
    change-of-variables term, so it is the density of the action in [-1, 1].
    """

    type = "gaussian"

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden_sizes: tuple[int, ...] | list[int] = (256, 256),
        activation: str = "tanh",
        init_std: float = 0.5,
        state_dependent_std: bool = False,
        squash: bool = False,
        obs_norm: bool = True,
        max_std: float | None = None,
        min_std: float | None = None,
        mirror: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(obs_dim, action_dim, obs_norm, mirror)
        self._kwargs = dict(
            hidden_sizes=list(hidden_sizes),
            activation=activation,
            init_std=init_std,
            state_dependent_std=state_dependent_std,
            squash=squash,
            obs_norm=obs_norm,
            max_std=max_std,
            min_std=min_std,
            mirror=mirror,
        )
        self.squash, self.state_dependent_std = squash, state_dependent_std
        self.trunk = mlp([obs_dim, *hidden_sizes], activation).append(ACTIVATIONS[activation]())
        self.mean_head = mlp([hidden_sizes[-1], action_dim], activation, out_scale=0.01)
        init_log_std = math.log(init_std)
        self.log_std_max = LOG_STD_MAX if max_std is None else min(LOG_STD_MAX, math.log(max_std))
        self.log_std_bound = self.log_std_max  # the upper bound it was built with; `cap_std` lowers log_std_max
        self.log_std_min = LOG_STD_MIN if min_std is None else max(LOG_STD_MIN, math.log(min_std))
        if state_dependent_std:
            self.log_std_head = mlp([hidden_sizes[-1], action_dim], activation, out_scale=0.01)
            torch.nn.init.constant_(self.log_std_head[0].bias, init_log_std)
        else:
            self.log_std = torch.nn.Parameter(torch.full((action_dim,), init_log_std))

    def distribution(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (mean, log_std), both `[..., action_dim]`, of the pre-squash Gaussian. Under `mirror`
        the mean is reflected back from the canonical frame; the std, the same for an action and
        its image, is not negated, only put in the world's order where a reflection swaps
        actions."""
        obs, frame = self.canonical(obs)
        hidden = self.trunk(self.obs_norm(obs))
        mean = self.mean_head(hidden)
        if frame is not None:
            mean = frame.to_world(mean)
        if self.state_dependent_std:  # a head's bound lets a gradient back in (the free std is projected: after_step)
            log_std = _InwardClamp.apply(self.log_std_head(hidden), self.log_std_min, self.log_std_max)
        else:
            log_std = self.log_std.expand_as(mean).clamp(self.log_std_min, self.log_std_max)
        return mean, (log_std if frame is None else frame.order(log_std))

    def _log_probs(self, raw, mean, log_std):
        """Per-dimension log-density `[..., action_dim]` (the diagonal factorizes)."""
        z = (raw - mean) * torch.exp(-log_std)
        logp = -0.5 * z**2 - log_std - HALF_LOG_2PI
        if self.squash:
            logp = logp - tanh_log_det(raw)
        return logp

    def to_action(self, raw: torch.Tensor) -> torch.Tensor:
        return torch.tanh(raw) if self.squash else raw.clamp(-1.0, 1.0)

    def raw_from_action(self, action):
        if self.squash:  # atanh, kept finite for saturated actions
            return torch.atanh(action.clamp(-1.0 + SQUASH_EDGE, 1.0 - SQUASH_EDGE))
        return action

    def std_parameters(self):
        return list(self.log_std_head.parameters()) if self.state_dependent_std else [self.log_std]

    @torch.no_grad()
    def cap_std(self, max_std: float) -> None:
        """Bound the free std by `max_std` from now on (never above the bound the policy was built
        with), the std moved under it at once (`algo.std_anneal`, grpo_robot/hooks.py)."""
        if self.state_dependent_std:
            raise ValueError("cap_std bounds a free std; this policy's std comes from a head (state_dependent_std)")
        self.log_std_max = max(self.log_std_min, min(self.log_std_bound, math.log(max_std)))
        self.log_std.clamp_(self.log_std_min, self.log_std_max)

    @torch.no_grad()
    def after_step(self):
        # The free log-std is projected onto [log(min_std), log(max_std)] after every step rather
        # than only clamped in `distribution`: a clamped parameter past the bound gets no gradient
        # and would stay at the bound for good, even when the objective wants a narrower policy.
        if not self.state_dependent_std:
            self.log_std.clamp_(self.log_std_min, self.log_std_max)

    def sample(self, obs, generator=None, deterministic=False):
        mean, log_std = self.distribution(obs)
        if deterministic:
            raw = mean
        else:
            noise = normal(generator, mean.shape, device=mean.device, dtype=mean.dtype)
            raw = mean + noise * torch.exp(log_std)
        return raw, self.to_action(raw), self._log_probs(raw, mean, log_std)

    def state_free_entropy(self, rows):
        # a reflection that swaps actions puts each row's dimensions in its own order
        if self.squash or self.state_dependent_std or (self.mirror is not None and self.mirror.swaps_actions):
            return None
        log_std = self.log_std.expand(rows, self.action_dim).clamp(self.log_std_min, self.log_std_max)
        return log_std + 0.5 + HALF_LOG_2PI  # as log_probs computes it, op for op

    def log_probs(self, obs, raw):
        mean, log_std = self.distribution(obs)
        logp = self._log_probs(raw, mean, log_std)
        entropy = log_std + 0.5 + HALF_LOG_2PI
        if self.squash:
            # H(tanh(u)) = H(u) + E[log(1 - tanh(u)^2)]: no closed form, so a one-sample estimate at
            # the taken action, written as mean + std * z with z fixed, so that its gradient reaches
            # the mean and the std through the squash too. (The taken action's -log p alone has the
            # same expectation but no gradient from the squash: a bonus on it let the mean run off
            # into saturation, |u| in the hundreds, while the "entropy" read -1000.)
            z = ((raw - mean) * torch.exp(-log_std)).detach()
            entropy = entropy + tanh_log_det(mean + z * torch.exp(log_std))
        return logp, entropy
