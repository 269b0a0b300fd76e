"""Any registered robosuite environment behind the Gymnasium API, rewarded by binary success.

Entry point: ``grpo_robot.envs.robosuite_env:RobosuiteEnv`` (nothing is registered globally).
Needs the ``robosuite`` extra (``pip install -e ".[robosuite]"``).

Where robosuite's randomness comes from (1.5.2), and how `reset(seed=...)` pins it down:

* ``env.rng``, one ``numpy.random.Generator`` made from ``robosuite.make(seed=...)``, feeds every
  draw of the built-in tasks: object placement (the placement samplers are handed a reference
  to this same generator when the model is built and keep it), the robots' initial joint noise
  (``initialization_noise``; ``env.rng`` is passed to ``robot.reset`` on every reset), the
  task variant some tasks pick per reset (PickPlace/NutAssembly's single-object modes), draws
  made when the model is built (Lift's cube size, Wipe's table height), and arena or object
  models that keep their own reference (``WipeArena``, ``HammerObject``).
* A generator that is not ``env.rng`` can still sit in the object graph, e.g. a user-supplied
  ``placement_initializer`` built with its own ``rng``, or the unused default generator of a
  ``SequentialCompositeSampler``.

Because these objects hold *references*, replacing ``env.rng`` with a new generator would leave
the samplers drawing from the old one, and seeding numpy's global generator (what robosuite's
``GymWrapper.reset(seed=...)`` does) reaches none of them. So on ``reset(seed=s)`` this adapter
walks the robosuite objects reachable from the env, finds every generator, and reseeds each *in
place* (``env.rng`` as ``numpy.random.default_rng(s)`` would start; any other with its own
child of ``SeedSequence(s)``), then runs robosuite's reset. Soft resets (``sim.reset()``,
i.e. ``mj_resetData``, plus fresh controllers and observables) then reproduce the start exactly
whatever ran before; hard resets rebuild the model from the reseeded generator, so model-time
draws follow the reset seed too.

Not covered: observation corrupters and delayers (off by default) draw from numpy's global RNG.
"""

from __future__ import annotations

import difflib
import logging
from collections import OrderedDict
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces


