"""A built-in task as an ordinary single-world Gymnasium env.

It steps through the same code as the batched backend (one world, on the calling thread), so
the two agree bit for bit on the same seed and actions.
"""

from __future__ import annotations

import gymnasium
import numpy as np

from grpo_robot.batched import BatchedEnv
from grpo_robot.envs import scene
from grpo_robot.seed_ranges import TRAIN_SEED_END


class TaskEnv(gymnasium.Env):
    """`gymnasium.make("grpo_robot/<Task>-v<version>")`. Reward is 1.0 on the success step, else 0.0;
    `info["is_success"]` carries the success predicate. The episode terminates on success (unless
    `terminate_on_success=False`) and is truncated at the task's horizon or if the physics fails.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": round(1 / (scene.TIMESTEP * scene.N_SUBSTEPS))}

    def __init__(
        self,
        task: str = "Reach",
        horizon: int | None = None,
        terminate_on_success: bool = True,
        render_mode: str | None = None,
        camera: str = "front",
        width: int = 320,
        height: int = 240,
    ):
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode={render_mode!r} is not supported; use 'rgb_array' or None")
        if camera not in scene.CAMERAS:
            raise ValueError(f"camera={camera!r} is not in the scene; its cameras: {', '.join(scene.CAMERAS)}")
        self.render_mode, self.camera, self.width, self.height = render_mode, camera, width, height
        self._batch = BatchedEnv(task, 1, nthread=1, horizon=horizon, terminate_on_success=terminate_on_success)
        self.task = self._batch.task
        self.horizon = self._batch.horizon
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (self.task.obs_dim,), np.float32)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (self.task.action_dim,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        # without a seed, draw the start from the env's own generator so successive resets differ,
        # among the training seeds: never an evaluation or demonstration start (grpo_robot/seed_ranges.py)
        start = seed if seed is not None else int(self.np_random.integers(TRAIN_SEED_END))
        obs = self._batch.reset([start])[0]
        return obs, {"is_success": False, "seed": start}

    def step(self, action):
        action = np.asarray(action)
        if action.shape != self.action_space.shape:
            raise ValueError(f"action must have shape {self.action_space.shape}, got {action.shape}")
        obs, reward, terminated, truncated, info = self._batch.step(action[None])
        return (
            obs[0],
            float(reward[0]),
            bool(terminated[0]),
            bool(truncated[0]),
            {"is_success": bool(info["is_success"][0]), "failed": bool(info["failed"][0])},
        )

    def render(self):
        """`render_mode="rgb_array"`: the current frame, `uint8 [height, width, 3]`, from `camera`."""
        if self.render_mode is None:
            return None
        if not self._batch._was_reset:
            self._batch.reset([0])
        return self._batch.render([0], self.camera, self.width, self.height)[0]

    def close(self) -> None:
        self._batch.close()
