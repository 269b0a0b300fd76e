"""The group-environment interface that rollout and evaluation are written against, and the one
constructor for its two backends: `BatchedEnv` (built-in tasks, `mujoco.rollout`) and
`GymGroupEnv` (any Gymnasium env, as a Gymnasium vector env)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from grpo_robot.config import EnvConfig, TrainConfig


@runtime_checkable
class GroupEnv(Protocol):
    """`num_worlds` worlds stepped together; each world is reset from its own seed, so the members
    of a group (equal seeds) start from one state. Flags are per world `[B]` and sticky until the
    next reset; a world that is `done` ignores its actions."""

    name: str
    num_worlds: int
    obs_dim: int
    action_dim: int
    horizon: int  # control steps at most per episode
    steps: np.ndarray  # [B] int, control steps taken since the reset
    success: np.ndarray  # [B] bool, the task's success predicate at the last step
    terminated: np.ndarray  # [B] bool, ended by success (outcome=any_step)
    truncated: np.ndarray  # [B] bool, ended otherwise: horizon, the env's own end, a failure
    failed: np.ndarray  # [B] bool, the world crashed or blew up (counts as no success)

    @property
    def done(self) -> np.ndarray:
        """`[B]` bool, terminated | truncated."""
        ...

    def reset(self, seeds: Sequence[int]) -> np.ndarray:
        """`seeds [B]` -> obs `[B, obs_dim]` float32."""
        ...

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """`actions [B, action_dim]` in [-1, 1] -> (obs, reward, terminated, truncated, info)."""
        ...

    def close(self) -> None: ...


def make_env(cfg: EnvConfig, num_worlds: int) -> GroupEnv:
    """`num_worlds` worlds of the configured env: a built-in task runs on `BatchedEnv`, any
    other Gymnasium env on `GymGroupEnv`."""
    if cfg.task:
        from grpo_robot.batched import BatchedEnv

        return BatchedEnv(
            cfg.task,
            num_worlds,
            nthread=cfg.nthread,
            horizon=cfg.horizon,
            terminate_on_success=cfg.outcome == "any_step",
        )
    from grpo_robot.gym_vector import GymGroupEnv

    return GymGroupEnv(cfg, num_worlds)


def make_eval_env(cfg: TrainConfig, n_seeds: int, train_env: GroupEnv | None = None) -> GroupEnv:
    """The env that evaluates `n_seeds` held-out seeds. Built-in worlds are cheap: one per seed. A
    Gymnasium env evaluates in chunks on at most the training worlds (`train_env` itself when
    given), so a 200-seed evaluation does not build 200 more envs."""
    if cfg.env.task:
        return make_env(cfg.env, n_seeds)
    if train_env is not None:
        return train_env
    return make_env(cfg.env, min(n_seeds, cfg.algo.groups_per_iter * cfg.algo.group_size))
