"""What a built-in task is: an MJCF scene, a seeded reset distribution, a success predicate over
sensor readings, and a scripted expert. Backends (batched or Gymnasium) only call these."""

from __future__ import annotations

from typing import ClassVar

import mujoco
import numpy as np

from . import scene

FULLPHYSICS = mujoco.mjtState.mjSTATE_FULLPHYSICS.value


def versioned(name: str, version: int) -> str:
    """A task's id, its name and version: `PushCube-v2`. Demo files, checkpoints and messages
    spell versions this way, and `env.task` takes it."""
    return f"{name}-v{version}"


class Task:
    """Base class of the built-in tasks. Subclasses set the class attributes and implement
    `place`, `success` and `expert`.

    Observations are the model's sensor readings, in MJCF order: `obs: [..., obs_dim]`.
    `self.obs_slices[name]` locates one sensor in that vector.
    """

    name: ClassVar[str]
    version: ClassVar[int] = 0  # bump when the scene, its physics, the sensors or the reset distribution change
    horizon: ClassVar[int]  # control steps per episode
    bodies: ClassVar[str]  # task MJCF inside <worldbody>
    sensors: ClassVar[str]  # task MJCF inside <sensor>
    action_dim: ClassVar[int] = 4
    timestep: ClassVar[float] = scene.TIMESTEP  # s, one physics step
    n_substeps: ClassVar[int] = scene.N_SUBSTEPS  # physics steps per 25 Hz control step
    # Any |qvel| entry above this (m/s or rad/s) means the world blew up. Under random actions the
    # built-in tasks peak at 1.4 m/s and 41 rad/s (a flicked cube spinning), so 500 never fires on
    # real motion; it catches runaways before MuJoCo's own 1e10 bound does.
    blowup_qvel: ClassVar[float] = 500.0
    # Whether `place` takes a difficulty below 1: easier starts for a start curriculum
    # (`algo.curriculum`), drawn from the same seed with the same draws, only nearer the goal.
    easier_starts: ClassVar[bool] = False
    # The observation whose sign picks the frame a mirrored policy acts in (`policy.mirror`): one
    # sensor, or a sensor minus another (`("goal_pos", "cube_pos")`); None: the task does not declare
    # its mirror symmetries. See `mirror_axes`.
    mirror_key: ClassVar[tuple[str, ...] | None] = None

    def __init__(self) -> None:
        xml = scene.build_xml(self.name, self.bodies, self.sensors, self.timestep)
        self.model = mujoco.MjModel.from_xml_string(xml)
        m = self.model
        self.obs_slices = {
            m.sensor(i).name: slice(int(m.sensor_adr[i]), int(m.sensor_adr[i] + m.sensor_dim[i]))
            for i in range(m.nsensor)
        }
        self.obs_dim = int(m.nsensordata)
        self.nstate = mujoco.mj_stateSize(m, FULLPHYSICS)
        self._data = mujoco.MjData(m)
        # Sensors of position and velocity stages only (all built-in tasks): a start's readings
        # need kinematics and velocities, not the whole of mj_forward (collisions, constraints,
        # the mass matrix), which was half of a reset's cost. Equal bit for bit (tests/test_envs.py).
        self._kinematic_reset = bool((m.sensor_needstage <= mujoco.mjtStage.mjSTAGE_VEL.value).all())
        self._hand_qpos = [self.qpos_adr(j) for j in ("hand_x", "hand_y", "hand_z")]
        self._finger_qpos = [self.qpos_adr(j) for j in ("finger_left", "finger_right")]

    def __repr__(self) -> str:
        return self.task_id()

    @classmethod
    def task_id(cls) -> str:
        """The task and its version, `PushCube-v2`: what `env.task` and `make_task` take for exactly
        this version (the bare name takes the current one)."""
        return versioned(cls.name, cls.version)

    def qpos_adr(self, joint: str) -> int:
        return int(self.model.jnt_qposadr[self.model.joint(joint).id])

    def put_cube(self, data: mujoco.MjData, xy: np.ndarray) -> None:
        """Rest the cube, unrotated, on the table at `xy`."""
        adr = self.qpos_adr("cube")
        data.qpos[adr : adr + 3] = (*xy, scene.CUBE_HALF)

    def mirror_axes(self) -> list[dict[str, list[int]]]:
        """The reflections x -> -x and y -> -y of the world that leave the task unchanged, as
        `policy.mirror` takes them: per axis, `key` (the observation entry, or the pair of entries
        whose difference, picks the frame: where it is negative the policy sees the mirrored
        observation and its action is mirrored back), `obs` and `action` (the entries the
        reflection negates). The scene is symmetric about both vertical planes through the origin
        (table, workspace, hand, the starts' distributions), a position or velocity sensor's
        reflection negates that axis's entry, in whatever frame it is expressed (the frame's own
        orientation reflects with it), and the hand's x and y velocities are actions 0 and 1. The
        finger reading is taken as symmetric: the fingers are driven alike, so a reflection through
        y, which swaps them, leaves it. `ValueError` for a task without `mirror_key`, or with a
        sensor whose reflection is not one of these."""
        if self.mirror_key is None:
            raise ValueError(f"{self.task_id()} declares no mirror symmetry (Task.mirror_key is None)")
        m, vector = self.model, (mujoco.mjtSensor.mjSENS_FRAMEPOS, mujoco.mjtSensor.mjSENS_FRAMELINVEL)
        flips: list[list[int]] = [[], []]
        for i in range(m.nsensor):
            name, start = m.sensor(i).name, int(m.sensor_adr[i])
            if m.sensor_type[i] in vector:
                for axis in (0, 1):
                    flips[axis].append(start + axis)
            elif not (m.sensor_type[i] == mujoco.mjtSensor.mjSENS_JOINTPOS and name == "finger"):
                raise ValueError(f"{self.task_id()}'s sensor {name!r} has no known mirror image: only position "
                                 "and velocity frame sensors and the finger reading do")  # fmt: skip
        key = [self.obs_slices[name].start for name in self.mirror_key]
        return [{"key": [k + axis for k in key], "obs": flips[axis], "action": [axis]} for axis in (0, 1)]

    def read(self, obs: np.ndarray, name: str) -> np.ndarray:
        """One named sensor out of observations `obs: [..., obs_dim]` -> `[..., dim]`."""
        return obs[..., self.obs_slices[name]]

    def initial_condition(self, seed: int, difficulty: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The start drawn from `seed`: (state [nstate], mocap_pos [nmocap*3], obs [obs_dim]).

        Depends on `seed` (and `difficulty`) alone, never on earlier calls. `difficulty` in (0, 1]
        makes the start easier below 1 (tasks with `easier_starts`); at 1 it is the task's own.
        """
        if not 0.0 < difficulty <= 1.0 or (difficulty < 1.0 and not self.easier_starts):
            allowed = "(0, 1]" if self.easier_starts else f"1 ({self.name} has no easier starts)"
            raise ValueError(f"difficulty must be {allowed}, got {difficulty!r}")
        rng = np.random.default_rng(seed)
        m, d = self.model, self._data
        mujoco.mj_resetData(m, d)
        hand = scene.HOME + rng.uniform(-0.03, 0.03, size=3)
        d.qpos[self._hand_qpos] = hand
        d.act[:3] = hand  # the position targets start where the hand is
        d.qpos[self._finger_qpos] = scene.FINGER_OPEN
        if difficulty < 1.0:
            self.place(rng, d, difficulty)
        else:
            self.place(rng, d)
        if self._kinematic_reset:
            for stage in (mujoco.mj_kinematics, mujoco.mj_comPos, mujoco.mj_sensorPos, mujoco.mj_comVel,
                          mujoco.mj_sensorVel):  # fmt: skip
                stage(m, d)
        else:
            mujoco.mj_forward(m, d)
        state = np.empty(self.nstate)
        mujoco.mj_getState(m, d, state, FULLPHYSICS)
        return state, d.mocap_pos.ravel().copy(), d.sensordata.copy()

    # -- task-specific --------------------------------------------------------------------------
    def place(self, rng: np.random.Generator, data: mujoco.MjData) -> None:
        """Place objects and goals in `data` (qpos, mocap_pos) using `rng` only. A task with
        `easier_starts` also takes `difficulty` in (0, 1) as a third argument."""
        raise NotImplementedError

    def success(self, obs: np.ndarray) -> np.ndarray:
        """`obs: [B, obs_dim]` -> `bool [B]`."""
        raise NotImplementedError

    def expert(self, obs: np.ndarray) -> np.ndarray:
        """Scripted expert, stateless: `obs: [B, obs_dim]` -> actions `[B, action_dim]` in [-1, 1]."""
        raise NotImplementedError

    def potential(self, obs: np.ndarray) -> np.ndarray:
        """A hand-made measure of progress, `obs: [B, obs_dim]` -> `[B]`, higher nearer success:
        minus the distances (m) still to cover. Only the shaped-reward option of PPO
        (`algo.critic.reward=shaped`) uses it, as a reference; GRPO learns from the outcome alone."""
        raise NotImplementedError

    def planar_distance(self, obs: np.ndarray, a: str, b: str) -> np.ndarray:
        """Distance (m) in the table plane between two world-frame position sensors, `[B]`.

        Judge placement with this, never with a `framepos` taken relative to the cube's site:
        that one is expressed in the cube's own frame, which turns when the cube rolls over, so a
        rolled cube far from its goal could read as on it."""
        return np.linalg.norm((self.read(obs, a) - self.read(obs, b))[..., :2], axis=-1)

    def reach_cube(self, obs: np.ndarray) -> np.ndarray:
        """Grip point to cube distance (m), `[B]`: the first term of every cube task's potential."""
        return np.linalg.norm(self.read(obs, "cube_rel"), axis=-1)


def move_towards(grip: np.ndarray, target: np.ndarray, gain: float = 12.0) -> np.ndarray:
    """Hand velocity command towards `target`, saturating at full speed: `[B, 3]` -> `[B, 3]`."""
    return np.clip(gain * (target - grip), -1.0, 1.0)


def nearer(goal: np.ndarray, to: np.ndarray, difficulty: float, nearest: float) -> np.ndarray:
    """`goal` (xy) moved along the line towards `to` to `difficulty` x its distance, but never
    nearer than `nearest` (m); `goal` itself at difficulty 1, so the task's own starts are unchanged."""
    if difficulty >= 1.0:
        return goal
    offset = goal - to
    distance = float(np.linalg.norm(offset))
    return to + offset * (max(nearest, difficulty * distance) / distance)


def sample_apart(rng: np.random.Generator, low: float, high: float, other: np.ndarray, min_dist: float):
    """A point uniform in the square [low, high]^2 at least `min_dist` from `other` (xy)."""
    while True:
        p = rng.uniform(low, high, size=2)
        if np.linalg.norm(p - other) >= min_dist:
            return p
