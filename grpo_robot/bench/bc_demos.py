"""Behaviour-cloning success against the number of demonstrations.

Each cell: demos from `collect_demos` (demo seed stream 0, no noise), a 128x128 policy cloned
with the default `BCConfig` (but for `token_sigma`), deterministic success on the first
held-out evaluation seeds.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from grpo_robot.batched import BatchedEnv
from grpo_robot.bc import behaviour_clone
from grpo_robot.bench.markdown import rate_interval, row
from grpo_robot.config import BCConfig
from grpo_robot.demos import collect_demos
from grpo_robot.evaluation import EvalResult, evaluate
from grpo_robot.machine import one_line
from grpo_robot.policies import build_policy
from grpo_robot.seeding import eval_seeds


def clone_success(env: BatchedEnv, kind: str, n_demos: int, token_sigma: float) -> EvalResult:
    """A `kind` policy cloned from `n_demos` demos of `env`'s task, on `env.num_worlds` held-out seeds."""
    data, _ = collect_demos(env.name, n_demos)
    torch.manual_seed(0)
    policy = build_policy(kind, data.obs_dim, data.action_dim, hidden_sizes=[128, 128])
    behaviour_clone(policy, data, BCConfig(token_sigma=token_sigma))
    return evaluate(env, policy, eval_seeds(env.num_worlds), torch.device("cpu"))


def sweep(
    tasks: Sequence[str], policies: Sequence[str], demos: Sequence[int], n_seeds: int, token_sigma: float
) -> Iterator[str]:
    """The table's lines: the machine, then a row per task and policy type, a column per demo count."""
    yield f"# {one_line()}; bc.token_sigma={token_sigma}"
    yield row("task", "policy", *(f"{n} demos" for n in demos))
    yield row("---", "---", *("---" for _ in demos))
    for task in tasks:
        env = BatchedEnv(task, n_seeds)
        for kind in policies:
            results = [clone_success(env, kind, n, token_sigma) for n in demos]
            yield row(task, kind, *(rate_interval(r.rate, r.interval) for r in results))
