"""Small Gymnasium envs, defined here, that exercise the Gymnasium backend's contract.

`PointReach` is the well-behaved one: a point on a plane driven to a seeded goal, actions in
[-2, 2] (so the [-1, 1] -> Box mapping shows), success in `info["is_success"]`. The others each
break one rule the backend must catch or contain.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class PointReach(gym.Env):
    """obs = (position, goal); the point moves by 0.05 * action per step; success within `tolerance`."""

    def __init__(self, tolerance: float = 0.1, crash_at: int | None = None):
        self.tolerance = tolerance
        self.crash_at = crash_at  # step() raises at this step when the goal's x is positive
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float64)
        self.action_space = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
        self.last_action = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = np.zeros(2)
        self.goal = self.np_random.uniform(-0.5, 0.5, size=2)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        self.last_action = np.array(action)
        if self.crash_at is not None and self.t == self.crash_at and self.goal[0] > 0:
            raise RuntimeError("simulated crash")
        self.pos = self.pos + 0.05 * np.clip(action, -2.0, 2.0)
        success = bool(np.linalg.norm(self.pos - self.goal) < self.tolerance)
        return self._obs(), float(success), False, False, {"is_success": success, "distance": 0.0}

    def _obs(self):
        return np.concatenate([self.pos, self.goal])


class GlobalRandomReach(PointReach):
    """Ignores its seed: the goal comes from numpy's global generator."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.goal = np.random.uniform(-0.5, 0.5, size=2)  # noqa: NPY002 (the point of this env)
        return self._obs(), {}


class DictPointReach(PointReach):
    """The same task observed as a Dict, with an extra key to leave out."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        box = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
        self.observation_space = gym.spaces.Dict({"position": box, "goal": box, "time": gym.spaces.Box(0, 1e6, (1,))})

    def _obs(self):
        return {"position": self.pos.copy(), "goal": self.goal.copy(), "time": np.array([self.t], np.float32)}


class NoSuccessKey(PointReach):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {"distance": float(np.linalg.norm(self.pos - self.goal))}


class DiscreteActions(PointReach):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.action_space = gym.spaces.Discrete(4)


class NaNAfterFirstStep(PointReach):
    """Its observation goes non-finite at step 2 for goals with positive y."""

    def step(self, action):
        obs, *rest = super().step(action)
        if self.t >= 2 and self.goal[1] > 0:
            obs = obs * np.nan
        return (obs, *rest)


def goal_reached(obs, info) -> bool:
    """A success_fn: the position within 0.1 of the goal, read from the observation."""
    return bool(np.linalg.norm(obs[:2] - obs[2:]) < 0.1)


def register() -> None:
    """Register PointReach as `toy/PointReach-v0` with a 40-step time limit (idempotent)."""
    if "toy/PointReach-v0" not in gym.registry:
        gym.register("toy/PointReach-v0", entry_point="toy_envs:PointReach", max_episode_steps=40)


register()
