"""Demonstrations: successful expert episodes, stored as one `.npz` file.

Where they come from: the built-in tasks' scripted experts (`collect_demos`), any expert policy
for any env the trainer accepts (`collect_expert_demos`, `demos.expert=module:attr`), or a recorded
dataset in the ecosystem's formats (grpo_robot/datasets.py: Minari, robomimic HDF5).

File format (`numpy.savez_compressed`, loadable with `allow_pickle=False`), version 2:

  obs            float32 [S, obs_dim]     observation each action was taken from (flattened as the
                                          trainer flattens it), episodes back to back
  actions        float32 [S, action_dim]  action executed, in [-1, 1] (the expert's plus noise)
  expert_actions float32 [S, action_dim]  the expert's own action at that observation (the BC label), in [-1, 1]
  lengths        int64   [E]              steps of each episode; episode e is rows sum(lengths[:e]) ...
  seeds          int64   [E]              reset seed of each episode, -1 where the env does not repeat
                                          from a seed (replaying `actions` from it succeeds)
  env            str (JSON)               what env the demos are for (grpo_robot.environment.env_identity):
                                          the task and version, or the id / entry point, kwargs and
                                          observation keys; obs_dim and action_dim; a dataset of
                                          another env or layout is refused
  env_config     str (JSON)               the env config it was collected with, to rebuild the env
  spaces         str (JSON)               the env's own observation and action spaces and action
                                          bounds (what [-1, 1] maps onto), for people reading the file
  source         str                      where the demos came from (expert, dataset file)
  noise          float                    std of the Gaussian action noise used while collecting
  format_version int                      2 (version 1, built-in tasks only, is still read)

Actions are in the project's [-1, 1] convention, mapped linearly from the env's Box bounds.
Noise is injected into the executed actions only: the labels stay the expert's choices, while
the states visited spread around the expert's path, so a cloned policy sees how to recover.
Demo seeds come from their own range (grpo_robot/seeding.py), away from training and evaluation seeds.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from grpo_robot.batched import BatchedEnv
from grpo_robot.checkpoint import atomic_file, one_line
from grpo_robot.config import EnvConfig, env_config_dict, env_name
from grpo_robot.environment import bounds_differ, check_identity, env_identity
from grpo_robot.envs import Task, make_task, versioned
from grpo_robot.seeding import check_demo_seed, demo_seeds

FORMAT_VERSION = 2
ARRAYS = ("obs", "actions", "expert_actions", "lengths", "seeds")


class TooFewDemos(RuntimeError):
    """The expert succeeded too rarely to give `demos.episodes` within `demos.max_attempts`."""


class DatasetError(ValueError):
    """A demonstration dataset that cannot be used: one line naming the file and what is wrong."""


def check_finite(value: np.ndarray, lengths: np.ndarray, what: str, bound: float | None = None) -> None:
    """`DatasetError` if the `[steps, dim]` array `value` (episodes of `lengths` back to back) holds a
    NaN or inf (or, with `bound`, a value past +-bound), naming `what` (e.g. "file: obs"), the
    first bad row and column, its episode and step."""
    good = np.isfinite(value) if bound is None else np.isfinite(value) & (np.abs(value) <= bound)
    if not good.all():
        row, col = (int(i) for i in np.argwhere(~good)[0])
        e = int(np.searchsorted(np.cumsum(lengths), row, side="right"))
        step = row - int(np.sum(lengths[:e]))
        name = what.rsplit(": ", 1)[-1]
        rule = "finite" if bound is None else "in [-1, 1] (the env's action bounds mapped onto the unit box)"
        raise DatasetError(f"{what}[{row}, {col}] is {value[row, col]} (episode {e}, step {step}); {name} must be "
                           f"{rule}")  # fmt: skip


@dataclass
class DemoDataset:
    obs: np.ndarray
    actions: np.ndarray
    expert_actions: np.ndarray
    lengths: np.ndarray
    seeds: np.ndarray
    env: dict[str, Any]  # env_identity(...) with obs_dim and action_dim
    noise: float = 0.0
    env_config: dict[str, Any] = field(default_factory=dict)
    spaces: dict[str, Any] = field(default_factory=dict)
    source: str = ""

    @classmethod
    def from_episodes(cls, episodes: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]], **meta: Any) -> DemoDataset:
        """Episodes of (reset seed, obs [T, obs_dim], executed [T, action_dim], labels [T, action_dim])
        back to back; `meta`: the other fields (env, noise, env_config, spaces, source)."""
        return cls(
            obs=np.concatenate([e[1] for e in episodes]).astype(np.float32),
            actions=np.concatenate([e[2] for e in episodes]),
            expert_actions=np.concatenate([e[3] for e in episodes]),
            lengths=np.array([len(e[1]) for e in episodes], dtype=np.int64),
            seeds=np.array([e[0] for e in episodes], dtype=np.int64),
            **meta,
        )

    @property
    def task(self) -> str | None:
        """The built-in task, or None for a Gymnasium env."""
        return self.env.get("task")

    @property
    def task_id(self) -> str | None:
        """The built-in task and the version it was recorded on (`PushCube-v2`), or None."""
        version = self.env.get("version")
        return self.task if self.task is None or version is None else versioned(self.task, version)

    @property
    def n_episodes(self) -> int:
        return len(self.lengths)

    @property
    def obs_dim(self) -> int:
        return self.obs.shape[1]

    @property
    def action_dim(self) -> int:
        return self.actions.shape[1]

    def episode_index(self) -> np.ndarray:
        """`[S]` episode of each step."""
        return np.repeat(np.arange(self.n_episodes), self.lengths)

    def episode(self, e: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(obs, actions, expert_actions) of episode `e`."""
        start = int(self.lengths[:e].sum())
        rows = slice(start, start + int(self.lengths[e]))
        return self.obs[rows], self.actions[rows], self.expert_actions[rows]

    def save(self, path: str | Path) -> Path:
        """Write atomically (temporary file in the same folder, then rename)."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_name(path.name + ".npz")
        with atomic_file(path) as f:
            np.savez_compressed(
                f,
                **{name: getattr(self, name) for name in ARRAYS},
                env=np.array(json.dumps(self.env)),
                env_config=np.array(json.dumps(self.env_config)),
                spaces=np.array(json.dumps(self.spaces)),
                source=np.array(self.source),
                noise=np.array(self.noise),
                format_version=np.array(FORMAT_VERSION),
            )
        return path

    @classmethod
    def load(cls, path: str | Path) -> DemoDataset:
        """Read a `.npz` written by `save`; anything else is a one-line `DatasetError` (a
        `ValueError`) naming the file and what is wrong."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no demo dataset at {path}")
        unreadable = f"{path} is not a readable demo dataset (.npz)"
        size = path.stat().st_size
        if size == 0:
            raise DatasetError(f"{unreadable}: the file is empty (0 bytes)")
        if not zipfile.is_zipfile(path):
            with open(path, "rb") as f:
                truncated = f.read(2) == b"PK"
            what = "truncated or corrupt zip archive" if truncated else "not a zip archive"
            raise DatasetError(f"{unreadable}: {what} ({size} bytes)")
        try:
            with np.load(path, allow_pickle=False) as f:
                data = cls._from_npz(f, path)
        except DatasetError:
            raise
        except Exception as err:  # zip, zlib, npy-header and OS errors of a damaged archive
            raise DatasetError(f"{unreadable}: {one_line(err)}") from None
        data.check(str(path))
        data.env.setdefault("obs_dim", data.obs_dim)
        data.env.setdefault("action_dim", data.action_dim)
        return data

    @classmethod
    def _from_npz(cls, f: Any, path: Path) -> DemoDataset:
        def read(name: str) -> np.ndarray:
            if name not in f.files:
                raise DatasetError(f"{path} lacks the array {name!r} (it holds {', '.join(sorted(f.files)) or 'none'})")
            try:
                return f[name]
            except ValueError as err:  # an object array (pickled Python objects), or a damaged header
                raise DatasetError(f"{path}: array {name!r} cannot be read safely: {one_line(err)}") from None

        def scalar(name: str, kind: type) -> Any:
            value = read(name)
            if value.shape != ():
                raise DatasetError(f"{path}: {name!r} must be a single value, got an array of shape {value.shape}")
            try:
                return kind(value)
            except (TypeError, ValueError):
                raise DatasetError(f"{path}: {name!r} is {value!r:.60}, not a {kind.__name__}") from None

        def json_dict(name: str) -> dict[str, Any]:
            try:
                value = json.loads(scalar(name, str))
            except json.JSONDecodeError as err:
                raise DatasetError(f"{path}: {name!r} is not valid JSON ({err})") from None
            if not isinstance(value, dict):
                raise DatasetError(f"{path}: {name!r} is a JSON {type(value).__name__}, not an object")
            return value

        version = scalar("format_version", int) if "format_version" in f.files else None
        if version not in (1, FORMAT_VERSION):
            raise DatasetError(f"{path}: demo format version {version!r}; this toolkit reads 1 and {FORMAT_VERSION}")
        arrays = {name: read(name) for name in ARRAYS}
        if version == 1:  # built-in tasks only
            env = {"task": scalar("task", str), "version": scalar("task_version", int)}
            env_config = {"task": versioned(env["task"], env["version"])}
            meta = {"env": env, "env_config": env_config, "source": f"{env['task']} expert"}
        else:
            meta = {k: json_dict(k) for k in ("env", "env_config", "spaces")}
            meta["source"] = scalar("source", str)
        return cls(**arrays, **meta, noise=scalar("noise", float))

    def check(self, where: str) -> None:
        """`DatasetError` (a `ValueError`) unless the arrays have the layout of the file format
        (ranks, dtypes, lengths that add up), hold at least one episode, and are finite; a
        non-finite value is named by array, row and column, episode and step. Arrays of numbers
        saved in another dtype (float64, float16, integers, bools) are taken as the format's
        own from here on: float32 steps, int64 lengths and seeds, as the policy and the update
        read them."""
        for name in ARRAYS:
            value = getattr(self, name)
            if not isinstance(value, np.ndarray):
                raise DatasetError(f"{where}: {name} is a {type(value).__name__}, not an array")
            counts = name in ("lengths", "seeds")
            if value.dtype.kind not in ("iu" if counts else "fiub"):
                want = "integers" if counts else "numbers"
                raise DatasetError(f"{where}: {name} holds {value.dtype} values, not {want}")
            rank = 1 if counts else 2
            if value.ndim != rank:
                layout = "[episodes]" if rank == 1 else "[steps, dim]"
                raise DatasetError(f"{where}: {name} has shape {list(value.shape)}; it must be a {layout} array")
            if counts and value.dtype.kind == "u" and len(value) and value.max() > np.iinfo(np.int64).max:
                raise DatasetError(f"{where}: {name} holds {int(value.max())}, past the int64 range")
            setattr(self, name, value.astype(np.int64 if counts else np.float32, copy=False))
        if self.expert_actions.shape != self.actions.shape:
            raise DatasetError(f"{where}: expert_actions has shape {list(self.expert_actions.shape)}, actions "
                               f"{list(self.actions.shape)}; they must match")  # fmt: skip
        if len(self.lengths) == 0:
            raise DatasetError(f"{where}: the dataset holds no episodes")
        if len(self.seeds) != len(self.lengths):
            raise DatasetError(f"{where}: {len(self.lengths)} episode lengths but {len(self.seeds)} seeds; lengths "
                               "and seeds must be one per episode")  # fmt: skip
        if (self.lengths < 1).any():
            e = int(np.flatnonzero(self.lengths < 1)[0])
            raise DatasetError(f"{where}: episode {e} has length {int(self.lengths[e])}; lengths must be >= 1")
        steps = sum(int(n) for n in self.lengths)  # Python integers: an int64 sum can wrap around to the rows'
        if not (len(self.obs) == len(self.actions) == steps):
            raise DatasetError(f"{where}: obs has {len(self.obs)} rows and actions {len(self.actions)}, but the "
                               f"episode lengths add up to {steps}")  # fmt: skip
        if self.obs.shape[1] < 1 or self.actions.shape[1] < 1:
            raise DatasetError(f"{where}: obs {list(self.obs.shape)} and actions {list(self.actions.shape)} must have "
                               "at least one column")  # fmt: skip
        if isinstance(self.env, dict):  # the env record names the env it came from, in these forms
            for key, kind, form in (("kwargs", dict, "a mapping of constructor arguments"),
                                    ("obs_keys", list, "a list of observation keys")):  # fmt: skip
                value = self.env.get(key)
                if value is not None and not isinstance(value, kind):
                    raise DatasetError(f"{where}: its env record's {key} is a {type(value).__name__} ({value!r:.60}), "
                                       f"not {form}")  # fmt: skip
        for key, dim in (("obs_dim", self.obs.shape[1]), ("action_dim", self.actions.shape[1])):
            recorded = self.env.get(key) if isinstance(self.env, dict) else None
            if recorded is not None and recorded != dim:
                raise DatasetError(f"{where}: its env records {key}={recorded}, but the arrays have {dim} columns")
        for name in ("obs", "actions", "expert_actions"):
            check_finite(getattr(self, name), self.lengths, f"{where}: {name}")
        for name in ("actions", "expert_actions"):  # the format's unit box: a label past it the policy cannot act
            check_finite(getattr(self, name), self.lengths, f"{where}: {name}", 1.0 + 1e-6)

    def check_compatible(self, cfg: EnvConfig, env: Any, where: str = "dataset") -> None:
        """Refuse a dataset recorded on another env, task version, observation layout or size, or
        (a Gymnasium env's) other action bounds: its actions are stored in [-1, 1] of the bounds it
        was recorded with, so other bounds would give them other meanings."""
        check_identity(self.env, env_identity(cfg, env), where)
        differ = bounds_differ(self.spaces, env)
        if differ:
            raise DatasetError(f"{where} was recorded on {differ}; record it again on this env, or give the env the "
                               "bounds it had (env.kwargs)")  # fmt: skip

    @property
    def identity(self) -> dict[str, Any]:
        """`env` with the action bounds it was recorded on (a Gymnasium env's), for a clone's checkpoint."""
        return {**self.env, **{k: [float(v) for v in np.ravel(self.spaces[k])] for k in ("action_low", "action_high")
                               if self.spaces.get(k) is not None}}  # fmt: skip


