"""One constructor for the two env backends the trainer drives.

Both offer the same interface: `name`, `num_worlds`, `obs_dim`, `action_dim`, `horizon`;
`reset(seeds [B]) -> obs [B, obs_dim]`; `step(actions [B, action_dim]) -> (obs, reward,
terminated, truncated, info)`; the sticky per-world flags `success`, `terminated` (ended by
success), `truncated`, `failed` and `done`; and `close()`.
"""

from __future__ import annotations

from grpo_robot.batched import BatchedEnv
from grpo_robot.config import EnvConfig, TrainConfig
from grpo_robot.gym_vector import GymGroupEnv


def make_env(cfg: EnvConfig, num_worlds: int) -> BatchedEnv | GymGroupEnv:
    """`num_worlds` worlds of the configured env: a built-in task runs on `BatchedEnv`, any
    other Gymnasium env on `GymGroupEnv`."""
    if cfg.task:
        return BatchedEnv(
            cfg.task,
            num_worlds,
            nthread=cfg.nthread,
            horizon=cfg.horizon,
            terminate_on_success=cfg.outcome == "any_step",
        )
    return GymGroupEnv(cfg, num_worlds)


def make_eval_env(cfg: TrainConfig, n_seeds: int, train_env: BatchedEnv | GymGroupEnv | None = None):
    """The env that evaluates `n_seeds` held-out seeds. Built-in worlds are cheap: one per seed. A
    Gymnasium env evaluates in chunks on at most the training worlds (`train_env` itself when
    given), so a 200-seed evaluation does not build 200 more envs."""
    if cfg.env.task:
        return make_env(cfg.env, n_seeds)
    if train_env is not None:
        return train_env
    return make_env(cfg.env, min(n_seeds, cfg.algo.groups_per_iter * cfg.algo.group_size))
