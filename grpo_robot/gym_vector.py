"""Any Gymnasium env as groups of worlds: the backend of `env.id=` / `env.entry_point=` configs.

`GymGroupEnv` offers the interface of the built-in `BatchedEnv` (`reset(seeds)`, `step`, the
sticky `success`/`terminated`/`truncated`/`failed` flags) over a Gymnasium vector env
(`SyncVectorEnv`, or `AsyncVectorEnv` with `env.vector=async`) whose worlds are `OutcomeEnv`s:

- **Observations** are flattened to one float32 vector: a Box as is, a Dict over `env.obs_keys`
  (default: every key, in the space's order), each entry flattened.
- **Actions** come in [-1, 1] per dimension and are mapped linearly onto the env's Box bounds
  (dimensions with an infinite bound are passed through unchanged).
- **Success** is `bool(info[env.success_key])` after each step, or `env.success_fn(obs, info)`.
  With `outcome=any_step` the episode ends at the first success; with `final_step` success is
  judged at the last step. The env's own termination or time limit also ends it.
- **Episodes end inside the world**: a finished world keeps its last observation and ignores
  further actions, and never reports done to the vector env, so nothing autoresets and a
  finished robosuite env is never stepped again.
- **A crashing world is contained**: an exception in its `step` or `reset`, or a non-finite
  observation, ends that world as a failure (no success); the others carry on. The probe that
  checks the env at construction tries `PROBE_EPISODES` seeds, and refuses the env (a one-line
  `ValueError`) only when every one of them raised.
- **Workers start from a clean process** with `async`: a fork server (`start_method`), or fresh
  interpreters for worlds that render; never a fork of this process, whose threads (torch's,
  MuJoCo's) a forked child does not have.
- **A hung world is bounded** by `env.step_timeout_s`: with `async` its worker process is killed
  (SIGKILL) and replaced, the world failed for the rest of its episode (a world not built in its
  worker within that time, or whose build raised there, is a one-line `ValueError`); with `sync`
  a `Watchdog` thread ends the process through `lifecycle.emergency_exit` (a call hung in this
  process cannot be interrupted).
- **Every world failed** after a reset, or by the end of a step: `EnvFailure`, one line naming the
  env and the first error; there is nothing to learn from.
- **Seeding is checked** when the env is built: worlds reset from equal seeds must start from
  equal observations, and a second reset from the same seeds must repeat the first, else
  `ValueError`; `env.check_seeding=false` turns this off for envs noisy by design.
"""

from __future__ import annotations

import atexit
import ctypes
import difflib
import functools
import importlib
import logging
import math
import multiprocessing
import multiprocessing.connection
import multiprocessing.util  # its exit hook is registered before ours, so ours (kill the workers) runs first
import os
import re
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector.async_vector_env import _async_worker
from gymnasium.vector.utils import CloudpickleWrapper, clear_mpi_env_vars

from grpo_robot import env_state, lifecycle
from grpo_robot.batched import check_actions
from grpo_robot.config import EnvConfig, env_name, env_source
from grpo_robot.seed_ranges import check_seeds

log = logging.getLogger(__name__)

RUNNING, SUCCEEDED, HORIZON, ENV_ENDED, FAILED = 0, 1, 2, 3, 4  # OutcomeEnv's `info["ended"]`
PROBE_EPISODES = 3  # seeds the probe tries before it concludes that the env cannot step at all


class EnvFailure(RuntimeError):
    """Every world of a batch failed (after a reset, or by the end of a step): there is nothing to
    learn from. One line naming the env, how many worlds, and the first error."""


class CopyFailed(RuntimeError):
    """Copying a reset world into another raised (group_start=clone)."""


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def _usable_timeout(seconds: float | None) -> float | None:
    """`env.step_timeout_s` -> seconds, or None for no limit (null, zero, negative or infinite)."""
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return None
    return float(seconds)


class MissingSuccessKey(KeyError):
    """The env's info lacks `env.success_key`: a config error to report, not a crash to contain."""


# -- building one env from the config -------------------------------------------------------------
def _import(name: str):
    """`importlib.import_module`, finding modules in the working directory too (last), as
    `python -m` would: a user's `my_envs.py` next to where they run the trainer."""
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    return importlib.import_module(name)


def import_modules(names: Sequence[str]) -> None:
    for name in names:
        try:
            _import(name)
        except Exception as err:
            raise ValueError(f"env.import={name!r} failed: {type(err).__name__}: {err}") from None


