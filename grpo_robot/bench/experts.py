"""Success rate of each task's scripted expert through the batched backend."""

from __future__ import annotations

import time

import numpy as np

from grpo_robot.batched import BatchedEnv
from grpo_robot.bench.markdown import row


def run_expert(env: BatchedEnv, seeds: np.ndarray) -> float:
    """One episode per seed (`env.num_worlds` of them) driven by the task's expert; the seconds
    it took. The outcome stays in `env`'s flags."""
    obs = env.reset(seeds)
    start = time.perf_counter()
    while not env.done.all():
        obs, *_ = env.step(env.task.expert(obs))
    return time.perf_counter() - start


def expert_row(task: str, n_seeds: int) -> str:
    """| task | seeds | success | failed | mean steps | seconds |, over seeds 0..n_seeds-1."""
    env = BatchedEnv(task, n_seeds)
    seconds = run_expert(env, np.arange(n_seeds))
    return row(
        task, n_seeds, f"{env.terminated.mean():.1%}", env.failed.sum(), f"{env.steps.mean():.1f}", f"{seconds:.1f}"
    )


def gym_expert_row(preset: str, expert: str, n_seeds: int) -> str:
    """| env | expert | seeds | success [Wilson 95%] | failed | mean steps | seconds |: the expert on
    the `conf/env/<preset>.yaml` env, one episode per reset seed 0..n_seeds-1, no action noise."""
    from grpo_robot.cli import compose_train_config
    from grpo_robot.demos import expert_episodes
    from grpo_robot.stats import wilson_interval

    cfg = compose_train_config(f"env={preset}").env
    start = time.perf_counter()
    episodes = expert_episodes(cfg, expert, range(n_seeds))
    outcomes = [(ok, crashed, len(obs)) for _, obs, _, _, ok, crashed, _ in episodes]
    seconds = time.perf_counter() - start
    ok, crashed, steps = (np.array(c) for c in zip(*outcomes, strict=True))
    low, high = wilson_interval(int(ok.sum()), n_seeds)
    return row(preset, f"`{expert}`", n_seeds, f"{ok.mean():.1%} [{low:.1%}, {high:.1%}]", int(crashed.sum()),
               f"{steps.mean():.1f}", f"{seconds:.1f}")  # fmt: skip
