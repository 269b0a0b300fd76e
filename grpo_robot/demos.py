"""Demonstrations: the scripted expert's successful episodes, stored as one `.npz` file.

File format (`numpy.savez_compressed`, loadable with `allow_pickle=False`), version 1:

  obs            float32 [S, obs_dim]     observation each action was taken from, episodes back to back
  actions        float32 [S, action_dim]  action executed (the expert's plus noise, clipped to [-1, 1])
  expert_actions float32 [S, action_dim]  the expert's own action at that observation (the BC label)
  lengths        int64   [E]              steps of each episode; episode e is rows sum(lengths[:e]) ...
  seeds          int64   [E]              reset seed of each episode (replaying `actions` from it succeeds)
  task           str                      built-in task name, e.g. "PushCube"
  task_version   int                      the task's version; a dataset of another version is refused
  noise          float                    std of the Gaussian action noise used while collecting
  format_version int                      1

Noise is injected into the executed actions only: the labels stay the expert's choices, while
the states visited spread around the expert's path, so a cloned policy sees how to recover.
Demo seeds come from their own range (grpo_robot/seeding.py), away from training and evaluation seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from grpo_robot.batched import BatchedEnv
from grpo_robot.checkpoint import atomic_file
from grpo_robot.envs import Task, make_task
from grpo_robot.seeding import check_demo_seed, demo_seeds

FORMAT_VERSION = 1


@dataclass
class DemoDataset:
    obs: np.ndarray
    actions: np.ndarray
    expert_actions: np.ndarray
    lengths: np.ndarray
    seeds: np.ndarray
    task: str
    task_version: int
    noise: float

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
                obs=self.obs,
                actions=self.actions,
                expert_actions=self.expert_actions,
                lengths=self.lengths,
                seeds=self.seeds,
                task=np.array(self.task),
                task_version=np.array(self.task_version),
                noise=np.array(self.noise),
                format_version=np.array(FORMAT_VERSION),
            )
        return path

    @classmethod
    def load(cls, path: str | Path) -> DemoDataset:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no demo dataset at {path}")
        with np.load(path, allow_pickle=False) as f:
            version = int(f["format_version"]) if "format_version" in f else None
            if version != FORMAT_VERSION:
                raise ValueError(f"{path}: demo format version {version!r}, this toolkit reads {FORMAT_VERSION}")
            data = cls(
                obs=f["obs"],
                actions=f["actions"],
                expert_actions=f["expert_actions"],
                lengths=f["lengths"],
                seeds=f["seeds"],
                task=str(f["task"]),
                task_version=int(f["task_version"]),
                noise=float(f["noise"]),
            )
        steps = int(data.lengths.sum())
        if not (len(data.obs) == len(data.actions) == len(data.expert_actions) == steps):
            raise ValueError(f"{path}: obs/actions rows do not match the episode lengths (sum {steps})")
        return data

    def check_compatible(self, task: Task, source: str = "dataset") -> None:
        """Refuse a dataset recorded on another task, task version or observation/action size."""
        mine = (self.task, self.task_version, self.obs_dim, self.action_dim)
        theirs = (task.name, task.version, task.obs_dim, task.action_dim)
        if mine != theirs:
            raise ValueError(
                f"{source} holds {self.task}-v{self.task_version} demos (obs_dim={self.obs_dim}, "
                f"action_dim={self.action_dim}), but the config trains {task.name}-v{task.version} "
                f"(obs_dim={task.obs_dim}, action_dim={task.action_dim})"
            )


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
) -> tuple[DemoDataset, CollectStats]:
    """Run the scripted expert until `episodes` successful episodes are kept.

    Episode k starts from `seeding.demo_seeds(seed, k, 1)`; the action noise
    comes from a generator seeded by `seed`, so a call is reproducible. Failed episodes are
    dropped. Raises `RuntimeError` if fewer than `episodes` succeed within `max_attempts`
    (default 10 x episodes + 64).
    """
    if episodes < 1:
        raise ValueError(f"episodes={episodes} is invalid: must be >= 1")
    if noise < 0:
        raise ValueError(f"noise={noise} is invalid: must be >= 0")
    check_demo_seed(seed)
    task = make_task(task) if isinstance(task, str) else task
    max_attempts = 10 * episodes + 64 if max_attempts is None else max_attempts
    rng = np.random.default_rng([seed, 7])
    batch_size = min(batch_size, max_attempts)
    env = BatchedEnv(task, batch_size, nthread=nthread)
    kept: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
    attempted = failed = 0
    while len(kept) < episodes and attempted < max_attempts:
        seeds = demo_seeds(seed, attempted, batch_size)
        obs = env.reset(seeds)
        obs_steps, act_steps, label_steps = [], [], []
        while not env.done.all():
            label = task.expert(obs).astype(np.float32)
            act = label + (noise * rng.standard_normal(label.shape)).astype(np.float32)
            act = np.clip(act, -1.0, 1.0)
            obs_steps.append(obs)
            act_steps.append(act)
            label_steps.append(label)
            obs, *_ = env.step(act)
        for w in range(min(batch_size, max_attempts - attempted)):  # in seed order, until enough
            attempted += 1
            failed += int(env.failed[w])
            if env.terminated[w]:
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
        raise RuntimeError(
            f"the {task.name} expert succeeded in only {len(kept)} of {attempted} episodes with noise={noise}; "
            f"lower the noise or raise max_attempts"
        )
    lengths = np.array([len(k[1]) for k in kept], dtype=np.int64)
    data = DemoDataset(
        obs=np.concatenate([k[1] for k in kept]).astype(np.float32),
        actions=np.concatenate([k[2] for k in kept]),
        expert_actions=np.concatenate([k[3] for k in kept]),
        lengths=lengths,
        seeds=np.array([k[0] for k in kept], dtype=np.int64),
        task=task.name,
        task_version=task.version,
        noise=float(noise),
    )
    return data, CollectStats(attempted, len(kept), failed, float(lengths.mean()))


def replay(data: DemoDataset, task: Task | None = None) -> np.ndarray:
    """Re-run each episode's executed actions from its seed -> `bool [E]` success at its last step."""
    task = make_task(data.task) if task is None else task
    env = BatchedEnv(task, data.n_episodes, nthread=1)
    env.reset(data.seeds)
    starts = np.concatenate([[0], np.cumsum(data.lengths)[:-1]])
    for t in range(int(data.lengths.max())):
        rows = np.minimum(starts + t, starts + data.lengths - 1)
        env.step(data.actions[rows])
    return env.terminated & (env.steps == data.lengths)
