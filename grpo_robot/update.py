"""The update: K epochs of minibatches over one batch's trajectories, the registered policy loss
on each (grpo_robot/algo.py), plus the loss of a critic when the advantages come from one."""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import torch
from torch import nn

from grpo_robot.algo import POLICY_LOSSES, Layout, estimator_options, gradient_steps, group_relative
from grpo_robot.config import AlgoConfig
from grpo_robot.policies import Policy
from grpo_robot.rollout import Batch
from grpo_robot.seeding import STREAM_SHUFFLE, stream_seed

log = logging.getLogger(__name__)

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
        self.options = estimator_options(cfg.advantage, dict(cfg.options)) if cfg.options else {}  # once, not per batch

    def advantages(self, batch: Batch, policy: Policy) -> tuple[torch.Tensor, dict[str, float]]:
        per_traj = group_relative(self.name, batch.success.view(-1, self.group_size), self.eps, self.options)  # [B]
        _, traj = batch.mask.nonzero(as_tuple=True)  # the t-major order of Batch.packed()
        return per_traj[traj], {"mean_abs_advantage": per_traj.abs().mean().item()}


def frozen_copy(policy: Policy) -> Policy:
    """The KL reference: a copy of `policy` that never trains."""
    ref = copy.deepcopy(policy)
    ref.requires_grad_(False)
    return ref.eval()


def _is_moment(key: str, value: object) -> bool:
    """An optimizer state entry that moves with the weights: a floating tensor other than the step count."""
    return key != "step" and torch.is_tensor(value) and value.is_floating_point()


