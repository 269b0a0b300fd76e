"""Stable-Baselines3 PPO on a built-in task, as the outside reference of `benchmark.py train`.

It trains on the same Gymnasium env (`grpo_robot/<Task>-v0`: reward 1 on the success step, the
episode ends there or at the horizon), from scratch, with SB3's PPO defaults (n_steps 2048 per
env, batch 64, 10 epochs, lr 3e-4, gamma 0.99, GAE 0.95) and the same 128x128 tanh network as
the default job. Every `eval_every_steps` env steps a callback evaluates the mean action on the
same held-out seeds and the same batched env as grpo-robot's evaluation, and training stops at
the target. Evaluation time is kept out of the training seconds, as in grpo-robot's runs.
Needs the `bench` extra.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from grpo_robot import machine
from grpo_robot.batched import BatchedEnv
from grpo_robot.envs import TASKS, register_all
from grpo_robot.evaluation import EvalResult
from grpo_robot.rollout import eval_seeds

N_ENVS = 8


def evaluate_sb3(model, env: BatchedEnv, seeds: np.ndarray) -> EvalResult:
    """Mean-action success on `seeds`, one world each, exactly like grpo_robot.evaluation."""
    obs = env.reset(seeds)
    while not env.done.all():
        action, _ = model.predict(obs, deterministic=True)
        obs, *_ = env.step(action)
    return EvalResult(seeds, env.terminated & ~env.failed, env.steps.copy())


def run_sb3(task: str, seed: int, args: argparse.Namespace, out: Path) -> dict:
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    register_all()
    env_id = f"grpo_robot/{task}-v{TASKS[task].version}"
    vec = make_vec_env(env_id, n_envs=N_ENVS, seed=seed)
    model = PPO("MlpPolicy", vec, seed=seed, device="cpu", verbose=0,
                policy_kwargs={"net_arch": [128, 128], "activation_fn": torch.nn.Tanh})  # fmt: skip
    eval_env = BatchedEnv(task, args.eval_seeds)
    seeds = eval_seeds(args.eval_seeds)
    curve = {"env_steps": [], "seconds": [], "success": []}
    state = {"eval_s": 0.0, "target": {"target": args.target, "reached": False}, "next": 0}
    start = time.perf_counter()

    def record(steps: int) -> bool:
        t0 = time.perf_counter()
        result = evaluate_sb3(model, eval_env, seeds)
        state["eval_s"] += time.perf_counter() - t0
        elapsed = time.perf_counter() - start
        curve["env_steps"].append(steps)
        curve["seconds"].append(elapsed)
        curve["success"].append(result.rate)
        if result.rate >= args.target and not state["target"]["reached"]:
            state["target"].update(reached=True, env_steps=steps, success=result.rate, seconds=elapsed,
                                   train_seconds=elapsed - state["eval_s"])  # fmt: skip
            return False  # stop learning
        return True

    class EvalEvery(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps >= state["next"]:
                state["next"] += args.sb3_eval_every
                return record(self.num_timesteps)
            return True

    record(0)
    if not state["target"]["reached"]:
        model.learn(total_timesteps=args.sb3_steps, callback=EvalEvery())
    seconds = time.perf_counter() - start
    steps = int(model.num_timesteps)
    if curve["env_steps"][-1] != steps and not state["target"]["reached"]:
        record(steps)
    vec.close()
    import stable_baselines3

    run_machine = {**machine.describe(), "stable_baselines3": stable_baselines3.__version__}
    return {"task": task, "start": "scratch", "algo": "sb3_ppo", "seed": seed, "target": state["target"],
            "iterations": None, "env_steps": steps, "seconds": seconds, "eval_seconds": state["eval_s"],
            "final_success": curve["success"][-1], "curve": curve, "machine": run_machine}  # fmt: skip
