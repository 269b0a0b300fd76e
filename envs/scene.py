"""The shared scene: a table and a small Cartesian gripper, built from primitive geoms.

Coordinates are metres; the table top is the plane z = 0 and the workspace is centred on the
origin. The gripper's reference point `grip` lies between the fingertips' inner faces, 1.5 cm
above their lower ends, so a gripper at `grip = cube centre` holds a resting cube without touching
the table.

Actuators (ctrl order): three `intvelocity` actuators on the x/y/z slides, whose targets are
integrated in `act` (so the commanded position is part of the physics state and is clamped to the
workspace), then one position actuator per finger.
"""

from __future__ import annotations

import numpy as np

# The physics step: 10 ms, 4 per control step (control at 25 Hz). The tasks' previous versions
# (Reach-v0, PushCube-v1, LiftCube-v0, PlaceCube-v1: envs/__init__.py) stepped 5 ms, 8 per control
# step; the 10 ms step doubles the physical limit and keeps every scripted expert within 0.5 points
# of its success there (docs/benchmarks.md, "Physics options of the scene").
TIMESTEP = 0.01  # s
N_SUBSTEPS = 4
TIMESTEP_5MS, N_SUBSTEPS_5MS = 0.005, 8  # the previous versions' step
MAX_SPEED = 0.5  # m/s, the hand target speed an action of magnitude 1 commands (Task.blowup_qvel is the blow-up bound)
FINGER_OPEN = 0.04  # m, finger joint value when fully open (each finger; gap = 2x)
HOME = np.array([0.0, 0.0, 0.15])  # m, mean start of the grip point
WORKSPACE_LOW = np.array([-0.25, -0.25, 0.015])
WORKSPACE_HIGH = np.array([0.25, 0.25, 0.30])
CUBE_HALF = 0.02  # m, half side of the cube

# ctrl = ACTION_MATRIX @ action + ACTION_OFFSET, action in [-1, 1]^4 = (vx, vy, vz, grip)
# grip = -1 closes the fingers, +1 opens them fully.
ACTION_MATRIX = np.array(
    [
        [MAX_SPEED, 0, 0, 0],
        [0, MAX_SPEED, 0, 0],
        [0, 0, MAX_SPEED, 0],
        [0, 0, 0, FINGER_OPEN / 2],
        [0, 0, 0, FINGER_OPEN / 2],
    ]
)
ACTION_OFFSET = np.array([0, 0, 0, FINGER_OPEN / 2, FINGER_OPEN / 2])


def _hand_xml() -> str:
    lo, hi = WORKSPACE_LOW, WORKSPACE_HIGH
    finger = (
        '<geom type="box" size=".012 .005 .03" pos="0 {y} .015" mass=".02" '
        'friction="1.5 .005 .0001" rgba=".25 .25 .3 1"/>'
    )
    return (
        f"""
    <body name="hand" gravcomp="1">
      <joint name="hand_x" type="slide" axis="1 0 0" damping="5"/>
      <joint name="hand_y" type="slide" axis="0 1 0" damping="5"/>
      <joint name="hand_z" type="slide" axis="0 0 1" damping="5"/>
      <site name="grip" size=".006" rgba="1 .5 0 .6"/>
      <camera name="wrist" pos=".16 0 .2" xyaxes="0 1 0 -.75 0 .66" fovy="50"/>
      <geom name="palm" type="box" size=".015 .06 .01" pos="0 0 .055" mass=".3"
            rgba=".35 .35 .4 1"/>
      <body name="finger_left" gravcomp="1">
        <joint name="finger_left" type="slide" axis="0 1 0" range="0 {FINGER_OPEN}"
               damping="2"/>
        {finger.format(y=0.005)}
      </body>
      <body name="finger_right" gravcomp="1">
        <joint name="finger_right" type="slide" axis="0 -1 0" range="0 {FINGER_OPEN}"
               damping="2"/>
        {finger.format(y=-0.005)}
      </body>
    </body>
    """,
        f"""
    <actuator>
      <intvelocity joint="hand_x" kp="300" kv="20" actrange="{lo[0]} {hi[0]}"/>
      <intvelocity joint="hand_y" kp="300" kv="20" actrange="{lo[1]} {hi[1]}"/>
      <intvelocity joint="hand_z" kp="300" kv="20" actrange="{lo[2]} {hi[2]}"/>
      <position joint="finger_left" kp="200" kv="2" ctrlrange="0 {FINGER_OPEN}"
                forcerange="-10 10"/>
      <position joint="finger_right" kp="200" kv="2" ctrlrange="0 {FINGER_OPEN}"
                forcerange="-10 10"/>
    </actuator>
    """,
    )


