"""Copying a reset Gymnasium env into another: equal group starts for envs whose reset ignores the seed.

With `env.group_start=clone`, the first world of each group resets and the other members are made
copies of it. Three ways to copy, tried in this order (the first that proves faithful is kept):

- `state`: the env's own `get_state() -> state` and `set_state(state)` (on the env, a wrapper, or
  the unwrapped env). The most reliable when an env has them: its author says what its state is.
- `mujoco`: for an env that holds a `mujoco.MjModel` / `mujoco.MjData` among its attributes or
  theirs (Gymnasium's MuJoCo envs, Gymnasium-Robotics): the full integration state (`mj_getState`
  with `mjSTATE_INTEGRATION`: time, qpos, qvel, actuator activations, mocap poses, controls,
  applied forces, user data, warm start), then `mj_forward`, together with the Python-side task
  state: every attribute of the unwrapped env that is plain data (numbers, strings, numpy arrays
  and generators, and lists, tuples and dicts of them), e.g. a goal drawn at reset.
- `deepcopy`: a deep copy of the whole reset env, which carries every Python object. Slower, and
  not faithful for envs that pickle by re-construction (Gymnasium's `EzPickle`), which the check
  below catches.

A copy also copies the leader's random generators, so that the members stay equal if the env draws
during an episode. Each member keeps its own generators aside (`own_generators`) and gets them back
before its next reset (`restore_generators`): otherwise every member would draw the leader's next
start, and worlds that should be independent (evaluation, the next iteration) would repeat each
other.

A copy is faithful when the copies then behave as the original: `GymGroupEnv` steps every group
with identical actions after the first copy and compares what its members observe; a method that
fails that check is dropped for the next. Every snapshot is picklable, so the async backend sends
it between processes.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
from typing import Any

import gymnasium
import mujoco
import numpy as np

METHODS = ("state", "mujoco", "deepcopy")
_PHYSICS_STATE = mujoco.mjtState.mjSTATE_INTEGRATION
_PLAIN = (type(None), bool, int, float, complex, str, bytes, np.ndarray, np.generic, np.random.Generator,
          np.random.BitGenerator, np.random.SeedSequence)  # fmt: skip


def _layers(env: gymnasium.Env) -> list[Any]:
    """The env, each wrapper's inner env, down to the unwrapped env."""
    layers = [env]
    while isinstance(layers[-1], gymnasium.Wrapper):
        layers.append(layers[-1].env)
    return layers


def state_api(env: gymnasium.Env) -> Any | None:
    """The outermost layer of `env` with callable `get_state()` and `set_state(state)`, or None."""
    for layer in _layers(env):
        get, put = getattr(layer, "get_state", None), getattr(layer, "set_state", None)
        if callable(get) and callable(put):
            try:
                positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                params = inspect.signature(get).parameters.values()
                required = [p for p in params if p.default is p.empty and p.kind in positional]
            except (TypeError, ValueError):
                required = []
            if not required:
                return layer
    return None


def mujoco_handles(env: gymnasium.Env) -> tuple[mujoco.MjModel, mujoco.MjData] | None:
    """The `(MjModel, MjData)` the unwrapped env simulates with, looked for among its attributes
    and theirs, three deep. Not robosuite's, one level further (`robosuite_env.sim.model._model`),
    on purpose: its controllers and observables keep state outside `MjData`, so a copy of the
    physics alone steps apart from the original from its first step, even right after a reset
    (`tests/test_robosuite_env.py`); the adapter seeds robosuite's resets and needs no copy."""
    found: dict[type, Any] = {}

    def visit(obj: Any, depth: int) -> None:
        if isinstance(obj, mujoco.MjModel | mujoco.MjData):
            found.setdefault(type(obj), obj)
            return
        if depth == 0 or isinstance(obj, _PLAIN) or not hasattr(obj, "__dict__"):
            return
        for value in vars(obj).values():
            visit(value, depth - 1)

    visit(env.unwrapped, 3)
    model, data = found.get(mujoco.MjModel), found.get(mujoco.MjData)
    return None if model is None or data is None else (model, data)


def _is_plain(value: Any, depth: int = 0) -> bool:
    if isinstance(value, _PLAIN):
        return not isinstance(value, np.ndarray) or value.dtype != object
    if depth < 4 and isinstance(value, list | tuple):
        return all(_is_plain(v, depth + 1) for v in value)
    if depth < 4 and isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v, depth + 1) for k, v in value.items())
    return False


