"""LiftCube: grasp the cube and hold it with its bottom at least 8 cm above the table."""

from __future__ import annotations

import numpy as np

from . import scene
from .task import Task, move_towards

APPROACH_Z = 0.08  # m, grip height while lining up over the cube
HOLD_Z = 0.15  # m, grip height the expert lifts to


def grasp_actions(task: Task, obs: np.ndarray, carry_target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shared pick behaviour: line up over the cube, descend, close; once held, move the grip
    point to `carry_target [B, 3]`. Returns (actions [B, 4], held [B])."""
    grip = task.read(obs, "grip_pos")
    cube = task.read(obs, "cube_pos")
    finger = task.read(obs, "finger")[:, 0]
    rel = cube - grip
    dist_xy = np.linalg.norm(rel[:, :2], axis=-1)
    at_cube = np.linalg.norm(rel, axis=-1) < 0.01
    held = (np.linalg.norm(rel, axis=-1) < 0.015) & (finger < scene.CUBE_HALF + 0.004)

    target = cube.copy()
    target[:, 2] = APPROACH_Z  # line up above the cube
    descend = dist_xy < 0.008
    target[descend, 2] = cube[descend, 2]
    target[held] = carry_target[held]
    act = np.empty((len(obs), 4))
    act[:, :3] = move_towards(grip, target)
    act[:, 3] = np.where(at_cube | held, -1.0, 1.0)
    # while the fingers close, hold still so the cube is not dragged
    closing = at_cube & ~held
    act[closing, :3] = 0.0
    return act, held


class LiftCube(Task):
    name = "LiftCube"
    version = 1  # 10 ms physics steps (v0: 5 ms)
    horizon = 80
    lift_height = 0.08  # m, cube bottom above the table
    mirror_key = ("cube_pos",)  # a mirrored policy sees the cube at +x and +y of the start (Task.mirror_axes)
    bodies = scene.cube_xml()
    sensors = scene.CUBE_SENSORS

    def place(self, rng, data):
        self.put_cube(data, rng.uniform(-0.1, 0.1, size=2))

    def success(self, obs):
        high = self.read(obs, "cube_pos")[:, 2] - scene.CUBE_HALF >= self.lift_height
        held = np.linalg.norm(self.read(obs, "cube_rel"), axis=-1) < 0.02
        return high & held

    def potential(self, obs):
        height = self.read(obs, "cube_pos")[:, 2] - scene.CUBE_HALF
        return -self.reach_cube(obs) - np.maximum(self.lift_height - height, 0.0)

    def expert(self, obs):
        carry = self.read(obs, "grip_pos").copy()
        carry[:, 2] = HOLD_Z
        return grasp_actions(self, obs, carry)[0]