def cube_xml() -> str:
    """A free 4 cm cube of 50 g."""
    return f"""
    <body name="cube" pos="0 0 {CUBE_HALF}">
      <freejoint name="cube"/>
      <geom name="cube" type="box" size="{CUBE_HALF} {CUBE_HALF} {CUBE_HALF}" mass=".05"
            friction="1 .005 .0001" rgba=".8 .2 .2 1"/>
      <site name="cube" size=".005" rgba="0 0 0 0"/>
    </body>
    """


def goal_xml(name: str = "goal", rgba: str = "0 .8 .2 .5") -> str:
    """A visual-only mocap marker; its position is set per world at reset."""
    return f"""
    <body name="{name}" mocap="true">
      <geom type="sphere" size=".015" contype="0" conaffinity="0" rgba="{rgba}"/>
    </body>
    """


CUBE_SENSORS = """
    <framepos name="cube_pos" objtype="site" objname="cube"/>
    <framelinvel name="cube_vel" objtype="site" objname="cube"/>
    <framepos name="cube_rel" objtype="site" objname="cube" reftype="site" refname="grip"/>
"""

HAND_SENSORS = """
    <framepos name="grip_pos" objtype="site" objname="grip"/>
    <framelinvel name="grip_vel" objtype="site" objname="grip"/>
    <jointpos name="finger" joint="finger_left"/>
"""


# Named cameras (`render(camera=...)`): front shows gripper, cube and goal across the whole
# workspace; top looks straight down; wrist moves with the hand. Cameras, lights and materials
# are visual only: the physics is the same with or without them, bit for bit.
CAMERAS = ("front", "top", "wrist")
OFFSCREEN = (640, 480)  # pixels: the largest frame a camera renders
CAMERA_XML = """
    <camera name="front" pos=".42 0 .3" xyaxes="0 1 0 -.55 0 .83" fovy="50"/>
    <camera name="top" pos="0 0 .75" xyaxes="0 1 0 -1 0 0" fovy="40"/>
"""
VISUAL_XML = f"""
  <visual>
    <global offwidth="{OFFSCREEN[0]}" offheight="{OFFSCREEN[1]}"/>
    <headlight ambient=".15 .15 .15" diffuse=".35 .35 .35" specular=".05 .05 .05"/>
    <quality shadowsize="2048"/>
  </visual>
  <asset>
    <texture name="sky" type="skybox" builtin="gradient" rgb1=".55 .65 .75" rgb2=".15 .17 .2" width="64" height="64"/>
    <texture name="grid" type="2d" builtin="checker" rgb1=".62 .58 .52" rgb2=".54 .5 .45" width="64" height="64"/>
    <material name="table" texture="grid" texrepeat="8 8" reflectance=".05"/>
  </asset>
"""


def build_xml(name: str, bodies: str, sensors: str, timestep: float = TIMESTEP) -> str:
    """The full MJCF of a task: options, visuals and cameras, table, hand, the task's bodies and
    sensors, with physics steps of `timestep` seconds."""
    hand, actuators = _hand_xml()
    return f"""
<mujoco model="{name}">
  <option timestep="{timestep}" integrator="implicitfast">
    <!-- an unstable world must stay visibly broken, not be silently reset -->
    <flag autoreset="disable"/>
  </option>
  {VISUAL_XML}
  <worldbody>
    <light pos="0 0 1.5" dir="0 0 -1" directional="true" diffuse=".55 .55 .55"/>
    <light pos=".6 .4 1" dir="-.5 -.3 -1" diffuse=".2 .2 .2" castshadow="false"/>
    {CAMERA_XML}
    <geom name="table" type="box" size=".4 .4 .02" pos="0 0 -.02" material="table"/>
    {hand}
    {bodies}
  </worldbody>
  {actuators}
  <sensor>
    {HAND_SENSORS}
    {sensors}
  </sensor>
</mujoco>
"""