@dataclass
class CollectStats:
    attempted: int
    kept: int
    failed_physics: int
    mean_length: float

    def to_json(self) -> dict:
        return {
            "attempted": self.attempted,
            "kept": self.kept,
            "expert_success_rate": self.kept / max(self.attempted, 1),
            "failed_physics": self.failed_physics,
            "mean_length": self.mean_length,
        }


def collect_demos(
    task: str | Task,
    episodes: int,
    noise: float = 0.0,
    seed: int = 0,
    max_attempts: int | None = None,
    batch_size: int = 64,
    nthread: int | None = None,
    horizon: int | None = None,
    outcome: str = "any_step",
) -> tuple[DemoDataset, CollectStats]:
    """Run the scripted expert until `episodes` successful episodes are kept: episodes of at most
    `horizon` control steps (None: the task's own), successful as training judges them with
    `outcome` (`env.outcome`: at any step, which ends the episode, or at the last one).

    Episode k starts from `seeding.demo_seeds(seed, k, 1)`, and its action noise comes from a
    generator of its own, seeded by `seed` and that start: each episode is a function of (`seed`,
    k) alone, whatever `max_attempts`, `batch_size` or `nthread` (a shared generator drew each
    step's noise for the whole batch, so a batch cut short by `max_attempts` gave other demos).
    Failed episodes are
    dropped. Raises `TooFewDemos` (a `RuntimeError`) if fewer than `episodes` succeed within `max_attempts`
    (default 10 x episodes + 64).
    """
    if episodes < 1:
        raise ValueError(f"episodes={episodes} is invalid: must be >= 1")
    if noise < 0:
        raise ValueError(f"noise={noise} is invalid: must be >= 0")
    check_demo_seed(seed)
    task = make_task(task) if isinstance(task, str) else task
    max_attempts = 10 * episodes + 64 if max_attempts is None else max_attempts
    batch_size = min(batch_size, max_attempts)
    if outcome not in ("any_step", "final_step"):
        raise ValueError(f"outcome={outcome!r} is invalid: must be any_step or final_step")
    final_step = outcome == "final_step"
    env = BatchedEnv(task, batch_size, nthread=nthread, horizon=horizon, terminate_on_success=not final_step)
    kept: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
    attempted = failed = 0
    while len(kept) < episodes and attempted < max_attempts:
        seeds = demo_seeds(seed, attempted, batch_size)
        obs = env.reset(seeds)
        streams = [np.random.default_rng([seed, 7, int(s)]) for s in seeds] if noise else []
        obs_steps, act_steps, label_steps = [], [], []
        while not env.done.all():
            label = task.expert(obs).astype(np.float32)
            act = label
            if noise:
                draw = np.stack([g.standard_normal(label.shape[1]) for g in streams])
                act = label + (noise * draw).astype(np.float32)
            act = np.clip(act, -1.0, 1.0)
            obs_steps.append(obs)
            act_steps.append(act)
            label_steps.append(label)
            obs, *_ = env.step(act)
        for w in range(min(batch_size, max_attempts - attempted)):  # in seed order, until enough
            attempted += 1
            failed += int(env.failed[w])
            if (env.success[w] and not env.failed[w]) if final_step else env.terminated[w]:
                steps = int(env.steps[w])
                kept.append(
                    (
                        int(seeds[w]),
                        np.stack([o[w] for o in obs_steps[:steps]]),
                        np.stack([a[w] for a in act_steps[:steps]]),
                        np.stack([a[w] for a in label_steps[:steps]]),
                    )
                )
                if len(kept) == episodes:
                    break
    if len(kept) < episodes:
        raise TooFewDemos(
            f"the {task.name} expert succeeded in only {len(kept)} of {attempted} episodes with noise={noise}; "
            f"lower the noise or raise max_attempts"
        )
    data = DemoDataset.from_episodes(
        kept,
        env={"task": task.name, "version": task.version, "obs_dim": task.obs_dim, "action_dim": task.action_dim},
        noise=float(noise),
        env_config={"task": task.task_id(), **({} if horizon is None else {"horizon": int(horizon)}),
                    **({"outcome": outcome} if final_step else {})},
        source=f"{task.name} scripted expert",
    )
    return data, CollectStats(attempted, len(kept), failed, float(data.lengths.mean()))


