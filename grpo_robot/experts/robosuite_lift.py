"""A scripted expert for robosuite Lift with a Panda arm and its default controller (OSC_POSE
arm deltas + gripper), through grpo_robot.envs.robosuite_env with its default observation keys.

It reads `object-state` (cube position 0:3, quaternion 3:7, cube minus gripper 7:10) and acts in
robosuite's own units: a position delta of up to 5 cm per step on each axis (scaled to [-1, 1]),
no rotation, and the gripper (-1 opens, +1 closes). An object with `reset()` and
`get_action(obs)`: it keeps its phase (approach, descend, close, lift) across an episode.
"""

from __future__ import annotations

import numpy as np

SCALE = 0.05  # metres of OSC_POSE position delta at action 1.0
HOVER = 0.06  # approach this far above the cube's centre
CLOSE_STEPS = 8  # control steps to close the fingers before lifting


class LiftExpert:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.phase, self.closing = "approach", 0

    def get_action(self, obs: dict) -> np.ndarray:
        rel = np.asarray(obs["object-state"][7:10], dtype=np.float64)  # cube - gripper
        move, grip = np.zeros(3), -1.0
        if self.phase == "approach":
            move = rel + [0.0, 0.0, HOVER]
            if np.linalg.norm(move) < 0.01:
                self.phase = "descend"
        if self.phase == "descend":
            move = rel + [0.0, 0.0, 0.005]
            if np.linalg.norm(move) < 0.008:
                self.phase = "close"
        if self.phase == "close":
            move, grip = rel, 1.0
            self.closing += 1
            if self.closing >= CLOSE_STEPS:
                self.phase = "lift"
        if self.phase == "lift":
            move, grip = np.array([0.0, 0.0, 0.1]), 1.0
        arm = np.clip(move / SCALE, -1.0, 1.0)
        return np.concatenate([arm, np.zeros(3), [grip]])