def load_callable(path: str, key: str, check: bool = True) -> Callable[..., Any]:
    """`module:attr` (attr may be dotted) -> the object, which must be callable when `check`; an
    import failure is a `ValueError` that names the config `key` (env.entry_point, ...) and shows
    the import error."""
    module_name, _, attr = path.partition(":")
    try:
        obj: Any = _import(module_name)
    except Exception as err:
        raise ValueError(f"{key}={path!r} could not be imported: {type(err).__name__}: {err}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            public = [n for n in dir(obj) if not n.startswith("_")]
            close = difflib.get_close_matches(part, public, n=3)
            hint = f"; close matches: {', '.join(close)}" if close else ""
            raise ValueError(f"{key}={path!r}: {module_name} has no attribute {attr!r}{hint}")
        obj = getattr(obj, part)
    if check and not callable(obj):
        raise ValueError(f"{key}={path!r} is a {type(obj).__name__}, not a class or function")
    return obj


class EnvNotBuilt(ValueError):
    """The env's constructor raised: one line naming the env, and `cause`, the error itself."""

    def __init__(self, cfg: EnvConfig, err: BaseException) -> None:
        self.cause = f"{type(err).__name__}: {_one_line(err)}"
        super().__init__(f"{env_name(cfg)} could not be built: {self.cause}")


def make_inner(cfg: EnvConfig) -> gymnasium.Env:
    """The user's env, one world, exactly as configured."""
    import_modules(cfg.imports)
    kwargs = dict(cfg.kwargs)
    if cfg.id:
        if cfg.id not in gymnasium.registry:
            close = difflib.get_close_matches(cfg.id, list(gymnasium.registry), n=5, cutoff=0.6)
            hint = f"close matches: {', '.join(close)}" if close else "no close matches"
            where = "" if cfg.imports else "; if a package registers it, name it in env.import=[package]"
            raise ValueError(f"env.id={cfg.id!r} is not a registered Gymnasium env ({hint}){where}")
        if cfg.horizon is not None:  # the env's own TimeLimit must not cut episodes shorter
            kwargs["max_episode_steps"] = cfg.horizon
        make = functools.partial(gymnasium.make, cfg.id)
    else:
        make = load_callable(cfg.entry_point, "env.entry_point")  # type: ignore[arg-type]
    try:
        env = make(**kwargs)
    except TypeError as err:
        if "render_mode" in kwargs and "render_mode" in str(err):
            raise ValueError(f"{env_source(cfg)} cannot render frames: it takes no render_mode argument, and "
                             "video needs render_mode='rgb_array'") from None  # fmt: skip
        unexpected = re.search(r"unexpected keyword argument '(\w+)'", str(err))
        if unexpected and unexpected.group(1) in cfg.kwargs:  # a misspelled or foreign key in env.kwargs
            raise ValueError(f"env.kwargs.{unexpected.group(1)} is invalid: {env_name(cfg)} takes no argument "
                             f"{unexpected.group(1)!r}") from None  # fmt: skip
        raise EnvNotBuilt(cfg, err) from None
    except ValueError:
        raise
    except Exception as err:  # a constructor that raises (a device it cannot open, a file it lacks): one line
        raise EnvNotBuilt(cfg, err) from None
    if not isinstance(env, gymnasium.Env):  # gymnasium.make's always is
        raise ValueError(f"env.entry_point={cfg.entry_point!r} made a {type(env).__name__}, not a gymnasium.Env")
    if cfg.horizon is not None:  # env.horizon wins over a shorter TimeLimit the entry point wrapped around its env
        layer = env
        while isinstance(layer, gymnasium.Wrapper):
            if isinstance(layer, gymnasium.wrappers.TimeLimit) and layer._max_episode_steps < cfg.horizon:
                layer._max_episode_steps = cfg.horizon
            layer = layer.env
    return env


def _space_error(cfg: EnvConfig, what: str, space: spaces.Space, supported: str) -> ValueError:
    return ValueError(f"{env_name(cfg)}: its {what} space {space} is not supported; grpo-robot needs {supported}")


def check_spaces(cfg: EnvConfig, env: gymnasium.Env) -> list[str] | None:
    """Refuse spaces the toolkit cannot drive; -> the Dict keys to concatenate (None for a Box)."""
    act = env.action_space
    if not isinstance(act, spaces.Box) or not np.issubdtype(act.dtype, np.floating):
        raise _space_error(cfg, "action", act, "continuous actions in a float gymnasium.spaces.Box")
    obs = env.observation_space
    if isinstance(obs, spaces.Box):
        if cfg.obs_keys is not None:
            raise ValueError(
                f"env.obs_keys={list(cfg.obs_keys)} is set, but {env_name(cfg)} observes a Box, not a Dict"
            )
        return None
    if not isinstance(obs, spaces.Dict):
        raise _space_error(cfg, "observation", obs, "a Box, or a Dict of Boxes (flattened over env.obs_keys)")
    keys = list(cfg.obs_keys) if cfg.obs_keys is not None else list(obs.spaces)
    for key in keys:
        if key not in obs.spaces:
            raise ValueError(f"env.obs_keys names {key!r}, but {env_name(cfg)} observes {', '.join(obs.spaces)}")
        if not isinstance(obs.spaces[key], spaces.Box):
            others = [k for k in keys if isinstance(obs.spaces[k], spaces.Box)]
            raise _space_error(cfg, f"observation[{key!r}]", obs.spaces[key], "Box entries only (or leave it out: "
                               f"env.obs_keys=[{','.join(others)}])")  # fmt: skip
    return keys


def image_like_entries(cfg: EnvConfig, env: gymnasium.Env, keys: list[str] | None) -> list[str]:
    """A line for each observed Box of integer values or of 3 or more dimensions (a camera image):
    the policy is an MLP, which takes it flattened, pixel by pixel, as raw numbers."""
    boxes = [(None, env.observation_space)] if keys is None else [(k, env.observation_space[k]) for k in keys]
    lines = []
    for key, box in boxes:
        if np.issubdtype(box.dtype, np.integer) or len(box.shape) >= 3:
            what = "its observation" if key is None else f"observation[{key!r}]"
            leave = "" if key is None else f"; leave it out with env.obs_keys=[{','.join(k for k in keys if k != key)}]"
            lines.append(f"{env_name(cfg)}: {what} is a {box.dtype} Box of shape {box.shape}, which the policy's MLP "
                         f"takes flattened into {int(np.prod(box.shape))} raw inputs (no image encoder){leave}")
    return lines


def unit_actions(actions: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """`[S, D]` actions in an env's Box units -> the project's [-1, 1] per dimension (linear where
    both bounds are finite, unchanged elsewhere; clipped, as the env would clip them) float32. A
    dimension whose bounds are equal holds one value, whatever the policy emits: it maps to 0."""
    a = np.asarray(actions, dtype=np.float64)
    scaled = np.isfinite(low) & np.isfinite(high)
    fixed = scaled & (high == low)
    lo, span = np.where(scaled, low, -1.0), np.where(scaled & ~fixed, high - low, 2.0)
    unit = np.where(fixed, 0.0, np.where(scaled, 2.0 * (a - lo) / span - 1.0, a - _half_offset(low, high)))
    return np.clip(unit, -1.0, 1.0).astype(np.float32)


def _half_offset(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Per dimension, what is added to a [-1, 1] value where a bound is infinite: `low + 1` where
    only the low bound is finite (the values start at it), `high - 1` where only the high one is,
    0 where neither is (the value unchanged), so the env's Box holds every value."""
    return np.where(np.isfinite(low), low + 1.0, np.where(np.isfinite(high), high - 1.0, 0.0))


def truth(value: Any, what: str, kind: str = "success flag") -> bool:
    """`value` as a flag (a success flag, or `terminated`); a NaN, which `bool` takes for True, an
    array of several values or any other object raises, so the world fails."""
    if isinstance(value, np.ndarray | list | tuple):  # a one-element array or list: its element
        array = np.asarray(value, dtype=object)
        if array.size != 1:
            raise ValueError(f"{what} holds {array.size} values, not one {kind}")
        value = array.reshape(()).item()
    if isinstance(value, float | np.floating) and value != value:
        raise ValueError(f"{what} is nan, not a {kind}")
    if isinstance(value, str | bytes):  # bool("False") is True
        raise ValueError(f"{what} is the string {value!r}, not a {kind} (a bool or a number)")
    if hasattr(value, "item") and not isinstance(value, np.generic):  # a 0-d tensor of another library
        value = value.item()
    if not isinstance(value, bool | int | float | np.bool_ | np.number):  # bool(<any object>) is True
        raise ValueError(f"{what} is a {type(value).__name__}, not a {kind} (a bool or a number)")
    return bool(value)


class SuccessRule:
    """Whether a step of a Gymnasium env succeeded, as training judges it: `env.success_fn(obs,
    info)` when set, else `info[env.success_key]`, each read as one truth value (`truth`). An info
    without the key raises `MissingSuccessKey`, never reads as "not yet"."""

    def __init__(self, cfg: EnvConfig) -> None:
        self.key = cfg.success_key
        self.fn = load_callable(cfg.success_fn, "env.success_fn") if cfg.success_fn else None

    def __call__(self, obs: Any, info: dict[str, Any]) -> bool:
        if self.fn is not None:
            return truth(self.fn(obs, info), "env.success_fn's value")
        if self.key not in info:
            raise MissingSuccessKey(
                f"env.success_key={self.key!r} is not in the info it returned, which has keys "
                f"{sorted(info) or 'none'}; set env.success_key to one of them, or env.success_fn=module:func"
            )
        return truth(info[self.key], f"info[{self.key!r}]")


def flatten_obs(obs: Any, keys: list[str] | None, obs_dim: int, declared: str) -> np.ndarray:
    """An env's observation, as it returned it -> the policy's flat float32 `[obs_dim]`: a Box's
    values, or a Dict's `keys` concatenated in that order. A size other than `obs_dim` is a one-line
    `ValueError` ending with `declared` and the size."""
    if keys is None:
        flat = np.array(obs, dtype=np.float32).reshape(-1)  # a copy: an env may reuse its array in place
    else:
        try:  # the checks below only once it failed: this runs per world and step
            flat = np.concatenate([np.asarray(obs[k], dtype=np.float32).reshape(-1) for k in keys])
        except (KeyError, TypeError, IndexError):
            if not isinstance(obs, Mapping):
                raise ValueError(f"its observation is a {type(obs).__name__}, where a Dict with keys {keys} was "
                                 "expected") from None  # fmt: skip
            missing = [k for k in keys if k not in obs]
            if missing:
                raise ValueError(f"its observation has no key {missing[0]!r}; it has {', '.join(map(str, obs))}") \
                    from None  # fmt: skip
            raise
    if flat.size != obs_dim:
        raise ValueError(f"its observation has {flat.size} values where {declared} {obs_dim}")
    return flat


class ActionMap:
    """[-1, 1] per dimension -> an env's Box of bounds `low`/`high` (flat), as `shape` and `dtype`:
    linear between finite bounds; from a finite bound on where the other is infinite
    (`_half_offset`); unchanged where both are. `unit_actions` is its inverse."""

    def __init__(self, low: np.ndarray, high: np.ndarray, shape: tuple[int, ...], dtype: Any) -> None:
        low, high = np.asarray(low, np.float64).reshape(-1), np.asarray(high, np.float64).reshape(-1)
        self._scaled = np.isfinite(low) & np.isfinite(high)
        self._all_scaled = bool(self._scaled.all())
        # the bounds the mapping uses, 0 where a bound is infinite (those entries are shifted into the Box)
        self._low0 = np.where(self._scaled, low, 0.0)
        self._span0 = np.where(self._scaled, high - low, 0.0)
        self._offset = np.where(self._scaled, 0.0, _half_offset(low, high))
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)

    def __call__(self, action: np.ndarray) -> np.ndarray:
        a = np.asarray(action, dtype=np.float64).reshape(-1)
        a = np.minimum(np.maximum(a, -1.0), 1.0)  # np.clip, without its dispatch (per world, per step)
        mapped = self._low0 + (a + 1.0) * 0.5 * self._span0
        if not self._all_scaled:
            mapped = np.where(self._scaled, mapped, a + self._offset)
        return mapped.reshape(self.shape).astype(self.dtype)


# -- one world ----------------------------------------------------------------------------------
class OutcomeEnv(gymnasium.Env):
    """One world: the user's env with flat float32 observations, actions in [-1, 1], the binary
    success outcome, episodes that end inside the world, and crashes contained.

    `step` returns reward 1.0 on a success step, never `terminated`/`truncated` (the episode's
    end is `info["ended"]`, one of RUNNING, SUCCEEDED, HORIZON, ENV_ENDED, FAILED), and
    `info["success"]`, the success predicate at this step.
    """

    metadata = {"render_modes": []}

    def __init__(self, cfg: EnvConfig, horizon: int, inner: gymnasium.Env | None = None) -> None:
        self.inner = inner if inner is not None else make_inner(cfg)
        modes = list((getattr(self.inner, "metadata", None) or {}).get("render_modes", []))
        if cfg.kwargs.get("render_mode") == "rgb_array" and (
            "rgb_array" not in modes or getattr(self.inner, "render_mode", None) != "rgb_array"
        ):
            mode = getattr(self.inner, "render_mode", None)
            why = (f"its render modes are {modes}, and video needs 'rgb_array'" if "rgb_array" not in modes else
                   f"it was built with render_mode='rgb_array' but its render_mode attribute is {mode!r} (a "
                   "Gymnasium env keeps the render_mode it was given in self.render_mode)")
            raise ValueError(f"{env_source(cfg)} cannot render frames: {why}")
        self.keys = check_spaces(cfg, self.inner)
        self.horizon = horizon
        self.terminate_on_success = cfg.outcome == "any_step"
        self.is_success = SuccessRule(cfg)
        act = self.inner.action_space
        self._low, self._high = act.low.reshape(-1).astype(np.float64), act.high.reshape(-1).astype(np.float64)
        self.to_env_action = ActionMap(self._low, self._high, act.shape, act.dtype)
        obs_space = self.inner.observation_space
        shapes = [obs_space.shape] if self.keys is None else [obs_space[k].shape for k in self.keys]
        self.obs_dim = int(sum(np.prod(shape) for shape in shapes))
        self.observation_space = spaces.Box(-np.inf, np.inf, (self.obs_dim,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (int(np.prod(act.shape)),), np.float32)
        self._obs = np.zeros(self.obs_dim, np.float32)
        self._ended = FAILED
        self._success = False
        self._steps = 0
        self.raw_obs: Any = None  # the inner env's last observation and info, as it returned them
        self.raw_info: dict[str, Any] = {}
        self._own_generators: dict[str, Any] = {}  # a copy's own generators, kept aside (env_state)
        # sync backend: which world this is, and the watchdog told which world is in a call
        self.index = 0
        self.watchdog: Watchdog | None = None

    def _flatten(self, obs: Any) -> np.ndarray:
        return flatten_obs(obs, self.keys, self.obs_dim, "its observation space declares")

    def _info(self, error: str | None = None) -> dict[str, Any]:
        info = {"success": self._success, "ended": self._ended, "steps": self._steps}
        if error is not None:
            info["error"] = error
        return info

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self._success, self._steps = False, 0
        if self._own_generators:  # a copy's generators were the leader's: draw from its own again
            env_state.restore_generators(self.inner, self._own_generators)
            self._own_generators = {}
        if self.watchdog is not None:  # each world's call has the whole limit, not the batch
            self.watchdog.world, self.watchdog.step = self.index, 0
            self.watchdog.arm("reset")
        try:
            obs, info = self.inner.reset(seed=seed, options=options)
            self.raw_obs, self.raw_info = obs, info
            flat = self._flatten(obs)
        except Exception as err:  # the world starts failed; the caller decides if that is fatal
            self._obs[:], self._ended = 0.0, FAILED
            return self._obs.copy(), self._info(f"reset: {type(err).__name__}: {err}")
        if not np.isfinite(flat).all():
            self._obs[:], self._ended = 0.0, FAILED
            return self._obs.copy(), self._info("reset: non-finite observation")
        self._obs, self._ended = flat, RUNNING
        return flat.copy(), self._info()

    def step(self, action):
        if self._ended != RUNNING:  # finished: frozen until the next reset
            return self._obs.copy(), 0.0, False, False, self._info()
        self._steps += 1
        if self.watchdog is not None:
            self.watchdog.world, self.watchdog.step = self.index, self._steps
            self.watchdog.arm("step")
        try:
            obs, _, terminated, truncated, info = self.inner.step(self.to_env_action(action))
            self.raw_obs, self.raw_info = obs, info
            success = self.is_success(obs, info)
            flat = self._flatten(obs)
            ended = truth(terminated, "terminated", "flag") or truth(truncated, "truncated", "flag")
        except MissingSuccessKey as err:  # it was there at the probe's first step: this world fails
            return self._fail(None, err.args[0])
        except Exception as err:
            return self._fail(err)
        if not np.isfinite(flat).all():
            return self._fail(None, "non-finite observation")
        self._obs, self._success = flat, success
        if success and self.terminate_on_success:
            self._ended = SUCCEEDED
        elif ended:
            self._ended = ENV_ENDED
        elif self._steps >= self.horizon:
            self._ended = HORIZON
        return flat.copy(), float(success), False, False, self._info()

    def _fail(self, err: BaseException | None, message: str | None = None):
        self._ended, self._success = FAILED, False
        text = message or f"{type(err).__name__}: {err}"
        return self._obs.copy(), 0.0, False, False, self._info(f"step {self._steps}: {text}")

    def from_env_action(self, action: Any) -> np.ndarray:
        """The inverse of `to_env_action`: an action in the env's units -> [-1, 1] per dimension."""
        return unit_actions(np.asarray(action).reshape(1, -1), self._low, self._high)[0]

    @property
    def ended(self) -> int:
        """RUNNING, SUCCEEDED, HORIZON, ENV_ENDED or FAILED."""
        return self._ended

    @property
    def success(self) -> bool:
        """The success predicate at the last step."""
        return self._success

    # -- equal group starts by copying (env.group_start=clone; grpo_robot/env_state.py) --
    def take_start(self, method: str) -> tuple | str | None:
        """A snapshot of this freshly reset world; None if its reset failed, the error's text if
        the copy did (errors travel back as values: a raise would end an async worker)."""
        if self._ended == FAILED:
            return None
        try:
            return env_state.take(self.inner, method), self._obs.copy(), self.raw_obs, self.raw_info
        except Exception as err:
            return f"{type(err).__name__}: {err}"

    def adopt_start(self, method: str, start: tuple | None) -> str | None:
        """Become a copy of the world `start` was taken from, at its reset; -> an error's text or None."""
        self._success, self._steps = False, 0
        if start is None:
            self._obs[:], self._ended = 0.0, FAILED
            return None
        snapshot, obs, raw_obs, raw_info = start
        try:
            own = self._own_generators or env_state.own_generators(self.inner)  # back before the next reset
            self.inner = env_state.put(self.inner, method, snapshot)
            self._own_generators = own
        except Exception as err:
            self._obs[:], self._ended = 0.0, FAILED
            return f"{type(err).__name__}: {err}"
        self._obs, self._ended, self.raw_obs, self.raw_info = obs.copy(), RUNNING, raw_obs, raw_info
        return None

    def copy_methods(self) -> list[str]:
        return env_state.applicable(self.inner)

    def model_fingerprint(self) -> dict[str, bytes] | None:
        return env_state.model_fingerprint(self.inner)

    def observed(self) -> np.ndarray:
        """Every entry of the last raw observation, flattened (not only `env.obs_keys`): what the
        clone check compares."""
        obs = self.raw_obs
        parts = [obs[k] for k in sorted(obs)] if isinstance(obs, dict) else [obs]
        return np.concatenate([np.asarray(p, dtype=np.float64).reshape(-1) for p in parts] + [[self._success]])

    def frame(self) -> np.ndarray | str:
        """The inner env's `render()` (render_mode="rgb_array") as `uint8 [H, W, 3]`, or what went
        wrong, as a value (so that an async worker survives it)."""
        try:
            frame = np.asarray(self.inner.render())
        except Exception as err:
            return _one_line(f"render() raised {type(err).__name__}: {err}")
        if frame.ndim != 3 or frame.shape[-1] not in (3, 4):
            return f"render() returned an array of shape {frame.shape}, not an RGB frame [H, W, 3]"
        if frame.dtype != np.uint8:
            frame = np.clip(frame * 255 if np.issubdtype(frame.dtype, np.floating) else frame, 0, 255)
        return frame[..., :3].astype(np.uint8)

    def close(self) -> None:
        self.inner.close()


def _make_world(cfg: EnvConfig, horizon: int) -> OutcomeEnv:  # a picklable factory for AsyncVectorEnv
    return OutcomeEnv(cfg, horizon)


# -- hung calls ------------------------------------------------------------------------------------
HANG_NOTE = ("the world hangs (a hung call cannot be interrupted in this process; env.vector=async kills and "
             "replaces a hung world instead)")  # fmt: skip
PROBE_HANG_NOTE = ("the env hangs in the probe episode, which runs in this process before any world starts "
                   "(with env.vector=async too), where a hung call cannot be interrupted")  # fmt: skip


class Watchdog:
    """Ends the process (`lifecycle.emergency_exit`, code 1) when a call made in this process
    outlives `timeout_s`: a world's `step` or `reset` in the sync backend, or the probe's.

    `arm(call)` before the call and `disarm()` after only store a tuple: no lock, no thread woken,
    nothing created per call. One daemon thread, started at the first `arm`, sleeps until the armed
    deadline, or a whole timeout when nothing is armed (a later `arm`'s deadline cannot come
    sooner), and fires if the call it finds armed is past its deadline. The world in the call is
    `world` (its seed `seeds[world]`), at step `step`: `OutcomeEnv` records both before each call
    of the env it wraps, and arms it again there: the limit holds for each world's call, not for
    a batch's calls together.
    """

    def __init__(self, name: str, timeout_s: float | None, seeds: np.ndarray | None = None) -> None:
        self.name = name
        self.timeout = _usable_timeout(timeout_s)
        self.seeds = seeds
        self.world = 0
        self.step = 0
        self._armed: tuple[float, str, str | None] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def arm(self, call: str, where: str | None = None) -> None:
        """`call` ("step", "reset", a method's name) starts now; `where` replaces "world <i> (seed <s>)"."""
        if self.timeout is None:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"watchdog {self.name}", daemon=True)
            self._thread.start()
        self._armed = (time.monotonic() + self.timeout, call, where)

    def disarm(self) -> None:
        self._armed = None

    def message(self, call: str, where: str | None) -> str:
        if where is None:
            seed = "?" if self.seeds is None else int(self.seeds[self.world])
            where = f"world {self.world} (seed {seed})"
        what = f"step {self.step}" if call == "step" else call
        limit = f"env.step_timeout_s={self.timeout:g} s"
        if "probe" in call:  # made here before any world starts, whatever env.vector is
            return f"{self.name}: {where} did not return from {what} within {limit}; {PROBE_HANG_NOTE}"
        return f"{self.name}: {where} did not return from {what} within {limit}; {HANG_NOTE}"

    def _run(self) -> None:
        while True:
            now = time.monotonic()  # read before the call: it was still armed at a time >= now
            armed = self._armed
            if armed is not None and now >= armed[0]:
                try:
                    message = self.message(armed[1], armed[2])
                except Exception:  # noqa: BLE001  (the exit must happen)
                    message = f"{self.name}: a world did not return from {armed[1]} within env.step_timeout_s"
                lifecycle.emergency_exit(message, code=1)
                return
            wake = armed[0] if armed is not None else now + self.timeout  # type: ignore[operator]
            if self._stop.wait(max(wake - now, 0.0)):
                return

    def close(self) -> None:
        """End the thread (a later `arm` starts another)."""
        self._armed = None
        if self._thread is not None:
            self._stop.set()
            if self._thread is not threading.current_thread():
                self._thread.join(timeout=1.0)
            self._thread, self._stop = None, threading.Event()


# -- the async backend: one process per world, each call bounded in time ---------------------------
def _worker(index: int, env_fn: Callable[[], gymnasium.Env], pipe: Any, parent_pipe: Any, *rest: Any) -> None:
    """Gymnasium's worker loop, deaf to SIGINT and SIGTERM: a Ctrl-C in the terminal reaches only
    the main process, which shuts its workers down itself. An env that raises while it is built is
    answered to the first command with `NotBuilt`, and the worker ends. numpy's global generator
    is seeded afresh from the OS: workers forked from one server would otherwise all hold the
    server's, and an env drawing from it (one whose reset ignores the seed) would give every world
    the same draws, every group the same start."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _end_with_parent()
    np.random.seed()  # noqa: NPY002  (the generator such envs draw from; Python's `random` reseeds itself)
    try:
        env = env_fn()
    except Exception as err:  # noqa: BLE001  (told to the main process)
        parent_pipe.close()
        cause = err.cause if isinstance(err, EnvNotBuilt) else f"{type(err).__name__}: {_one_line(err)}"
        pipe.send((NotBuilt(cause), False))
        return
    _async_worker(index, lambda: env, pipe, parent_pipe, *rest)


def _end_with_parent() -> None:
    """On Linux, have the kernel SIGKILL this worker when its parent ends: the fork server, which
    ends with the main process (or the main process itself, for `spawn`). A worker idle in its
    loop ends anyway when its pipe closes; one inside a hung call would otherwise outlive a main
    process that was killed (SIGKILL), since it ignores SIGTERM.

    The fork server ends when no process holds the write end of its "alive" pipe, and every
    process it starts inherits one, for forking more of its own: a worker closes it, so that the
    server ends with the main process whatever its workers are doing."""
    from multiprocessing import forkserver

    server = forkserver._forkserver  # the module's one server, as the worker inherited it
    if getattr(server, "_forkserver_alive_fd", None) is not None:
        os.close(server._forkserver_alive_fd)
        server._forkserver_alive_fd = None
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no prctl: the worker ends with its pipe, as elsewhere
        return
    if os.getppid() != parent:  # the parent ended before the request: nobody is left to answer
        os._exit(1)


@dataclass(frozen=True)
class NotBuilt:
    """A worker's answer when its env raised while being built (the worker then ends): the error,
    in one line. At the pool's start that refuses the env; for a replaced worker the world is lost,
    as if its worker had died."""

    error: str


def start_method(render: bool = False) -> str:
    """How the async backend starts its workers: from a fork server (`forkserver`), a clean
    single-threaded process that has imported this module (and the main script, as `spawn`
    would), so that each worker starts in milliseconds; `spawn` for worlds that render (OpenGL
    does not survive a fork once a process has opened it) and where there is no fork server.

    Never `fork` of this process: a forked child has none of its threads, and what they held stays
    held there. A worker forked from a process that had stepped a `BatchedEnv` hung for ever in
    its first garbage collection, which destroyed the inherited MuJoCo thread pool (the test run
    once stopped there; grpo_robot/batched.py's `PhysicsPool` now guards that case too)."""
    if render or "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    # read when the fork server starts (the first pool of the process); later calls change nothing
    multiprocessing.get_context("forkserver").set_forkserver_preload(["__main__", __name__])
    return "forkserver"


_POOLS: weakref.WeakSet = weakref.WeakSet()  # open pools, killed at exit (their workers ignore SIGTERM)


@atexit.register
def _kill_pools() -> None:
    for pool in list(_POOLS):
        try:
            pool.close(terminate=True)
        except Exception:  # noqa: BLE001, S110  (exiting anyway)
            pass


@dataclass
class Lost:
    """A world that gave no answer: its worker hung (killed) or died, and was replaced."""

    why: str


class _BuiltOnce:
    """An env factory whose first call in this process returns an env built already; a worker
    (which receives it pickled, without that env) builds its own."""

    def __init__(self, built: gymnasium.Env, factory: Callable[[], gymnasium.Env]) -> None:
        self.built, self.factory = built, factory

    def __call__(self) -> gymnasium.Env:
        built, self.built = self.built, None
        return built if built is not None else self.factory()

    def __getstate__(self) -> dict[str, Any]:
        return {"built": None, "factory": self.factory}


class WorkerPool(gymnasium.vector.AsyncVectorEnv):
    """`AsyncVectorEnv` whose calls are bounded in time: `exchange` sends each world its own
    message and waits at most `timeout` seconds; a worker that does not answer in time is killed
    (SIGKILL), one that died is reaped, and either is replaced by a fresh worker for its index,
    ready for the next reset. Workers ignore SIGINT and SIGTERM; `close` ends them, killing those
    that do not end by themselves, and leaves no process behind."""

    def __init__(self, env_fns: Sequence[Callable[[], gymnasium.Env]], context: str | None = None,
                 name: str = "env", build_timeout: float | None = None,
                 built: gymnasium.Env | None = None) -> None:  # fmt: skip
        """`built`: an env as `env_fns[0]` makes it, already built in this process (the probe's),
        which Gymnasium then reads its spaces from (and closes) rather than building one more here."""
        self._unread: set[int] = set()  # worlds whose answer to an interrupted exchange is still to come
        self._name, self._build_timeout = name, build_timeout
        fns = list(env_fns)
        if built is not None and fns:
            fns[0] = _BuiltOnce(built, fns[0])
        try:
            super().__init__(fns, shared_memory=False, autoreset_mode="Disabled", worker=_worker, daemon=True,
                             context=context)  # fmt: skip
        finally:
            if built is not None and fns and fns[0].built is not None:  # not taken: closed here, as it would be
                fns[0].built.close()
        _POOLS.add(self)

    def _check_spaces(self) -> None:
        """Gymnasium's check, when the pool starts, that every worker built its world with the
        same spaces, each answer awaited at most `build_timeout` seconds. A world whose worker does
        not answer in time (its env's constructor hangs), raised while building it, or died, is a
        one-line `ValueError` naming it, and every worker is killed."""
        data = (self.observation_mode, self.single_observation_space, self.single_action_space)
        waiting, answers, not_built, raised, died = {}, {}, {}, [], []
        for i, pipe in enumerate(self.parent_pipes):
            try:
                pipe.send(("_check_spaces", data))
                waiting[pipe] = i
            except OSError:  # the worker has ended already (a main script without its main guard: docs/custom_envs.md)
                died.append(i)
        for i, value, ok in self._receive(waiting, self._build_timeout):
            if ok:
                answers[i] = value
            elif isinstance(value, NotBuilt):
                not_built[i] = value.error
            else:
                (raised if ok is False else died).append(i)
        if not_built or raised or died or waiting:  # told for the first world in order that failed
            world = min([*not_built, *raised, *died, *waiting.values()])
            if world in not_built:
                why = f"could not build its env: {not_built[world]}"
            elif world in raised:
                err = self._worker_errors(raised)[raised.index(world)]
                why = f"failed the check of its spaces: {type(err).__name__}: {_one_line(err)}"
            elif world in died:
                self.processes[world].join(timeout=1.0)
                why = f"died (exit code {self.processes[world].exitcode}) while building its env; its stderr says why"
            else:
                why = f"did not build its env within env.step_timeout_s={self._build_timeout:g} s"
            self.close(terminate=True)
            raise ValueError(f"{self._name}: world {world}'s worker {why}")
        same_obs, same_action = (all(value[k] for value in answers.values()) for k in (0, 1))
        if not (same_obs and same_action):
            self.close(terminate=True)
            space = "observation" if not same_obs else "action"
            raise ValueError(f"{self._name}: the worlds' {space} spaces differ from one worker to another")

    def exchange(self, messages: dict[int, tuple[str, Any]], timeout: float | None) -> tuple[dict, dict[int, Lost]]:
        """Send `messages[i]` (a worker command and its data) to world `i` -> (answers by world,
        the worlds lost: no answer within `timeout`, or a dead worker; each already replaced). An
        exception a worker sends back (its loop then ends) is raised here, after it is replaced."""
        self._assert_is_running()
        self._drain(timeout)
        waiting: dict[Any, int] = {}
        lost: dict[int, Lost] = {}
        for i, message in messages.items():
            pipe = self.parent_pipes[i]
            try:
                pipe.send(message)
                waiting[pipe] = i
            except (OSError, AttributeError):  # a closed pipe (AttributeError: None) or a dead worker
                lost[i] = self._death(i)
        answers: dict[int, Any] = {}
        raised: list[int] = []
        try:
            for i, value, ok in self._receive(waiting, timeout):
                if ok is None:
                    lost[i] = self._death(i)
                elif ok:
                    answers[i] = value
                elif isinstance(value, NotBuilt):  # a replaced worker whose env raised while being built
                    lost[i] = Lost(f"its worker could not build its env ({value.error}) and was replaced")
                else:
                    raised.append(i)
        except BaseException:  # interrupted (Ctrl-C): the next exchange first reads the answers still due
            self._unread.update(waiting.values())
            raise
        for i in waiting.values():
            lost[i] = Lost(f"did not return within env.step_timeout_s={timeout:g} s; its process was killed and "
                           "replaced")  # fmt: skip
        errors = self._worker_errors(raised)
        for i in [*lost, *raised]:
            self.restart(i)
        if errors:
            raise errors[0]
        return answers, dict(sorted(lost.items()))

    def _drain(self, timeout: float | None) -> None:
        """Read and drop the answers to an interrupted exchange; a worker that does not give its
        answer in time, or gives an error, is replaced."""
        if not self._unread:
            return
        waiting = {self.parent_pipes[i]: i for i in sorted(self._unread) if self.parent_pipes[i] is not None}
        self._unread.clear()
        for i, value, ok in self._receive(waiting, timeout):
            if ok is False and not isinstance(value, NotBuilt):  # the worker sent back an exception; its loop ended
                self._worker_errors([i])
            if not ok:
                self.restart(i)
        for i in waiting.values():
            self.restart(i)

    @staticmethod
    def _receive(waiting: dict[Any, int], timeout: float | None):
        """Yield `(world, value, ok)` as each pipe of `waiting` (pipe -> world) answers, until all
        did or `timeout` passed; `ok` is None when the pipe broke (its worker died). The pipes that
        did not answer stay in `waiting`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while waiting:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            for pipe in multiprocessing.connection.wait(list(waiting), left):
                i = waiting.pop(pipe)
                try:
                    value, ok = pipe.recv()
                except (EOFError, OSError):
                    yield i, None, None
                    continue
                yield i, value, ok

    def _death(self, i: int) -> Lost:
        process = self.processes[i]
        process.join(timeout=1.0)
        return Lost(f"its process died (exit code {process.exitcode}) and was replaced")

    def _worker_errors(self, worlds: list[int]) -> list[BaseException]:
        """The exceptions the workers of `worlds` sent back (each puts one on the error queue)."""
        found: dict[int, BaseException] = {}
        for _ in worlds:
            try:
                index, _, value, _ = self.error_queue.get(timeout=5.0)
            except Exception:  # noqa: BLE001  (lost in transit: say so below)
                break
            found[index] = value if isinstance(value, BaseException) else RuntimeError(str(value))
        return [found.get(i, RuntimeError(f"world {i}'s worker failed")) for i in worlds]

    def restart(self, i: int) -> None:
        """Kill world `i`'s worker if it still runs, reap it, and start a fresh one in its place."""
        process = self.processes[i]
        if process.is_alive():
            process.kill()
        process.join(timeout=5.0)
        if self.parent_pipes[i] is not None:
            self.parent_pipes[i].close()
        ctx = multiprocessing.get_context(self.context)
        parent_pipe, child_pipe = ctx.Pipe()
        # the arguments gymnasium gave the first worker (their number differs between its versions), new pipes
        args = list(getattr(process, "_args", ()))
        if len(args) < 7:
            args = [i, None, None, None, None, self.error_queue, self.autoreset_mode, None]
        args[1:4] = CloudpickleWrapper(self.env_fns[i]), child_pipe, parent_pipe
        fresh = ctx.Process(target=_worker, name=process.name, args=tuple(args), daemon=True)
        with clear_mpi_env_vars():
            fresh.start()
        child_pipe.close()
        self.parent_pipes[i], self.processes[i] = parent_pipe, fresh

    def pids(self) -> list[int | None]:
        return [p.pid for p in self.processes]

    def close_extras(self, timeout: float | None = None, terminate: bool = False) -> None:
        """Ask every worker to close its env and end (up to `timeout`, default 10 s), then kill
        whichever has not ended; `terminate`: kill them all at once. Every process is reaped."""
        _POOLS.discard(self)
        deadline = time.monotonic() + (0.0 if terminate else 10.0 if timeout is None else timeout)
        if not terminate:
            waiting = []
            for pipe in self.parent_pipes:
                if pipe is not None and not pipe.closed:
                    try:
                        pipe.send(("close", None))
                        waiting.append(pipe)
                    except OSError:
                        pass
            while waiting and (left := deadline - time.monotonic()) > 0:
                for pipe in multiprocessing.connection.wait(waiting, left):
                    waiting.remove(pipe)
                    try:
                        pipe.recv()
                    except (EOFError, OSError):
                        pass
        for process in self.processes:
            process.join(timeout=max(deadline - time.monotonic(), 0.0))
            if process.is_alive():
                process.kill()
                process.join()
        for pipe in self.parent_pipes:
            if pipe is not None:
                pipe.close()


# -- groups of worlds ------------------------------------------------------------------------------
_IMAGE_WARNED: set[str] = set()


def probe(cfg: EnvConfig, watchdog: Watchdog | None = None) -> tuple[gymnasium.Env, int]:
    """Build one world and check it before any work starts: the spaces, the horizon, and the
    success signal after one step. A probe episode is a reset and one step; one that raises is
    retried from the next seed, and only when each of `PROBE_EPISODES` raised is the env refused
    (`ValueError`). Each call is bounded by `env.step_timeout_s` (`watchdog`, or one of its own).
    -> (the inner env, reusable as a world; the horizon)."""
    inner = make_inner(cfg)
    world = OutcomeEnv(cfg, 1, inner)
    name = env_name(cfg)
    for line in image_like_entries(cfg, inner, world.keys):
        if line not in _IMAGE_WARNED:  # once a process: the training env and the evaluation's are probed alike
            _IMAGE_WARNED.add(line)
            log.warning(line)
    horizon = cfg.horizon
    if horizon is None:
        spec = getattr(inner, "spec", None)
        horizon = getattr(spec, "max_episode_steps", None)
        layer = inner
        while horizon is None and isinstance(layer, gymnasium.Wrapper):  # an entry point's own TimeLimit
            if isinstance(layer, gymnasium.wrappers.TimeLimit):
                horizon = layer._max_episode_steps
            layer = layer.env
        if horizon is None:
            raise ValueError(f"{name} has no time limit (spec.max_episode_steps, or a TimeLimit wrapper); "
                             "set env.horizon")  # fmt: skip
    watch = watchdog if watchdog is not None else Watchdog(name, getattr(cfg, "step_timeout_s", None))
    action = world.to_env_action(np.zeros(world.action_space.shape))  # the middle of the action range
    failures: list[tuple[int, str, Exception]] = []
    try:
        for seed in range(PROBE_EPISODES):
            call = "reset"
            try:
                watch.arm("reset in a probe episode", f"world 0 (seed {seed})")
                first, _ = inner.reset(seed=seed)
                call = "step"
                watch.arm("step 1 in a probe episode", f"world 0 (seed {seed})")
                obs, _, _, _, info = inner.step(action)
            except Exception as err:
                failures.append((seed, call, err))
                continue
            finally:
                watch.disarm()
            break
        else:
            calls = " or ".join(sorted({call for _, call, _ in failures}, reverse=True))
            err = failures[0][2]
            raise ValueError(f"{name}: {calls} raised on each of {PROBE_EPISODES} probe episodes: "
                             f"{type(err).__name__}: {_one_line(err)}")  # fmt: skip
    finally:
        if watchdog is None:
            watch.close()
    if failures:
        seed, call, err = failures[0]
        log.warning("%s: its %s raised in the probe episode from seed %d (%s: %s) but not from seed %d; worlds "
                    "that raise will count as failed", name, call, seed, type(err).__name__, _one_line(err),
                    len(failures))  # fmt: skip
    for what, seen in (("reset", first), ("step", obs)):  # the sizes the trainer will read
        try:
            world._flatten(seen)
        except Exception as err:
            raise ValueError(f"{name}: at {what}, {_one_line(err)}") from None
    # read the outcome as training will
    try:
        world.is_success(obs, info)
    except MissingSuccessKey as err:
        raise ValueError(f"{name}: {err.args[0]}") from None
    except Exception as err:
        source = f"env.success_fn={cfg.success_fn!r} failed" if cfg.success_fn else (
            f"info[{cfg.success_key!r}] (env.success_key) is not a single truth value")
        raise ValueError(f"{name}: {source}: {type(err).__name__}: {_one_line(err)}") from None
    return inner, int(horizon)


class GymGroupEnv:
    """`num_worlds` worlds of a Gymnasium env, reset from per-world seeds and stepped together;
    the same interface as `BatchedEnv` (flags are sticky until the next reset)."""

    def __init__(self, cfg: EnvConfig, num_worlds: int) -> None:
        if num_worlds < 1:
            raise ValueError(f"num_worlds must be >= 1, got {num_worlds}")
        self.cfg = cfg
        self.name = env_name(cfg)
        self.num_worlds = B = num_worlds
        self.timeout = _usable_timeout(getattr(cfg, "step_timeout_s", None))
        self.seeds = np.zeros(B, dtype=np.int64)
        self.vec: gymnasium.vector.VectorEnv | None = None
        self._watch = Watchdog(self.name, self.timeout, self.seeds)  # sync calls, and the probe's
        try:
            inner, self.horizon = probe(cfg, self._watch)
            first = OutcomeEnv(cfg, self.horizon, inner)
            # the observation layout and the action bounds: what a dataset must match, and how its actions map
            self.obs_keys, self.action_low, self.action_high = first.keys, first._low.copy(), first._high.copy()
            sizes = [int(np.prod(inner.observation_space[k].shape)) for k in first.keys or ()]
            # (key, first flat index, size) of each Dict entry observed, for messages
            self.obs_layout = [(k, int(sum(sizes[:n])), sizes[n]) for n, k in enumerate(first.keys or ())]
            self.render_fps = (getattr(inner, "metadata", None) or {}).get("render_fps")  # of a real-time video
            if cfg.vector == "sync":  # the probed env becomes world 0
                fns = [lambda: first] + [functools.partial(_make_world, cfg, self.horizon)] * (B - 1)
                self.vec = gymnasium.vector.SyncVectorEnv(fns, autoreset_mode="Disabled")
                for i, world in enumerate(self.vec.envs):
                    world.index, world.watchdog = i, self._watch
            else:
                self._watch.close()  # the probe's: the pool bounds its own calls (`exchange`)
                context = start_method(render=bool(cfg.kwargs.get("render_mode")))
                self.vec = WorkerPool([functools.partial(_make_world, cfg, self.horizon)] * B, context, self.name,
                                      self.timeout, built=first)  # fmt: skip
            self._setup(cfg)
        except BaseException:
            self.close()
            raise

    def _setup(self, cfg: EnvConfig) -> None:
        B = self.num_worlds
        self.sync = isinstance(self.vec, gymnasium.vector.SyncVectorEnv)
        self.obs_dim = int(self.vec.single_observation_space.shape[0])
        self.action_dim = int(self.vec.single_action_space.shape[0])
        self.check_seeding = cfg.check_seeding
        self.steps = np.zeros(B, dtype=np.int64)
        self.success = np.zeros(B, dtype=bool)
        self.terminated = np.zeros(B, dtype=bool)  # ended by success (outcome=any_step)
        self.truncated = np.zeros(B, dtype=bool)  # ended otherwise: horizon, the env's own end, failure
        self.failed = np.zeros(B, dtype=bool)
        self._ended = np.full(B, FAILED, dtype=np.int64)  # each world's OutcomeEnv `ended`
        self._obs = np.zeros((B, self.obs_dim), np.float32)
        self._errors: dict[int, str] = {}  # this episode's failures, by world, in the order they happened
        self._reported: set[str] = set()
        self._was_reset = False
        self._seeding_checked = not (cfg.group_start == "seed" and self.check_seeding)
        self._unequal_warned = False
        self.group_start = cfg.group_start
        self.copy_method: str | None = None  # group_start=clone: the copy method that proved faithful
        try:  # check the starts now, before any work starts
            if self.group_start == "clone" and B >= 2:  # find a faithful copy
                self.reset(np.zeros(B, dtype=np.int64))
            elif not self._seeding_checked:  # equal seeds must give equal starts
                self.reset(np.arange(B, dtype=np.int64) // 2)
        except EnvFailure as err:  # an env that cannot even start is a config error, reported as one
            raise ValueError(str(err)) from None
        self._was_reset = False  # the user's reset comes first

    @property
    def done(self) -> np.ndarray:
        return self.terminated | self.truncated

    def reset(self, seeds: Sequence[int]) -> np.ndarray:
        seeds = check_seeds(seeds, self.num_worlds)
        obs = self._reset_worlds(seeds)
        if self.failed.all():
            raise EnvFailure(self._every_world_failed(" to reset"))
        if self.group_start == "clone":
            self._copy_starts(seeds)
            if self.failed.all():
                raise EnvFailure(self._every_world_failed(" to start"))
        elif not self._seeding_checked:
            self._check_seeding(seeds, obs)
            self._seeding_checked = True
        elif self.group_start == "seed" and self.check_seeding and not self._unequal_warned:
            unequal = self._unequal_member(seeds, obs)
            if unequal is not None:  # the build's check passed: state it keeps that a few steps did not show
                self._unequal_warned = True
                log.warning(self._seeding_message(*unequal) + "; this run's groups are not equal starts from here on")
        self._was_reset = True
        return self.obs()

    # -- calling the worlds: bounded in time, results gathered per world --
    def _reset_worlds(self, seeds: np.ndarray) -> np.ndarray:
        """Reset world `i` from `seeds[i]`, take in the outcome -> the observations."""
        self.seeds[:] = seeds
        self._errors = {}
        B = self.num_worlds
        if self.sync:
            self._watch.arm("reset")
            try:
                obs, info = self.vec.reset(seed=[int(s) for s in seeds])
            finally:
                self._watch.disarm()
            self._take(obs, info["ended"], info["steps"], info["success"], self._info_errors(info))
            return obs
        answers, lost = self.vec.exchange(
            {i: ("reset", {"seed": int(s), "options": None}) for i, s in enumerate(seeds)}, self.timeout
        )
        obs = np.zeros((B, self.obs_dim), np.float32)
        ended, steps, success = np.full(B, FAILED), np.zeros(B, np.int64), np.zeros(B, bool)
        errors = {}
        for i, (o, info) in answers.items():
            obs[i], ended[i], steps[i], success[i] = o, info["ended"], info["steps"], info["success"]
            if "error" in info:
                errors[i] = info["error"]
        errors.update({i: f"reset: {why.why}" for i, why in lost.items()})
        self._take(obs, ended, steps, success, dict(sorted(errors.items())), loud=lost)
        return obs

    def _step_worlds(self, actions: np.ndarray, active: np.ndarray) -> np.ndarray:
        """Step the `active` worlds, take in the outcome -> the rewards. In sync each live world
        is called directly rather than through `SyncVectorEnv.step`, which would also call every
        finished world and gather every world's info (half of a small env's step time); the
        worlds, their order and what each is given are the same."""
        obs, ended, steps, success = self._obs.copy(), self._ended.copy(), self.steps.copy(), self.success.copy()
        reward = np.zeros(self.num_worlds)
        errors = {}
        if self.sync:
            envs = self.vec.envs
            self._watch.arm("step")
            try:
                for i in np.flatnonzero(active).tolist():
                    obs[i], reward[i], _, _, info = envs[i].step(actions[i])
                    ended[i], steps[i], success[i] = info["ended"], info["steps"], info["success"]
                    if "error" in info:
                        errors[i] = info["error"]
            finally:
                self._watch.disarm()
            self._take(obs, ended, steps, success, errors)
            return reward
        answers, lost = self.vec.exchange({int(i): ("step", actions[i]) for i in np.flatnonzero(active)},
                                          self.timeout)  # fmt: skip
        for i, (o, r, _, _, info) in answers.items():
            obs[i], reward[i], ended[i], steps[i], success[i] = o, r, info["ended"], info["steps"], info["success"]
            if "error" in info:
                errors[i] = info["error"]
        for i, why in lost.items():  # the world was in this step when it hung or died
            ended[i], steps[i], success[i] = FAILED, steps[i] + 1, False
            errors[i] = f"step {steps[i]}: {why.why}"
        self._take(obs, ended, steps, success, dict(sorted(errors.items())), loud=lost)
        return reward

    @staticmethod
    def _info_errors(info: dict[str, Any]) -> dict[int, str]:
        if "error" not in info:
            return {}
        return {int(i): str(info["error"][i]) for i in np.flatnonzero(info["_error"])}

    def _take(self, obs: np.ndarray, ended: np.ndarray, steps: np.ndarray, success: np.ndarray,
              errors: dict[int, str], loud: Any = ()) -> None:  # fmt: skip
        """Set every world's observation and flags; record and log the worlds that failed (each
        distinct error once, a world in `loud`, hung or dead, always)."""
        self._obs[:] = obs
        self._ended[:] = ended
        self.steps[:] = steps
        self.success[:] = success
        self.failed[:] = self._ended == FAILED
        self.terminated[:] = self._ended == SUCCEEDED
        self.truncated[:] = (self._ended != RUNNING) & (self._ended != SUCCEEDED)
        self._record(errors, loud)

    def _record(self, errors: dict[int, str], loud: Any = ()) -> None:
        for i, message in errors.items():
            self._errors.setdefault(i, message)
            error = message.split(": ", 1)[-1]
            if i in loud or error not in self._reported:  # each distinct error once, with where it happened
                self._reported.add(error)
                log.warning("%s: world %d (seed %d) failed and was ended at %s", self.name, i, self.seeds[i], message)

    def _every_world_failed(self, what: str = "") -> str:
        if self._errors:
            i, message = next(iter(self._errors.items()))
            first = f"world {i} (seed {self.seeds[i]}) {message}"
        else:
            first = "unknown"
        worlds = "its one world" if self.num_worlds == 1 else f"every one of the {self.num_worlds} worlds"
        return _one_line(f"{self.name}: {worlds} failed{what}; first error: {first}")

    def _each(self, name: str, calls: dict[int, tuple]) -> dict[int, Any]:
        """`OutcomeEnv.<name>(*calls[i])` on each world `i` in `calls` -> {i: result, or `Lost`}."""
        if self.sync:
            results = {}
            for i, args in calls.items():
                self._watch.world = i
                self._watch.arm(name)
                try:
                    results[i] = getattr(self.vec.envs[i], name)(*args)
                finally:
                    self._watch.disarm()
            return results
        answers, lost = self.vec.exchange({i: ("_call", (name, args, {})) for i, args in calls.items()},
                                          self.timeout)  # fmt: skip
        return {**answers, **lost}

    # -- group_start=clone: every world reset, then each group's members made copies of its first --
    def _copy(self, lead: np.ndarray, worlds: np.ndarray, method: str, starts: dict[int, Any] | None = None,
              strict: bool = True):  # fmt: skip
        """Make each world in `worlds` a copy of its group's first world `lead[w]` at its reset
        (from `starts` when given) -> the starts, by first world. `strict`: a copy that fails is a
        `CopyFailed`; else the worlds it leaves without a start fail (a lost first world too)."""
        if starts is None:
            starts = self._each("take_start", {int(i): (method,) for i in np.unique(lead[worlds])})
        lost = {i: s for i, s in starts.items() if isinstance(s, Lost)}  # a first world hung or died
        bad = {i: s for i, s in starts.items() if isinstance(s, str)}  # its snapshot failed
        if strict and (lost or bad):
            raise CopyFailed(next(iter(bad.values())) if bad else next(iter(lost.values())).why)

        unstarted = {**{i: s.why for i, s in lost.items()}, **bad}

        def usable(start: Any) -> Any:
            return None if isinstance(start, str | Lost) else start

        adopted = self._each("adopt_start", {int(w): (method, usable(starts[int(lead[w])])) for w in worlds})
        problems = {i: f"copy: {s.why}" for i, s in lost.items()}  # world -> why it has no start
        for w, outcome in adopted.items():
            if isinstance(outcome, Lost):
                problems[w], lost[w] = f"copy: {outcome.why}", outcome
            elif outcome is not None:
                if strict:
                    raise CopyFailed(outcome)
                problems[w] = f"copy: {outcome}"
        if strict and lost:
            raise CopyFailed(next(iter(lost.values())).why)
        src = lead[worlds]
        self._obs[worlds], self.failed[worlds] = self._obs[src], self.failed[src]
        self.steps[worlds], self.success[worlds], self.terminated[worlds] = 0, False, False
        for w in worlds.tolist():  # the members of a first world that gave no snapshot have no start
            first = int(lead[w])
            if first in unstarted and w != first:
                problems.setdefault(w, f"copy: world {first} could not be copied: {unstarted[first]}")
        broken = np.array(sorted(problems), dtype=np.int64)
        self.failed[broken], self._obs[broken] = True, 0.0
        self.truncated[worlds] = self.failed[worlds]
        self.truncated[broken], self.terminated[broken] = True, False
        self._ended[self.failed] = FAILED
        self._ended[worlds[~self.failed[worlds]]] = RUNNING
        self._record({i: problems[i] for i in broken.tolist()}, loud=lost)
        return starts

    def _copy_starts(self, seeds: np.ndarray) -> None:
        _, first, inverse = np.unique(seeds, return_index=True, return_inverse=True)
        lead = first[inverse]  # [B] the first world of each world's group
        members = np.flatnonzero(lead != np.arange(self.num_worlds))
        if not len(members):
            return
        if self.copy_method is not None:
            self._copy(lead, members, self.copy_method, strict=False)
            return
        tried = []
        methods = self._each("copy_methods", {0: ()})[0]
        if isinstance(methods, Lost):
            raise ValueError(f"{self.name}: world 0 (seed {seeds[0]}) copy_methods: {methods.why}")
        for method in methods:
            try:  # every world is stepped by the check, so every group's first world is snapshot
                starts = self._each("take_start", {int(i): (method,) for i in np.unique(lead)})
                self._copy(lead, members, method, starts)
                problem = self._diverged(lead, members, seeds, method, starts) if self.check_seeding else None
            except CopyFailed as err:
                problem = f"failed: {err}"
            if problem is None:
                self.copy_method = method
                self._copy(lead, np.arange(self.num_worlds), method, starts)  # back to the start, all worlds
                log.info("%s: group starts copied by %s", self.name, method)
                return
            tried.append(f"{method} ({problem})")
            self._reset_worlds(seeds)
        raise ValueError(
            f"{self.name} cannot give a group equal starts with env.group_start=clone: no copy of a reset world "
            f"behaved as the original (tried {'; '.join(tried)}); add get_state() and set_state(state) to the env, "
            "or seed all of its randomness in reset(seed=...) and use env.group_start=seed"
        )

    def _diverged(self, lead: np.ndarray, members: np.ndarray, seeds: np.ndarray, method: str,
                  starts: dict[int, Any], steps: int = 3) -> str | None:  # fmt: skip
        """Step every world with the same actions, copy every world again from `starts` (copies
        replaced by copies) and reset them all, as the next iteration will; -> where a member first
        differs from its group's first world, or a world fails to reset after being copied, or None."""
        rng = np.random.default_rng(0)
        everyone = {i: () for i in range(self.num_worlds)}
        for t in range(steps + 1):
            if t:
                action = rng.uniform(-1.0, 1.0, self.action_dim).astype(np.float32)
                actions = np.tile(action, (self.num_worlds, 1))
                if self.sync:
                    self._watch.arm("step")
                    try:
                        self.vec.step(actions)
                    finally:
                        self._watch.disarm()
                else:
                    _, lost = self.vec.exchange({i: ("step", actions[i]) for i in everyone}, self.timeout)
                    if lost:
                        i = next(iter(lost))
                        return f"world {i} {lost[i].why} in step {t} of the check"
            seen = self._each("observed", everyone)
            for i, value in seen.items():
                if isinstance(value, Lost):
                    return f"world {i} {value.why} in the check"
            if t == 0:  # a reset that changes the MjModel (domain randomization) must be copied too
                models = self._each("model_fingerprint", everyone)
                for m in members:
                    a, b = models[int(lead[m])], models[int(m)]
                    if isinstance(a, dict) and isinstance(b, dict) and a != b:
                        field = next(k for k in sorted(a) if a[k] != b.get(k))
                        return (f"world {m}'s MjModel differs from world {lead[m]}'s in {field}: a reset that "
                                "changes the model is not carried by this copy")  # fmt: skip
            for m in members:
                a, b = seen[int(lead[m])], seen[int(m)]
                if a.shape != b.shape or not np.array_equal(a, b):
                    k = 0 if a.shape != b.shape else int(np.argmax(np.abs(a - b)))
                    return f"world {m} differs from world {lead[m]} after {t} steps, observation entry {k}"
        failed_before = self.failed.copy()
        self._copy(lead, np.arange(self.num_worlds), method, starts)
        self._reset_worlds(seeds)  # a copy must also start its next episode
        broken = np.flatnonzero(self.failed & ~failed_before)
        if len(broken):
            return f"world {broken[0]}, a copy, failed its next reset: {self._errors.get(int(broken[0]), 'unknown')}"
        return None

    def _check_seeding(self, seeds: np.ndarray, obs: np.ndarray) -> None:
        """Worlds reset from one seed must start equal, and a world reset again from its seed, after
        a few steps of actions that differ from world to world, must repeat its start (the members
        of a group alone can agree by chance: async workers forked from one process share an
        unseeded generator's state; and a reset that leaves state of the episode before, an arm's
        position, shows only once the worlds have moved)."""
        unequal = self._unequal_member(seeds, obs)
        if unequal is not None:
            raise ValueError(self._seeding_message(*unequal))
        ok = ~self.failed
        obs = obs.copy()
        self._stir()
        again = self._reset_worlds(seeds)
        for i in np.flatnonzero(ok & ~self.failed):
            if not np.array_equal(obs[i], again[i]):
                raise ValueError(self._seeding_message(f"world {i} was reset twice with seed {seeds[i]}, a few steps "
                                                       "apart,", obs[i], again[i]))  # fmt: skip

    def _unequal_member(self, seeds: np.ndarray, obs: np.ndarray) -> tuple[str, np.ndarray, np.ndarray] | None:
        """The first world whose start differs from its group's first world's (reset from the same
        seed): (what, theirs, its); None when every group starts equal."""
        ok = ~self.failed
        unique, inverse, counts = np.unique(seeds, return_inverse=True, return_counts=True)
        first: dict[int, int] = {}
        for i in np.flatnonzero(ok & (counts[inverse] > 1)):  # compare the members of each group with its first
            j = first.setdefault(inverse[i], i)
            if not np.array_equal(obs[i], obs[j]):
                return f"worlds {j} and {i} were both reset with seed {seeds[i]}", obs[j], obs[i]
        return None

    def _stir(self, steps: int = 3) -> None:
        """A few steps with an action of its own in each world (and a sign of its own per dimension)."""
        signs = np.where(np.arange(self.action_dim) % 2, -1.0, 1.0)
        actions = np.linspace(-1.0, 1.0, self.num_worlds)[:, None] * signs
        for _ in range(steps):
            active = ~self.done
            if not active.any():
                break
            self._step_worlds(np.where(active[:, None], actions, 0.0), active)

    def _seeding_message(self, what: str, a: np.ndarray, b: np.ndarray) -> str:
        k = int(np.argmax(np.abs(a - b)))
        return (
            f"{self.name} ignores its reset seed: {what} but started from different observations "
            f"({self._entry(k)}: {a[k]:.6g} vs {b[k]:.6g}); GRPO groups need equal starts. Set "
            "env.group_start=clone (each group's first world is reset and copied into the others), seed all of the "
            "env's randomness and set its whole state in reset(seed=...), or set env.check_seeding=false if its "
            "observations are noisy by design"
        )

    def _entry(self, k: int) -> str:
        """Flat observation index `k` by the Dict entry it comes from (`obs['goal'][0]`), or `obs[k]`."""
        for key, start, size in self.obs_layout:
            if start <= k < start + size:
                return f"obs[{key!r}][{k - start}]"
        return f"obs[{k}]"

    def obs(self) -> np.ndarray:
        return self._obs.copy()

    def step(self, actions: np.ndarray):
        """`actions: [B, action_dim]` in [-1, 1]; rows of finished worlds are ignored. Returns
        `(obs, reward, terminated, truncated, info)` like `BatchedEnv.step`. `EnvFailure` when
        every world has failed."""
        if not self._was_reset:
            raise RuntimeError("call reset(seeds) before step()")
        active = ~self.done
        actions = check_actions(actions, active, self.action_dim)
        reward = self._step_worlds(np.where(active[:, None], actions, 0.0), active)
        if self.failed.all():
            raise EnvFailure(self._every_world_failed())
        info = {"is_success": self.success.copy(), "failed": self.failed.copy(), "n_failed": int(self.failed.sum()),
                "active": active}  # fmt: skip
        return self.obs(), (reward * active).astype(np.float32), self.terminated.copy(), self.truncated.copy(), info

    def render(self, worlds: Sequence[int] | None = None, **_: Any) -> np.ndarray:
        """Frames of `worlds` (default: all), `uint8 [n, H, W, 3]`, each the world's own `render()`
        (the env must be made with `render_mode="rgb_array"`; camera and size are its own)."""
        worlds = range(self.num_worlds) if worlds is None else [int(w) for w in worlds]
        frames = self._each("frame", {i: () for i in worlds})
        for i in worlds:
            if isinstance(frames[i], Lost | str):
                raise EnvFailure(f"{self.name}: world {i} (seed {self.seeds[i]}) could not render: {frames[i]}")
        return np.stack([frames[i] for i in worlds])

    def worker_pids(self) -> list[int | None]:
        """The async backend's worker processes, by world (empty for sync)."""
        return self.vec.pids() if isinstance(self.vec, WorkerPool) else []

    def close(self) -> None:
        self._watch.close()
        if self.vec is not None:
            self.vec.close()
