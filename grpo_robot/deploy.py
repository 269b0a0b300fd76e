"""A trained policy in your own loop: `load_policy(checkpoint)` -> a callable from the env's own
observation to the env's own action.

    from grpo_robot import load_policy

    policy = load_policy("runs/train/<date>_<time>")   # a run (its last.pt), or any checkpoint: best.pt, bc.pt
    env = policy.make_env()                            # the Gymnasium env it was trained on, one world
    obs, info = env.reset(seed=0)
    while True:
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        if terminated or truncated:
            break

`make_env()` ends an episode at the run's horizon and, with `env.outcome=any_step` (the default),
at its first success, judged as training judged it and given in `info["is_success"]`, as
training did. `policy(obs)` takes an
observation as the env returns it (a Box's array, or a Dict, of which it
reads the keys it was trained on, in their order) and returns the action in the env's Box: the
[-1, 1] action the policy emits, mapped onto the bounds it was trained with, as training stepped
it (flat float32, until `make_env()` or `env=` gives the env's own action shape and dtype). A
non-finite observation is refused in one line. The mean action by default
(`deterministic=False` samples, from a stream of `seed`); a tokenized policy decodes as it was
trained to, or as `decode=` says. `policy.act(batch)` does the same for a batch (an array
`[N, ...]`, or a Dict of such arrays), as a vector env returns it.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch

from grpo_robot.config import EnvConfig, to_train_config
from grpo_robot.gym_vector import ActionMap, MissingSuccessKey, SuccessRule, flatten_obs


class TrainedPolicy:
    """A checkpoint's policy acting in its env's units (see the module's docstring)."""

    def __init__(self, ckpt: dict[str, Any], path: Path, device: str | torch.device = "cpu",
                 deterministic: bool = True, seed: int = 0, decode: str | None = None) -> None:  # fmt: skip
        from grpo_robot import checkpoint
        from grpo_robot.config.validate import validate_device
        from grpo_robot.device import resolve_device
        from grpo_robot.registry import DECODES

        validate_device(str(device))
        if not isinstance(seed, int | np.integer):
            raise ValueError(f"seed={seed!r} is invalid: must be an integer")
        self.path = path
        self.device = resolve_device(str(device))
        self.policy = checkpoint.policy_from_record(ckpt["policy"], self.device).eval()
        if decode is not None:
            if decode not in DECODES:
                raise ValueError(f"decode={decode!r} is invalid: must be None or one of {', '.join(DECODES)}")
            if not deterministic:
                raise ValueError(f"decode={decode!r} chooses the deterministic action; with deterministic=False "
                                 "the action is sampled")  # fmt: skip
            if getattr(self.policy, "decode", None) is None:
                raise ValueError(f"decode={decode!r} is for a tokenized policy; {path} holds a "
                                 f"{type(self.policy).__name__}")  # fmt: skip
            self.policy.decode = decode
        self.deterministic = bool(deterministic)
        self.generator = torch.Generator(self.device).manual_seed(int(seed))
        self.env_config: EnvConfig = to_train_config(ckpt["config"]).env
        self.obs_dim, self.action_dim = int(ckpt["policy"]["obs_dim"]), int(ckpt["policy"]["action_dim"])
        ident = ckpt.get("env_identity") if isinstance(ckpt.get("env_identity"), dict) else {}
        self._identity = ident
        keys = ident.get("obs_keys", self.env_config.obs_keys)
        self.obs_keys: list[str] | None = None if keys is None else [str(k) for k in keys]
        low, high = ident.get("action_low"), ident.get("action_high")
        if low is None or high is None:  # a built-in task (its actions are [-1, 1]) or an older record
            low, high = -np.ones(self.action_dim), np.ones(self.action_dim)
            self._bounds_recorded = bool(self.env_config.task)
        else:
            self._bounds_recorded = True
        self.action_low, self.action_high = np.asarray(low, np.float64), np.asarray(high, np.float64)
        self._to_env = ActionMap(self.action_low, self.action_high, (self.action_dim,), np.float32)

    def __repr__(self) -> str:
        return (f"TrainedPolicy({self.path}, {type(self.policy).__name__}, obs_dim={self.obs_dim}, "
                f"action_dim={self.action_dim}, deterministic={self.deterministic})")  # fmt: skip

    # -- acting ------------------------------------------------------------------------------------
    def __call__(self, obs: Any) -> np.ndarray:
        """One observation, as the env returned it -> one action in the env's Box."""
        flat = self._flat(obs)
        return self._to_env(self._unit_actions(flat[None])[0])

    def act(self, obs: Any) -> np.ndarray:
        """A batch of observations (`[N, ...]`, or a Dict of `[N, ...]` arrays) -> `[N, ...]` actions."""
        if isinstance(obs, dict):
            read = self.obs_keys if self.obs_keys is not None else list(obs)
            if all(np.ndim(obs[k]) < 2 for k in read if k in obs):
                raise ValueError(f"{self.path}: act() takes a batch, a Dict of [N, ...] arrays, got one of vectors; "
                                 "one observation goes to policy(obs)")  # fmt: skip
            arrays = {k: np.asarray(obs[k]) for k in read if k in obs}  # once, not per row (lists are copied)
            sizes = {k: len(a) if a.ndim else 0 for k, a in arrays.items()}
            if len(set(sizes.values())) > 1:
                raise ValueError(f"{self.path}: act() was given a Dict whose arrays hold different numbers of rows "
                                 f"({', '.join(f'{k}: {n}' for k, n in sizes.items())})")  # fmt: skip
            n = next(iter(sizes.values()), 0)
            rows = [{k: a[i] for k, a in arrays.items()} for i in range(n)]
        else:
            batch = np.asarray(obs)
            if batch.ndim < 2:
                raise ValueError(f"{self.path}: act() takes a batch [N, ...] of observations, got an array of shape "
                                 f"{batch.shape}; one observation goes to policy(obs)")  # fmt: skip
            rows = list(batch)
        if not rows:
            raise ValueError(f"{self.path}: act() was given no observations")
        flat = np.stack([self._flat(row) for row in rows])
        return np.stack([self._to_env(a) for a in self._unit_actions(flat)])

    def _flat(self, obs: Any) -> np.ndarray:
        if not self._bounds_recorded:
            raise ValueError(f"{self.path} records no action bounds (a checkpoint from before they were kept): "
                             "give load_policy your env (env=...), or use policy.make_env(), to take them from it")
        try:
            flat = flatten_obs(obs, self.obs_keys, self.obs_dim, f"{self.path.name}'s policy takes")
        except (ValueError, TypeError) as err:
            raise ValueError(f"{self.path}: {err}") from None
        if not np.isfinite(flat).all():  # as training fails a world on one, never an action from it
            k = int(np.flatnonzero(~np.isfinite(flat))[0])
            raise ValueError(f"{self.path}: its observation holds a non-finite value ({flat[k]} at flat index {k})")
        return flat

    @torch.no_grad()
    def _unit_actions(self, flat: np.ndarray) -> np.ndarray:
        obs = torch.as_tensor(flat, dtype=torch.float32, device=self.device)
        _, action, _ = self.policy.sample(obs, None if self.deterministic else self.generator, self.deterministic)
        return action.float().cpu().numpy()

    # -- export ----------------------------------------------------------------------------------------
    def export(self, path: str | Path) -> Path:
        """Write the deterministic policy as a `torch.export` program (`.pt2`), for a process that
        has torch but not this package (a robot's computer): `torch.export.load(path).module()(obs)`
        maps flat float32 observations `[N, obs_dim]` (a Dict's `meta["obs_keys"]`, concatenated in
        that order; a 2-D float32 tensor) to float32 actions `[N, action_dim]` in the env's Box, the
        values `act` gives, bit for bit; a row whose observation is not finite gives NaN actions (where
        `act` refuses it), so check them before they reach a robot. Its extra file `meta.json`
        (`torch.export.load(path, extra_files={"meta.json": ""})`) names the env, the observation keys
        and sizes, the action bounds and the decode.
        -> the path written (atomically)."""
        import io
        import json

        from grpo_robot.checkpoint import write_bytes_atomic

        if not self.deterministic:
            raise ValueError("export writes the deterministic action; load the policy with deterministic=True")
        if not self._bounds_recorded:
            raise ValueError(f"{self.path} records no action bounds: give load_policy your env (env=...) to export it")
        module = _Exported(copy.deepcopy(self.policy), self._to_env).to(self.device).eval().requires_grad_(False)
        module.policy.obs_norm.clear_cache()  # cast again inside the export: a cached cast made torch.export warn
        example = torch.zeros(2, self.obs_dim, device=self.device)
        with torch.no_grad():
            program = torch.export.export(module, (example,), dynamic_shapes=({0: torch.export.Dim("batch")},))
        meta = {"checkpoint": str(self.path), "env": dataclasses.asdict(self.env_config),
                "env_identity": self._identity, "obs_keys": self.obs_keys, "obs_dim": self.obs_dim,
                "action_dim": self.action_dim, "action_low": self.action_low.tolist(),
                "action_high": self.action_high.tolist(), "policy": type(self.policy).__name__,
                "decode": getattr(self.policy, "decode", None)}  # fmt: skip
        buffer = io.BytesIO()
        torch.export.save(program, buffer, extra_files={"meta.json": json.dumps(meta, default=str)})
        write_bytes_atomic(path, buffer.getbuffer())
        return Path(path)

    # -- the env ---------------------------------------------------------------------------------------
    def make_env(self, **kwargs: Any):
        """The Gymnasium env this policy was trained on, one world, built as training built it (its
        id or entry point, kwargs, horizon; a built-in task at the version it trained on);
        `kwargs` are added to its own (`render_mode="rgb_array"`, a camera)."""
        cfg = self.env_config
        if cfg.task:
            version = self._identity.get("version")
            from grpo_robot.envs import TASK_NAMES

            name = TASK_NAMES[cfg.task].name if cfg.task in TASK_NAMES else cfg.task
            task_id = f"{name}-v{version}" if version is not None else cfg.task
            options = {"horizon": cfg.horizon, "terminate_on_success": cfg.outcome != "final_step", **kwargs}
            return gymnasium.make(f"grpo_robot/{task_id}", **options)
        from grpo_robot.gym_vector import make_inner

        env = make_inner(dataclasses.replace(cfg, kwargs={**cfg.kwargs, **kwargs}))
        self.check_env(env)
        if cfg.horizon is not None and not cfg.id:  # an env.id's own TimeLimit is set to it already
            env = gymnasium.wrappers.TimeLimit(env, cfg.horizon)
        if cfg.outcome != "final_step":
            env = EndsAtSuccess(env, cfg)
        return env

    def check_env(self, env: Any) -> None:
        """A one-line `ValueError` unless `env` (a Gymnasium env) observes and acts as this policy was
        trained: the observation's flat size (over the keys it read) and the action's size and bounds."""
        from gymnasium import spaces

        obs_space, act = env.observation_space, env.action_space
        if isinstance(env, gymnasium.vector.VectorEnv):  # one world's spaces; its batches go to act()
            obs_space, act = env.single_observation_space, env.single_action_space
        ident, task = self._identity, getattr(getattr(env, "unwrapped", env), "task", None)
        if self.env_config.task and ident.get("version") is not None and getattr(task, "version", None) is not None:
            if (task.name, task.version) != (ident["task"], ident["version"]):
                raise ValueError(f"{self.path} was trained on {ident['task']}-v{ident['version']}; the env is "
                                 f"{task.name}-v{task.version}")  # fmt: skip
        if self.obs_keys is not None:
            if not isinstance(obs_space, spaces.Dict) or any(k not in obs_space.spaces for k in self.obs_keys):
                raise ValueError(f"{self.path} was trained on the Dict keys {self.obs_keys}; the env observes "
                                 f"{obs_space}")  # fmt: skip
            size = sum(int(np.prod(obs_space[k].shape)) for k in self.obs_keys)
        elif obs_space.shape is None:
            raise ValueError(f"{self.path} was trained on a Box observation; the env observes {obs_space}")
        else:
            size = int(np.prod(obs_space.shape))
        if size != self.obs_dim or int(np.prod(act.shape)) != self.action_dim:
            raise ValueError(f"{self.path} takes {self.obs_dim} observation values and gives {self.action_dim} "
                             f"actions; the env observes {size} and acts with {int(np.prod(act.shape))}")  # fmt: skip
        low, high = np.ravel(act.low).astype(np.float64), np.ravel(act.high).astype(np.float64)
        same = np.array_equal(low, self.action_low) and np.array_equal(high, self.action_high)
        if self._bounds_recorded and not same:
            from grpo_robot.environment import bounds_text

            trained = bounds_text(self.action_low, self.action_high)
            raise ValueError(f"{self.path} was trained on action bounds {trained}; the env's are "
                             f"{bounds_text(low, high)}")  # fmt: skip
        if not self._bounds_recorded:  # an older record: the env's own bounds are the ones it trained on
            self.action_low, self.action_high, self._bounds_recorded = low, high, True
            self._to_env = ActionMap(low, high, (self.action_dim,), np.float32)
        self._to_env.shape, self._to_env.dtype = tuple(act.shape), np.dtype(act.dtype)


class _Exported(torch.nn.Module):
    """The deterministic policy and the [-1, 1] -> env Box mapping of `ActionMap`, in torch."""

    def __init__(self, policy: torch.nn.Module, mapping: ActionMap) -> None:
        super().__init__()
        self.policy = policy
        for name in ("_low0", "_span0", "_offset", "_scaled"):
            self.register_buffer(name.lstrip("_"), torch.as_tensor(getattr(mapping, name)))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        action = self.policy.sample(obs, None, True)[1]
        a = action.to(torch.float64).clamp(-1.0, 1.0)
        mapped = torch.where(self.scaled, self.low0 + (a + 1.0) * 0.5 * self.span0, a + self.offset)
        # a row with a non-finite observation gives NaN actions, never a plausible command (a tokenized
        # mode or median turned a NaN into a full-scale action); `policy(obs)` refuses such a row instead
        finite = torch.isfinite(obs).all(dim=-1, keepdim=True)
        return torch.where(finite, mapped, torch.full_like(mapped, float("nan"))).to(torch.float32)


class EndsAtSuccess(gymnasium.Wrapper):
    """A Gymnasium env whose episode terminates at its first success, judged as training judged it
    (`env.success_key` in the info, or `env.success_fn`), as training ended it with
    `env.outcome=any_step`; `info["is_success"]` carries the judgement at each step."""

    def __init__(self, env: gymnasium.Env, cfg: EnvConfig) -> None:
        super().__init__(env)
        self.is_success = SuccessRule(cfg)

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        try:
            success = self.is_success(obs, info)
        except MissingSuccessKey as err:  # training fails such a world: never read as "not yet"
            raise ValueError(err.args[0]) from None
        return obs, reward, bool(terminated) or success, truncated, {**info, "is_success": success}


def load_policy(checkpoint: str | Path, device: str | torch.device = "cpu", deterministic: bool = True,
                seed: int = 0, decode: str | None = None, env: Any = None) -> TrainedPolicy:  # fmt: skip
    """A checkpoint's policy as a callable from the env's observation to the env's action (see
    `grpo_robot.deploy`). `checkpoint`: a run directory (its `checkpoints/last.pt`, as
    `scripts/evaluate.py` takes it) or a `.pt`; `device`: `cpu`, `cuda` or `auto`; `env`: your
    own instance of the env, checked against what the policy was trained on (the spaces' sizes and
    the action bounds), whose action shape and dtype the actions then take."""
    from grpo_robot import checkpoint as ckpt_module

    path = ckpt_module.resolve(checkpoint)
    ckpt = ckpt_module.load(path, map_location="cpu", purpose="evaluate")
    trained = TrainedPolicy(ckpt, path, device, deterministic, seed, decode)
    if env is not None:
        trained.check_env(env)
    return trained