class _ErrorsOnly(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


# robosuite warns on import about an optional private macro file and optional packages
# (robosuite_models, mink) that this adapter does not use; hold those back while importing.
_robosuite_logger = logging.getLogger("robosuite_logs")
_import_filter = _ErrorsOnly()
_robosuite_logger.addFilter(_import_filter)
try:
    import robosuite
    from robosuite.controllers.composite.composite_controller_factory import refactor_composite_controller_config
    from robosuite.robots import REGISTERED_ROBOTS
finally:
    _robosuite_logger.removeFilter(_import_filter)
# robosuite logs one INFO line per env built ("Loading controller configuration ..."): a group of
# 64 worlds would print 64; keep warnings and errors (lower the level again to see them)
_robosuite_logger.setLevel(logging.WARNING)

DEFAULT_HORIZON = 500  # control steps; robosuite's benchmark setting at 20 Hz
DEFAULT_CONSTRUCTION_SEED = 0
_NO_RENDERER = {"has_renderer": False, "has_offscreen_renderer": False, "use_camera_obs": False}


def _unknown(kind: str, name: Any, known) -> ValueError:
    known = sorted(known)
    close = difflib.get_close_matches(str(name), known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ValueError(f"unknown robosuite {kind} {name!r}{hint}; available: {', '.join(known)}")


def _controller_configs(controller: str, robots: list[str]) -> list[dict]:
    """One robosuite composite-controller config per robot for the name or .json path `controller`."""
    if controller.endswith(".json"):
        return [robosuite.load_composite_controller_config(controller=controller) for _ in robots]
    composite = {c.upper(): c for c in robosuite.ALL_COMPOSITE_CONTROLLERS}
    parts = {c.upper(): c for c in robosuite.ALL_PART_CONTROLLERS}
    name = controller.upper()
    if name in composite:
        return [robosuite.load_composite_controller_config(controller=composite[name], robot=r) for r in robots]
    if name in parts:
        # an arm-part controller (e.g. OSC_POSITION) on each arm, inside the robot's default composite
        return [
            refactor_composite_controller_config(
                robosuite.load_part_controller_config(default_controller=parts[name]), r, REGISTERED_ROBOTS[r].arms
            )
            for r in robots
        ]
    raise _unknown("controller", controller, [*composite.values(), *parts.values()])


def arm_controllers(kwargs: dict[str, Any]) -> list[dict[str, str]] | None:
    """What each robot's arms run under robosuite env kwargs: per robot, `{arm: "OSC_POSE (delta actions)"}`
    (the arm-part controller's type, and whether its actions are deltas or absolute targets). The
    kwargs are a robosuite env's own (`controller_configs`: a composite config of robosuite 1.5, or
    the arm-part config of robosuite 1.4 and earlier, which robomimic's datasets record), or this
    adapter's (`controller`: a name or a .json path), or neither (each robot's default). None where
    a robot is not one robosuite knows."""
    robots = kwargs.get("robots", "Panda")
    robots = [robots] if isinstance(robots, str) else list(robots)
    if any(r not in REGISTERED_ROBOTS for r in robots):
        return None
    configs = kwargs.get("controller_configs")
    if configs is None:
        controller = kwargs.get("controller")
        configs = (_controller_configs(controller, robots) if controller else
                   [robosuite.load_composite_controller_config(controller=None, robot=r) for r in robots])  # fmt: skip
    if isinstance(configs, dict):
        configs = [configs] * len(robots)
    out = []
    for robot, config in zip(robots, configs, strict=False):
        arms = REGISTERED_ROBOTS[robot].arms
        parts = config.get("body_parts")
        if parts is None:  # robosuite <= 1.4: one arm-part controller, on every arm
            per_arm = {arm: config for arm in arms}
        else:
            parts = parts.get("arms", parts)  # a composite config as written, or as robosuite expands it
            per_arm = {arm: parts[arm] for arm in arms if isinstance(parts.get(arm), dict)}
        out.append({arm: f"{str(c.get('type')).upper()} ({_input_type(c)} actions)" for arm, c in per_arm.items()})
    return out


def _input_type(part: dict[str, Any]) -> str:
    """"delta" or "absolute": robosuite 1.5's `input_type`, or 1.4's `control_delta`."""
    if "input_type" in part:
        return str(part["input_type"])
    return "delta" if part.get("control_delta", True) else "absolute"


def _random_generators(root: Any) -> list[np.random.Generator | np.random.RandomState]:
    """Every numpy generator reachable from `root` through robosuite objects (instances of
    robosuite classes or their subclasses), dicts, lists and tuples, each once, in a
    deterministic (attribute-order) sequence."""
    found, seen, stack = [], set(), [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, (np.random.Generator, np.random.RandomState)):
            found.append(obj)
            continue
        if isinstance(obj, dict):
            children = list(obj.values())
        elif isinstance(obj, (list, tuple)):
            children = list(obj)
        elif hasattr(obj, "__dict__") and any(c.__module__.startswith("robosuite") for c in type(obj).__mro__):
            children = list(vars(obj).values())
        else:
            continue
        stack.extend(reversed(children))
    return found


def _reseed(gen: np.random.Generator | np.random.RandomState, seed: np.random.SeedSequence) -> None:
    """Reset `gen` in place to the start of the stream that `seed` gives its bit generator."""
    if isinstance(gen, np.random.Generator):
        gen.bit_generator.state = type(gen.bit_generator)(seed).state
    else:
        gen.seed(seed.generate_state(1)[0])


class RobosuiteEnv(gymnasium.Env):
    """A robosuite environment (Lift, Stack, Door, NutAssembly, PickPlace, ...) as a Gymnasium env
    whose only reward is task success.

    Args:
        env_name: a registered robosuite environment (``robosuite.ALL_ENVIRONMENTS``).
        robots: robot name(s) (``robosuite.ALL_ROBOTS``); a list for multi-robot tasks.
        controller: ``None`` for each robot's default controller (Panda: OSC_POSE arm + gripper,
            7-dim action); a composite controller name (``robosuite.ALL_COMPOSITE_CONTROLLERS``,
            e.g. ``"BASIC"``); an arm-part controller name (``robosuite.ALL_PART_CONTROLLERS``,
            e.g. ``"OSC_POSITION"``, ``"JOINT_VELOCITY"``), placed on every arm of the robot's
            default composite controller; or a path to a composite-controller ``.json``. Case
            does not matter. Pass ``controller_configs=`` instead for a ready-made config.
        obs_keys: robosuite observation entries to return. Default: the keys robosuite's own
            ``GymWrapper`` would concatenate, in its order: ``"object-state"`` (if the task has
            object observations), ``"<camera>_image"`` per camera if ``use_camera_obs=True``, then
            ``"robot<i>_proprio-state"`` per robot. For Lift + Panda that is object-state (10)
            and robot0_proprio-state (50): 60 numbers. Any entry robosuite produces can be named
            (e.g. ``"cube_pos"``, ``"robot0_eef_pos"``); unknown keys raise ``ValueError``.
        hard_reset: rebuild robosuite's model and simulation on every reset (about 100x slower).
            The default soft reset keeps the model built at construction, so model-time draws
            (e.g. Lift's cube size) stay fixed for the instance's life.
        control_freq: control steps per simulated second.
        horizon: control steps per episode; reaching it truncates the episode.
        render_mode: ``"rgb_array"`` turns robosuite's offscreen renderer on; ``render()`` then
            returns the frame of ``render_camera`` (e.g. ``"frontview"``, ``"agentview"``,
            ``"birdview"``), ``render_width`` x ``render_height`` pixels. ``MUJOCO_GL`` must name a
            working platform before robosuite is first imported (``grpo_robot.render.gl_backend``
            chooses one).
        **robosuite_kwargs: passed to ``robosuite.make``. Rendering is off unless asked for here
            (``has_renderer``, ``has_offscreen_renderer``, ``use_camera_obs`` default to False)
            and ``reward_shaping`` defaults to False. ``seed`` seeds construction: the model is
            built from it, and resets without a seed continue its stream reproducibly, as in
            ``robosuite.make(seed=...)``. Without it the model is built from seed 0 (so every
            instance has the same scene, and equal reset seeds give equal starts across
            instances even with soft resets) and unseeded resets draw from fresh OS entropy.

    Spaces: ``observation_space`` is a ``spaces.Dict`` (in ``obs_keys`` order) of unbounded
    float32 Boxes (integer entries such as images keep their dtype and bounds);
    ``action_space`` is a float32 Box with robosuite's ``action_spec`` bounds. Actions are
    passed on unclipped (robosuite's controllers clip to their input range).

    Reward is 1.0 on a step where robosuite's ``_check_success()`` holds, else 0.0;
    ``info["is_success"]`` carries that flag on every step and after reset (alongside whatever
    info robosuite returns). An episode is truncated at ``horizon`` (unless ``ignore_done=True``)
    and terminated only if robosuite ends it earlier (e.g. Wipe's early terminations), not on
    success. Stepping an ended episode raises ``RuntimeError``; call ``reset()``.

    ``reset(seed=s)`` gives a bit-identical start (observation and simulation state) for equal
    ``s``, in fresh instances and in one instance reused after any earlier episodes; see the
    module docstring for how. ``reset()`` without a seed continues from the current generators.
    The wrapped robosuite env is ``self.robosuite_env``.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        env_name: str = "Lift",
        robots: str | list[str] = "Panda",
        controller: str | None = None,
        obs_keys: list[str] | None = None,
        hard_reset: bool = False,
        control_freq: int = 20,
        horizon: int = DEFAULT_HORIZON,
        render_mode: str | None = None,
        render_camera: str = "frontview",
        render_width: int = 320,
        render_height: int = 240,
        **robosuite_kwargs: Any,
    ):
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode={render_mode!r} is not supported; use 'rgb_array' or None")
        self.render_mode, self.render_camera = render_mode, render_camera
        self.render_size = (int(render_width), int(render_height))
        self.metadata = {**self.metadata, "render_fps": control_freq}
        if env_name not in robosuite.ALL_ENVIRONMENTS:
            raise _unknown("environment", env_name, robosuite.ALL_ENVIRONMENTS)
        robot_list = [robots] if isinstance(robots, str) else list(robots)
        for robot in robot_list:
            if robot not in robosuite.ALL_ROBOTS:
                raise _unknown("robot", robot, robosuite.ALL_ROBOTS)
        kwargs = {**_NO_RENDERER, "reward_shaping": False, **robosuite_kwargs}
        if render_mode == "rgb_array":
            kwargs["has_offscreen_renderer"] = True
        if controller is not None:
            if "controller_configs" in kwargs:
                raise ValueError("give either controller= or controller_configs=, not both")
            configs = _controller_configs(controller, robot_list)
            kwargs["controller_configs"] = configs if len(configs) > 1 else configs[0]
        construction_seed = kwargs.pop("seed", None)

        self.env_name = env_name
        self.horizon = int(horizon)
        self.robosuite_env = robosuite.make(
            env_name,
            robots=robots,
            hard_reset=hard_reset,
            control_freq=control_freq,
            horizon=self.horizon,
            seed=DEFAULT_CONSTRUCTION_SEED if construction_seed is None else construction_seed,
            **kwargs,
        )
        self._closed = False
        self._generators: list | None = None  # cached by _seed_generators
        self._episode_over = True  # step() needs a reset() first
        if construction_seed is None:
            self._seed_generators(np.random.SeedSequence())  # unseeded resets: fresh entropy

        env = self.robosuite_env
        sample = env.reset()  # real observations, for the shapes and dtypes of every entry
        if obs_keys is None:
            obs_keys = []
            if getattr(env, "use_object_obs", False) and "object-state" in sample:
                obs_keys.append("object-state")
            if getattr(env, "use_camera_obs", False):
                obs_keys += [f"{cam}_image" for cam in env.camera_names]
            obs_keys += [f"robot{i}_proprio-state" for i in range(len(env.robots))]
        missing = [k for k in obs_keys if k not in sample]
        if missing:
            raise ValueError(f"observation keys {missing} not produced by {env_name}; available: {', '.join(sample)}")
        self.obs_keys = list(obs_keys)
        self.observation_space = spaces.Dict(OrderedDict((k, self._box(sample[k])) for k in self.obs_keys))
        low, high = env.action_spec
        self.action_space = spaces.Box(np.float32(low), np.float32(high), dtype=np.float32)
        if render_mode == "rgb_array" and render_camera not in env.sim.model.camera_names:
            cameras = ", ".join(env.sim.model.camera_names)
            raise ValueError(f"render_camera={render_camera!r} is not in {env_name}'s scene; its cameras: {cameras}")

    def render(self):
        """`render_mode="rgb_array"`: the current frame of `render_camera`, `uint8 [H, W, 3]`."""
        if self.render_mode is None:
            return None
        width, height = self.render_size
        frame = self.robosuite_env.sim.render(camera_name=self.render_camera, width=width, height=height)
        return np.ascontiguousarray(frame[::-1])  # OpenGL's rows run bottom-up

    @staticmethod
    def _box(value: Any) -> spaces.Box:
        value = np.asarray(value)
        if np.issubdtype(value.dtype, np.integer):
            info = np.iinfo(value.dtype)
            return spaces.Box(info.min, info.max, value.shape, value.dtype)
        return spaces.Box(-np.inf, np.inf, value.shape, np.float32)

    def _obs(self, raw: dict) -> dict[str, np.ndarray]:
        return {k: np.asarray(raw[k], dtype=space.dtype) for k, space in self.observation_space.spaces.items()}

    def _seed_generators(self, seed: np.random.SeedSequence) -> None:
        env = self.robosuite_env
        if self._generators is None or env.hard_reset:  # a hard reset rebuilds the objects
            self._generators = [g for g in _random_generators(env) if g is not env.rng]
        others = self._generators
        _reseed(env.rng, seed)
        for gen, child in zip(others, seed.spawn(len(others)), strict=True):
            _reseed(gen, child)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if self._closed:
            raise RuntimeError("reset() on a closed RobosuiteEnv")
        if seed is not None:
            self._seed_generators(np.random.SeedSequence(seed))
        raw = self.robosuite_env.reset()
        self._episode_over = False
        return self._obs(raw), {"is_success": bool(self.robosuite_env._check_success())}

    def step(self, action):
        if self._episode_over:
            raise RuntimeError(
                "step() on a RobosuiteEnv whose episode has ended (or never started); call reset() first"
            )
        action = np.asarray(action, dtype=np.float64)
        if action.shape != self.action_space.shape:
            raise ValueError(f"action must have shape {self.action_space.shape}, got {action.shape}")
        env = self.robosuite_env
        raw, _, done, rs_info = env.step(action)
        success = bool(env._check_success())
        truncated = env.timestep >= self.horizon and not env.ignore_done
        terminated = bool(done) and not truncated
        self._episode_over = terminated or truncated
        info = {**rs_info, "is_success": success}
        return self._obs(raw), float(success), terminated, truncated, info

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._episode_over = True
            self.robosuite_env.close()
