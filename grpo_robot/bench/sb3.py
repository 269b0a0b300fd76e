"""Stable-Baselines3 PPO on a built-in task, as the outside reference of a sweep
(`scripts/benchmark.py train --sb3-steps N`).

It trains on the same Gymnasium env (`grpo_robot/<Task>-v<version>`: reward 1 on the success step, the
episode ends there or at the horizon) with SB3's PPO defaults (n_steps 2048 per env, batch 64,
10 epochs, lr 3e-4, gamma 0.99, GAE 0.95) and the same 128x128 tanh network as the default job.

From scratch, or from the same behaviour-cloned checkpoint as grpo-robot's runs: the clone's
layers are copied into SB3's actor (trunk, mean head, log-std) and its observation normalization
becomes a fixed wrapper around SB3's env. The value network starts fresh, as grpo-robot's
critic does. Before training, the copy is checked: SB3's mean action must score what the clone
scores on the held-out seeds.

Every `sb3_eval_every` env steps a callback evaluates SB3's mean action with grpo-robot's own
evaluation (`grpo_robot.evaluation.evaluate`, the same held-out seeds and batched env), and
training stops at the target. Evaluation time is kept out of the training seconds, as in
grpo-robot's runs. Needs the `bench` extra; Stable-Baselines3 is imported only by `run_sb3`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from grpo_robot import machine
from grpo_robot.batched import BatchedEnv
from grpo_robot.bench.sweep import Sweep, record
from grpo_robot.envs import TASKS, register_all
from grpo_robot.evaluation import EvalResult, evaluate
from grpo_robot.seeding import eval_seeds

N_ENVS = 8
CPU = torch.device("cpu")


def identity(obs: np.ndarray) -> np.ndarray:
    return obs


def frozen_normalizer(obs_norm) -> Callable[[np.ndarray], np.ndarray]:
    """The clone's own `ObsNormalizer`, applied to numpy observations without further updates."""

    @torch.no_grad()
    def normalize(obs: np.ndarray) -> np.ndarray:
        return obs_norm(torch.as_tensor(obs)).numpy().astype(np.float32)

    return normalize


class MeanAction(torch.nn.Module):
    """A model with SB3's `predict` as the policy that `grpo_robot.evaluation.evaluate` runs:
    `sample` returns its deterministic action (observations through `normalize` first)."""

    def __init__(self, model, normalize: Callable[[np.ndarray], np.ndarray] = identity) -> None:
        super().__init__()
        self.model, self.normalize = model, normalize

    def sample(self, obs: torch.Tensor, generator=None, deterministic: bool = True):
        action, _ = self.model.predict(self.normalize(obs.cpu().numpy()), deterministic=True)
        action = torch.as_tensor(action, device=obs.device)
        return action, action, torch.zeros_like(action)


def evaluate_sb3(model, env: BatchedEnv, seeds: np.ndarray, normalize=identity) -> EvalResult:
    """Mean-action success of an SB3 model on `seeds`, by grpo-robot's evaluation."""
    return evaluate(env, MeanAction(model, normalize), seeds, CPU)


def load_clone(path: Path):
    """A behaviour-cloned policy from a grpo-robot checkpoint, if SB3's actor can hold it."""
    from grpo_robot import checkpoint

    clone = checkpoint.policy_from_record(checkpoint.load(path)["policy"])
    kwargs = clone.init_kwargs()
    if clone.type != "gaussian" or kwargs["squash"] or kwargs["state_dependent_std"]:
        raise SystemExit(f"{path}: SB3 takes an unsquashed Gaussian policy with a learned log-std vector")
    if kwargs.get("mirror"):
        raise SystemExit(f"{path}: the clone acts in a mirror frame (policy.mirror=true), which SB3's actor has "
                         "no place for: clone with policy.mirror=false")  # fmt: skip
    return clone


