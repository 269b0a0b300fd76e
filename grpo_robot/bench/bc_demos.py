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


def refit_config(experiment: str, seed: int, overrides: Sequence[str] = ()):
    """The checked config of a demo pipeline on a built-in task (`pretrain=true` and `env.task`) at
    `seed`; a ValueError in one line for another experiment or a bad value."""
    from grpo_robot.cli import checked_train_config

    cfg = checked_train_config(f"experiment={experiment}", f"seed={seed}", *overrides)
    if not (cfg.pretrain and cfg.env.task and not cfg.demos.path):
        raise ValueError(f"experiment={experiment} is not a demo pipeline on a built-in task (pretrain=true, "
                         "env.task, the task's expert): push_cube_bc, lift_cube_bc, place_cube_bc and their "
                         "_tokenized variants are")  # fmt: skip
    return cfg


def refit_pairs(experiment: str, seeds: Sequence[int], n_eval: int, overrides: Sequence[str] = ()) -> Iterator[dict]:
    """`bc.refit` against the split fit, per run seed of a demo pipeline (`experiment=<name>`): each
    seed's demos, split and initial weights as `scripts/train.py` draws them, the clone fitted
    with and without the refit, each evaluated deterministically on the first `n_eval` held-out
    seeds -> a record per seed."""
    import dataclasses

    from grpo_robot.bc import clone, run_seeded
    from grpo_robot.environment import make_eval_env

    for seed in seeds:
        cfg = refit_config(experiment, seed, overrides)
        d, bc = run_seeded(cfg)
        data, _ = collect_demos(cfg.env.task, d.episodes, d.noise, d.seed, d.max_attempts, nthread=cfg.env.nthread,
                                horizon=cfg.env.horizon, outcome=cfg.env.outcome)  # fmt: skip
        env = make_eval_env(cfg, n_eval)
        record = {"experiment": experiment, "seed": seed, "episodes": data.n_episodes}
        for name, refit in (("split", False), ("refit", True)):
            policy, result = clone(data, cfg.policy, dataclasses.replace(bc, refit=refit), env=cfg.env)
            evaluation = evaluate(env, policy, eval_seeds(n_eval), torch.device("cpu"))
            steps = result.refit_steps if refit else result.best_step  # 0: the refit fell back to the split fit
            record[name] = {"steps": steps, "successes": int(evaluation.success.sum()), "n": n_eval}
        env.close()
        yield record


def refit_summary(records: Sequence[dict]) -> list[str]:
    """Markdown: a row per experiment, the mean success of the split fit and of the refit over its
    seeds, and on how many seeds the refit came out above, level and below."""
    lines = [row("experiment", "seeds", "split fit", "refit", "refit above / level / below", "refits that fell back"),
             row("---", "---:", "---:", "---:", "---", "---:")]  # fmt: skip
    for name in dict.fromkeys(r["experiment"] for r in records):
        mine = [r for r in records if r["experiment"] == name]
        rates = {k: [r[k]["successes"] / r[k]["n"] for r in mine] for k in ("split", "refit")}
        pairs = list(zip(rates["split"], rates["refit"], strict=True))
        above, below = sum(b > a for a, b in pairs), sum(b < a for a, b in pairs)
        mean = {k: f"{100 * sum(v) / len(v):.1f}%" for k, v in rates.items()}
        fell_back = sum(r["refit"]["steps"] == 0 for r in mine)
        lines.append(row(name, str(len(mine)), mean["split"], mean["refit"],
                         f"{above} / {len(pairs) - above - below} / {below}", str(fell_back)))  # fmt: skip
    return lines
