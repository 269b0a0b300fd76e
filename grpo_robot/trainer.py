"""GRPO training loop: rollout in groups -> group-relative advantages -> clipped update.

Metric names (TensorBoard, x-axis = env steps):
  charts/  train_success, eval_success, eval_success_low, eval_success_high, mixed_groups,
           mean_abs_advantage, failed_worlds, env_steps_per_s; with dynamic sampling also
           groups_drawn, groups_kept, drawn_success (train_success is then over kept groups)
  losses/  policy_loss, clip_fraction, approx_kl, kl_ref, entropy, grad_norm, skipped_steps;
           with a critic (algo=ppo) also value_loss, and charts/explained_variance
  time/    rollout_s, update_s
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf

from grpo_robot import checkpoint, machine
from grpo_robot.algo import ADVANTAGE_ESTIMATORS, AGGREGATIONS, KL_ESTIMATORS, clipped_surrogate, gae, mixed_fraction
from grpo_robot.batched import group_seeds
from grpo_robot.config import TrainConfig, config_dict, env_name, env_source, policy_kwargs, validate
from grpo_robot.environment import make_env, make_eval_env
from grpo_robot.envs import make_task
from grpo_robot.evaluation import EvalResult, evaluate
from grpo_robot.policies import build_policy
from grpo_robot.rollout import (
    STREAM_EVAL,
    STREAM_SHUFFLE,
    Batch,
    collect,
    eval_seeds,
    iteration_generator,
    iteration_seeds,
    stream_seed,
)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


# architecture keys that must match between an init_from checkpoint and the config; the
# others (temperature, init_std) are sampling settings or superseded by the loaded weights
ARCHITECTURE_KEYS = ("hidden_sizes", "activation", "obs_norm", "state_dependent_std", "squash", "bins", "head",
                     "embed_dim")  # fmt: skip


def load_initial_policy(path: str, cfg: TrainConfig, env, device: torch.device) -> dict[str, torch.Tensor]:
    """The state_dict of the policy in checkpoint `path` (a BC or training checkpoint), after
    checking that it fits `cfg` and `env` (name, obs_dim, action_dim); a mismatch raises
    `ValueError` naming both sides."""
    ckpt = checkpoint.load(path, map_location=device)
    record = ckpt["policy"]
    where = f"init_from={path!s}"
    if record["type"] != cfg.policy.type:
        raise ValueError(f"{where} holds a {record['type']} policy, but the config has policy.type={cfg.policy.type}")
    their_env = (ckpt.get("config") or {}).get("env")
    if their_env and env_name(their_env) != env.name:
        raise ValueError(f"{where} was trained on {env_name(their_env)}, but the config has {env_source(cfg.env)}")
    if (record["obs_dim"], record["action_dim"]) != (env.obs_dim, env.action_dim):
        raise ValueError(
            f"{where} has obs_dim={record['obs_dim']}, action_dim={record['action_dim']}, but {env.name} has "
            f"obs_dim={env.obs_dim}, action_dim={env.action_dim}"
        )
    mine = policy_kwargs(cfg.policy)
    for key in ARCHITECTURE_KEYS:
        if key in mine and key in record["kwargs"] and record["kwargs"][key] != mine[key]:
            raise ValueError(
                f"{where} has policy.{key}={record['kwargs'][key]!r}, but the config has policy.{key}={mine[key]!r}"
            )
    return record["state_dict"]


@dataclass
class UpdateStats:
    """Means over the optimizer steps of one update."""

    values: dict[str, list[float]] = field(default_factory=dict)

    def add(self, **kv: float) -> None:
        for k, v in kv.items():
            self.values.setdefault(k, []).append(float(v))

    def means(self) -> dict[str, float]:
        return {k: float(np.mean(v)) for k, v in self.values.items()}


class Trainer:
    """Builds everything from a validated `TrainConfig`; `run()` trains and returns a summary."""

    def __init__(self, cfg: TrainConfig, run_dir: str | Path) -> None:
        validate(cfg)  # before any environment is built
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.device = resolve_device(cfg.device)
        algo = cfg.algo
        self.n_groups, self.group_size = algo.groups_per_iter, algo.group_size
        task = make_task(cfg.env.task) if cfg.env.task else None  # a built-in task (its expert makes demos)
        self.final_step_outcome = cfg.env.outcome == "final_step"
        env = self.env = make_env(cfg.env, self.n_groups * self.group_size)
        self.eval_env = make_eval_env(cfg, cfg.eval_seeds, env)

        torch.manual_seed(cfg.seed)  # initial weights
        self.policy = build_policy(cfg.policy.type, env.obs_dim, env.action_dim, **policy_kwargs(cfg.policy)).to(
            self.device
        )
        self.pretrained = None  # how the initial policy was made: {"source", "eval", ...} or None
        if cfg.init_from:
            self.pretrained = {"source": str(checkpoint.resolve(cfg.init_from))}
            self.policy.load_state_dict(load_initial_policy(cfg.init_from, cfg, env, self.device))
        self.update_obs_norm = cfg.obs_norm_updates
        if self.update_obs_norm is None:  # a pretrained policy keeps the inputs it was trained on
            self.update_obs_norm = not (cfg.init_from or cfg.pretrain)
        self.demos = None  # a given dataset is checked before any work starts
        if cfg.pretrain and cfg.demos.path:
            from grpo_robot.demos import DemoDataset

            self.demos = DemoDataset.load(cfg.demos.path)
            self.demos.check_compatible(task, f"demos.path={cfg.demos.path}")
        # the frozen reference, the initial policy, exists only when the KL term is on
        self.reference = self._freeze(self.policy) if algo.kl_beta > 0 else None
        self.task = task
        self.critic = None  # PPO's value function (advantage=gae)
        if algo.advantage == "gae":
            from grpo_robot.critic import ValueFunction

            sizes, activation = list(cfg.policy.hidden_sizes), cfg.policy.activation
            self.critic = ValueFunction(env.obs_dim, sizes, activation).to(self.device)
        self.optimizer = self._make_optimizer()
        self.iteration = 0
        self.env_steps = 0
        self.sampling: dict[str, float] = {}  # dynamic-sampling counts of the last iteration
        self.best_eval = -1.0
        self.last_eval: EvalResult | None = None
        self.eval_seconds = 0.0  # spent in evaluations, so time-to-target can leave them out
        # the first evaluation at cfg.target_success: {"target", "reached", "iteration", "env_steps", "seconds", ...}
        self.target: dict[str, Any] = (
            {} if cfg.target_success is None else {"target": cfg.target_success, "reached": False}
        )
        if cfg.resume:
            self._restore(checkpoint.load(cfg.resume, map_location=self.device))
        self.writer = None

    def pretrain(self) -> None:
        """The `pretrain=true` stage: collect (or load) demonstrations, behaviour-clone the policy
        and evaluate the clone. Writes `demos.npz`, `demos.json`, `bc.pt` and `bc.json` in the
        run directory. Skipped when resuming (the checkpoint holds the weights and reference)."""
        from grpo_robot.bc import checkpoint_from_bc, clone
        from grpo_robot.demos import collect_demos

        cfg = self.cfg
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.demos is not None:
            data, demos_path, collect_stats = self.demos, Path(cfg.demos.path), None
        else:
            d = cfg.demos
            data, stats = collect_demos(self.task, d.episodes, d.noise, d.seed, d.max_attempts, nthread=cfg.env.nthread)
            demos_path, collect_stats = data.save(self.run_dir / "demos.npz"), stats.to_json()
            (self.run_dir / "demos.json").write_text(json.dumps(collect_stats, indent=1))
        self.policy, result = clone(data, cfg.policy, cfg.bc, self.device)
        self.optimizer = self._make_optimizer()
        bc_eval = self.evaluate()
        record = checkpoint_from_bc(self.policy, cfg, str(demos_path), result, bc_eval)
        checkpoint.save_atomic(record, self.run_dir / "bc.pt")
        info = {"demos": str(demos_path), "collect": collect_stats, "bc": result.to_json(), "eval": bc_eval.to_json()}
        (self.run_dir / "bc.json").write_text(json.dumps(info, indent=1))
        self.pretrained = {"source": str(self.run_dir / "bc.pt"), "demo_episodes": data.n_episodes}
        if cfg.algo.kl_beta > 0:
            self.reference = self._freeze(self.policy)

    def _make_optimizer(self) -> torch.optim.Adam:
        params = list(self.policy.parameters()) + ([] if self.critic is None else list(self.critic.parameters()))
        return torch.optim.Adam(params, lr=self.cfg.algo.lr, eps=1e-5)

    @staticmethod
    def _freeze(policy):
        ref = copy.deepcopy(policy)
        ref.requires_grad_(False)
        return ref.eval()

    # -- one iteration ------------------------------------------------------------------------------
    def rollout(self, it: int) -> Batch:
        """One iteration's groups. With dynamic sampling, groups whose success rate lies outside
        `algo.keep_range` are dropped and more are drawn, up to `algo.max_sampling_rounds`
        draws; the batch then holds at most `groups_per_iter` kept groups (all of the last
        draw if none was kept, so the iteration still counts its steps)."""
        algo = self.cfg.algo
        if not algo.dynamic_sampling:
            return self._draw(it, 0)
        low, high = algo.keep_range
        kept: list[Batch] = []
        n_kept, successes = 0, 0.0
        for round_ in range(algo.max_sampling_rounds):
            batch = self._draw(it, round_)
            successes += batch.success.sum().item()
            rate = batch.success.view(-1, self.group_size).mean(1)
            keep = ((rate > low) & (rate < high)).nonzero()[:, 0][: self.n_groups - n_kept]
            traj = (keep[:, None] * self.group_size + torch.arange(self.group_size, device=keep.device)).flatten()
            kept.append(batch.select(traj))
            n_kept += len(keep)
            if n_kept == self.n_groups:
                break
        drawn = (round_ + 1) * self.n_groups
        self.sampling = {
            "charts/groups_drawn": drawn,
            "charts/groups_kept": n_kept,
            "charts/drawn_success": successes / (drawn * self.group_size),  # train success before filtering
        }
        if n_kept == 0:
            batch.simulated_steps = sum(k.simulated_steps for k in kept)
            return batch
        return Batch.concat(kept)

    def _draw(self, it: int, round_: int) -> Batch:
        seeds = group_seeds(iteration_seeds(self.cfg.seed, it, self.n_groups, round_), self.group_size)
        generator = iteration_generator(self.cfg.seed, it, self.device, round_=round_)
        return collect(self.env, self.policy, seeds, self.device, generator, False, self.final_step_outcome)

    def advantages(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (advantages [B], outcomes [G, N])."""
        rewards = batch.success.view(-1, self.group_size)
        adv = ADVANTAGE_ESTIMATORS[self.cfg.algo.advantage](rewards, self.cfg.algo.adv_eps)
        return adv.reshape(-1).to(torch.float32), rewards

    def gae_advantages(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """PPO's per-step advantages from the value function: the reward is the binary outcome on a
        trajectory's last step. -> (advantages [S], returns [S], values [S]) over `batch.packed()` steps."""
        algo = self.cfg.algo
        with torch.no_grad():
            values = self.critic(self.policy.obs_norm(batch.obs))  # [T, B]
        last = batch.mask.sum(0) - 1  # [B] index of each trajectory's last step
        rewards = torch.zeros_like(values)
        rewards[last.clamp(min=0), torch.arange(values.shape[1], device=values.device)] = batch.success
        if algo.reward == "shaped":
            rewards += algo.shaping_coef * self.shaping(batch)
        adv, returns = gae(rewards, values, batch.mask, algo.gamma, algo.gae_lambda)
        t_idx, traj = batch.mask.nonzero(as_tuple=True)
        return adv[t_idx, traj], returns[t_idx, traj], values[t_idx, traj]

    def shaping(self, batch: Batch) -> torch.Tensor:
        """Potential-based shaping (Ng et al. 1999), `[T, B]`: gamma * phi(s_t+1) - phi(s_t) between
        consecutive observations of a trajectory, 0 on padding and on its last step, whose next
        observation a batch does not keep. Over an episode it adds about phi(last) - phi(first);
        in the textbook setting (phi = 0 at termination) such shaping leaves the optimal policy
        unchanged, here it is close to that."""
        obs = batch.obs.cpu().numpy()
        phi = torch.as_tensor(self.task.potential(obs.reshape(-1, obs.shape[-1])).reshape(obs.shape[:2]))
        phi = phi.to(device=batch.mask.device, dtype=torch.float32)
        shaped = torch.zeros_like(phi)
        shaped[:-1] = (self.cfg.algo.gamma * phi[1:] - phi[:-1]) * batch.mask[1:]
        return shaped

    def update(
        self, packed: tuple[torch.Tensor, ...], advantages: torch.Tensor, it: int, returns: torch.Tensor | None = None
    ) -> dict[str, float]:
        """K epochs of minibatches over trajectories.

        `packed`: a batch's valid steps, as `Batch.packed()` returns them. `advantages`: one per
        trajectory `[B]` (GRPO family), or one per packed step `[S]` with the value targets
        `returns [S]` (PPO). Each minibatch's loss is the clipped surrogate per element (token,
        action or trajectory, `algo.ratio`), minus the KL penalty, plus the entropy bonus,
        aggregated by `algo.aggregation`; with a critic, plus `vf_coef` x the value loss.
        """
        algo = self.cfg.algo
        obs, raw, logp_old, traj, lengths = packed  # logp_old: [S, n_tokens]
        adv = advantages[traj] if returns is None else advantages
        n_traj = len(lengths)
        # zero-advantage steps add nothing to the surrogate's gradient: leave them out unless a
        # KL or entropy term, or the value loss, needs them (every aggregation keeps its full denominator)
        keep = torch.ones_like(adv, dtype=torch.bool)
        if algo.kl_beta == 0 and algo.entropy_coef == 0 and returns is None:
            keep = adv != 0
        logp_ref = None
        if self.reference is not None:
            with torch.no_grad():
                logp_ref = self.reference.log_probs(obs, raw)[0]
        lr = algo.lr * (1.0 - it / self.cfg.iterations if algo.lr_schedule == "linear" else 1.0)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        shuffle = torch.Generator().manual_seed(stream_seed(self.cfg.seed, it, STREAM_SHUFFLE))
        max_norm = algo.max_grad_norm if algo.max_grad_norm is not None else math.inf
        stats = UpdateStats()
        for _ in range(algo.epochs):
            for members in torch.randperm(n_traj, generator=shuffle).to(self.device).chunk(algo.minibatches):
                in_mb = torch.zeros(n_traj, dtype=torch.bool, device=self.device)
                in_mb[members] = True
                sel = in_mb[traj] & keep
                if not sel.any():
                    continue
                logp, entropy = self.policy.log_probs(obs[sel], raw[sel])
                ref = None if logp_ref is None else logp_ref[sel]
                adv_mb = adv[sel]
                if algo.normalize_advantages and len(adv_mb) > 1:
                    adv_mb = (adv_mb - adv_mb.mean()) / (adv_mb.std() + 1e-8)
                terms = self.loss_terms(logp, logp_old[sel], ref, entropy, adv_mb, traj[sel], lengths)
                objective, surrogate, elem_traj, elem_lengths, ratio, clipped, kl_ref = terms
                aggregate = AGGREGATIONS[algo.aggregation]
                loss = -aggregate(objective, elem_traj, elem_lengths, members, self.norm)
                value_loss = torch.zeros(())
                if returns is not None:
                    value = self.critic(self.policy.obs_norm(obs[sel]))
                    value_loss = 0.5 * (value - returns[sel]).pow(2).mean()
                    loss = loss + algo.vf_coef * value_loss
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(self.optimizer.param_groups[0]["params"], max_norm)
                if not (torch.isfinite(loss) and torch.isfinite(grad_norm)):
                    stats.add(skipped_steps=1)  # a NaN never reaches the weights
                    self.optimizer.zero_grad(set_to_none=True)
                    continue
                self.optimizer.step()
                with torch.no_grad():
                    log_ratio = torch.log(ratio)
                    policy_loss = -aggregate(surrogate, elem_traj, elem_lengths, members, self.norm)
                    stats.add(
                        policy_loss=policy_loss.item(),
                        clip_fraction=clipped.float().mean().item(),
                        approx_kl=(ratio - 1 - log_ratio).mean().item(),
                        kl_ref=kl_ref.mean().item(),
                        entropy=entropy.sum(-1).mean().item(),
                        grad_norm=grad_norm.item(),
                        skipped_steps=0,
                        **({} if returns is None else {"value_loss": value_loss.item()}),
                    )
        return stats.means()

    @property
    def norm(self) -> float:
        """Dr. GRPO's constant normalizer: the most elements a trajectory can have, i.e. max
        horizon x elements per step (1 with `ratio=sequence`, where a trajectory is one element)."""
        ratio = self.cfg.algo.ratio
        if ratio == "sequence":
            return 1.0
        return float(self.env.horizon * (self.policy.n_tokens if ratio == "token" else 1))

    def loss_terms(self, logp, logp_old, logp_ref, entropy, adv, traj, lengths):
        """Per-element objective at the configured ratio level.

        Inputs are per step: token log-probs `[s, n_tokens]`, `adv, traj: [s]`, and
        `lengths: [B]` valid steps per trajectory.
        -> (objective, surrogate, elem_traj, elem_lengths, ratio, clipped, kl_ref), the first two
        and `elem_traj` over elements `[E]`, `elem_lengths: [B]` elements per trajectory.
        """
        algo = self.cfg.algo
        clip_low = algo.clip_low if algo.clip_low is not None else algo.clip_eps
        clip_high = algo.clip_high if algo.clip_high is not None else algo.clip_eps
        kl_fn = KL_ESTIMATORS[algo.kl_estimator]
        n_tok = logp.shape[-1]
        if algo.ratio == "sequence":
            # GSPO: one ratio per trajectory, the geometric mean of its token ratios
            members, elem_traj = torch.unique(traj, return_inverse=True)
            tokens = (lengths[members] * n_tok).to(logp.dtype)
            per_traj = torch.zeros(len(members), dtype=logp.dtype, device=logp.device)

            def traj_mean(x):  # mean over each trajectory's tokens, [s, n_tok] -> [M]
                return per_traj.index_add(0, elem_traj, x.sum(-1)) / tokens

            seq_log_ratio = traj_mean(logp - logp_old)
            adv_traj = torch.zeros_like(per_traj).index_add(0, elem_traj, adv) / lengths[members].to(adv.dtype)
            surrogate, ratio, clipped = clipped_surrogate(
                seq_log_ratio, torch.zeros_like(seq_log_ratio), adv_traj, clip_low, clip_high, algo.dual_clip
            )
            kl_ref = traj_mean(kl_fn(logp, logp_ref)) if logp_ref is not None else torch.zeros_like(surrogate)
            ent = traj_mean(entropy)
            elem_traj, elem_lengths = members, torch.ones_like(lengths)
        else:
            if algo.ratio == "action":
                logp, logp_old, entropy = logp.sum(-1), logp_old.sum(-1), entropy.sum(-1)
                logp_ref = None if logp_ref is None else logp_ref.sum(-1)
                elem_traj, elem_lengths = traj, lengths
            else:  # token: every token its own clipped term
                logp, logp_old, entropy = logp.flatten(), logp_old.flatten(), entropy.flatten()
                logp_ref = None if logp_ref is None else logp_ref.flatten()
                adv = adv.repeat_interleave(n_tok)
                elem_traj, elem_lengths = traj.repeat_interleave(n_tok), lengths * n_tok
            surrogate, ratio, clipped = clipped_surrogate(logp, logp_old, adv, clip_low, clip_high, algo.dual_clip)
            kl_ref = kl_fn(logp, logp_ref) if logp_ref is not None else torch.zeros_like(surrogate)
            ent = entropy
        objective = surrogate
        # terms with a zero weight stay out of the graph: backward would still walk them
        if algo.kl_beta > 0:
            objective = objective - algo.kl_beta * kl_ref
        if algo.entropy_coef > 0:
            objective = objective + algo.entropy_coef * ent
        return objective, surrogate, elem_traj, elem_lengths, ratio, clipped, kl_ref

    # -- the loop -----------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        from torch.utils.tensorboard import SummaryWriter
        from tqdm import tqdm

        cfg = self.cfg
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "resolved_config.yaml").write_text(OmegaConf.to_yaml(config_dict(cfg)))
        start_time = time.perf_counter()
        if cfg.pretrain and self.iteration == 0 and not cfg.resume:
            self.pretrain()
        self.writer = SummaryWriter(str(self.run_dir / "tb"))
        if self.iteration == 0 and (self.pretrained is not None or cfg.eval_at_start):
            if self.pretrained is None:
                self.pretrained = {"source": f"random initial weights (seed {cfg.seed})"}
            # the starting point, on the same held-out seeds, at env step 0
            initial = self.last_eval if cfg.pretrain else self.evaluate()
            self.pretrained["eval"] = initial.to_json(episodes=False)
            for tag, value in (("rate", initial.rate), ("low", initial.interval[0]), ("high", initial.interval[1])):
                self.writer.add_scalar(f"charts/eval_success{'' if tag == 'rate' else '_' + tag}", value, 0)
        if self.iteration == 0 and self.last_eval is not None and self._check_target(self.last_eval, start_time):
            cfg = dataclasses.replace(cfg, iterations=0)  # the start already meets the target
        bar = tqdm(
            total=cfg.iterations, initial=self.iteration, disable=not cfg.progress, unit="it", dynamic_ncols=True
        )
        try:
            while self.iteration < cfg.iterations:
                it = self.iteration
                t0 = time.perf_counter()
                batch = self.rollout(it)
                t1 = time.perf_counter()
                packed = batch.packed()
                outcomes = batch.success.view(-1, self.group_size)
                critic_stats = {}
                if self.critic is None:
                    advantages, _ = self.advantages(batch)
                    update_stats = self.update(packed, advantages, it)
                else:
                    advantages, returns, values = self.gae_advantages(batch)
                    update_stats = self.update(packed, advantages, it, returns)
                    residual = (returns - values).var() / returns.var().clamp(min=1e-12)
                    critic_stats = {"charts/explained_variance": 1.0 - residual.item()}
                if self.update_obs_norm:  # after the update: one normalization per iteration
                    self.policy.obs_norm.update(packed[0])
                t2 = time.perf_counter()
                self.iteration = it + 1
                self.env_steps += batch.simulated_steps
                train_success = batch.success.mean().item()
                scalars = {
                    "charts/train_success": train_success,
                    "charts/mixed_groups": mixed_fraction(outcomes),
                    "charts/mean_abs_advantage": advantages.abs().mean().item(),
                    "charts/failed_worlds": batch.failed.float().mean().item(),
                    "charts/env_steps_per_s": batch.simulated_steps / (t1 - t0),
                    "time/rollout_s": t1 - t0,
                    "time/update_s": t2 - t1,
                    **{f"losses/{k}": v for k, v in update_stats.items()},
                    **critic_stats,
                    **self.sampling,
                }
                out_of_time = (
                    cfg.time_limit_min is not None and time.perf_counter() - start_time > 60 * cfg.time_limit_min
                ) or (cfg.max_env_steps is not None and self.env_steps >= cfg.max_env_steps)
                last = self.iteration == cfg.iterations or out_of_time
                if self.iteration % cfg.eval_every == 0 or last:
                    result = self.evaluate()
                    if self._check_target(result, start_time):
                        out_of_time = last = True  # the target is reached: save, summarize, stop
                    low, high = result.interval
                    scalars.update(
                        {
                            "charts/eval_success": result.rate,
                            "charts/eval_success_low": low,
                            "charts/eval_success_high": high,
                        }
                    )
                    if result.rate > self.best_eval:
                        self.best_eval = result.rate
                        self.save("best")
                if self.iteration % cfg.checkpoint_every == 0 or self.iteration % cfg.eval_every == 0 or last:
                    self.save("last")
                for tag, value in scalars.items():
                    self.writer.add_scalar(tag, value, self.env_steps)
                postfix = {"success": f"{train_success:.2f}"}
                if self.last_eval is not None:
                    postfix["eval"] = f"{self.last_eval.rate:.2f}"
                bar.set_postfix(postfix, refresh=False)
                bar.update(1)
                if out_of_time:
                    break
        finally:
            bar.close()
            self.writer.close()
        final = self.last_eval
        summary = {
            "iterations": self.iteration,
            "env_steps": self.env_steps,
            "seconds": time.perf_counter() - start_time,
            "eval": final.to_json() if final is not None else None,
            "best_eval": self.best_eval,
            "run_dir": str(self.run_dir),
            "initial_policy": self.pretrained,
            "target": self.target,
            "eval_seconds": self.eval_seconds,
            "machine": machine.describe(),
        }
        brief = {**summary, "eval": None if final is None else final.to_json(episodes=False)}
        (self.run_dir / "summary.json").write_text(json.dumps(brief, indent=1))
        if final is not None:
            (self.run_dir / "eval.json").write_text(json.dumps(final.to_json(), indent=1))
        return summary

    def _check_target(self, result: EvalResult, start_time: float) -> bool:
        """Record the first evaluation at `target_success` or above; True when it is this one."""
        target = self.cfg.target_success
        if target is None or self.target.get("reached") or result.rate < target:
            return False
        seconds = time.perf_counter() - start_time
        self.target.update(reached=True, iteration=self.iteration, env_steps=self.env_steps, success=result.rate,
                           seconds=seconds, train_seconds=seconds - self.eval_seconds)  # fmt: skip
        return True

    def close(self) -> None:
        """Release the envs (worker processes of `env.vector=async`)."""
        self.env.close()
        if self.eval_env is not self.env:
            self.eval_env.close()

    def evaluate(self) -> EvalResult:
        start = time.perf_counter()
        cfg = self.cfg
        generator = iteration_generator(cfg.seed, self.iteration, self.device, STREAM_EVAL)
        self.last_eval = evaluate(
            self.eval_env,
            self.policy,
            eval_seeds(cfg.eval_seeds),
            self.device,
            cfg.eval_deterministic,
            generator,
            self.final_step_outcome,
        )
        self.eval_seconds += time.perf_counter() - start
        return self.last_eval

    # -- checkpoints --------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {
            "format_version": checkpoint.FORMAT_VERSION,
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "best_eval": self.best_eval,
            "config": config_dict(self.cfg),
            "policy": checkpoint.policy_record(self.policy),
            "optimizer": self.optimizer.state_dict(),
            "reference": None if self.reference is None else self.reference.state_dict(),
            "critic": None if self.critic is None else self.critic.state_dict(),
            "eval": None if self.last_eval is None else self.last_eval.to_json(),
        }

    def save(self, name: str) -> Path:
        path = self.run_dir / "checkpoints" / f"{name}.pt"
        checkpoint.save_atomic(self.state(), path)
        return path

    def _restore(self, ckpt: dict[str, Any]) -> None:
        record = ckpt["policy"]
        mine = checkpoint.policy_record(self.policy)
        for key in ("type", "obs_dim", "action_dim", "kwargs"):
            if record[key] != mine[key]:
                raise ValueError(f"cannot resume: checkpoint policy {key}={record[key]!r}, config gives {mine[key]!r}")
        self.policy.load_state_dict(record["state_dict"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        if self.reference is not None:
            if ckpt["reference"] is None:
                raise ValueError("cannot resume with algo.kl_beta > 0: the checkpoint holds no reference policy")
            self.reference.load_state_dict(ckpt["reference"])
        if self.critic is not None:
            if ckpt.get("critic") is None:
                raise ValueError("cannot resume with algo.advantage=gae: the checkpoint holds no value function")
            self.critic.load_state_dict(ckpt["critic"])
        self.iteration = int(ckpt["iteration"])
        self.env_steps = int(ckpt["env_steps"])
        self.best_eval = float(ckpt["best_eval"])
