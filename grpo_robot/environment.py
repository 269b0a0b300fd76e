"""One constructor for the two env backends the trainer drives.

Both offer the same interface: `name`, `num_worlds`, `obs_dim`, `action_dim`, `horizon`;
`reset(seeds [B]) -> obs [B, obs_dim]`; `step(actions [B, action_dim]) -> (obs, reward,
terminated, truncated, info)`; the sticky per-world flags `success`, `terminated` (ended by
success), `truncated`, `failed` and `done`; and `close()`.
"""

from __future__ import annotations

from grpo_robot.batched import BatchedEnv
from grpo_robot.config import EnvConfig
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
