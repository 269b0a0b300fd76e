"""The physical limit of `BatchedEnv`: the episodes it ran, replayed open-loop through
`mujoco.rollout` alone.

An episode plan fixes the world seeds and the action stream of each batched episode, so the
timed plain loop (`run_batched`) and the untimed recording pass (`record_batched`) go through
the same episodes. `LimitReplay` feeds the recorded start states, controls and mocap positions
to one `Rollout.rollout` call per episode (per distinct episode length, when a recording holds
each world's length), with no state or sensor outputs. One long call
warm-starts the constraint solver across control steps, which `BatchedEnv` does not (it starts
each control step cold): the physics cost per step is comparable, the trajectories are not
bit-identical beyond the first control step.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from grpo_robot.batched import ACTION_MATRIX, ACTION_OFFSET, CONTROL_SPEC, BatchedEnv, PhysicsPool


@dataclass(frozen=True)
class Episode:
    """One batched episode: the seeds of its B worlds and the seed of its action stream."""

    world_seeds: np.ndarray
    action_seed: int


def episode_plan(seed: int, num_worlds: int, num_episodes: int) -> list[Episode]:
    """Episodes with fresh world seeds each, so every reset draws new starts."""
    return [
        Episode(
            world_seeds=seed * 1_000_003 + i * num_worlds + np.arange(num_worlds, dtype=np.int64),
            action_seed=seed * 7_919 + i,
        )
        for i in range(num_episodes)
    ]


def run_batched(env: BatchedEnv, plan: Sequence[Episode]) -> tuple[int, float]:
    """The plain loop, timed: `(live control steps, seconds)`, resets included. Uniform random
    actions in [-1, 1]; only the steps of live worlds count."""
    shape = (env.num_worlds, env.action_dim)
    live = 0
    start = time.perf_counter()
    for ep in plan:
        rng = np.random.default_rng(ep.action_seed)
        env.reset(ep.world_seeds)
        while not env.done.all():
            info = env.step(rng.uniform(-1.0, 1.0, shape))[4]
            live += int(info["active"].sum())
    return live, time.perf_counter() - start


@dataclass
class Recording:
    """What one batched episode fed the physics: start states, mocap positions, actions."""

    state0: np.ndarray  # [B, nstate]
    mocap_pos: np.ndarray  # [B, 3 * nmocap]
    actions: np.ndarray  # [horizon, B, action_dim]; rows after the last step stay 0
    live_steps: int = 0
    failed: int = 0  # worlds whose physics failed (non-finite or runaway state)
    lengths: np.ndarray | None = None  # [B] control steps each world took; None: the full horizon


def record_batched(env: BatchedEnv, plan: Sequence[Episode]) -> list[Recording]:
    """Re-run the plan (untimed) and keep what the physics received, mirroring `run_batched`."""
    shape = (env.num_worlds, env.action_dim)
    recordings = []
    for ep in plan:
        rng = np.random.default_rng(ep.action_seed)
        env.reset(ep.world_seeds)
        rec = Recording(env.state.copy(), env.mocap_pos.copy(), np.zeros((env.horizon, *shape)))
        t = 0
        while not env.done.all():
            rec.actions[t] = rng.uniform(-1.0, 1.0, shape)
            info = env.step(rec.actions[t])[4]
            rec.live_steps += int(info["active"].sum())
            t += 1
        rec.failed = int(env.failed.sum())
        recordings.append(rec)
    return recordings


class LimitReplay:
    """Open-loop replay of recorded episodes of `env` through `mujoco.rollout` only.

    Every replayed world runs the full horizon, `horizon * n_substeps` physics steps, each
    control held for `n_substeps` steps, with `nthread` threads as `BatchedEnv` uses them. A
    recording with `lengths` replays each world for its own episode only: the worlds of each
    distinct length in one call, so an episode that ended early costs what it cost in training,
    not a rest to the horizon with zero actions.
    """

    def __init__(self, env: BatchedEnv, nthread: int) -> None:
        m = env.model
        self.nsub = env.task.n_substeps
        self.nstep = env.horizon * self.nsub
        self.nu = m.nu
        # same pool layout as BatchedEnv: 0 threads runs on the calling thread
        self.pool = PhysicsPool(nthread)
        self.datas = [mujoco.MjData(m) for _ in range(max(nthread, 1))]
        self.models = [m] * env.num_worlds
        ncontrol = mujoco.mj_stateSize(m, CONTROL_SPEC)
        self.control = np.zeros((env.num_worlds, self.nstep, ncontrol))  # C-contiguous float64
        self.state0 = np.zeros((env.num_worlds, env.task.nstate))
        self.jobs: list[tuple] = []  # the loaded episode's calls (`load`)

    def load(self, rec: Recording) -> None:
        """Lay out one episode as CONTROL_SPEC expects: [ctrl (nu), mocap_pos (3*nmocap)]."""
        ctrl = rec.actions @ ACTION_MATRIX.T + ACTION_OFFSET  # [horizon, B, nu]
        # each control step holds its ctrl for n_substeps physics steps
        self.control[:, :, : self.nu] = np.repeat(ctrl.transpose(1, 0, 2), self.nsub, axis=1)
        self.control[:, :, self.nu :] = rec.mocap_pos[:, None, :]
        self.state0[:] = rec.state0
        lengths = np.full(len(self.state0), self.nstep // self.nsub) if rec.lengths is None else rec.lengths
        # (worlds, their start states, their controls, physics steps): one call each, built untimed
        self.jobs = [
            (worlds, self.state0[worlds], np.ascontiguousarray(self.control[worlds, : n * self.nsub]), n * self.nsub)
            for n in np.unique(lengths[lengths > 0])
            for worlds in [np.flatnonzero(lengths == n)]
        ]

    def _rollout(self, job, state: np.ndarray | None) -> None:
        worlds, state0, control, nstep = job
        self.pool.rollout(
            self.models[: len(worlds)],
            self.datas,
            state0,
            control,
            control_spec=CONTROL_SPEC,
            skip_checks=True,
            nstep=nstep,
            state=state,
            sensordata=None,
        )

    def rollout(self) -> float:
        """The rollout calls of the loaded episode; returns their duration in seconds."""
        start = time.perf_counter()
        for job in self.jobs:
            self._rollout(job, None)
        return time.perf_counter() - start

    def final_states(self) -> np.ndarray:
        """`[B, nstate]`: the loaded episode's states after each world's last physics step
        (untimed, to check what the replay simulates; worlds of length 0 keep their start)."""
        final = self.state0.copy()
        for job in self.jobs:
            worlds, *_, nstep = job
            states = np.zeros((len(worlds), nstep, self.state0.shape[1]))
            self._rollout(job, states)
            final[worlds] = states[:, -1]
        return final

    def run(self, recordings: Sequence[Recording]) -> float:
        """Seconds spent inside rollout over all episodes (input building is excluded)."""
        total = 0.0
        for rec in recordings:
            self.load(rec)
            total += self.rollout()
        return total