def env_config_of(data: DemoDataset) -> EnvConfig:
    """The env config a dataset was collected with (a built-in task, or the Gymnasium env)."""
    from grpo_robot.config import env_config

    return env_config(data.env_config)


def replay(data: DemoDataset, task: Task | None = None) -> np.ndarray:
    """Re-run each episode's executed actions from its seed -> `bool [E]` success at its last step,
    as training judges it with the env config's outcome (`ValueError` for episodes with no seed:
    an env that does not repeat from one cannot replay)."""
    if (data.seeds < 0).any():
        raise ValueError("the dataset holds episodes without a reset seed (an env that ignores it): no replay")
    cfg = env_config_of(data)  # its horizon and outcome as collected
    if data.task or task is not None:
        env = BatchedEnv(make_task(data.task_id) if task is None else task, data.n_episodes, nthread=1,
                         horizon=cfg.horizon, terminate_on_success=cfg.outcome == "any_step")  # fmt: skip
    else:
        from grpo_robot.gym_vector import GymGroupEnv

        env = GymGroupEnv(cfg, data.n_episodes)
    env.reset(data.seeds)
    starts = np.concatenate([[0], np.cumsum(data.lengths)[:-1]])
    for t in range(int(data.lengths.max())):
        rows = np.minimum(starts + t, starts + data.lengths - 1)
        env.step(data.actions[rows])
    success = env.success if cfg.outcome == "final_step" else env.terminated  # as training judges it
    ok = success & ~env.failed & (env.steps == data.lengths)
    env.close()
    return ok


