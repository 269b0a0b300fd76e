"""Small Gymnasium envs, defined here, that exercise the Gymnasium backend's contract.

`PointReach` is the well-behaved one: a point on a plane driven to a seeded goal, actions in
[-2, 2] (so the [-1, 1] -> Box mapping shows), success in `info["is_success"]`. The others each
break one rule the backend must catch or contain.
"""

from __future__ import annotations

import os
import threading
import time

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


class ThrusterReach(gym.Env):
    """A point in the unit square, steered by two opposed thrusters along x and a y velocity, to a
    goal; obs = (position x, y, goal x, y, distance to the left wall, to the right wall), action
    = (left thruster, pushing towards +x; right thruster, towards -x; y velocity), each in [0, 1]
    or [-1, 1]. Reflecting the square about x = 0.5 negates x about 0.5, exchanges the walls'
    distances and the thrusters; about y = 0.5 it negates y and the y velocity
    (`THRUSTER_AXES`)."""

    def __init__(self, tolerance: float = 0.06):
        self.tolerance = tolerance
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (6,), np.float64)
        low, high = np.array([0.0, 0.0, -1.0], np.float32), np.ones(3, np.float32)
        self.action_space = gym.spaces.Box(low, high, dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.goal = self.np_random.uniform(0.1, 0.9, size=(2, 2))
        return self._obs(), {}

    def step(self, action):
        left, right, vy = np.clip(np.asarray(action, dtype=np.float64), self.action_space.low, self.action_space.high)
        self.pos = np.clip(self.pos + 0.05 * np.array([left - right, vy]), 0.0, 1.0)
        success = bool(np.linalg.norm(self.pos - self.goal) < self.tolerance)
        return self._obs(), float(success), False, False, {"is_success": success}

    def _obs(self):
        return np.concatenate([self.pos, self.goal, [self.pos[0], 1.0 - self.pos[0]]])


# ThrusterReach's two mirror planes, x = 0.5 and y = 0.5, as policy.mirror_axes takes them
THRUSTER_AXES = [
    {"key": [2, 0], "obs": [0, 2], "center": [0.5, 0.5], "swap": [[4, 5]], "action": [], "swap_action": [[0, 1]]},
    {"key": [3, 1], "obs": [1, 3], "center": [0.5, 0.5], "action": [2]},
]


class GlobalRandomReach(PointReach):
    """Ignores its seed: the goal comes from numpy's global generator."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.goal = np.random.uniform(-0.5, 0.5, size=2)  # noqa: NPY002 (the point of this env)
        return self._obs(), {}


class StatefulRandomReach(GlobalRandomReach):
    """Ignores its seed, but says what its state is (`get_state` / `set_state`)."""

    def get_state(self):
        return {"pos": self.pos.copy(), "goal": self.goal.copy(), "t": self.t}

    def set_state(self, state):
        self.pos, self.goal, self.t = state["pos"].copy(), state["goal"].copy(), state["t"]


class UncopyableRandomReach(GlobalRandomReach):
    """Ignores its seed, and holds a lock, which cannot be copied: neither seeded nor cloned."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.lock = threading.Lock()


class _Handle:
    """A resource that deep copies share (as robosuite's MjSim does with its simulator), and that
    `close` releases for every copy."""

    def __init__(self):
        self.open = True

    def __deepcopy__(self, memo):
        return self


class SharedHandleReach(GlobalRandomReach):
    """Ignores its seed; a deep copy of it shares a handle that closing any copy releases, so a
    copy of a copy fails its next reset."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.handle = _Handle()

    def reset(self, *, seed=None, options=None):
        if not self.handle.open:
            raise RuntimeError("the simulator was released")
        return super().reset(seed=seed, options=options)

    def close(self):
        self.handle.open = False


SLIDER_XML = """
<mujoco>
  <option timestep="0.01"/>
  <worldbody>
    <body name="puck">
      <joint name="x" type="slide" axis="1 0 0" damping="2"/>
      <joint name="y" type="slide" axis="0 1 0" damping="2"/>
      <geom type="sphere" size="0.05" mass="0.2"/>
    </body>
  </worldbody>
  <actuator>
    <motor joint="x" gear="1" ctrlrange="-1 1"/>
    <motor joint="y" gear="1" ctrlrange="-1 1"/>
  </actuator>
</mujoco>
"""


class MujocoRandomSlide(gym.Env):
    """A MuJoCo puck pushed by two motors to a goal; its reset ignores the seed (start and goal
    from a generator seeded by the OS) and its goal lives in Python, not in the physics."""

    def __init__(self, tolerance: float = 0.1):
        import mujoco

        self._mujoco = mujoco
        self.model = mujoco.MjModel.from_xml_string(SLIDER_XML)
        self.data = mujoco.MjData(self.model)
        self.tolerance = tolerance
        self.rng = np.random.default_rng()  # not reached by reset(seed=...)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (6,), np.float64)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[:] = self.rng.uniform(-0.3, 0.3, 2)
        self.data.qvel[:] = self.rng.normal(0.0, 0.1, 2)
        self.goal = self.rng.uniform(-0.4, 0.4, 2)
        self._mujoco.mj_forward(self.model, self.data)
        return self._obs(), {}

    def step(self, action):
        self.data.ctrl[:] = np.clip(action, -1.0, 1.0)
        for _ in range(5):
            self._mujoco.mj_step(self.model, self.data)
        success = bool(np.linalg.norm(self.data.qpos - self.goal) < self.tolerance)
        return self._obs(), float(success), False, False, {"is_success": success}

    def _obs(self):
        return np.concatenate([self.data.qpos, self.data.qvel, self.goal])


class WaypointSlide(MujocoRandomSlide):
    """MujocoRandomSlide that observes its goal through a list of waypoint tuples: task state held
    as plain data nested two deep, which the `mujoco` copy method must carry."""

    def reset(self, *, seed=None, options=None):
        self.waypoints = [(0.0, 0.0)]  # replaced below, once the goal is drawn
        super().reset(seed=seed, options=options)
        self.waypoints = [tuple(float(v) for v in self.goal)]
        return self._obs(), {}

    def _obs(self):
        return np.concatenate([self.data.qpos, self.data.qvel, self.waypoints[0]])


class ViewSlide(MujocoRandomSlide):
    """MujocoRandomSlide whose success reads the puck through a view of MjData taken once, at
    construction, as robot code often does (`self.puck_xpos = data.body("puck").xpos`)."""

    def __init__(self, tolerance: float = 0.1):
        super().__init__(tolerance)
        self.puck_xpos = self.data.body("puck").xpos

    def step(self, action):
        obs, _, terminated, truncated, _ = super().step(action)
        success = bool(np.linalg.norm(self.puck_xpos[:2] - self.goal) < self.tolerance)
        return obs, float(success), terminated, truncated, {"is_success": success}


class RandomDampingSlide(MujocoRandomSlide):
    """MujocoRandomSlide whose reset also randomizes the model (the x joint's damping): domain
    randomization, which lives in the MjModel, not in the simulation state."""

    def reset(self, *, seed=None, options=None):
        self.model.dof_damping[0] = self.rng.uniform(0.5, 20.0)
        return super().reset(seed=seed, options=options)


class StatefulRandomDampingSlide(RandomDampingSlide):
    """RandomDampingSlide whose `get_state` / `set_state` carry the damping with the simulation."""

    def get_state(self):
        return {"qpos": self.data.qpos.copy(), "qvel": self.data.qvel.copy(), "goal": self.goal.copy(),
                "damping": self.model.dof_damping.copy()}  # fmt: skip

    def set_state(self, state):
        self._mujoco.mj_resetData(self.model, self.data)
        self.model.dof_damping[:] = state["damping"]
        self.data.qpos[:], self.data.qvel[:], self.goal = state["qpos"], state["qvel"], state["goal"].copy()
        self._mujoco.mj_forward(self.model, self.data)


class InPlaceRngReach(PointReach):
    """Ignores its seed: the goal comes from its own generator, whose state `get_state` carries
    and `set_state` restores in place, into the generator object itself."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.rng = np.random.default_rng()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.goal = self.rng.uniform(-0.5, 0.5, size=2)
        return self._obs(), {}

    def get_state(self):
        return {"pos": self.pos.copy(), "goal": self.goal.copy(), "t": self.t, "rng": self.rng.bit_generator.state}

    def set_state(self, state):
        self.pos, self.goal, self.t = state["pos"].copy(), state["goal"].copy(), state["t"]
        self.rng.bit_generator.state = state["rng"]


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


class LateNoSuccessKey(PointReach):
    """Reports `is_success` on its first two steps (the probe sees it), then no more."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, info if self.t <= 2 else {"distance": 0.0}


def limited_point_reach(**kwargs):
    """PointReach in a TimeLimit of 5 steps, made by a function (an entry point may wrap its env)."""
    return gym.wrappers.TimeLimit(PointReach(**kwargs), max_episode_steps=5)


class LongerObservation(PointReach):
    """Declares 4 observation values and returns 5."""

    def _obs(self):
        return np.concatenate([self.pos, self.goal, [0.0]])


class RaisesInConstructor(PointReach):
    def __init__(self, **kwargs):
        raise RuntimeError("cannot open the robot's serial port")


class ArraySuccess(PointReach):
    """Reports success as an array of two flags, not one truth value."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {"is_success": np.array([info["is_success"], False])}


class CountsBuilds(PointReach):
    """Keeps every instance built in this process (`built`), and whether it was closed."""

    built: list = []

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.closed = False
        CountsBuilds.built.append(self)

    def close(self):
        self.closed = True


class NaNSuccess(PointReach):
    """Reports success as nan from step `at` on, in the worlds reset from an even seed (`in_array`:
    as a one-element array)."""

    def __init__(self, at: int = 3, in_array: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.at, self.in_array = at, in_array

    def reset(self, *, seed=None, options=None):
        self.even = seed is not None and seed % 2 == 0
        return super().reset(seed=seed, options=options)

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        nan = np.array([np.nan]) if self.in_array else float("nan")
        return obs, reward, terminated, truncated, {"is_success": nan if self.even and self.t >= self.at
                                                    else info["is_success"]}  # fmt: skip


class SucceedsAsItBreaks(PointReach):
    """Reports success at step `at` in every world; in the worlds reset from an even seed, its
    observation at that step is non-finite too (the physics broke as the goal was met)."""

    def __init__(self, at: int = 2, **kwargs):
        super().__init__(**kwargs)
        self.at = at

    def reset(self, *, seed=None, options=None):
        self.even = seed is not None and seed % 2 == 0
        return super().reset(seed=seed, options=options)

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if self.t < self.at:
            return obs, 0.0, terminated, truncated, {"is_success": False}
        return obs * np.nan if self.even else obs, 1.0, terminated, truncated, {"is_success": True}


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


class RaisesOnFirstStep(PointReach):
    """The first step of a freshly built instance raises; every later one works."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.fresh = True

    def step(self, action):
        if self.fresh:
            self.fresh = False
            raise RuntimeError("not warmed up")
        return super().step(action)


class AlwaysRaises(PointReach):
    """Its `step` (or its `reset`, with `call="reset"`) raises every time."""

    def __init__(self, call: str = "step", **kwargs):
        super().__init__(**kwargs)
        self.call = call

    def reset(self, *, seed=None, options=None):
        if self.call == "reset":
            raise RuntimeError("boom")
        return super().reset(seed=seed, options=options)

    def step(self, action):
        raise RuntimeError("boom")


class RaisesAtRandom(PointReach):
    """Each step raises with probability `p`, drawn from the seeded generator: which worlds raise,
    and at which step, depends on the reset seed only. With `tolerance=0` nothing ever succeeds."""

    def __init__(self, p: float = 0.05, **kwargs):
        super().__init__(**kwargs)
        self.p = p

    def step(self, action):
        if self.np_random.random() < self.p:
            raise RuntimeError(f"random crash at step {self.t + 1}")
        return super().step(action)


def crash_step(seed: int, p: float, horizon: int) -> int | None:
    """The step at which `RaisesAtRandom(p)` reset from `seed` raises (None: it does not, within
    `horizon` steps, when nothing succeeds)."""
    env = RaisesAtRandom(p=p, tolerance=0.0)
    env.reset(seed=seed)
    for t in range(1, horizon + 1):
        try:
            env.step(np.zeros(2))
        except RuntimeError:
            return t
    return None


class Hangs(PointReach):
    """Hangs (sleeps for an hour) in `step` number `at` of an episode reset from `seed`, or in that
    reset with `at=0`; every other call works, each step taking `delay` seconds, each reset
    `reset_delay`."""

    def __init__(self, seed: int = 5, at: int = 3, delay: float = 0.0, reset_delay: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.hang_seed, self.at, self.delay, self.reset_delay = seed, at, delay, reset_delay

    def reset(self, *, seed=None, options=None):
        self.seed = seed
        if self.at == 0 and seed == self.hang_seed:
            time.sleep(3600)
        time.sleep(self.reset_delay)
        return super().reset(seed=seed, options=options)

    def step(self, action):
        if self.t + 1 == self.at and self.seed == self.hang_seed:
            time.sleep(3600)
        time.sleep(self.delay)
        return super().step(action)


class NaNFrom(PointReach):
    """Every observation is non-finite from step `at` on (`at=0`: from the reset)."""

    def __init__(self, at: int = 1, **kwargs):
        super().__init__(**kwargs)
        self.at = at

    def _obs(self):
        obs = super()._obs()
        return obs * np.nan if self.t >= self.at else obs


class Breaks(PointReach):
    """Works for the first `after` calls of `step` in this process (all worlds together), then
    `how`: "hang" sleeps for an hour in every step, "non_finite" returns NaN observations."""

    calls = 0

    def __init__(self, after: int = 100, how: str = "hang", **kwargs):
        super().__init__(**kwargs)
        self.after, self.how = after, how

    def step(self, action):
        Breaks.calls += 1
        if Breaks.calls > self.after and self.how == "hang":
            time.sleep(3600)
        return super().step(action)

    def _obs(self):
        obs = super()._obs()
        return obs * np.nan if Breaks.calls > self.after and self.how == "non_finite" else obs


def goal_reached(obs, info) -> bool:
    """A success_fn: the position within 0.1 of the goal, read from the observation."""
    return bool(np.linalg.norm(obs[:2] - obs[2:]) < 0.1)


def register() -> None:
    """Register PointReach as `toy/PointReach-v0` with a 40-step time limit (idempotent)."""
    if "toy/PointReach-v0" not in gym.registry:
        gym.register("toy/PointReach-v0", entry_point="toy_envs:PointReach", max_episode_steps=40)
    if "toy/MujocoRandomSlide-v0" not in gym.registry:
        gym.register("toy/MujocoRandomSlide-v0", entry_point="toy_envs:MujocoRandomSlide", max_episode_steps=60)


register()


def point_expert(obs, info):
    """A scripted expert for the PointReach family, in the env's own units ([-2, 2]): full speed
    toward the goal, slowing within reach."""
    pos, goal = np.asarray(obs[:2]), np.asarray(obs[2:4])
    return np.clip(20.0 * (goal - pos), -2.0, 2.0)


def half_expert(obs, info):
    """Succeeds only when the goal's x is positive; stands still otherwise."""
    return point_expert(obs, info) if obs[2] > 0 else np.zeros(2)


class GetActionExpert:
    """The `get_action(obs)` convention, with a `reset()` that counts episodes."""

    def __init__(self):
        self.episodes = 0

    def reset(self):
        self.episodes += 1

    def get_action(self, obs):
        return point_expert(obs, {})


class ResetRaisingExpert(GetActionExpert):
    def reset(self):
        raise KeyError("calibration")


def raising_expert(obs, info):
    raise RuntimeError("lost track of the goal")


def wrong_shape_expert(obs, info):
    return np.zeros(3)


def nan_expert(obs, info):
    return np.array([np.nan, 0.0])


def idle_expert(obs, info):
    return np.zeros(2)


def _in_a_worker() -> bool:
    import multiprocessing

    return multiprocessing.parent_process() is not None


class HangsWhenBuilt(PointReach):
    """Builds in the main process (the probe) and hangs for an hour when built in an async worker."""

    def __init__(self, **kwargs):
        if _in_a_worker():
            time.sleep(3600)
        super().__init__(**kwargs)


class RaisesWhenBuilt(PointReach):
    """Builds in the main process (the probe) and raises when built in an async worker."""

    def __init__(self, **kwargs):
        if _in_a_worker():
            raise RuntimeError("no licence server in this worker")
        super().__init__(**kwargs)


class HangsThenCannotBeRebuilt(Hangs):
    """`Hangs`, whose hang leaves a file `marker` behind, after which it raises when built in a worker:
    the replacement of the worker killed for the hang cannot build its env."""

    def __init__(self, marker: str = "", **kwargs):
        if marker and _in_a_worker() and os.path.exists(marker):
            raise RuntimeError("the robot is gone")
        super().__init__(**kwargs)
        self.marker = marker

    def step(self, action):
        if self.t + 1 == self.at and self.seed == self.hang_seed and self.marker:
            open(self.marker, "w").close()
        return super().step(action)


class ListSuccess(PointReach):
    """Reports success as a one-element list."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {"is_success": [info["is_success"]]}


class HalfBounded(PointReach):
    """Actions in Box([0, -inf], [inf, 1]): one dimension bounded below only, one above only; it
    refuses an action outside its Box, as some envs do."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.action_space = gym.spaces.Box(np.array([0.0, -np.inf], np.float32), np.array([np.inf, 1.0], np.float32))

    def step(self, action):
        assert self.action_space.contains(np.asarray(action, np.float32)), f"out of its Box: {action}"
        return super().step(action)


def wrapped_point(**kwargs):
    """An entry point that returns its env inside its own TimeLimit (no spec)."""
    return gym.wrappers.TimeLimit(PointReach(**kwargs), max_episode_steps=7)


class EvalSeedsNaN(PointReach):
    """Non-finite observations from the reset on the held-out evaluation seeds (1e9 <= seed < 2e9):
    demonstrations and training work, every evaluation fails."""

    def reset(self, *, seed=None, options=None):
        self.poison = seed is not None and 1_000_000_000 <= seed < 2_000_000_000
        return super().reset(seed=seed, options=options)

    def _obs(self):
        obs = super()._obs()
        return obs * np.nan if getattr(self, "poison", False) else obs


class Renders(PointReach):
    """Renders a 16 x `render_width` frame, for `frames` calls of `render` per instance (None: always); after
    them `render` raises, as a lost GL context would. `frames=0`: `render` returns None."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 25}

    def __init__(self, render_mode=None, frames: int | None = None, render_width: int = 16, **kwargs):
        super().__init__(**kwargs)
        self.render_mode, self.frames, self.rendered, self.render_width = render_mode, frames, 0, render_width

    def render(self):
        if self.frames == 0:
            return None
        self.rendered += 1
        if self.frames is not None and self.rendered > self.frames:
            raise RuntimeError("GL context lost")
        frame = np.zeros((16, self.render_width, 3), np.uint8)
        frame[..., 0] = int(255 * min(abs(self.pos[0]), 1.0))
        return frame


RENAMED_KEYS: dict[str, str] = {}  # DictPointReach's keys as a later version of the env names them


class RenamingDictReach(DictPointReach):
    """DictPointReach whose keys are renamed by `RENAMED_KEYS`, as an upgrade of an env may do."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_space = gym.spaces.Dict(
            {RENAMED_KEYS.get(k, k): v for k, v in self.observation_space.spaces.items()})

    def _obs(self):
        return {RENAMED_KEYS.get(k, k): v for k, v in super()._obs().items()}


class RendersGlobalRandom(Renders):
    """`Renders` whose reset ignores its seed, as GlobalRandomReach's does."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.goal = np.random.uniform(-0.5, 0.5, size=2)  # noqa: NPY002 (the point of this env)
        return self._obs(), {}


class CountedReach(PointReach):
    """PointReach that counts its instances (`built`) and can be slowed (`sleep_s` per step)."""

    built = 0

    def __init__(self, tolerance: float = 0.1, sleep_s: float = 0.0):
        super().__init__(tolerance)
        self.sleep_s = sleep_s
        CountedReach.built += 1

    def step(self, action):
        if self.sleep_s:
            import time

            time.sleep(self.sleep_s)
        return super().step(action)


class LeakyReset(PointReach):
    """Seeds its goal but keeps the point where the last episode left it (from reset number
    `from_reset` of the instance on; 1: always)."""

    def __init__(self, from_reset: int = 1, **kwargs):
        super().__init__(**kwargs)
        self.from_reset, self.resets = from_reset, 0

    def reset(self, *, seed=None, options=None):
        self.resets += 1
        kept = getattr(self, "pos", None)
        obs, info = super().reset(seed=seed)
        if kept is not None and self.resets >= self.from_reset:
            self.pos = kept
        return self._obs(), info


class StringSuccess(PointReach):
    """Reports success as a string ("False", "True"), which bool() reads as True either way."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {**info, "is_success": str(info["is_success"])}


class ArrayTerminatedLater(PointReach):
    """From step `at` of an episode on, `terminated` is a 2-element array, not one truth value."""

    def __init__(self, at: int = 5, **kwargs):
        super().__init__(**kwargs)
        self.at = at

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, np.array([terminated, False]) if self.t >= self.at else terminated, truncated, info


class MarksItsWork(PointReach):
    """Creates the file `$TOY_WORKING` at the 200th step in this process (all worlds together):
    a test's sign that the command is past its start-up and the env's probe steps, at work (a
    signal sent then lands in the work)."""

    steps = 0

    def step(self, action):
        MarksItsWork.steps += 1
        mark = os.environ.get("TOY_WORKING")
        if mark and MarksItsWork.steps == 200:
            open(mark, "w").close()
        return super().step(action)


def success_as_info(obs, info):
    """An `env.success_fn` with a bug: it returns the info dict, which bool() reads as True."""
    return info


class ImageObs(PointReach):
    """Observes a Dict: the state, and an 8x8 RGB uint8 image of nothing."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_space = gym.spaces.Dict({
            "cam": gym.spaces.Box(0, 255, (8, 8, 3), np.uint8),
            "state": gym.spaces.Box(-np.inf, np.inf, (4,), np.float64),
        })  # fmt: skip

    def _obs(self):
        return {"cam": np.zeros((8, 8, 3), np.uint8), "state": np.concatenate([self.pos, self.goal])}


class DictGoalUnseeded(ImageObs, GlobalRandomReach):
    """ImageObs whose goal comes from numpy's global generator (GlobalRandomReach's reset)."""


class ReusedBuffer(PointReach):
    """Returns one float32 array it fills in place each step; NaN from step 3 where the goal's x > 0."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
        self.buffer = np.zeros(4, np.float32)

    def _obs(self):
        self.buffer[:] = np.concatenate([self.pos, self.goal])
        if self.t >= 3 and self.goal[0] > 0:
            self.buffer[:] = np.nan
        return self.buffer


class Bounded(PointReach):
    """PointReach with actions in [-HIGH, HIGH]: bounds the env's code decides, not its kwargs (a
    test changes HIGH as a new version of the env would)."""

    HIGH = 2.0

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.action_space = gym.spaces.Box(-self.HIGH, self.HIGH, (2,), np.float32)


class SlowToBuild(PointReach):
    """When `$TOY_BUILDING` names a file that does not exist yet, its first build in this process
    creates it and then takes a minute: a test's sign that the command is building its env, before
    any work (a signal sent then lands in the build)."""

    def __init__(self, **kwargs):
        mark = os.environ.get("TOY_BUILDING")
        if mark and not os.path.exists(mark):
            open(mark, "w").close()
            time.sleep(60)
        super().__init__(**kwargs)
