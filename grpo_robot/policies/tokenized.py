"""Tokenized actions, as vision-language-action models emit them: each action dimension is
discretized into K uniform bins over [-1, 1] and executed at the bin centre."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from grpo_robot.policies.base import ACTIVATIONS, Frame, Policy, mlp, register_policy
from grpo_robot.policies.gaussian import LOG_STD_MAX, LOG_STD_MIN
from grpo_robot.registry import BIN_LOGITS, DECODES, HEADS
from grpo_robot.seeding import uniform, uniform_columns

# bounds of a learned log-temperature: down to a near-argmax policy (0.02), up to a near-uniform one
LOG_TEMPERATURE_MIN, LOG_TEMPERATURE_MAX = math.log(0.02), math.log(50.0)


def bin_centres(bins: int) -> torch.Tensor:
    """`[K]` centres of K equal bins over [-1, 1]."""
    return -1.0 + (2.0 * torch.arange(bins, dtype=torch.float32) + 1.0) / bins


def to_tokens(action: torch.Tensor, bins: int) -> torch.Tensor:
    """The bin of each action value: `[..., D]` in [-1, 1] -> long `[..., D]` in [0, K)."""
    return ((action.clamp(-1.0, 1.0) + 1.0) * (bins / 2.0)).floor().long().clamp(0, bins - 1)


def smoothed_targets(action: torch.Tensor, bins: int, sigma_bins: float) -> torch.Tensor:
    """BC's target distribution over the bins, `[..., D, K]`, for actions `[..., D]`, with
    s = `sigma_bins` bin widths. An action inside (-1, 1) gets the Gaussian's density at the bin
    centres, normalized: its argmax is the action's own bin. An action at a bound is censored (the
    expert's command was clipped there, as a saturated scripted expert's often is): it gets the bin
    probabilities of clip(a + N(0, s^2)), the tail past the bound kept on the end bin, so the
    target's mean is the clipped draws' (1 - 0.4 s at a = 1) where the density cut at the bound
    put it 0.8 s inside, and a clone decoded by its mean undershot there."""
    a = action.clamp(-1.0, 1.0)[..., None]  # [..., D, 1]
    scale = sigma_bins * 2.0 / bins
    centres = bin_centres(bins).to(a)
    inside = torch.softmax(-0.5 * ((centres - a) / scale) ** 2, dim=-1)
    edges = centres[1:] - 1.0 / bins  # [K-1] inner bin edges
    cdf = torch.special.ndtr((edges - a) / scale)
    clipped = torch.diff(torch.cat([torch.zeros_like(a), cdf, torch.ones_like(a)], dim=-1), dim=-1).clamp_(min=0.0)
    return torch.where(a.abs() >= 1.0, clipped, inside)


def ordinal_logits(scores: torch.Tensor) -> torch.Tensor:
    """Logits `[..., K]` of an ordinal categorical from K scores `[..., K]` (Tang & Agrawal, AAAI
    2020): score j is the log-odds that the action lies past bin j, and bin k's logit is
    sum_{j<=k} log sigmoid(s_j) + sum_{j>k} log sigmoid(-s_j). Neighbouring bins share all but a few
    terms, so a gradient step on one bin moves its neighbours with it, as a step on a Gaussian's
    mean moves the whole density. Zero scores give the uniform distribution."""
    past, before = F.logsigmoid(scores).cumsum(-1), F.logsigmoid(-scores).cumsum(-1)
    return past + (before[..., -1:] - before)


def sample_categorical(logits: torch.Tensor, generator: torch.Generator | None = None,
                       u: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
    """One draw per row of `logits [..., K]` -> long `[...]`, by inverse CDF: the first bin whose
    cumulative probability exceeds a uniform draw (`u [..., 1]` float64 when given, else drawn
    from `generator`). A bin of probability 0 is never chosen. On the CPU this is about 30x faster
    than `torch.multinomial` for 2048 rows of 256 bins, which made it the largest cost of a
    tokenized rollout (benchmarks.md, "Profile")."""
    cdf = F.softmax(logits.to(torch.float64), dim=-1).cumsum(-1)
    if u is None:
        u = uniform(generator, (*cdf.shape[:-1], 1), dtype=torch.float64, device=cdf.device)
    return torch.searchsorted(cdf, u * cdf[..., -1:], right=True)[..., 0].clamp_(max=cdf.shape[-1] - 1)


# HEADS, BIN_LOGITS and DECODES (the deterministic actions of a categorical over bins: evaluation,
# videos, BC's validation score) are declared in grpo_robot/registry.py, for the config


def check_decode(decode: str) -> None:
    if decode not in DECODES:
        raise ValueError(f"decode must be one of {', '.join(DECODES)}, got {decode!r}")


@register_policy
class TokenizedPolicy(Policy):
    """Categorical over K bins per action dimension, from a shared MLP trunk.

    `head="factorized"`: one independent categorical per dimension.
    `head="autoregressive"`: dimension d's categorical is conditioned on the tokens chosen for
    dimensions < d. Its logits are the factorized head's plus a correction from an MLP over
    the trunk features, a one-hot of d and the embeddings of the earlier tokens (later ones
    masked to zero), so token d never sees tokens >= d. The correction starts near zero, so the
    head learns the per-dimension mapping as fast as the factorized one and adds dependencies.
    `bin_logits="ordinal"` makes each dimension's logits an `ordinal_logits` of its scores.
    `bin_logits="gaussian"` adds to the free logits a discretized Gaussian's, -(c_k - mu)^2 / 2w^2
    for bin centre c_k, with mu from a mean head and a learned width w per dimension (starting at
    `init_std`, bounded as a Gaussian policy's std): a step toward a sampled bin moves mu, and so
    the whole bump, as a step on a Gaussian's mean does, while the free logits (starting near
    zero) can still shape any categorical.
    Temperature divides the logits for sampling and scoring alike. `decode` picks the
    deterministic action of each dimension's categorical: its mode (argmax), its median (the
    first bin whose cumulative probability reaches one half) or its mean over the bin centres,
    the one deterministic action that is not a bin centre; see `DECODES`.
    """

    type = "tokenized"

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        bins: int = 256,
        head: str = "factorized",
        hidden_sizes: tuple[int, ...] | list[int] = (256, 256),
        activation: str = "tanh",
        temperature: float = 1.0,
        embed_dim: int = 16,
        obs_norm: bool = True,
        bin_logits: str = "free",
        learn_temperature: bool = False,
        decode: str = "mode",
        init_std: float = 0.3,
        free_logits_lr: float = 1.0,
        mirror: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(obs_dim, action_dim, obs_norm, mirror)
        if head not in HEADS:
            raise ValueError(f"head must be one of {', '.join(HEADS)}, got {head!r}")
        if bin_logits not in BIN_LOGITS:
            raise ValueError(f"bin_logits must be one of {', '.join(BIN_LOGITS)}, got {bin_logits!r}")
        check_decode(decode)
        if head == "autoregressive" and self.mirror is not None and self.mirror.swaps_actions:
            raise ValueError("mirror axes that swap actions (swap_action) need head=factorized: the autoregressive "
                             "head decodes the dimensions in a fixed order")  # fmt: skip
        self._kwargs = dict(
            bins=bins,
            head=head,
            hidden_sizes=list(hidden_sizes),
            activation=activation,
            temperature=temperature,
            embed_dim=embed_dim,
            obs_norm=obs_norm,
            bin_logits=bin_logits,
            learn_temperature=learn_temperature,
            decode=decode,
            init_std=init_std,
            free_logits_lr=free_logits_lr,
            mirror=mirror,
        )
        self.bins, self.head, self.temperature, self.ordinal = bins, head, temperature, bin_logits == "ordinal"
        self.decode, self.free_logits_lr = decode, free_logits_lr
        self.register_buffer("centres", bin_centres(bins))
        if learn_temperature:
            self.log_temperature = nn.Parameter(torch.full((action_dim, 1), math.log(temperature)))
        else:
            self.log_temperature = None
        hidden = hidden_sizes[-1]
        self.trunk = mlp([obs_dim, *hidden_sizes], activation).append(ACTIVATIONS[activation]())
        self.logits_head = mlp([hidden, action_dim * bins], activation, out_scale=0.01)
        self.bump = bin_logits == "gaussian"
        if self.bump:
            self.mean_head = mlp([hidden, action_dim], activation, out_scale=0.01)
            self.log_width = nn.Parameter(torch.full((action_dim,), math.log(init_std)))
        if head == "autoregressive":
            # one embedding table for all dimensions: token k of dimension d is row d*K + k
            self.embed = nn.Embedding(action_dim * bins, embed_dim)
            self.cond_head = mlp(
                [hidden + action_dim + action_dim * embed_dim, hidden, bins], activation, out_scale=0.01
            )
            self.register_buffer("earlier", torch.ones(action_dim, action_dim).tril(-1))  # [d, j]: j < d
            self.register_buffer("dim_onehot", torch.eye(action_dim))

    def to_action(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.centres[tokens]

    def logits(self, obs: torch.Tensor, tokens: torch.Tensor | None = None) -> torch.Tensor:
        """Temperature-scaled logits `[..., D, K]`, each dimension's up to a constant (with the
        bump, see `_bump_layer`). The autoregressive head needs `tokens [..., D]` (teacher
        forcing); logits of dimension d read only tokens[..., :d]."""
        return self._logits(*self._trunk_out(obs), tokens)

    def _trunk_out(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """What does not depend on the tokens: (trunk features [..., H], the factorized head's
        scores [..., D, K]: logits (with the bump's under bin_logits=gaussian), or the ordinal
        scores `ordinal_logits` turns into logits, of the canonical frame's categoricals in the
        world's order of dimensions; and the `Frame` that `mirror` reflects back from, or None)."""
        obs, frame = self.canonical(obs)
        features = self.trunk(self.obs_norm(obs))
        if self.bump:
            out = F.linear(features, *self._bump_layer())
        else:
            out = self.logits_head(features)
        out = out.view(*features.shape[:-1], self.action_dim, self.bins)
        if frame is not None and frame.perm is not None:  # a reflection that swaps actions: the world's order
            out = out.gather(-2, frame.perm[..., None].expand_as(out))
        return features, out, frame

    def _bump_layer(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(weight [D*K, H], bias [D*K]) of one linear layer giving the free logits plus the
        bump's. -(c_k - mu)^2 / 2w^2 = c_k mu / w^2 - c_k^2 / 2w^2 - mu^2 / 2w^2, and the last
        term is the same for every bin of a dimension, which the softmax ignores; what is left is
        linear in mu, itself linear in the features, so both heads fold into one layer and the
        bump costs no pass over the [N, D, K] logits (it took a third of the tokenized update)."""
        free, mean = self.logits_head[0], self.mean_head[0]
        inv_var = torch.exp(-2.0 * self.log_width)[:, None]  # [D, 1]
        slope = self.centres * inv_var  # [D, K]: d logit_k / d mu
        weight = free.weight.view(self.action_dim, self.bins, -1) + slope[..., None] * mean.weight[:, None, :]
        bias = free.bias.view(self.action_dim, self.bins) + slope * mean.bias[:, None]
        bias = bias - 0.5 * self.centres.square() * inv_var
        return weight.flatten(0, 1), bias.flatten()

    def _logits(self, features: torch.Tensor, out: torch.Tensor, frame: Frame | None,
                tokens: torch.Tensor | None) -> torch.Tensor:  # fmt: skip
        """The world frame's logits `[..., D, K]`. The bins are symmetric about 0, so a reflected
        dimension's categorical is the canonical one read backwards (bin k is bin K-1-k)."""
        batch = features.shape[:-1]
        reflected = None if frame is None else (frame.sign < 0)[..., None]
        if self.head == "autoregressive":
            if tokens is None:
                raise ValueError("the autoregressive head needs the tokens to condition on")
            if reflected is not None:  # the earlier tokens as the canonical frame chose them
                tokens = torch.where(reflected[..., 0], self.bins - 1 - tokens, tokens)
            offsets = torch.arange(self.action_dim, device=tokens.device) * self.bins
            emb = self.embed(tokens + offsets)  # [..., D, E]
            # context of dimension d: embeddings of tokens j < d, zeros for j >= d -> [..., D, D*E]
            context = (self.earlier[..., None] * emb[..., None, :, :]).flatten(-2)
            inputs = torch.cat(
                [
                    features[..., None, :].expand(*batch, self.action_dim, -1),
                    self.dim_onehot.expand(*batch, -1, -1),
                    context,
                ],
                dim=-1,
            )
            out = out + self.cond_head(inputs)
        if self.ordinal:
            out = ordinal_logits(out)
        if reflected is not None:
            out = torch.where(reflected, out.flip(-1), out)
        if self.log_temperature is not None:
            scale = torch.exp(-self.log_temperature)  # [D, 1]
            if frame is not None and frame.perm is not None:  # each row's dimensions in its world order
                scale = frame.order(scale[:, 0].expand_as(frame.perm))[..., None]
            return out * scale
        return out if self.temperature == 1.0 else out / self.temperature  # x / 1 is x: skip the pass

    def sample(self, obs, generator=None, deterministic=False):
        batch = obs.shape[:-1]
        if self.head == "factorized":
            logits = self.logits(obs)
            tokens, action = self._choose(logits, generator, deterministic)
        else:
            tokens = torch.zeros(*batch, self.action_dim, dtype=torch.long, device=obs.device)
            action = torch.zeros(*batch, self.action_dim, device=obs.device)
            trunk = self._trunk_out(obs)  # once: only the conditional part changes between passes
            # the step's uniforms, one per dimension: with noise correlated in time, dimension d's
            # continues dimension d's of the step before (seeding.uniform_columns)
            u = None if deterministic else uniform_columns(generator, (*batch, self.action_dim, 1),
                                                           dtype=torch.float64, device=obs.device)  # fmt: skip
            for d in range(self.action_dim):  # decode in order; later tokens are masked anyway
                logits = self._logits(*trunk, tokens)
                token, value = self._choose(logits[..., d : d + 1, :], generator, deterministic,
                                            None if u is None else u[..., d : d + 1, :])  # fmt: skip
                tokens[..., d], action[..., d] = token[..., 0], value[..., 0]  # decode=mean: its bin, the mean
        logp = F.log_softmax(logits, dim=-1).gather(-1, tokens[..., None])[..., 0]
        return tokens, action, logp

    def _choose(self, logits: torch.Tensor, generator, deterministic: bool,
                u: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """(tokens, actions) `[...]` of categoricals `logits [..., K]`: a draw (from the uniforms `u`
        when given), or `decode`'s choice."""
        if not deterministic:
            tokens = sample_categorical(logits, generator, u)
        elif self.decode == "mode":
            tokens = logits.argmax(-1)
        elif self.decode == "median":
            cdf = F.softmax(logits.to(torch.float64), dim=-1).cumsum(-1)
            half = torch.full((*cdf.shape[:-1], 1), 0.5, dtype=cdf.dtype, device=cdf.device)
            tokens = torch.searchsorted(cdf, half)[..., 0].clamp_(max=self.bins - 1)
        else:
            action = (F.softmax(logits, dim=-1) * self.centres).sum(-1)
            return to_tokens(action, self.bins), action
        return tokens, self.centres[tokens]

    def optimizer_groups(self):
        # with the bump, the free logits' layer may train slower: Adam moves each of its D*K rows at
        # the learning rate whatever its gradient, so a rate that suits the bump's mean reshapes
        # every bin's logit each step
        if not self.bump or self.free_logits_lr == 1.0:
            return super().optimizer_groups()
        free = list(self.logits_head.parameters())
        rest = [p for p in self.parameters() if all(p is not q for q in free)]
        return [(1.0, rest), (self.free_logits_lr, free)]

    def std_parameters(self):
        widths = [self.log_width] if self.bump else []
        return widths if self.log_temperature is None else [self.log_temperature, *widths]

    @torch.no_grad()
    def after_step(self):
        # projected after each step, not clamped in `_logits`: a clamped parameter gets no gradient
        if self.log_temperature is not None:
            self.log_temperature.clamp_(LOG_TEMPERATURE_MIN, LOG_TEMPERATURE_MAX)
        if self.bump:
            self.log_width.clamp_(LOG_STD_MIN, LOG_STD_MAX)

    def raw_from_action(self, action):
        return to_tokens(action, self.bins)

    def soft_cross_entropy(self, obs: torch.Tensor, action: torch.Tensor, sigma_bins: float) -> torch.Tensor:
        """Cross-entropy `[...]` (summed over dimensions) against a discretized Gaussian around
        each continuous target `action [..., D]`, `sigma_bins` bins wide (`smoothed_targets`): neighbouring bins share
        the credit, so the cloned distribution is smooth and unimodal around the target and its
        argmax lands near it even when few demonstrations hit any one bin."""
        tokens = to_tokens(action, self.bins)
        target = smoothed_targets(action, self.bins, sigma_bins)
        log_p = F.log_softmax(self.logits(obs, tokens), dim=-1)
        return -(target * log_p).sum(-1).sum(-1)

    def log_probs(self, obs, raw):
        log_p = F.log_softmax(self.logits(obs, raw), dim=-1)
        logp = log_p.gather(-1, raw[..., None])[..., 0]
        entropy = -(log_p.exp() * log_p).sum(-1)
        return logp, entropy