# -- demonstrations from any expert policy on any Gymnasium env ----------------------------------
class Expert:
    """`demos.expert=module:attr`, called as the env's users call a scripted policy.

    The attribute is a function `(obs, info) -> action`, an object with `get_action(obs)` (or
    callable as a function), or a class of either, built with no arguments. Observations and info
    are the env's own (a Dict observation stays a dict), actions are in the env's own units. An
    optional `reset()` is called before each episode, for experts that keep a plan.
    """

    def __init__(self, path: str) -> None:
        from grpo_robot.gym_vector import load_callable

        self.path = path
        obj = load_callable(path, "demos.expert", check=False)
        if isinstance(obj, type):
            try:
                obj = obj()
            except Exception as err:
                raise ValueError(f"demos.expert={path!r}: building it with no arguments failed: "
                                 f"{type(err).__name__}: {err}") from None  # fmt: skip
        if callable(getattr(obj, "get_action", None)):
            get_action = obj.get_action
            self.act: Callable[[Any, dict], Any] = lambda obs, info: get_action(obs)
        elif callable(obj):
            self.act = obj
        else:
            raise ValueError(f"demos.expert={path!r} is a {type(obj).__name__}: it must be a function (obs, info) -> "
                             "action, or an object with get_action(obs)")  # fmt: skip
        self._reset = getattr(obj, "reset", None)

    def reset(self) -> None:
        """The expert's own `reset()` before each episode, if it has one; a raise is one line."""
        if callable(self._reset):
            try:
                self._reset()
            except Exception as err:
                raise ValueError(f"demos.expert={self.path!r}: its reset() raised {one_line(err)}") from None

    def __call__(self, obs: Any, info: dict, size: int, where: str) -> np.ndarray:
        """The expert's action as a flat float64 `[size]` array; a raise, a wrong size or a
        non-finite value is a one-line `ValueError` naming `where`."""
        try:
            action = self.act(obs, info)
        except Exception as err:
            raise ValueError(f"demos.expert={self.path!r} raised {type(err).__name__}: {err} ({where})") from None
        try:
            action = np.asarray(action, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise ValueError(f"demos.expert={self.path!r} returned {type(action).__name__} {action!r:.80}, not an "
                             f"array of {size} numbers ({where})") from None  # fmt: skip
        if action.size != size:
            raise ValueError(f"demos.expert={self.path!r} returned an action of {action.size} values; the env's "
                             f"action space has {size} ({where})")  # fmt: skip
        if not np.isfinite(action).all():
            raise ValueError(f"demos.expert={self.path!r} returned a non-finite action {action.tolist()} ({where})")
        return action


def expert_episodes(env_cfg: EnvConfig, expert: str, seeds: Any, noise: float = 0.0, rng_seed: int = 0,
                    check_seed: int | None = None):  # fmt: skip
    """Run `expert` (see `Expert`) on one world of the Gymnasium env `env_cfg`, one episode per
    reset seed drawn from the iterable `seeds`, with N(0, noise) on the executed actions. Yields
    `(seed, obs [T, obs_dim], executed [T, action_dim], labels [T, action_dim], success, failed)`
    per episode, actions in [-1, 1]; success as the trainer judges it (`env.success_key` or
    `env.success_fn`, `env.outcome`). The world is `expert_episodes.world` while it runs. With
    `check_seed`, the world is first reset twice from it: an env that does not repeat its start
    from a seed is refused in one line (the seeds recorded would not replay)."""
    from grpo_robot.gym_vector import ENV_ENDED, FAILED, HORIZON, RUNNING, SUCCEEDED, OutcomeEnv, Watchdog, probe

    policy = Expert(expert)
    watch = Watchdog(env_name(env_cfg), env_cfg.step_timeout_s, np.zeros(1, np.int64))  # each reset and step
    try:
        inner, horizon = probe(env_cfg, watch)
    except BaseException:
        watch.close()
        raise
    world = OutcomeEnv(env_cfg, horizon, inner)
    world.watchdog, world.index = watch, 0
    size = int(np.prod(inner.action_space.shape))
    rng = np.random.default_rng([rng_seed, 7])
    final_step = env_cfg.outcome == "final_step"
    empty = np.zeros((0, world.obs_dim), np.float32), np.zeros((0, size), np.float32)
    try:  # the world and its watchdog are closed however this ends
        if check_seed is not None:
            watch.seeds[0] = check_seed
            starts = [world.reset(seed=check_seed)[0] for _ in range(2)]
            if world.ended != FAILED and not np.array_equal(*starts):
                k = int(np.argmax(np.abs(starts[0] - starts[1])))
                raise ValueError(
                    f"{env_name(env_cfg)} ignores its reset seed: reset twice with seed {check_seed}, it started from "
                    f"different observations (obs[{k}]: {starts[0][k]:.6g} vs {starts[1][k]:.6g}), so the "
                    "demonstrations' seeds would not replay their starts; set env.group_start=clone (seeds are then "
                    "recorded as -1), or env.check_seeding=false if its observations are noisy by design")  # fmt: skip
        for k, reset_seed in enumerate(seeds):
            watch.seeds[0] = int(reset_seed)
            obs, _ = world.reset(seed=int(reset_seed))
            if world.ended == FAILED:
                yield int(reset_seed), empty[0], empty[1], empty[1], False, True, world
                continue
            policy.reset()
            rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
            while world.ended == RUNNING:
                where = f"episode {k}, seed {reset_seed}, step {len(rows)}"
                label = world.from_env_action(policy(world.raw_obs, world.raw_info, size, where))
                act = np.clip(label + noise * rng.standard_normal(label.shape), -1.0, 1.0).astype(np.float32)
                rows.append((obs, act, label))
                obs, *_ = world.step(act)
            ok = world.ended == SUCCEEDED or (final_step and world.success and world.ended in (HORIZON, ENV_ENDED))
            columns = [np.stack(c) for c in zip(*rows, strict=True)]
            yield int(reset_seed), *columns, bool(ok), world.ended == FAILED, world
    finally:
        watch.close()
        world.close()


def collect_expert_demos(
    env_cfg: EnvConfig,
    expert: str,
    episodes: int,
    noise: float = 0.0,
    seed: int = 0,
    max_attempts: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[DemoDataset, CollectStats]:
    """Run `expert` (see `Expert`) on the Gymnasium env `env_cfg` until `episodes` successful
    episodes are kept (`expert_episodes`).

    Episode k resets with `seeding.demo_seeds(seed, k, 1)`; the seed is recorded unless
    `env.group_start=clone` says the env does not repeat from it. The expert's action is mapped
    into [-1, 1] (the label), noise is added to the executed action only. Stops with a one-line
    `TooFewDemos` (a `RuntimeError`) once `episodes` can no longer be reached within `max_attempts` (default
    10 x episodes + 64), naming the success rate the expert reached. `progress(kept, attempted)`
    is called after each episode.
    """
    if episodes < 1:
        raise ValueError(f"episodes={episodes} is invalid: must be >= 1")
    if noise < 0:
        raise ValueError(f"noise={noise} is invalid: must be >= 0")
    check_demo_seed(seed)
    max_attempts = 10 * episodes + 64 if max_attempts is None else max_attempts
    seeded = env_cfg.group_start == "seed"
    kept: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
    attempted = failed = 0
    world = None

    def seeds():  # until enough are kept, or enough can no longer be
        k = 0
        while len(kept) < episodes and max_attempts - k >= episodes - len(kept):
            yield demo_seeds(seed, k, 1)[0]
            k += 1

    check = int(demo_seeds(seed, 0, 1)[0]) if seeded and env_cfg.check_seeding else None
    for episode in expert_episodes(env_cfg, expert, seeds(), noise, seed, check):
        reset_seed, obs, act, label, ok, crashed, world = episode
        attempted += 1
        failed += int(crashed)
        if ok:
            kept.append((reset_seed if seeded else -1, obs, act, label))
        if progress is not None:
            progress(len(kept), attempted)
    if len(kept) < episodes:
        raise TooFewDemos(
            f"demos.expert={expert!r} succeeded in {len(kept)} of {attempted} episodes "
            f"({len(kept) / max(attempted, 1):.1%}) on {env_name(env_cfg)} with demos.noise={noise}, short of "
            f"demos.episodes={episodes} within demos.max_attempts={max_attempts}; check the expert (its actions are "
            "in the env's own units), lower the noise, or raise max_attempts"
        )
    inner = world.inner
    spaces = {"observation": str(inner.observation_space), "action": str(inner.action_space),
              "action_low": world._low.tolist(), "action_high": world._high.tolist()}  # fmt: skip
    data = DemoDataset.from_episodes(
        kept,
        env={**env_identity(env_cfg), "obs_keys": world.keys, "obs_dim": world.obs_dim,
             "action_dim": int(world.action_space.shape[0])},  # fmt: skip
        noise=float(noise),
        env_config=env_config_dict(env_cfg),
        spaces=spaces,
        source=f"expert {expert}",
    )
    return data, CollectStats(attempted, len(kept), failed, float(data.lengths.mean()))
