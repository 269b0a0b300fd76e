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
