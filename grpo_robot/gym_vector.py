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
  observation, ends that world as a failure (no success); the others carry on.
- **Seeding is checked**: on the first reset, worlds reset from equal seeds must start from
  equal observations (or, with no seed repeated, a second reset must repeat the first), else
  `ValueError`; `env.check_seeding=false` turns this off for envs noisy by design.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from grpo_robot import env_state
from grpo_robot.batched import check_actions
from grpo_robot.config import EnvConfig, env_name
from grpo_robot.seeding import check_seeds

log = logging.getLogger(__name__)

RUNNING, SUCCEEDED, HORIZON, ENV_ENDED, FAILED = 0, 1, 2, 3, 4  # OutcomeEnv's `info["ended"]`


class CopyFailed(RuntimeError):
    """Copying a reset world into another raised (group_start=clone)."""


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
        return gymnasium.make(cfg.id, **kwargs)
    factory = load_callable(cfg.entry_point, "env.entry_point")  # type: ignore[arg-type]
    env = factory(**kwargs)
    if not isinstance(env, gymnasium.Env):
        raise ValueError(f"env.entry_point={cfg.entry_point!r} made a {type(env).__name__}, not a gymnasium.Env")
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
            raise _space_error(cfg, f"observation[{key!r}]", obs.spaces[key], "Box entries only")
    return keys


