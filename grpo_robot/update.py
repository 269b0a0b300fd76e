"""The update: K epochs of minibatches over one batch's trajectories, the registered policy loss
on each (grpo_robot/algo.py), plus the loss of a critic when the advantages come from one."""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import torch
from torch import nn

from grpo_robot.algo import POLICY_LOSSES, Layout, gradient_steps, group_relative
from grpo_robot.config import AlgoConfig
from grpo_robot.policies import Policy
from grpo_robot.rollout import Batch
from grpo_robot.seeding import STREAM_SHUFFLE, stream_seed

ADAPT_FACTOR = 1.5  # algo.lr_schedule=adaptive: the step by which the learning rate moves after an update


class TrainingDiverged(RuntimeError):
    """`algo.max_skipped_steps` optimizer steps in a row were non-finite; the message is one line."""


class AdvantageSource(Protocol):
    """Where the advantages of a batch come from: group outcomes (the GRPO family) or a critic."""

    every_step: bool  # its loss needs every step, zero advantage or not

    def advantages(self, batch: Batch, policy: Policy) -> tuple[torch.Tensor, dict[str, float]]:
        """-> (advantages `[S]`, one per step of `batch.packed()`, metrics)."""
        ...


class GroupAdvantages:
    """The registered group estimator `algo.advantage` over each group's outcomes `[G, N]`: the
    same advantage for every step of a trajectory; no critic, no extra loss."""

    every_step = False

    def __init__(self, cfg: AlgoConfig) -> None:
        self.name, self.eps, self.group_size = cfg.advantage, cfg.adv_eps, cfg.group_size

    def advantages(self, batch: Batch, policy: Policy) -> tuple[torch.Tensor, dict[str, float]]:
        per_traj = group_relative(self.name, batch.success.view(-1, self.group_size), self.eps)  # [B]
        _, traj = batch.mask.nonzero(as_tuple=True)  # the t-major order of Batch.packed()
        return per_traj[traj], {"mean_abs_advantage": per_traj.abs().mean().item()}


def frozen_copy(policy: Policy) -> Policy:
    """The KL reference: a copy of `policy` that never trains."""
    ref = copy.deepcopy(policy)
    ref.requires_grad_(False)
    return ref.eval()


