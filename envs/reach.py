"""Reach: bring the grip point within 2 cm of a goal point in the air."""

from __future__ import annotations

import numpy as np

from . import scene
from .task import Task, move_towards


class Reach(Task):
    name = "Reach"
    version = 1  # 10 ms physics steps (v0: 5 ms)
    horizon = 50
    tolerance = 0.02  # m
    mirror_key = ("goal_pos",)  # a mirrored policy reaches for goals at +x and +y of the start (Task.mirror_axes)
    bodies = scene.goal_xml()
    sensors = """
    <framepos name="goal_pos" objtype="body" objname="goal"/>
    <framepos name="goal_rel" objtype="body" objname="goal" reftype="site" refname="grip"/>
    """

    def place(self, rng, data):
        data.mocap_pos[0] = rng.uniform([-0.15, -0.15, 0.03], [0.15, 0.15, 0.25])

    def success(self, obs):
        return np.linalg.norm(self.read(obs, "goal_rel"), axis=-1) < self.tolerance

    def potential(self, obs):
        return -np.linalg.norm(self.read(obs, "goal_rel"), axis=-1)

    def expert(self, obs):
        grip = self.read(obs, "grip_pos")
        act = np.zeros((len(obs), 4))
        act[:, :3] = move_towards(grip, self.read(obs, "goal_pos"))
        return act