def copy_actor(clone, policy) -> None:
    """The clone's trunk, mean head and log-std into SB3's `ActorCriticPolicy` of the same sizes."""
    ours = [m for m in clone.trunk if isinstance(m, torch.nn.Linear)] + [clone.mean_head[0]]
    theirs = [m for m in policy.mlp_extractor.policy_net if isinstance(m, torch.nn.Linear)] + [policy.action_net]
    with torch.no_grad():
        for a, b in zip(ours, theirs, strict=True):
            b.weight.copy_(a.weight)
            b.bias.copy_(a.bias)
        policy.log_std.copy_(clone.log_std)


def run_sb3(s: Sweep, seed: int, init: Path | None = None) -> dict:
    """One SB3 PPO run of `s.task` from scratch (`init` None) or from the clone at `init`,
    until the target or `s.sb3_steps` env steps; its record for results.json."""
    import gymnasium
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    register_all()
    env_id = f"grpo_robot/{TASKS[s.task].task_id()}"
    clone = None if init is None else load_clone(init)
    normalize, wrapper = identity, None
    if clone is not None and clone.obs_norm.enabled:  # SB3's env sees what the clone was trained on
        normalize = frozen_normalizer(clone.obs_norm)

        def wrapper(env):
            return gymnasium.wrappers.TransformObservation(env, normalize, env.observation_space)

    vec = make_vec_env(env_id, n_envs=N_ENVS, seed=seed, wrapper_class=wrapper)
    model = PPO("MlpPolicy", vec, seed=seed, device="cpu", verbose=0,
                policy_kwargs={"net_arch": [128, 128], "activation_fn": torch.nn.Tanh})  # fmt: skip
    eval_env = BatchedEnv(s.task, s.eval_seeds)
    seeds = eval_seeds(s.eval_seeds)
    if clone is not None:
        copy_actor(clone, model.policy)
        ours = evaluate(eval_env, clone, seeds, CPU)
        theirs = evaluate_sb3(model, eval_env, seeds, normalize)
        if abs(ours.rate - theirs.rate) > 0.02:
            raise SystemExit(f"{init}: the clone scores {ours.rate:.0%}, its copy in SB3 {theirs.rate:.0%}")
        print(f"SB3 from {init}: the copy scores {theirs.rate:.0%}, the clone {ours.rate:.0%}", flush=True)
    curve = {"env_steps": [], "seconds": [], "success": []}
    state = {"eval_s": 0.0, "target": {"target": s.target, "reached": False}, "next": 0}
    start = time.perf_counter()

    def evaluate_at(steps: int) -> bool:
        """Evaluate, extend the curve; False once the target is reached (stop learning)."""
        t0 = time.perf_counter()
        result = evaluate_sb3(model, eval_env, seeds, normalize)
        state["eval_s"] += time.perf_counter() - t0
        elapsed = time.perf_counter() - start
        curve["env_steps"].append(steps)
        curve["seconds"].append(elapsed)
        curve["success"].append(result.rate)
        if result.rate >= s.target and not state["target"]["reached"]:
            state["target"].update(reached=True, env_steps=steps, success=result.rate, seconds=elapsed,
                                   train_seconds=elapsed - state["eval_s"])  # fmt: skip
            return False
        return True

    class EvalEvery(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps >= state["next"]:
                state["next"] += s.sb3_eval_every
                return evaluate_at(self.num_timesteps)
            return True

    evaluate_at(0)
    if not state["target"]["reached"]:
        model.learn(total_timesteps=s.sb3_steps, callback=EvalEvery())
    seconds = time.perf_counter() - start
    steps = int(model.num_timesteps)
    if not state["target"]["reached"]:  # after the last update (callbacks run while collecting)
        if curve["env_steps"][-1] == steps:
            for values in curve.values():
                values.pop()
        evaluate_at(steps)
    vec.close()
    summary = {"target": state["target"], "iterations": None, "env_steps": steps, "seconds": seconds,
               "eval_seconds": state["eval_s"], "eval": {"success_rate": curve["success"][-1]},
               "machine": machine.describe("stable_baselines3")}  # fmt: skip
    return record(s, "scratch" if init is None else "bc", "sb3_ppo", seed, summary, curve)