def applicable(env: gymnasium.Env) -> list[str]:
    """The copy methods that apply to `env`, in the order they are tried."""
    methods = []
    if state_api(env) is not None:
        methods.append("state")
    if mujoco_handles(env) is not None:
        methods.append("mujoco")
    methods.append("deepcopy")
    return methods


def take(env: gymnasium.Env, method: str) -> Any:
    """A picklable snapshot of `env` by `method`, independent of the env's later steps."""
    if method == "state":
        return copy.deepcopy(state_api(env).get_state())
    if method == "mujoco":
        model, data = mujoco_handles(env)
        physics = np.empty(mujoco.mj_stateSize(model, _PHYSICS_STATE))
        mujoco.mj_getState(model, data, physics, _PHYSICS_STATE)
        attrs = {k: copy.deepcopy(v) for k, v in vars(env.unwrapped).items() if _is_plain(v)}
        return physics, attrs
    if method == "deepcopy":
        return copy.deepcopy(env)
    raise ValueError(f"unknown copy method {method!r}; known: {', '.join(METHODS)}")


def put(env: gymnasium.Env, method: str, snapshot: Any) -> gymnasium.Env:
    """Make `env` the snapshot's state -> the env to use from now on (a new object for `deepcopy`)."""
    if method == "state":
        state_api(env).set_state(copy.deepcopy(snapshot))
        return env
    if method == "mujoco":
        physics, attrs = snapshot
        model, data = mujoco_handles(env)
        mujoco.mj_setState(model, data, physics, _PHYSICS_STATE)
        mujoco.mj_forward(model, data)
        unwrapped = env.unwrapped
        for key, value in attrs.items():
            held = getattr(unwrapped, key, None)
            if isinstance(held, np.ndarray) and held.base is not None and held.flags.writeable \
                    and held.shape == np.shape(value):  # fmt: skip
                # a view (into MjData, `self.data.body("ball").xpos`, or another array): replaced by a
                # copy it would freeze at the start; written in place it stays the view
                np.copyto(held, value, casting="unsafe")
            else:
                setattr(unwrapped, key, copy.deepcopy(value))
        return env
    if method == "deepcopy":
        fresh = copy.deepcopy(snapshot)
        env.close()
        return fresh
    raise ValueError(f"unknown copy method {method!r}; known: {', '.join(METHODS)}")


_GENERATORS = (np.random.Generator, np.random.RandomState)


def _generator_state(generator: Any) -> Any:
    if isinstance(generator, np.random.RandomState):
        return generator.get_state()
    return copy.deepcopy(generator.bit_generator.state)


def own_generators(env: gymnasium.Env) -> dict[str, Any]:
    """The unwrapped env's random generators: attribute name -> (the object, its state now). The
    state is kept too, because a copy may reach the object itself (a `set_state` that restores the
    leader's generator in place, `self.rng.bit_generator.state = ...`)."""
    return {k: (v, _generator_state(v)) for k, v in vars(env.unwrapped).items() if isinstance(v, _GENERATORS)}


def restore_generators(env: gymnasium.Env, generators: dict[str, Any]) -> None:
    """Put back the generators `own_generators` returned, each in the state it had then (on `env`,
    which may be a new object)."""
    unwrapped = env.unwrapped
    for key, (generator, state) in generators.items():
        if isinstance(generator, np.random.RandomState):
            generator.set_state(state)
        else:
            generator.bit_generator.state = state
        setattr(unwrapped, key, generator)


def model_fingerprint(env: gymnasium.Env) -> dict[str, bytes] | None:
    """The numeric arrays of the env's `MjModel` (field -> a digest of it), or None without one: what
    the clone check compares, so that a reset that changes the model (domain randomization: masses,
    damping, friction) is caught when a copy does not carry it."""
    handles = mujoco_handles(env)
    if handles is None:
        return None
    model, out = handles[0], {}
    for name in dir(model):
        if name.startswith("_"):
            continue
        try:
            value = getattr(model, name)
        except Exception:  # noqa: BLE001 (a property that needs what this model lacks)
            continue
        if isinstance(value, np.ndarray) and value.dtype != object:
            out[name] = hashlib.blake2b(value.tobytes(), digest_size=16).digest()
    return out
