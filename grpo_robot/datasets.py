"""Demonstration datasets in the ecosystem's formats, read into a `DemoDataset` for cloning.

`load_demos(path, cfg, env)` accepts:

- this project's `.npz` (grpo_robot/demos.py);
- a **Minari** dataset: its directory (`<root>/<dataset id>/`, holding `data/main_data.hdf5` and
  `data/metadata.json`), its `main_data.hdf5`, or `minari:<dataset id>` looked up under
  `$MINARI_DATASETS_PATH` (default `~/.minari/datasets`);
- a **robomimic / robosuite** HDF5 file: `data/demo_*/obs/<key>` and `data/demo_*/actions`, with
  the env in `data.attrs["env_args"]`.

The HDF5 files are read with h5py, following each format's documented layout, so neither library
need be installed (Minari wants numpy >= 2, which the robosuite extra cannot have).

Every format becomes the trainer's layout: observations flattened over the env's observation keys
(`env.obs_keys`, the same order as training), actions mapped from the env's Box bounds into
[-1, 1], and the dataset's env checked against the configured one (id, kwargs both give, keys,
sizes) before anything is trained.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from grpo_robot.config import EnvConfig
from grpo_robot.config.schema import ROBOSUITE_ENTRY_POINT
from grpo_robot.demos import DatasetError, DemoDataset, check_finite, one_line

log = logging.getLogger(__name__)
SUCCESS_INFOS = ("is_success", "success")  # a Minari episode's per-step success flags, where its env has one


def load_demos(path: str | Path, cfg: EnvConfig, env: Any, key: str = "demos.path",
               filter_key: str | None = None) -> DemoDataset:  # fmt: skip
    """The dataset at `path` (the config's `key`), checked against the configured env `cfg` and its
    group env `env` (whose `obs_keys` and action bounds convert an outside format); with
    `filter_key`, a robomimic file's demos that its `mask/<filter_key>` lists. One-line
    `ValueError` or `FileNotFoundError` for anything that does not fit."""
    where = f"{key}={path}"
    path = resolve(path)
    if path.suffix == ".npz":
        if filter_key is not None:
            raise DatasetError(f"{_filter_name(key)}={filter_key} is for a robomimic file's masks; {where} is a .npz")
        try:
            data = DemoDataset.load(path)
        except ValueError as err:
            raise DatasetError(f"{key}={err}") from None
    else:
        data = _load_hdf5(path, cfg, env, key, filter_key)
    data.check_compatible(cfg, env, where)
    return data


def _filter_name(key: str) -> str:
    """The filter key's config key beside the dataset's `key` (`dataset` of pretrain_bc.py, `demos.path`)."""
    return "filter_key" if key == "dataset" else "demos.filter_key"


def resolve(path: str | Path) -> Path:
    """`minari:<id>` -> its directory under the Minari root; any other path as is (it must exist)."""
    text = str(path)
    if text.startswith("minari:"):
        root = Path(os.environ.get("MINARI_DATASETS_PATH", Path.home() / ".minari" / "datasets"))
        found = root / text.removeprefix("minari:")
        if not found.exists():
            raise FileNotFoundError(f"no Minari dataset {text!r} under {root} (set MINARI_DATASETS_PATH to its root)")
        return found
    found = Path(text)
    if not found.exists():
        raise FileNotFoundError(f"no demo dataset at {found}")
    return found


ROBOMIMIC_KEYS = {"object-state": "object"}  # robosuite's observation key -> robomimic's name for it


def _load_hdf5(path: Path, cfg: EnvConfig, env: Any, key: str, filter_key: str | None = None) -> DemoDataset:
    import h5py

    main = path / "data" / "main_data.hdf5" if path.is_dir() else path
    if not main.is_file():
        where = f"{key}={path}" + (f" (a directory without {main.relative_to(path)})" if path.is_dir() else "")
        raise DatasetError(f"{where} is not a demo dataset (a .npz, a Minari dataset directory, a robomimic .hdf5)")
    unreadable = f"{key}={main} is not a readable HDF5 demo dataset"
    if main.stat().st_size == 0:
        raise DatasetError(f"{unreadable}: the file is empty (0 bytes)")
    try:
        with h5py.File(main, "r") as f:
            if "data" in f and isinstance(f["data"], h5py.Group) and any(k.startswith("demo") for k in f["data"]):
                return _robomimic(f, main, cfg, env, filter_key, _filter_name(key))
            if filter_key is not None:
                raise DatasetError(f"{key}={main}: {_filter_name(key)}={filter_key} is for a robomimic file's "
                                   "masks, and this is not one")  # fmt: skip
            if any(k.startswith("episode_") for k in f):
                return _minari(f, main, cfg, env)
            if "data" in f:
                raise DatasetError(f"{key}={main}: its data group holds no demo_* episodes (robomimic layout)")
    except DatasetError as err:
        raise DatasetError(f"{key}={err}" if not str(err).startswith(f"{key}=") else str(err)) from None
    except Exception as err:  # h5py's OSError/KeyError/TypeError for a damaged file or an unexpected layout
        raise DatasetError(f"{unreadable}: {one_line(err)}") from None
    raise DatasetError(f"{key}={main}: neither the Minari layout (episode_*/observations, actions) nor the robomimic "
                       "layout (data/demo_*/obs, actions)")  # fmt: skip


def _array(group: Any, name: str, where: str) -> np.ndarray:
    """`group[name]`, a dataset of one or more rows, as float64 `[T, ...]`."""
    import h5py

    if name not in group:
        raise DatasetError(f"{where} lacks {name!r} (it holds {', '.join(group) or 'nothing'})")
    item = group[name]
    if not isinstance(item, h5py.Dataset):
        raise DatasetError(f"{where}/{name} is a group, not an array")
    if item.ndim < 1 or item.shape[0] < 1:
        raise DatasetError(f"{where}/{name} has shape {list(item.shape)}: it must hold one row per step")
    try:
        value = np.asarray(item[()], dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise DatasetError(f"{where}/{name} holds {item.dtype} values, not numbers ({one_line(err)})") from None
    return value.reshape(len(value), -1)


def _json_attr(text: Any, where: str) -> dict[str, Any]:
    """A JSON object stored as text (an HDF5 attribute, a metadata file)."""
    try:
        value = json.loads(text.decode() if isinstance(text, bytes) else str(text))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DatasetError(f"{where} is not valid JSON ({err})") from None
    if not isinstance(value, dict):
        raise DatasetError(f"{where} is a JSON {type(value).__name__}, not an object")
    return value


def _flat_obs(group: Any, keys: list[str] | None, where: str, aliases: dict[str, str]) -> np.ndarray:
    """`[T, obs_dim]` float32: an HDF5 dataset as is, or a group's entries over `keys`, flattened per step."""
    import h5py

    if isinstance(group, h5py.Dataset):
        if keys is not None:
            raise DatasetError(f"{where}: the dataset's observations are one array, but the env observes a Dict "
                               f"(env.obs_keys={keys})")  # fmt: skip
        return _array({"observations": group}, "observations", where).astype(np.float32)
    if keys is None and len(group) == 1:  # one key (robomimic's `obs/state` of a Box env): its array is the Box
        return _array(group, next(iter(group)), where).astype(np.float32)
    if keys is None:
        raise DatasetError(f"{where}: the dataset's observations are a Dict ({', '.join(group)}), but the env "
                           "observes a Box")  # fmt: skip
    parts = []
    for key in keys:
        name = key if key in group else aliases.get(key, key)
        if name not in group:
            env_names = {v: k for k, v in aliases.items()}  # robomimic's `object` is the env's `object-state`
            has = ", ".join(env_names.get(k, k) for k in group)
            raise DatasetError(f"{where}: the env observes {key!r} (env.obs_keys={keys}), which the dataset lacks; "
                               f"it has {has}: choose the env's keys among them (env.obs_keys, or a robosuite "
                               "env's own env.kwargs.obs_keys)")  # fmt: skip
        parts.append(_array(group, name, where).astype(np.float32))
    rows = {len(part) for part in parts}
    if len(rows) > 1:
        raise DatasetError(f"{where}: its observation keys {keys} have different numbers of rows {sorted(rows)}")
    return np.concatenate(parts, axis=1)


def _dataset(episodes: list[tuple[np.ndarray, np.ndarray, int]], ident: dict[str, Any], env: Any, source: str,
             where: str, spaces: dict[str, Any] | None = None) -> DemoDataset:  # fmt: skip
    """Episodes of (obs [T, obs_dim], actions in the env's units [T, action_dim], seed) -> a `DemoDataset`."""
    from grpo_robot.environment import bounds_text
    from grpo_robot.gym_vector import unit_actions

    if not episodes:
        raise DatasetError(f"{where}: the dataset holds no episodes")
    dims = {a.shape[1] for _, a, _ in episodes}
    if dims != {env.action_dim}:
        raise DatasetError(f"{where}: the dataset's actions have {sorted(dims)} dimensions; {env.name} has "
                           f"{env.action_dim}")  # fmt: skip
    lengths = np.array([len(a) for _, a, _ in episodes], dtype=np.int64)
    for name, column in (("obs", 0), ("actions", 1)):  # before the actions are clipped into [-1, 1]
        check_finite(np.concatenate([e[column] for e in episodes]), lengths, f"{where}: {name}")
    low = getattr(env, "action_low", np.full(env.action_dim, -1.0))  # a built-in task acts in [-1, 1]
    high = getattr(env, "action_high", np.full(env.action_dim, 1.0))
    raw = np.concatenate([a for _, a, _ in episodes])
    outside = (raw < low) | (raw > high)
    if outside.any():  # clipped to the Box, as the env would clip them; said, not silent
        row, col = (int(v[0]) for v in np.nonzero(outside))
        e = int(np.searchsorted(np.cumsum(lengths), row, side="right"))
        log.warning("%s: %d of its %d action values lie outside %s's bounds (%s) and are clipped to them; the first "
                    "is %g (episode %d, step %d, dimension %d)", where, int(outside.sum()), outside.size, env.name,
                    bounds_text(low, high), float(raw[row, col]), e, row - int(np.sum(lengths[:e])), col)  # fmt: skip
    actions = unit_actions(raw, low, high)
    obs = np.concatenate([o for o, _, _ in episodes])
    keys = getattr(env, "obs_keys", None)
    data = DemoDataset(
        obs=obs,
        actions=actions,
        expert_actions=actions,
        lengths=lengths,
        seeds=np.array([s for _, _, s in episodes], dtype=np.int64),
        env={
            **ident,
            "obs_keys": None if keys is None else list(keys),
            "obs_dim": obs.shape[1],
            "action_dim": actions.shape[1],
        },
        source=source,
        spaces=spaces or {},
    )
    data.check(where)
    return data


def _numbered(group: Any, prefix: str, where: str) -> list[str]:
    """The names in `group` that start with `prefix` (`episode_`, `demo`), in the order of the
    number they end in (`demo_2` before `demo_10`); a name without one raises `DatasetError`."""
    names = [k for k in group if k.startswith(prefix)]
    bad = next((k for k in names if not re.search(r"\d$", k)), None)
    if bad is not None:
        pattern = f"{prefix}<i>" if prefix.endswith("_") else f"{prefix}_<i>"
        raise DatasetError(f"{where}/{bad}: an episode group is named {pattern}, with i its number")
    return sorted(names, key=lambda k: int(re.search(r"\d+$", k).group()))  # type: ignore[union-attr]


def _minari(f: Any, main: Path, cfg: EnvConfig, env: Any) -> DemoDataset:
    """Minari's HDF5 layout: `episode_<i>/observations` (T + 1 rows: the last observation too, a
    group per Dict key), `episode_<i>/actions` (T rows), attributes `seed`, `total_steps`; the env in
    `metadata.json` (its `env_spec`) next to `main_data.hdf5`."""
    where = str(main)
    keys = getattr(env, "obs_keys", None)
    episodes, failed, judged = [], [], 0
    for name in _numbered(f, "episode_", where):
        group = f[name]
        if "observations" not in group:
            raise DatasetError(f"{where}/{name} lacks 'observations' (it holds {', '.join(group) or 'nothing'})")
        actions = _array(group, "actions", f"{where}/{name}")
        obs = _flat_obs(group["observations"], keys, f"{where}/{name}/observations", {})[: len(actions)]
        if len(obs) != len(actions):
            raise DatasetError(f"{where}/{name}: {len(obs)} observations for {len(actions)} actions")
        seed = group.attrs.get("seed")
        episodes.append((obs, actions, int(seed) if isinstance(seed, int | np.integer) else -1))
        infos = group.get("infos")
        flag = next((infos[k] for k in SUCCESS_INFOS if infos is not None and k in infos), None)
        if flag is not None:  # the env's own success flag, step by step
            judged += 1
            if not np.asarray(flag[()]).astype(bool).any():
                failed.append(name)
    if failed:  # cloning copies what the episodes do: failures included
        log.warning("%s: %d of %d episodes never succeed (their infos/%s), and are cloned like the others: %s",
                    where, len(failed), judged, "is_success or success", ", ".join(failed[:5])
                    + (", ..." if len(failed) > 5 else ""))  # fmt: skip
    ident: dict[str, Any] = {}
    spaces: dict[str, Any] = {}
    meta_path = main.parent / "metadata.json"
    if meta_path.is_file():
        meta = _json_attr(meta_path.read_bytes(), str(meta_path))
        spaces = {k.removesuffix("_space"): meta[k] for k in ("observation_space", "action_space") if k in meta}
        spaces.update(_box_bounds(spaces.get("action"), f"{meta_path}: action_space"))
        spec = meta.get("env_spec")
        spec = _json_attr(spec, f"{meta_path}: env_spec") if isinstance(spec, str) else spec
        if spec is not None and not isinstance(spec, dict):
            raise DatasetError(f"{meta_path}: env_spec is a {type(spec).__name__}, not an object")
        if spec:
            wrappers = [w.get("name", "?") if isinstance(w, dict) else str(w)
                        for w in spec.get("additional_wrappers") or []]  # fmt: skip
            if wrappers:  # its observations or actions are the wrappers', which the env as configured does not apply
                raise DatasetError(
                    f"{meta_path}: recorded through the wrappers {', '.join(wrappers)} (env_spec.additional_wrappers), "
                    "which change what the env observes or takes; this toolkit builds the env without them: record "
                    "the dataset on the bare env"
                )  # fmt: skip
            ident = {"id": spec.get("id"), "kwargs": spec.get("kwargs") or {}}
            from grpo_robot.environment import registered_entry_point

            entry = spec.get("entry_point")  # the class it was made from: the same env as a config naming it
            entry = entry if isinstance(entry, str) and entry else registered_entry_point(ident["id"])
            if entry:
                ident["entry_point"] = entry
        source = f"minari {meta.get('dataset_id', main.parent.parent.name)}"
    else:
        source = f"minari {main}"
    if not ident:  # no recorded env: trust the config's
        ident = {**{k: v for k, v in _config_ident(cfg).items() if k in ("id", "entry_point")}, "partial_kwargs": True}
    return _dataset(episodes, ident, env, source, where, spaces)


def _box_bounds(space: Any, where: str) -> dict[str, list[float]]:
    """`action_low` and `action_high` of a Box serialized as Minari's metadata holds it (a JSON
    string of type, dtype, shape, low, high): the bounds the dataset's actions were recorded in,
    which `DemoDataset.check_compatible` compares with the env's. Empty for another space."""
    space = _json_attr(space, where) if isinstance(space, str | bytes) else space
    if not isinstance(space, dict) or space.get("type") != "Box" or "low" not in space or "high" not in space:
        return {}
    low, high = (np.ravel(np.asarray(space[k], dtype=np.float64)).tolist() for k in ("low", "high"))
    return {"action_low": low, "action_high": high}


def _robomimic(f: Any, main: Path, cfg: EnvConfig, env: Any, filter_key: str | None = None,
               filter_name: str = "demos.filter_key") -> DemoDataset:  # fmt: skip
    """robomimic's (and robosuite's converted) layout: `data/demo_<i>/obs/<key>` and
    `data/demo_<i>/actions` (T rows each), `data.attrs["env_args"]` a JSON object with `env_name`
    and `env_kwargs`. robomimic names robosuite's `object-state` observation `object`."""
    where = str(main)
    keys = getattr(env, "obs_keys", None)
    data = f["data"]
    episodes, empty = [], []
    names = _numbered(data, "demo", f"{where}/data")
    masks = sorted(f["mask"]) if "mask" in f else []
    if filter_key is not None:
        if filter_key not in masks:
            raise DatasetError(f"{where} has no filter key {filter_key!r} (its mask/ holds "
                               f"{', '.join(masks) or 'nothing'})")  # fmt: skip
        listed = {m.decode() if isinstance(m, bytes) else str(m) for m in f["mask"][filter_key][()]}
        missing = sorted(listed - set(names))
        if missing:
            raise DatasetError(f"{where}: mask/{filter_key} lists {', '.join(missing[:3])}, which data/ lacks")
        names = [n for n in names if n in listed]
    elif masks:
        log.warning("%s: every demo is cloned; its filter keys (mask/: %s) are not used (%s=<key> picks one)",
                    where, ", ".join(masks), filter_name)  # fmt: skip
    for name in names:
        group = data[name]
        if getattr(group.get("actions"), "shape", (1,))[:1] == (0,):  # one empty demo used to refuse the file
            empty.append(name)
            continue
        if "obs" not in group:
            raise DatasetError(f"{where}/data/{name} lacks 'obs' (it holds {', '.join(group) or 'nothing'})")
        actions = _array(group, "actions", f"{where}/data/{name}")
        obs = _flat_obs(group["obs"], keys, f"{where}/data/{name}/obs", ROBOMIMIC_KEYS)
        if len(obs) != len(actions):
            raise DatasetError(f"{where}/data/{name}: {len(obs)} observations for {len(actions)} actions")
        episodes.append((obs, actions, -1))
    if empty and episodes:
        log.warning("%s: %d of its %d demos hold no steps and are left out (%s)", where, len(empty), len(names),
                    ", ".join(empty[:5]) + (" ..." if len(empty) > 5 else ""))  # fmt: skip
    ident: dict[str, Any] = {}
    if "env_args" in data.attrs:
        args = _json_attr(data.attrs["env_args"], f"{where}: data.attrs['env_args']")
        kwargs = dict(args.get("env_kwargs") or {})
        _check_controller(kwargs, cfg, where)
        # robomimic records the robosuite env's own kwargs: of those, the ones the adapter takes by the same name and
        # meaning (control_freq: a demo recorded at another rate replays as other motions)
        recorded = {k: v for k, v in kwargs.items() if k in ("robots", "control_freq")}
        ident = {"kwargs": {"env_name": args.get("env_name"), **recorded}, "partial_kwargs": True}
        if isinstance(ident["kwargs"].get("robots"), list) and len(ident["kwargs"]["robots"]) == 1:
            ident["kwargs"]["robots"] = ident["kwargs"]["robots"][0]
    mine = _config_ident(cfg)
    ident = {**{k: v for k, v in mine.items() if k in ("id", "entry_point")}, **ident}  # the env_name decides
    return _dataset(episodes, ident, env, f"robomimic {main.name}", where)


def _check_controller(recorded: dict[str, Any], cfg: EnvConfig, where: str) -> None:
    """A robomimic file's demos act through the arm controller its `env_kwargs.controller_configs`
    records (robomimic's datasets: OSC_POSE, deltas; some convert them to absolute targets): under
    another one (a joint controller, absolute against delta) the same numbers are other motions,
    often of the same size, so nothing else would refuse them. Checked for this project's robosuite
    adapter, where the config's `controller` (or `controller_configs`) says what the env runs."""
    if recorded.get("controller_configs") is None or cfg.entry_point != ROBOSUITE_ENTRY_POINT:
        return
    from grpo_robot.envs.robosuite_env import arm_controllers

    theirs = arm_controllers({"robots": recorded.get("robots", cfg.kwargs.get("robots", "Panda")),
                              "controller_configs": recorded["controller_configs"]})  # fmt: skip
    mine = arm_controllers(dict(cfg.kwargs))
    if theirs is None or mine is None or theirs == mine:
        return

    def said(arms: list[dict[str, str]]) -> str:
        return "; ".join(", ".join(f"{arm} arm {kind}" for arm, kind in robot.items()) for robot in arms)

    setting = next((f"kwargs.{k}={cfg.kwargs[k]!r}" for k in ("controller_configs", "controller")
                    if cfg.kwargs.get(k) is not None), "the robot's default controller")  # fmt: skip
    raise DatasetError(f"{where}: its demos were recorded with {said(theirs)}, and the env runs {said(mine)}, "
                       f"from {setting}: their actions would replay as other motions; give the env the dataset's "
                       "controller (env.kwargs.controller=<name or .json>, or env.kwargs.controller_configs)")


def _config_ident(cfg: EnvConfig) -> dict[str, Any]:
    from grpo_robot.environment import env_identity

    return env_identity(cfg)
