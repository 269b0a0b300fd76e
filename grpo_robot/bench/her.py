"""GRPO against Stable-Baselines3 SAC with hindsight experience replay on Gymnasium-Robotics
FetchReach, side by side (`scripts/benchmark.py her`).

For each seed, one run after the other on the same machine: grpo-robot's `experiment=fetch_reach`
and SB3's SAC + HER with the RL Zoo's FetchReach settings (MultiInputPolicy, 64x64, lr 1e-3,
batch 256, gamma 0.95, 1,000 random steps first, 4 relabelled goals per transition from the
episode's future). Both are scored the same way: the mean action on the same held-out reset
seeds, an episode a success at its first `is_success` step; both stop at their first
evaluation at the target. Time to target leaves evaluation time out on both sides; the
wall-clock with it is reported too. Needs the `fetch` and `bench` extras.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from grpo_robot import machine
from grpo_robot.seeding import eval_seeds

ENV_ID = "FetchReach-v4"
SAC_HER = dict(buffer_size=1_000_000, batch_size=256, gamma=0.95, learning_rate=1e-3, learning_starts=1000)


@dataclass(frozen=True)
class HerBench:
    seeds: Sequence[int] = (0, 1, 2)
    target: float = 0.95
    eval_seeds: int = 100
    grpo_iterations: int = 40  # at most, per run (evaluated after every iteration)
    sb3_steps: int = 30_000  # at most, per run
    sb3_eval_every: int = 1_000  # env steps
    out: Path = Path("runs/benchmark/fetch_reach_her")


def sb3_success(model, seeds: np.ndarray, horizon: int = 50) -> float:
    """Mean-action success of an SB3 model on FetchReach from each reset seed: an episode
    succeeds at its first step with `info["is_success"]`, as grpo-robot's evaluation judges it."""
    import gymnasium
    import gymnasium_robotics

    gymnasium.register_envs(gymnasium_robotics)
    env = gymnasium.make(ENV_ID)
    wins = 0
    for seed in seeds:
        obs, _ = env.reset(seed=int(seed))
        for _ in range(horizon):
            action, _ = model.predict(obs, deterministic=True)
            obs, _, terminated, truncated, info = env.step(action)
            if info.get("is_success", 0.0) > 0.5:
                wins += 1
                break
            if terminated or truncated:
                break
    env.close()
    return wins / len(seeds)


def run_sac_her(b: HerBench, seed: int, log: Callable[[str], None]) -> dict:
    import gymnasium
    import gymnasium_robotics
    from stable_baselines3 import SAC, HerReplayBuffer
    from stable_baselines3.common.callbacks import BaseCallback

    gymnasium.register_envs(gymnasium_robotics)
    model = SAC("MultiInputPolicy", gymnasium.make(ENV_ID), seed=seed, device="cpu", verbose=0,
                replay_buffer_class=HerReplayBuffer,
                replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"},
                policy_kwargs={"net_arch": [64, 64]}, **SAC_HER)  # fmt: skip
    seeds = eval_seeds(b.eval_seeds)
    state = {"eval_s": 0.0, "next": b.sb3_eval_every, "target": None, "success": 0.0}
    start = time.perf_counter()

    class EvalEvery(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps < state["next"]:
                return True
            state["next"] += b.sb3_eval_every
            t0 = time.perf_counter()
            state["success"] = sb3_success(self.model, seeds)
            state["eval_s"] += time.perf_counter() - t0
            if state["success"] >= b.target:
                elapsed = time.perf_counter() - start
                state["target"] = {"env_steps": self.num_timesteps, "train_seconds": elapsed - state["eval_s"]}
                return False
            return True

    model.learn(total_timesteps=b.sb3_steps, callback=EvalEvery())
    seconds = time.perf_counter() - start
    row = {"method": "SB3 SAC+HER", "seed": seed, "target": state["target"], "env_steps": int(model.num_timesteps),
           "seconds": seconds, "final_success": state["success"]}  # fmt: skip
    log(f"SAC+HER seed {seed}: {row['final_success']:.0%} after {row['env_steps']:,} env steps, {seconds:.0f} s")
    return row


def run_grpo(b: HerBench, seed: int, log: Callable[[str], None]) -> dict:
    from grpo_robot.cli import compose_train_config
    from grpo_robot.trainer import Trainer

    cfg = compose_train_config("experiment=fetch_reach", f"seed={seed}", f"target_success={b.target}",
                               "eval_every=1", f"eval_seeds={b.eval_seeds}", f"iterations={b.grpo_iterations}",
                               "eval_at_start=false", "time_limit_min=null", "progress=false")  # fmt: skip
    trainer = Trainer(cfg, b.out / time.strftime("%Y-%m-%d_%H-%M-%S") / f"grpo_seed{seed}")
    summary = trainer.run()
    trainer.close()
    target = summary["target"]
    row = {"method": "grpo-robot GRPO", "seed": seed,
           "target": {"env_steps": target["env_steps"], "train_seconds": target["train_seconds"]}
           if target.get("reached") else None,
           "env_steps": summary["env_steps"], "seconds": summary["seconds"],
           "final_success": summary["eval"]["success_rate"]}  # fmt: skip
    log(f"GRPO seed {seed}: {row['final_success']:.0%} after {row['env_steps']:,} env steps, {row['seconds']:.0f} s")
    return row


def table(rows: list[dict], target: float) -> str:
    lines = [f"| method | seed | env steps to {target:.0%} | seconds to {target:.0%} (no eval) | "
             "final success | env steps | wall-clock (with eval) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for r in rows:
        t = r["target"]
        reach = ("not reached", "-") if t is None else (f"{t['env_steps']:,}", f"{t['train_seconds']:.0f} s")
        lines.append(f"| {r['method']} | {r['seed']} | {reach[0]} | {reach[1]} | {r['final_success']:.0%} | "
                     f"{r['env_steps']:,} | {r['seconds']:.0f} s |")  # fmt: skip
    for method in dict.fromkeys(r["method"] for r in rows):
        times = [r["target"]["train_seconds"] for r in rows if r["method"] == method and r["target"]]
        runs = sum(r["method"] == method for r in rows)
        median = f", median {np.median(times):.0f} s" if len(times) == runs else ""
        lines.append(f"\n{method}: target reached on {len(times)} of {runs} seeds{median}")
    return "\n".join(lines)


def benchmark(b: HerBench, log: Callable[[str], None]) -> str:
    """Both methods on every seed, taking turns (GRPO, then SAC+HER, per seed); the table."""
    info = machine.describe("stable_baselines3", "gymnasium_robotics")
    log(f"machine: {machine.one_line(info)}; stable-baselines3 {info['stable_baselines3']}, "
        f"gymnasium-robotics {info['gymnasium_robotics']}")
    rows = []
    for seed in b.seeds:
        rows.append(run_grpo(b, seed, log))
        rows.append(run_sac_her(b, seed, log))
    rows.sort(key=lambda r: (r["method"], r["seed"]))
    return table(rows, b.target)
