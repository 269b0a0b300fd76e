"""The group-environment interface that rollout and evaluation are written against, and the one
constructor for its two backends: `BatchedEnv` (built-in tasks, `mujoco.rollout`) and
`GymGroupEnv` (any Gymnasium env, as a Gymnasium vector env)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from grpo_robot.config import EnvConfig, TrainConfig


@runtime_checkable
class GroupEnv(Protocol):
    """`num_worlds` worlds stepped together; each world is reset from its own seed, so the members
    of a group (equal seeds) start from one state. Flags are per world `[B]` and sticky until the
    next reset; a world that is `done` ignores its actions."""

    name: str
    num_worlds: int
    obs_dim: int
    action_dim: int
    horizon: int  # control steps at most per episode
    steps: np.ndarray  # [B] int, control steps taken since the reset
    success: np.ndarray  # [B] bool, the task's success predicate at the last step
    terminated: np.ndarray  # [B] bool, ended by success (outcome=any_step)
    truncated: np.ndarray  # [B] bool, ended otherwise: horizon, the env's own end, a failure
    failed: np.ndarray  # [B] bool, the world crashed or blew up (counts as no success)

    @property
    def done(self) -> np.ndarray:
        """`[B]` bool, terminated | truncated."""
        ...

    def reset(self, seeds: Sequence[int]) -> np.ndarray:
        """`seeds [B]` -> obs `[B, obs_dim]` float32."""
        ...

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """`actions [B, action_dim]` in [-1, 1] -> (obs, reward, terminated, truncated, info)."""
        ...

    def close(self) -> None: ...


def make_env(cfg: EnvConfig, num_worlds: int) -> GroupEnv:
    """`num_worlds` worlds of the configured env: a built-in task runs on `BatchedEnv`, any
    other Gymnasium env on `GymGroupEnv`."""
    if cfg.task:
        from grpo_robot.batched import BatchedEnv

        return BatchedEnv(
            cfg.task,
            num_worlds,
            nthread=cfg.nthread,
            horizon=cfg.horizon,
            terminate_on_success=cfg.outcome == "any_step",
        )
    from grpo_robot.gym_vector import GymGroupEnv

    return GymGroupEnv(cfg, num_worlds)


def make_eval_env(cfg: TrainConfig, n_seeds: int, train_env: GroupEnv | None = None,
                  worlds: int | None = None) -> GroupEnv:  # fmt: skip
    """The env that evaluates `n_seeds` held-out seeds. Built-in worlds are cheap: one per seed. A
    Gymnasium env evaluates in chunks on at most `worlds` worlds (default: the training worlds;
    `train_env` itself when given), so a 200-seed evaluation does not build 200 more envs."""
    if cfg.env.task:
        return make_env(cfg.env, n_seeds)
    if train_env is not None:
        return train_env
    if worlds is None:
        worlds = cfg.algo.groups_per_iter * cfg.algo.group_size
    return make_env(cfg.env, min(n_seeds, worlds))


# -- what an env is: recorded with datasets and checkpoints, and compared before they are used --
# kwargs that change how an env is watched, not what it is (Gymnasium's MuJoCo envs, robosuite's wrapper)
IGNORED_KWARGS = ("render_mode", "render_camera", "render_width", "render_height", "camera_id", "camera_name",
                  "default_camera_config", "visual_options")  # fmt: skip


def env_identity(cfg: EnvConfig | dict, env: GroupEnv | None = None) -> dict[str, Any]:
    """The facts that decide whether a dataset or a policy fits an env: the built-in task and its
    version, or the Gymnasium id / entry point with its kwargs and observation keys; with `env`,
    also the flat observation and action sizes."""
    get = cfg.get if isinstance(cfg, dict) else lambda k, d=None: getattr(cfg, k, d)
    if get("task"):
        from grpo_robot.envs import TASK_NAMES

        task = TASK_NAMES.get(get("task"))  # a name (its current version) or an id (PushCube-v1)
        ident: dict[str, Any] = {"task": get("task") if task is None else task.name,
                                 "version": None if task is None else task.version}
    else:
        key = "id" if get("id") else "entry_point"
        kwargs = {k: v for k, v in dict(get("kwargs") or {}).items() if k not in IGNORED_KWARGS}
        obs_keys = get("obs_keys")
        if env is not None and getattr(env, "obs_keys", None) is not None:
            obs_keys = env.obs_keys  # the keys actually used (null in the config = all of them)
        ident = {key: get(key), "kwargs": _plain(kwargs), "obs_keys": None if obs_keys is None else list(obs_keys)}
        entry = registered_entry_point(get("id")) if key == "id" else None
        if entry:  # the class it makes: the same env by either name
            ident["entry_point"] = entry
    if env is not None:
        ident.update(obs_dim=int(env.obs_dim), action_dim=int(env.action_dim))
    return ident


def _plain(value: Any) -> Any:
    """OmegaConf containers and tuples -> dicts and lists, so identities compare and serialize."""
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple) or (hasattr(value, "__iter__") and not isinstance(value, str | bytes)):
        return [_plain(v) for v in value]
    return value


def describe_identity(ident: dict[str, Any]) -> str:
    """`FetchPush-v4 (obs_keys=[observation, desired_goal], obs_dim=28, action_dim=4)`."""
    if ident.get("task"):
        from grpo_robot.envs import versioned

        name = versioned(ident["task"], ident.get("version"))
    else:
        name = ident.get("id") or ident.get("entry_point") or "?"
    details = []
    if ident.get("kwargs"):
        details.append("kwargs=" + ",".join(f"{k}={v}" for k, v in ident["kwargs"].items()))
    if ident.get("obs_keys") is not None:
        details.append(f"obs_keys=[{', '.join(ident['obs_keys'])}]")
    details += [f"{k}={ident[k]}" for k in ("obs_dim", "action_dim") if ident.get(k) is not None]
    return f"{name} ({', '.join(details)})" if details else name


def registered_entry_point(env_id: str | None) -> str | None:
    """`module:Class` that Gymnasium's registry makes for `env_id` (as registered in this process:
    by gymnasium itself, or by a module imported so far), or None."""
    if not env_id:
        return None
    import gymnasium

    spec = gymnasium.registry.get(env_id)
    entry = None if spec is None else spec.entry_point
    if callable(entry):
        return f"{entry.__module__}:{entry.__qualname__}"
    return entry if isinstance(entry, str) and entry else None


def _made_with(ident: dict[str, Any]) -> dict[str, Any]:
    """The kwargs a Gymnasium env is made with: the config's over, for an id, its registration's
    defaults, and for an entry point, its signature's (where it imports). An identity that records
    only some of them (`partial_kwargs`: a robomimic file's, a dataset that records no env) gives
    those alone, so that only the keys it records are compared."""
    import inspect

    import gymnasium

    if ident.get("task") or ident.get("partial_kwargs"):
        return dict(ident.get("kwargs") or {})
    if ident.get("id"):
        spec = gymnasium.registry.get(ident["id"])
        defaults = dict(spec.kwargs) if spec is not None else {}
    else:
        try:
            from grpo_robot.gym_vector import load_callable

            parameters = inspect.signature(load_callable(ident["entry_point"], "env.entry_point")).parameters.values()
        except Exception:  # noqa: BLE001  (not importable here, or no signature: its own kwargs only)
            parameters = []
        defaults = {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}
    defaults = {k: v for k, v in defaults.items() if k not in IGNORED_KWARGS}
    return {**_plain(defaults), **(ident.get("kwargs") or {})}


def identity_mismatch(theirs: dict[str, Any], mine: dict[str, Any]) -> str | None:
    """The first fact in which `theirs` (a dataset's or a checkpoint's env) differs from `mine`
    (the configured env), or None. Facts only one side records are not compared (an outside
    dataset may not record kwargs). Kwargs are compared as each side makes the env: a kwarg one
    side leaves to its default is that default (`_made_with`), so a dataset recorded with the
    defaults does not fit a config that sets another value. A Gymnasium env named by its id on one
    side and by its entry point on the other is the same env where the id's registered entry
    point is that one."""
    if (theirs.get("task") or mine.get("task")) and theirs.get("task") != mine.get("task"):
        return "task"
    ids = theirs.get("id"), mine.get("id")
    if all(ids):
        if ids[0] != ids[1]:
            return "id"
    elif any(ids) or theirs.get("entry_point") or mine.get("entry_point"):
        a, b = (side.get("entry_point") or registered_entry_point(side.get("id")) for side in (theirs, mine))
        if not (a and b):
            return "id" if any(ids) else "entry_point"
        if a != b:
            return "entry_point"
    for key in ("version", "obs_keys", "obs_dim", "action_dim"):
        a, b = theirs.get(key), mine.get(key)
        if a is not None and b is not None and a != b:
            return key
    a, b = (_made_with(side) for side in (theirs, mine))
    for key in sorted(set(a) & set(b)):
        if a[key] != b[key]:
            return f"kwargs.{key}"
    return None


def action_bounds(env: Any) -> dict[str, list[float]]:
    """A Gymnasium env's action bounds (`GymGroupEnv.action_low/high`), as a checkpoint or a dataset
    records them: a policy's [-1, 1] actions mean other ones under other bounds. {} for a built-in
    task, whose actions are [-1, 1] by construction."""
    low, high = getattr(env, "action_low", None), getattr(env, "action_high", None)
    if low is None or high is None:
        return {}
    return {"action_low": [float(v) for v in np.ravel(low)], "action_high": [float(v) for v in np.ravel(high)]}


def bounds_text(low: Any, high: Any) -> str:
    def text(values: Any) -> str:
        return "[" + ", ".join(f"{float(v):g}" for v in np.ravel(values)) + "]"

    return f"low={text(low)} high={text(high)}"


def bounds_differ(recorded: dict[str, Any], env: Any) -> str | None:
    """None when `recorded` (a record's `action_low`/`action_high`) holds `env`'s action bounds, or
    either side has none (a record from before they were kept); else both sides, for a message."""
    now = action_bounds(env)
    theirs = (recorded.get("action_low"), recorded.get("action_high"))
    if not now or any(bound is None for bound in theirs):
        return None
    mine = (now["action_low"], now["action_high"])
    if all(np.shape(a) == np.shape(b) and np.array_equal(np.asarray(a, float), np.asarray(b, float))
           for a, b in zip(theirs, mine, strict=True)):  # fmt: skip
        return None
    return f"action bounds {bounds_text(*theirs)}, but {env.name} has {bounds_text(*mine)}"


def check_identity(theirs: dict[str, Any], mine: dict[str, Any], what: str) -> None:
    """`ValueError` naming both sides unless `theirs` fits `mine`; `what` says whose env `theirs` is."""
    key = identity_mismatch(theirs, mine)
    if key is not None:
        if key.startswith("kwargs."):  # as each side makes the env: a default the config leaves unwritten too
            name = key.removeprefix("kwargs.")
            key += f": {_made_with(theirs)[name]!r} against the config's {_made_with(mine)[name]!r}"
        raise ValueError(f"{what} is for {describe_identity(theirs)}, but the config has {describe_identity(mine)} "
                         f"(they differ in {key})")  # fmt: skip