def _moments(state: dict, params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The moment tensors of `params` in `state`, in a fixed order (updated in place by a step)."""
    return [v for p in params for k, v in state.get(p, {}).items() if _is_moment(k, v)]


def _floats(stats: dict[str, list], device: torch.device) -> dict[str, list[float]]:
    """`stats`' values (0-d tensors or floats) as floats, the tensors read in one transfer."""
    tensors = [v.reshape(()).to(device, torch.float64) for vs in stats.values() for v in vs if torch.is_tensor(v)]
    read = iter(torch.stack(tensors).tolist() if tensors else [])
    return {k: [next(read) if torch.is_tensor(v) else float(v) for v in vs] for k, vs in stats.items()}


def _to(indices: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Host indices on `device`, copied without waiting for the device's queue."""
    if device.type != "cuda":
        return indices.to(device)
    return indices.pin_memory().to(device, non_blocking=True)


class Learner:
    """Owns the optimizer (Adam over the policy and the critic, if any) and the KL reference."""

    def __init__(self, policy: Policy, cfg: AlgoConfig, horizon: int, iterations: int, run_seed: int,
                 device: torch.device, extra: Sequence[nn.Module] = ()) -> None:  # fmt: skip
        self.cfg, self.horizon, self.iterations, self.run_seed, self.device = cfg, horizon, iterations, run_seed, device
        self.extra = list(extra)  # modules with a `loss(policy, obs, sel)` trained alongside (a critic)
        self.policy_loss = POLICY_LOSSES[cfg.policy_loss]
        self.skipped_in_a_row = 0  # non-finite optimizer steps since the last good one
        self.lr = cfg.lr  # the learning rate of the last update
        if cfg.kl.beta > 0 and cfg.kl.estimator == "k1":
            log.warning("algo.kl.estimator=k1 with algo.kl.beta=%g: as a loss on the rollout's samples its expected "
                        "gradient is zero, so the penalty reports the KL but does not pull toward the reference; "
                        "k2 follows KL(pi || pi_ref), k3 (the default) KL(pi_ref || pi) (docs/algorithms.md)",
                        cfg.kl.beta)  # fmt: skip
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

    def _guarded_step(self, loss: torch.Tensor, grad_norm: torch.Tensor) -> bool:
        """`optimizer.step()`, undone when the loss or the gradient's norm was non-finite, or when
        the step left a parameter or an Adam moment non-finite (a finite gradient times an infinite
        learning rate, an overflow) -> whether it was kept. One device sync per step: the weights
        and moments are saved in one flat copy, and every check is one reduction."""
        state = self.optimizer.state
        tracked = [p.detach() for p in self.params] + _moments(state, self.params)
        saved = torch.cat([t.reshape(-1) for t in tracked])
        # the rest of each state (Adam's `step` count, a CPU tensor even when the weights are on CUDA)
        counts = {p: {k: v.clone() if torch.is_tensor(v) else v for k, v in state[p].items()
                      if not _is_moment(k, v)} for p in self.params if p in state}  # fmt: skip
        self.optimizer.step()
        after = [p.detach() for p in self.params] + _moments(state, self.params)
        # one sum in float64 (no float32 value can overflow it; a NaN or an inf carries through)
        finite = torch.cat([t.reshape(-1) for t in after]).sum(dtype=torch.float64).isfinite()
        if (finite & loss.isfinite() & grad_norm.isfinite()).item():
            return True
        with torch.no_grad():
            for t, before in zip(tracked, saved.split([t.numel() for t in tracked]), strict=True):
                t.copy_(before.view_as(t))
        for p in self.params:
            if p in counts:
                state[p].update(counts[p])
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
        # per-minibatch standardization counts every step: it gives a zero advantage a weight
        keep = gradient_steps(advantages, every_step or cfg.normalize_advantages
                              or (cfg.entropy_coef > 0 and not free_entropy))  # fmt: skip
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
        # The minibatches' rows are found on the host, once per update: the loop below then waits
        # for the device once per optimizer step (the finiteness check), never for an index.
        traj_host, keep_host = traj.cpu(), keep.cpu()
        stats: dict[str, list] = {}  # per optimizer step: 0-d tensors, or floats; read once at the end
        kl_steps = 0  # optimizer steps of the last epoch that report an approx. KL to the rollout policy
        for _ in range(cfg.epochs):
            kl_steps = 0
            # exactly `minibatches` parts, sizes differing by at most one (`chunk` makes fewer where they
            # do not divide the trajectories: 6 of 16 trajectories for 7); empty ones (fewer kept
            # trajectories than minibatches, under dynamic sampling) are skipped below
            for members_host in torch.randperm(n_traj, generator=shuffle).tensor_split(cfg.minibatches):
                in_mb = torch.zeros(n_traj, dtype=torch.bool)
                in_mb[members_host] = True
                member = in_mb[traj_host]
                sel = member & keep_host
                rows_host = sel.nonzero().squeeze(1)  # the mask's rows, found once for every tensor below
                idle_host = (member & ~keep_host).nonzero().squeeze(1) if free_entropy else rows_host[:0]
                if len(rows_host) == 0 and len(idle_host) == 0:
                    continue
                members, rows, idle = (_to(t, device) for t in (members_host, rows_host, idle_host))
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
                        extra_loss, extra_metrics = module.loss(policy, obs[rows], _to(sel, device))
                        loss = loss + extra_loss
                        metrics.update(extra_metrics)
                if len(idle):  # the bonus alone: ratio 1 and advantage 0 leave no other term, and
                    # every aggregation sums its elements over denominators fixed by the layout
                    layout = Layout(traj[idle], lengths, members, self.horizon)
                    unmoved = logp_old[idle]
                    idle_loss, idle_metrics = self.policy_loss(unmoved, unmoved, advantages[idle], layout, cfg, None,
                                                               policy.state_free_entropy(len(idle)))  # fmt: skip
                    loss = idle_loss if loss is None else loss + idle_loss
                    # the rest describe moved steps; a user's loss may report no entropy
                    metrics = metrics or {k: v for k, v in idle_metrics.items() if k == "entropy"}
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if free_entropy:  # weights the pass did not reach get its zero gradient: Adam's moments decay alike
                    for p in self.params:
                        if p.grad is None:
                            p.grad = torch.zeros_like(p)
                grad_norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm)
                if not self._guarded_step(loss.detach(), grad_norm):  # a NaN never reaches the weights
                    stats.setdefault("skipped_fraction", []).append(1.0)
                    self.optimizer.zero_grad(set_to_none=True)
                    self._skipped(it)
                    continue
                self.skipped_in_a_row = 0
                policy.after_step()
                for key, value in {**metrics, "grad_norm": grad_norm, "skipped_fraction": 0.0}.items():
                    stats.setdefault(key, []).append(value.detach() if torch.is_tensor(value) else value)
                if "approx_kl" in metrics:  # every built-in policy loss reports it
                    kl_steps += 1
        values = _floats(stats, device)
        if cfg.lr_schedule == "adaptive" and kl_steps:  # the mean over the last epoch's steps
            self._adapt_lr(float(np.mean(values["approx_kl"][-kl_steps:])))
        return {k: float(np.mean(v)) for k, v in values.items()}

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