class Learner:
    """Owns the optimizer (Adam over the policy and the critic, if any) and the KL reference."""

    def __init__(self, policy: Policy, cfg: AlgoConfig, horizon: int, iterations: int, run_seed: int,
                 device: torch.device, extra: Sequence[nn.Module] = ()) -> None:  # fmt: skip
        self.cfg, self.horizon, self.iterations, self.run_seed, self.device = cfg, horizon, iterations, run_seed, device
        self.extra = list(extra)  # modules with a `loss(policy, obs, sel)` trained alongside (a critic)
        self.policy_loss = POLICY_LOSSES[cfg.policy_loss]
        self.skipped_in_a_row = 0  # non-finite optimizer steps since the last good one
        self.lr = cfg.lr  # the learning rate of the last update
        self.set_policy(policy)

    def set_policy(self, policy: Policy) -> None:
        """Train `policy` from now on: a fresh optimizer, and `policy` as the KL reference."""
        self.policy = policy
        self.reference = frozen_copy(policy) if self.cfg.kl.beta > 0 else None
        # the policy's groups (the first at the rate, others at a fraction of it), then the extra
        # modules': in the first group when it is the only one, as every checkpoint before groups has them
        groups = [{"params": params, "lr_scale": scale} for scale, params in policy.optimizer_groups()]
        extra = [p for m in self.extra for p in m.parameters()]
        if extra and len(groups) == 1:
            groups[0]["params"] = groups[0]["params"] + extra
        elif extra:
            groups.append({"params": extra, "lr_scale": 1.0})
        self.params = [p for group in groups for p in group["params"]]
        self.optimizer = torch.optim.Adam(groups, lr=self.cfg.lr, eps=1e-5)
        self._set_lr(self.cfg.lr)

    def _set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)  # a checkpoint from before groups has no scale

    def _guarded_step(self) -> bool:
        """`optimizer.step()`, undone when it leaves a parameter or an Adam moment non-finite
        (a finite gradient times an infinite learning rate, an overflow) -> whether it was kept."""
        state = self.optimizer.state
        params = [p.detach().clone() for p in self.params]
        moments = {p: {k: v.clone() if torch.is_tensor(v) else v for k, v in state[p].items()}
                   for p in self.params if p in state}  # fmt: skip
        self.optimizer.step()
        # Adam's moments; its `step` count is left out: a CPU tensor even when the weights are on CUDA
        moments_after = [v for p in self.params for k, v in state.get(p, {}).items()
                         if k != "step" and torch.is_tensor(v) and v.is_floating_point()]  # fmt: skip
        after = [p.detach() for p in self.params] + moments_after
        # one sum in float64 (no float32 value can overflow it; a NaN or an inf carries through), one device sync
        if torch.cat([t.reshape(-1) for t in after]).sum(dtype=torch.float64).isfinite():
            return True
        with torch.no_grad():
            for p, before in zip(self.params, params, strict=True):
                p.copy_(before)
        for p in self.params:
            if p in moments:
                state[p] = moments[p]
            else:
                state.pop(p, None)
        return False

    def _skipped(self, it: int) -> None:
        self.skipped_in_a_row += 1
        if self.skipped_in_a_row >= self.cfg.max_skipped_steps:
            raise TrainingDiverged(
                f"{self.skipped_in_a_row} optimizer steps in a row were non-finite (the loss, the gradient or the "
                f"weights after the step; each was rolled back) at iteration {it}; the run stops with its last good "
                f"checkpoint. Lower algo.lr (now {self.cfg.lr:g}) or check the env's observations"
            )

    def update(self, batch: Batch, advantages: torch.Tensor, it: int, every_step: bool = False,
               progress: float | None = None) -> dict[str, float]:  # fmt: skip
        """K epochs of minibatches over the batch's trajectories. `advantages [S]` per step of
        `batch.packed()`; with `every_step`, zero-advantage steps are scored too. `progress`: the
        fraction of the run's budget spent before this update (default `it / iterations`), which
        `algo.lr_schedule=linear` decays the learning rate over.
        -> means over the optimizer steps of the loss metrics, and `skipped_fraction`, the fraction
        of steps skipped for a non-finite loss or gradient, or weights that the step left non-finite
        (rolled back). `TrainingDiverged` after `algo.max_skipped_steps` such steps in a row."""
        cfg, policy, device = self.cfg, self.policy, self.device
        obs, raw, logp_old, traj, lengths = batch.packed()  # logp_old: [S, n_tokens]
        n_traj = len(lengths)
        every_step = every_step or cfg.kl.beta > 0
        # An entropy bonus counts every step, zero advantage or not. Where the policy's entropy
        # depends on no observation, a zero-advantage step's bonus is scored without its forward
        # pass (`idle` below): the same loss and gradient, for the steps that move the policy only.
        free_entropy = (cfg.entropy_coef > 0 and not (every_step or cfg.normalize_advantages or cfg.forward_every_step)
                        and policy.state_free_entropy(0) is not None)  # fmt: skip
        keep = gradient_steps(advantages, every_step or (cfg.entropy_coef > 0 and not free_entropy))
        logp_ref = None
        if self.reference is not None:
            with torch.no_grad():
                logp_ref = self.reference.log_probs(obs, raw)[0]
        progress = it / self.iterations if progress is None else progress
        if cfg.lr_schedule == "adaptive":  # the rate the last update left, kept in checkpoints with the optimizer
            lr = self.optimizer.param_groups[0]["lr"]
        else:
            lr = cfg.lr * (max(0.0, 1.0 - progress) if cfg.lr_schedule == "linear" else 1.0)
        self.lr = lr
        self._set_lr(lr)
        shuffle = torch.Generator().manual_seed(stream_seed(self.run_seed, it, STREAM_SHUFFLE))
        max_norm = cfg.max_grad_norm if cfg.max_grad_norm is not None else math.inf
        stats: dict[str, list[float]] = {}
        for _ in range(cfg.epochs):
            epoch_kl: list[float] = []  # approx. KL to the rollout policy at each step of this epoch
            for members in torch.randperm(n_traj, generator=shuffle).to(device).chunk(cfg.minibatches):
                in_mb = torch.zeros(n_traj, dtype=torch.bool, device=device)
                in_mb[members] = True
                member = in_mb[traj]
                sel = member & keep
                rows = sel.nonzero().squeeze(1)  # the mask's rows, found once for every tensor below
                idle = (member & ~keep).nonzero().squeeze(1) if free_entropy else rows[:0]
                if len(rows) == 0 and len(idle) == 0:
                    continue
                loss, metrics = None, {}
                if len(rows):
                    logp, entropy = policy.log_probs(obs[rows], raw[rows])
                    adv = advantages[rows]
                    if cfg.normalize_advantages and len(adv) > 1:
                        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                    layout = Layout(traj[rows], lengths, members, self.horizon)
                    ref = None if logp_ref is None else logp_ref[rows]
                    loss, metrics = self.policy_loss(logp, logp_old[rows], adv, layout, cfg, ref, entropy)
                    for module in self.extra:
                        extra_loss, extra_metrics = module.loss(policy, obs[rows], sel)
                        loss = loss + extra_loss
                        metrics.update(extra_metrics)
                if len(idle):  # the bonus alone: ratio 1 and advantage 0 leave no other term, and
                    # every aggregation sums its elements over denominators fixed by the layout
                    layout = Layout(traj[idle], lengths, members, self.horizon)
                    unmoved = logp_old[idle]
                    idle_loss, idle_metrics = self.policy_loss(unmoved, unmoved, advantages[idle], layout, cfg, None,
                                                               policy.state_free_entropy(len(idle)))  # fmt: skip
                    loss = idle_loss if loss is None else loss + idle_loss
                    metrics = metrics or {"entropy": idle_metrics["entropy"]}  # the rest describe moved steps
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if free_entropy:  # weights the pass did not reach get its zero gradient: Adam's moments decay alike
                    for p in self.params:
                        if p.grad is None:
                            p.grad = torch.zeros_like(p)
                grad_norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm)
                if not (torch.isfinite(loss) and torch.isfinite(grad_norm)) or not self._guarded_step():
                    stats.setdefault("skipped_fraction", []).append(1.0)  # a NaN never reaches the weights
                    self.optimizer.zero_grad(set_to_none=True)
                    self._skipped(it)
                    continue
                self.skipped_in_a_row = 0
                policy.after_step()
                for key, value in {**metrics, "grad_norm": grad_norm, "skipped_fraction": 0.0}.items():
                    stats.setdefault(key, []).append(float(value))
                if "approx_kl" in metrics:  # every built-in policy loss reports it
                    epoch_kl.append(stats["approx_kl"][-1])
        if cfg.lr_schedule == "adaptive" and epoch_kl:
            self._adapt_lr(float(np.mean(epoch_kl)))
        return {k: float(np.mean(v)) for k, v in stats.items()}

    def _adapt_lr(self, kl: float) -> None:
        """`algo.lr_schedule=adaptive`: the next update's rate from how far this one moved the policy
        (`kl`, the mean approx. KL to the rollout policy over its last epoch's steps)."""
        cfg = self.cfg
        lr = self.lr
        if kl > 2.0 * cfg.desired_kl:
            lr /= ADAPT_FACTOR
        elif kl < 0.5 * cfg.desired_kl:
            lr *= ADAPT_FACTOR
        lr = min(max(lr, cfg.lr_range[0]), cfg.lr_range[1])
        self._set_lr(lr)
