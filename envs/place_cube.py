"""PlaceCube: pick the cube up and set it down on a raised target pad, then let go.

Version 1 judges "on the pad" by the cube's and the pad's world positions; version 0 read it from
`target_rel`, which is expressed in the cube's own frame and turns when the cube rolls over (see
envs/push_cube.py). The observation is unchanged. Version 2 steps the physics at 10 ms instead
of 5 (envs/scene.py); version 1 stays available as `PlaceCube-v1`.
"""

from __future__ import annotations

import numpy as np

from . import scene
from .lift_cube import grasp_actions
from .task import Task, sample_apart

PAD_HALF = (0.04, 0.04, 0.0125)  # m; the pad is a 2.5 cm step a pushed cube cannot climb
CARRY_Z = 0.11  # m, grip height while carrying
REST_Z = 2 * PAD_HALF[2] + scene.CUBE_HALF  # cube centre height when resting on the pad


class PlaceCube(Task):
    name = "PlaceCube"
    version = 2  # 10 ms physics steps (v1: 5 ms)
    horizon = 120
    tolerance = 0.03  # m, cube centre to pad centre in the table plane
    mirror_key = ("target_pos", "cube_pos")  # a mirrored policy carries towards +x and +y (Task.mirror_axes)
    bodies = (
        scene.cube_xml()
        + f"""
    <body name="target" mocap="true">
      <geom name="target" type="box" size="{PAD_HALF[0]} {PAD_HALF[1]} {PAD_HALF[2]}"
            rgba=".2 .4 .9 1"/>
    </body>
    """
    )
    sensors = (
        scene.CUBE_SENSORS
        + """
    <framepos name="target_pos" objtype="body" objname="target"/>
    <framepos name="target_rel" objtype="body" objname="target" reftype="site" refname="cube"/>
    """
    )

    def place(self, rng, data):
        cube = rng.uniform(-0.12, 0.12, size=2)
        self.put_cube(data, cube)
        data.mocap_pos[0] = (*sample_apart(rng, -0.15, 0.15, cube, 0.11), PAD_HALF[2])

    def _on_pad(self, obs):
        cube_z = self.read(obs, "cube_pos")[:, 2]
        near = self.planar_distance(obs, "target_pos", "cube_pos") < self.tolerance
        return near & (np.abs(cube_z - REST_Z) < 0.006)

    def success(self, obs):
        released = self.read(obs, "finger")[:, 0] > scene.CUBE_HALF + 0.008
        return self._on_pad(obs) & released

    def potential(self, obs):
        to_pad = self.planar_distance(obs, "target_pos", "cube_pos")
        released = self.read(obs, "finger")[:, 0] > scene.CUBE_HALF + 0.008
        # over the pad the cube should come down and be let go; elsewhere, carried at CARRY_Z
        on_pad = to_pad < self.tolerance
        cube_z = self.read(obs, "cube_pos")[:, 2]
        height = np.where(on_pad, np.abs(cube_z - REST_Z), np.abs(cube_z - CARRY_Z))
        return -self.reach_cube(obs) * ~(on_pad & released) - to_pad - height

    def expert(self, obs):
        grip = self.read(obs, "grip_pos")
        cube = self.read(obs, "cube_pos")
        pad = self.read(obs, "target_pos")
        over_pad = np.linalg.norm((pad - cube)[:, :2], axis=-1) < 0.006
        carry = np.empty_like(grip)
        carry[:, :2] = pad[:, :2]
        carry[:, 2] = CARRY_Z
        # rise before travelling sideways; over the pad, lower the cube onto it
        low = grip[:, 2] < CARRY_Z - 0.02
        carry[low & ~over_pad, :2] = grip[low & ~over_pad, :2]
        carry[over_pad, 2] = REST_Z + 0.002
        act, held = grasp_actions(self, obs, carry)
        release = held & over_pad & (cube[:, 2] < REST_Z + 0.004) | self._on_pad(obs)
        act[release, :3] = 0.0
        act[release, 3] = 1.0
        return act