def unit_actions(actions: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """`[S, D]` actions in an env's Box units -> the project's [-1, 1] per dimension (linear where
    both bounds are finite, unchanged elsewhere; clipped, as the env would clip them) float32."""
    a = np.asarray(actions, dtype=np.float64)
    scaled = np.isfinite(low) & np.isfinite(high)
    lo, span = np.where(scaled, low, -1.0), np.where(scaled, high - low, 2.0)
    return np.clip(np.where(scaled, 2.0 * (a - lo) / span - 1.0, a), -1.0, 1.0).astype(np.float32)


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
        self.keys = check_spaces(cfg, self.inner)
        self.horizon = horizon
        self.terminate_on_success = cfg.outcome == "any_step"
        self.success_key = cfg.success_key
        self.success_fn = load_callable(cfg.success_fn, "env.success_fn") if cfg.success_fn else None
        act = self.inner.action_space
        self._low, self._high = act.low.reshape(-1).astype(np.float64), act.high.reshape(-1).astype(np.float64)
        self._scaled = np.isfinite(self._low) & np.isfinite(self._high)
        self._act_shape, self._act_dtype = act.shape, act.dtype
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
        self.pending: tuple | None = None  # (method name, args) for `run_pending`
        self._own_generators: dict[str, Any] = {}  # a copy's own generators, kept aside (env_state)

    def _flatten(self, obs: Any) -> np.ndarray:
        if self.keys is None:
            return np.asarray(obs, dtype=np.float32).reshape(-1)
        return np.concatenate([np.asarray(obs[k], dtype=np.float32).reshape(-1) for k in self.keys])

    def to_env_action(self, action: np.ndarray) -> np.ndarray:
        """[-1, 1] per dimension -> the env's Box (infinite bounds: unchanged)."""
        a = np.clip(np.asarray(action, dtype=np.float64).reshape(-1), -1.0, 1.0)
        mapped = np.where(self._scaled, self._low + (a + 1.0) * 0.5 * (self._high - self._low), a)
        return mapped.reshape(self._act_shape).astype(self._act_dtype)

    def is_success(self, obs: Any, info: dict[str, Any]) -> bool:
        if self.success_fn is not None:
            return bool(self.success_fn(obs, info))
        if self.success_key not in info:
            raise MissingSuccessKey(
                f"env.success_key={self.success_key!r} is not in the info it returned, which has keys "
                f"{sorted(info) or 'none'}; set env.success_key to one of them, or env.success_fn=module:func"
            )
        return bool(info[self.success_key])

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
        try:
            obs, _, terminated, truncated, info = self.inner.step(self.to_env_action(action))
            self.raw_obs, self.raw_info = obs, info
            success = self.is_success(obs, info)
            flat = self._flatten(obs)
        except MissingSuccessKey:
            raise
        except Exception as err:
            return self._fail(err)
        if not np.isfinite(flat).all():
            return self._fail(None, "non-finite observation")
        self._obs, self._success = flat, success
        if success and self.terminate_on_success:
            self._ended = SUCCEEDED
        elif terminated or truncated:
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

    def observed(self) -> np.ndarray:
        """Every entry of the last raw observation, flattened (not only `env.obs_keys`): what the
        clone check compares."""
        obs = self.raw_obs
        parts = [obs[k] for k in sorted(obs)] if isinstance(obs, dict) else [obs]
        return np.concatenate([np.asarray(p, dtype=np.float64).reshape(-1) for p in parts] + [[self._success]])

    def run_pending(self) -> Any:
        """Run the call `pending` names, if any (how the async backend sends each world its own
        arguments: `set_attr("pending", [...])`, then `call("run_pending")`)."""
        if self.pending is None:
            return None
        name, args = self.pending
        self.pending = None
        return getattr(self, name)(*args)

    def close(self) -> None:
        self.inner.close()


def _make_world(cfg: EnvConfig, horizon: int) -> OutcomeEnv:  # a picklable factory for AsyncVectorEnv
    return OutcomeEnv(cfg, horizon)


# -- groups of worlds ------------------------------------------------------------------------------
def probe(cfg: EnvConfig) -> tuple[gymnasium.Env, int]:
    """Build one world and check it before any work starts: the spaces, the horizon, and the
    success signal after one step. -> (the inner env, reusable as a world; the horizon)."""
    inner = make_inner(cfg)
    world = OutcomeEnv(cfg, 1, inner)
    horizon = cfg.horizon
    if horizon is None:
        spec = getattr(inner, "spec", None)
        horizon = getattr(spec, "max_episode_steps", None)
        if horizon is None:
            raise ValueError(f"{env_name(cfg)} has no time limit (spec.max_episode_steps); set env.horizon")
    inner.reset(seed=0)
    # one step from the middle of the action range, read the outcome as training will
    obs, _, _, _, info = inner.step(world.to_env_action(np.zeros(world.action_space.shape)))
    try:
        world.is_success(obs, info)
    except MissingSuccessKey as err:
        raise ValueError(f"{env_name(cfg)}: {err.args[0]}") from None
    except Exception as err:
        raise ValueError(f"env.success_fn={cfg.success_fn!r} failed: {type(err).__name__}: {err}") from None
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
        inner, self.horizon = probe(cfg)
        first = OutcomeEnv(cfg, self.horizon, inner)
        # the observation layout and the action bounds: what a dataset must match, and how its actions map
        self.obs_keys, self.action_low, self.action_high = first.keys, first._low.copy(), first._high.copy()
        if cfg.vector == "sync":  # the probed env becomes world 0
            fns = [lambda: first] + [functools.partial(_make_world, cfg, self.horizon)] * (B - 1)
            self.vec = gymnasium.vector.SyncVectorEnv(fns, autoreset_mode="Disabled")
        else:
            first.close()
            fns = [functools.partial(_make_world, cfg, self.horizon)] * B
            self.vec = gymnasium.vector.AsyncVectorEnv(fns, autoreset_mode="Disabled")
        self.obs_dim = int(self.vec.single_observation_space.shape[0])
        self.action_dim = int(self.vec.single_action_space.shape[0])
        self.check_seeding = cfg.check_seeding
        self.seeds = np.zeros(B, dtype=np.int64)
        self.steps = np.zeros(B, dtype=np.int64)
        self.success = np.zeros(B, dtype=bool)
        self.terminated = np.zeros(B, dtype=bool)  # ended by success (outcome=any_step)
        self.truncated = np.zeros(B, dtype=bool)  # ended otherwise: horizon, the env's own end, failure
        self.failed = np.zeros(B, dtype=bool)
        self._obs = np.zeros((B, self.obs_dim), np.float32)
        self._reported: set[str] = set()
        self._was_reset = False
        self.group_start = cfg.group_start
        self.copy_method: str | None = None  # group_start=clone: the copy method that proved faithful
        if self.group_start == "clone" and B >= 2:  # find a faithful copy now, before any work starts
            self.reset(np.zeros(B, dtype=np.int64))

    @property
    def done(self) -> np.ndarray:
        return self.terminated | self.truncated

    def reset(self, seeds: Sequence[int]) -> np.ndarray:
        seeds = check_seeds(seeds, self.num_worlds)
        obs, info = self.vec.reset(seed=[int(s) for s in seeds])
        self.seeds[:] = seeds
        self._update(obs, info)
        if self.failed.all():
            raise RuntimeError(f"{self.name}: every world failed to reset; first error: {self._first_error(info)}")
        if self.group_start == "clone":
            self._copy_starts(seeds)
        elif self.check_seeding and not self._was_reset:
            self._check_seeding(seeds, obs)
        self._was_reset = True
        return self.obs()

    # -- group_start=clone: every world reset, then each group's members made copies of its first --
    def _each(self, name: str, calls: dict[int, tuple]) -> dict[int, Any]:
        """`OutcomeEnv.<name>(*calls[i])` on each world `i` in `calls` -> {i: result}."""
        if isinstance(self.vec, gymnasium.vector.SyncVectorEnv):
            return {i: getattr(self.vec.envs[i], name)(*args) for i, args in calls.items()}
        self.vec.set_attr("pending", [(name, calls[i]) if i in calls else None for i in range(self.num_worlds)])
        results = self.vec.call("run_pending")
        return {i: results[i] for i in calls}

    def _copy(self, lead: np.ndarray, worlds: np.ndarray, method: str, starts: dict[int, Any] | None = None):
        """Make each world in `worlds` a copy of its group's first world `lead[w]` at its reset
        (from `starts` when given) -> the starts, by first world."""
        if starts is None:
            starts = self._each("take_start", {int(i): (method,) for i in np.unique(lead[worlds])})
        errors = [s for s in starts.values() if isinstance(s, str)]
        if not errors:
            errors = [e for e in self._each("adopt_start", {int(w): (method, starts[int(lead[w])]) for w in worlds})
                      .values() if e is not None]  # fmt: skip
        if errors:
            raise CopyFailed(errors[0])
        src = lead[worlds]
        self._obs[worlds], self.failed[worlds] = self._obs[src], self.failed[src]
        self.steps[worlds], self.success[worlds], self.terminated[worlds] = 0, False, False
        self.truncated[worlds] = self.failed[worlds]
        return starts

    def _copy_starts(self, seeds: np.ndarray) -> None:
        _, first, inverse = np.unique(seeds, return_index=True, return_inverse=True)
        lead = first[inverse]  # [B] the first world of each world's group
        members = np.flatnonzero(lead != np.arange(self.num_worlds))
        if not len(members):
            return
        if self.copy_method is not None:
            self._copy(lead, members, self.copy_method)
            return
        tried = []
        for method in self._each("copy_methods", {0: ()})[0]:
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
            self._update(*self.vec.reset(seed=[int(s) for s in seeds]))
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
                self.vec.step(np.tile(action, (self.num_worlds, 1)))
            seen = self._each("observed", everyone)
            for m in members:
                a, b = seen[int(lead[m])], seen[int(m)]
                if a.shape != b.shape or not np.array_equal(a, b):
                    k = 0 if a.shape != b.shape else int(np.argmax(np.abs(a - b)))
                    return f"world {m} differs from world {lead[m]} after {t} steps, observation entry {k}"
        failed_before = self.failed.copy()
        self._copy(lead, np.arange(self.num_worlds), method, starts)
        obs, info = self.vec.reset(seed=[int(s) for s in seeds])  # a copy must also start its next episode
        self._update(obs, info)
        broken = np.flatnonzero(self.failed & ~failed_before)
        if len(broken):
            return f"world {broken[0]}, a copy, failed its next reset: {info['error'][broken[0]]}"
        return None

    def _check_seeding(self, seeds: np.ndarray, obs: np.ndarray) -> None:
        ok = ~self.failed
        unique, inverse, counts = np.unique(seeds, return_inverse=True, return_counts=True)
        if (counts[inverse][ok] > 1).any():  # compare the members of each group with its first
            first = {}
            for i in np.flatnonzero(ok):
                j = first.setdefault(inverse[i], i)
                if not np.array_equal(obs[i], obs[j]):
                    self._seeding_error(f"worlds {j} and {i} were both reset with seed {seeds[i]}", obs[j], obs[i])
            return
        again, _ = self.vec.reset(seed=[int(s) for s in seeds])  # no repeated seed: reset twice
        for i in np.flatnonzero(ok):
            if not np.array_equal(obs[i], again[i]):
                self._seeding_error(f"world {i} was reset twice with seed {seeds[i]}", obs[i], again[i])

    def _seeding_error(self, what: str, a: np.ndarray, b: np.ndarray) -> None:
        k = int(np.argmax(np.abs(a - b)))
        raise ValueError(
            f"{self.name} ignores its reset seed: {what} but started from different observations "
            f"(obs[{k}]: {a[k]:.6g} vs {b[k]:.6g}); GRPO groups need equal starts. Set env.group_start=clone "
            "(each group's first world is reset and copied into the others), seed all of the env's randomness in "
            "reset(seed=...), or set env.check_seeding=false if its observations are noisy by design"
        )

    def _update(self, obs: np.ndarray, info: dict[str, Any]) -> None:
        ended = info["ended"]
        self._obs[:] = obs
        self.steps[:] = info["steps"]
        self.success[:] = info["success"]
        self.failed[:] = ended == FAILED
        self.terminated[:] = ended == SUCCEEDED
        self.truncated[:] = (ended != RUNNING) & (ended != SUCCEEDED)
        if "error" in info:
            for i in np.flatnonzero(info["_error"]):
                message = str(info["error"][i])
                error = message.split(": ", 1)[-1]
                if error not in self._reported:  # each distinct error once, with where it happened
                    self._reported.add(error)
                    seed = self.seeds[i]
                    log.warning("%s: world %d (seed %d) failed and was ended at %s", self.name, i, seed, message)

    @staticmethod
    def _first_error(info: dict[str, Any]) -> str:
        errors = info.get("error")
        return "unknown" if errors is None else str(errors[np.flatnonzero(info["_error"])[0]])

    def obs(self) -> np.ndarray:
        return self._obs.copy()

    def step(self, actions: np.ndarray):
        """`actions: [B, action_dim]` in [-1, 1]; rows of finished worlds are ignored. Returns
        `(obs, reward, terminated, truncated, info)` like `BatchedEnv.step`."""
        if not self._was_reset:
            raise RuntimeError("call reset(seeds) before step()")
        active = ~self.done
        actions = check_actions(actions, active, self.action_dim)
        obs, reward, _, _, info = self.vec.step(np.where(active[:, None], actions, 0.0))
        self._update(obs, info)
        info = {"is_success": self.success.copy(), "failed": self.failed.copy(), "n_failed": int(self.failed.sum()),
                "active": active}  # fmt: skip
        return self.obs(), (reward * active).astype(np.float32), self.terminated.copy(), self.truncated.copy(), info

    def close(self) -> None:
        self.vec.close()
