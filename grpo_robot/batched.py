"""Batched MuJoCo backend: B worlds of one task stepped per call by `mujoco.rollout`'s C++ thread
pool, which releases the GIL; Python never loops over worlds inside a physics step.

Each control step is one `rollout` call of `n_substeps` physics steps over the worlds still
running. The qacc warm-start is zeroed at every call (rollout's own behaviour), so a world's
trajectory depends only on its own state and actions, never on which thread ran it or on the
other worlds: B worlds in a batch reproduce B single-world runs bit for bit.

Sensor readings are recorded by `mj_step` before its integration, so an observation after a
step describes the state one physics substep (10 ms; 5 ms on the tasks' previous versions) before
the stored state; the initial observation is exact. Both backends share this code, so they agree.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import mujoco
import numpy as np
from mujoco import rollout

from grpo_robot.envs import make_task
from grpo_robot.envs.scene import ACTION_MATRIX, ACTION_OFFSET
from grpo_robot.envs.task import FULLPHYSICS, Task
from grpo_robot.machine import usable_cores
from grpo_robot.seed_ranges import check_seeds

CONTROL_SPEC = mujoco.mjtState.mjSTATE_CTRL.value | mujoco.mjtState.mjSTATE_MOCAP_POS.value


class PhysicsPool:
    """A `mujoco.rollout.Rollout` thread pool (`nthread` threads; 0 or 1: none, the calls run on the
    calling thread) that a forked child of this process can still use and drop.

    A child made by `fork` has none of its parent's threads, and a pool whose threads are gone
    blocks for ever when it is destroyed: in a child of `os.fork`, `del` of such a pool, or a
    garbage collection that reaches one, never returns (tests/test_envs.py). That hung the
    workers of the async Gym backend when it forked them from a process that had built a
    `BatchedEnv`. In a forked child every threaded pool of the parent is therefore kept alive, never
    destroyed, and replaced by one without threads: the child's physics runs on its calling
    thread, to the same results."""

    def __init__(self, nthread: int) -> None:
        self.nthread = nthread if nthread > 1 else 0
        self._pool = rollout.Rollout(nthread=self.nthread)
        if self.nthread:
            _THREADED_POOLS.add(self)

    def rollout(self, models: Sequence[mujoco.MjModel], datas: Sequence[mujoco.MjData], *args: Any,
                **kwargs: Any) -> Any:  # fmt: skip
        """`Rollout.rollout`, given one scratch `MjData` per thread (the first alone without threads)."""
        return self._pool.rollout(models, datas if self.nthread else datas[:1], *args, **kwargs)

    def close(self) -> None:
        self._pool.close()
        _THREADED_POOLS.discard(self)

    def _after_fork_in_child(self) -> None:
        _INHERITED_POOLS.append(self._pool)
        self.nthread, self._pool = 0, rollout.Rollout(nthread=0)


_THREADED_POOLS: weakref.WeakSet = weakref.WeakSet()
_INHERITED_POOLS: list = []  # a forked child's pools from its parent: never destroyed (`PhysicsPool`)


def _keep_inherited_pools() -> None:
    for pool in list(_THREADED_POOLS):
        pool._after_fork_in_child()
    _THREADED_POOLS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_keep_inherited_pools)


def check_actions(actions: np.ndarray, active: np.ndarray, action_dim: int) -> np.ndarray:
    """`actions [B, action_dim]` as float64, finite on the `active` worlds, else `ValueError`
    naming the expected shape (and the worlds with non-finite values)."""
    actions = np.asarray(actions, dtype=np.float64)
    expected = (len(active), action_dim)
    if actions.shape != expected:
        raise ValueError(f"actions must have shape {expected}, got {actions.shape}")
    bad = active & ~np.isfinite(actions).all(axis=1)
    if bad.any():
        raise ValueError(
            f"actions must be finite, got non-finite values for worlds {np.flatnonzero(bad).tolist()} "
            f"(expected shape {expected}, values in [-1, 1])"
        )
    return actions


class BatchedEnv:
    """`num_worlds` worlds of one task, stepped together.

    Worlds run until success (when `terminate_on_success`), the horizon, or a physics failure;
    finished worlds are no longer simulated and keep their last observation until `reset`.
    Flags are sticky: `terminated`/`truncated` stay True once a world has finished.
    """

    # True: `rollout.collect_split` runs each part of the worlds as a rollout of its own on a thread
    # of its own, policy and physics (`use_parts`, `step_part`); False: one thread samples every
    # part while the parts' physics take turns on the one pool (`rollout.parallel_parts`)
    parallel_parts: bool = False
    # with `parallel_parts`: the parts' threads run their Python one at a time, each releasing a
    # lock only for its physics calls (`step_part`'s `turn`; `rollout.take_turns`)
    take_turns: bool = True

    def __init__(
        self,
        task: str | Task,
        num_worlds: int,
        *,
        nthread: int | None = None,
        horizon: int | None = None,
        terminate_on_success: bool = True,
    ) -> None:
        self.task = make_task(task) if isinstance(task, str) else task
        if num_worlds < 1:
            raise ValueError(f"num_worlds must be >= 1, got {num_worlds}")
        self.horizon = self.task.horizon if horizon is None else int(horizon)
        if self.horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {horizon}")
        self.nthread = usable_cores() if nthread is None else int(nthread)
        if self.nthread < 1:
            raise ValueError(f"nthread must be >= 1, got {nthread}")
        self.num_worlds = B = num_worlds
        self.terminate_on_success = terminate_on_success
        self.obs_dim = self.task.obs_dim
        self.action_dim = self.task.action_dim

        m = self.model = self.task.model
        self._nsub = self.task.n_substeps
        self._dt = float(m.opt.timestep)
        self._nu = m.nu
        self._qvel = slice(1 + m.nq, 1 + m.nq + m.nv)  # qvel inside a FULLPHYSICS state
        self._pool = PhysicsPool(self.nthread)
        self._datas = [mujoco.MjData(m) for _ in range(self.nthread)]
        self._models = [m] * B
        ncontrol = mujoco.mj_stateSize(m, CONTROL_SPEC)
        self._control = np.zeros((B, self._nsub, ncontrol))
        self._out_state = np.zeros((B, self._nsub, self.task.nstate))
        self._out_sensors = np.zeros((B, self._nsub, m.nsensordata))

        self.state = np.zeros((B, self.task.nstate))  # FULLPHYSICS state of each world
        self.mocap_pos = np.zeros((B, 3 * m.nmocap))
        self.sensordata = np.zeros((B, m.nsensordata))
        self.seeds = np.zeros(B, dtype=np.int64)
        # of the starts `reset` draws: below 1 easier ones (`Task.easier_starts`, a start curriculum's
        # `algo.curriculum`); 1 = the task's own
        self.difficulty = 1.0
        self.steps = np.zeros(B, dtype=np.int64)  # control steps taken since reset
        self.success = np.zeros(B, dtype=bool)  # success predicate at the last step
        self.terminated = np.zeros(B, dtype=bool)
        self.truncated = np.zeros(B, dtype=bool)
        self.failed = np.zeros(B, dtype=bool)  # physics went non-finite or unstable
        self._main_seconds = 0.0  # wall time of the physics calls of `step` and of unregistered parts
        self._was_reset = False
        self._renderers: dict[tuple[int, int], Any] = {}  # (width, height) -> grpo_robot.render.Renderer
        self._render_data: mujoco.MjData | None = None
        self._stepper: ThreadPoolExecutor | None = None  # the thread of `step_async` on other slices
        self._lanes: dict[tuple[int, int], _Lane] = {}  # (start, stop) -> the part's own physics (`use_parts`)
        self._layout: tuple | None = None  # the parts `_lanes` was built for
        self._running: set[tuple[int, int]] = set()  # parts of `_lanes` still stepping (`end_part`)
        self._parts_lock = threading.Lock()

    # -- API --------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.task.name

    @property
    def task_id(self) -> str:
        """The task's versioned id (`PushCube-v2`): what a record of results on this env names."""
        return self.task.task_id()

    @property
    def physics_seconds(self) -> float:
        """Wall time spent in the physics calls (`mujoco.rollout` alone) since construction:
        `step`'s, plus the mean over the parts of `use_parts` of each one's own (they run side by
        side). A part's wait for its turn at Python after its call is not in it."""
        lanes = [lane.seconds for lane in self._lanes.values()]
        return self._main_seconds + (sum(lanes) / len(lanes) if lanes else 0.0)

    def use_parts(self, parts: Sequence[slice]) -> None:
        """Give each of `parts` (disjoint slices of the worlds, as `rollout.collect_split` runs
        them) physics of its own for `step_part`: a rollout pool of `max(1, nthread // len(parts))`
        threads (1: the pool runs on the calling thread), its data and its output buffers, so that
        parts stepped from different threads at once share nothing but their own rows of the
        env's arrays. The same layout again keeps what it built. Every part counts as running
        until `end_part`."""
        keys = tuple((p.start, p.stop) for p in parts)
        if self._layout != keys:
            self._close_lanes()
            threads = max(1, self.nthread // max(1, len(keys)))
            self._lanes = {key: _Lane(self, threads, key[1] - key[0]) for key in keys}
            self._layout = keys
        with self._parts_lock:
            self._running = set(keys)

    def end_part(self, worlds: slice) -> None:
        """Part `worlds` of `use_parts` steps no more in this episode: once a single part is left
        running, `step_part` steps it on all the physics threads (parts whose worlds end sooner
        would otherwise leave their threads idle while the last part finishes)."""
        with self._parts_lock:
            self._running.discard((worlds.start, worlds.stop))

    def close(self) -> None:
        """Release the renderers and the `step_async` threads (the interface of `GymGroupEnv`)."""
        if self._stepper is not None:
            self._stepper.shutdown()
            self._stepper = None
        self._close_lanes()
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()

    def render(self, worlds: Sequence[int] | None = None, camera: str = "front", width: int = 320,
               height: int = 240) -> np.ndarray:  # fmt: skip
        """Frames of `worlds` (default: all) as they are now, `uint8 [n, height, width, 3]`, from
        the camera named `camera` (`envs.scene.CAMERAS`).

        Each world is rebuilt from its stored state in a private `MjData`, so rendering reads the
        simulation and never changes it: trajectories are the same with or without frames."""
        from grpo_robot.render import Renderer

        worlds = np.arange(self.num_worlds) if worlds is None else np.asarray(worlds, dtype=np.int64)
        m = self.model
        renderer = self._renderers.get((width, height))
        if renderer is None:
            renderer = self._renderers[width, height] = Renderer(m, width, height)
        if self._render_data is None:
            self._render_data = mujoco.MjData(m)
        d = self._render_data
        frames = np.empty((len(worlds), height, width, 3), np.uint8)
        for k, w in enumerate(worlds):
            mujoco.mj_setState(m, d, self.state[w], FULLPHYSICS)
            d.mocap_pos[:] = self.mocap_pos[w].reshape(-1, 3)
            mujoco.mj_forward(m, d)
            frames[k] = renderer.render(d, camera)
        return frames

    @property
    def render_fps(self) -> float:
        """Control steps per simulated second: frames per second of a real-time video."""
        return 1.0 / (self._dt * self._nsub)

    @property
    def done(self) -> np.ndarray:
        """`bool [B]`: worlds that are no longer stepped."""
        return self.terminated | self.truncated

    def reset(self, seeds: Sequence[int]) -> np.ndarray:
        """Start every world from its seed; equal seeds give bit-identical worlds.

        `seeds: [B]` non-negative integers -> `obs: [B, obs_dim]` float32.
        """
        seeds = check_seeds(seeds, self.num_worlds)
        unique, inverse = np.unique(seeds, return_inverse=True)
        starts = [self.task.initial_condition(int(s), self.difficulty) for s in unique]
        self.state[:] = np.stack([s[0] for s in starts])[inverse]
        self.mocap_pos[:] = np.stack([s[1] for s in starts])[inverse]
        self.sensordata[:] = np.stack([s[2] for s in starts])[inverse]
        self.seeds[:] = seeds
        self.steps[:] = 0
        for flag in (self.success, self.terminated, self.truncated, self.failed):
            flag[:] = False
        self._was_reset = True
        return self.obs()

    def obs(self) -> np.ndarray:
        """`[B, obs_dim]` float32: the current sensor readings of every world."""
        return self.sensordata.astype(np.float32)

    def step(self, actions: np.ndarray):
        """Advance every running world by one control step.

        `actions: [B, action_dim]` in [-1, 1] (clipped; rows of finished worlds are ignored).
        Returns `(obs [B, obs_dim], reward [B], terminated [B], truncated [B], info)`, the reward
        being 1.0 on a success step and 0.0 otherwise. `info` holds `is_success [B]`,
        `failed [B]`, `n_failed`, and `active [B]`: the worlds this call stepped.
        """
        if not self._was_reset:
            raise RuntimeError("call reset(seeds) before step()")
        active = ~self.done
        actions = check_actions(actions, active, self.action_dim)
        idx = np.flatnonzero(active)
        self._timed_simulate(idx, np.clip(actions[idx], -1.0, 1.0))
        info = {
            "is_success": self.success.copy(),
            "failed": self.failed.copy(),
            "n_failed": int(self.failed.sum()),
            "active": active,
        }
        reward = (self.success & active).astype(np.float32)
        return self.obs(), reward, self.terminated.copy(), self.truncated.copy(), info

    def step_async(self, actions: np.ndarray, worlds: slice) -> Future:
        """Start one control step of the running worlds among `worlds` on a background thread and
        return at once; the physics releases the GIL, so the caller can run the policy on other
        worlds meanwhile (`rollout.collect_split`). `actions: [len(worlds), action_dim]`.

        Steps run one after another in the order they were started; the caller must wait for the
        returned future before reading or stepping these worlds again, and may touch only other
        worlds until then. A world stepped this way follows the same trajectory, bit for bit, as
        with `step`, since every world's physics depends only on its own state and actions."""
        idx, act = self._part_actions(actions, worlds, "step_async")
        if self._stepper is None:
            self._stepper = ThreadPoolExecutor(1, thread_name_prefix="physics")
        return self._stepper.submit(self._timed_simulate, idx, act)

    def step_part(self, actions: np.ndarray, worlds: slice, turn: threading.Lock | None = None) -> None:
        """One control step of the running worlds among `worlds`, a part given to `use_parts`, on
        the calling thread with that part's own physics. Threads may step different parts at once
        (each releases the GIL in the physics); the trajectories are those `step` gives, bit for
        bit. `actions: [len(worlds), action_dim]`.

        `turn`: a lock the calling thread holds while it runs Python, released here for the
        physics call alone (`rollout.collect_split`): the parts' threads then take turns at their
        Python, one whole stretch each, instead of trading the GIL op by op, which keeps two
        parts in step and slows both."""
        lane = self._lanes.get((worlds.start, worlds.stop)) if (worlds.step or 1) == 1 else None
        if lane is None:
            parts = [slice(*key) for key in self._lanes]
            raise ValueError(f"step_part needs one of the parts given to use_parts ({parts}), got {worlds}")
        idx, act = self._part_actions(actions, worlds, "step_part")
        with self._parts_lock:
            alone = self._running == {(worlds.start, worlds.stop)}
        self._timed_simulate(idx, act, lane, alone, turn)

    # -- internals --------------------------------------------------------------------------------
    def _close_lanes(self) -> None:
        for lane in self._lanes.values():
            lane.pool.close()
        self._lanes = {}
        self._layout = None

    def _part_actions(self, actions: np.ndarray, worlds: slice, caller: str) -> tuple[np.ndarray, np.ndarray]:
        """(running worlds among `worlds`, their checked and clipped actions)."""
        if not self._was_reset:
            raise RuntimeError(f"call reset(seeds) before {caller}()")
        rows = np.arange(self.num_worlds)[worlds]
        active = ~self.done[rows]
        actions = check_actions(actions, active, self.action_dim)
        return rows[active], np.clip(actions[active], -1.0, 1.0)

    def _timed_simulate(self, idx: np.ndarray, act: np.ndarray, lane: _Lane | None = None,
                        whole_pool: bool = False, turn: threading.Lock | None = None) -> None:  # fmt: skip
        if len(idx):
            seconds = self._simulate(idx, act, lane, whole_pool, turn)
            if lane is None:
                self._main_seconds += seconds
            else:
                lane.seconds += seconds

    def _simulate(self, idx: np.ndarray, act: np.ndarray, lane: _Lane | None = None, whole_pool: bool = False,
                  turn: threading.Lock | None = None) -> float:  # fmt: skip
        """One control step of worlds `idx`; on `lane`'s physics, or with `whole_pool` on the env's
        pool of all the threads into the lane's buffers (the last part running, `end_part`);
        `turn` (held by the caller) is released for the physics call (`step_part`).
        -> the seconds of the physics call alone (`physics_seconds`): neither the wait for `turn`
        after it nor the bookkeeping around it."""
        n = len(idx)
        nu = self._nu
        pool, datas, control, out_state, out_sensors = (
            (self._pool, self._datas, self._control, self._out_state, self._out_sensors) if lane is None
            else (lane.pool, lane.datas, lane.control, lane.out_state, lane.out_sensors)
        )  # fmt: skip
        if whole_pool:
            pool, datas = self._pool, self._datas
        # the worlds as a slice when they are a run of rows (all of a part still running, the common
        # case): views instead of copies
        rows = slice(int(idx[0]), int(idx[-1]) + 1) if idx[-1] - idx[0] == n - 1 else idx
        control = control[:n]
        control[:, :, :nu] = (act @ ACTION_MATRIX.T + ACTION_OFFSET)[:, None, :]
        control[:, :, nu:] = self.mocap_pos[rows][:, None, :]
        state0 = self.state[rows]  # read (`advanced`) before the state is written back
        out_state = out_state[:n]
        out_sensors = out_sensors[:n]
        if turn is not None:
            turn.release()
        start = time.perf_counter()
        try:
            pool.rollout(
                self._models[:n],
                datas,
                state0,
                control,
                control_spec=CONTROL_SPEC,
                skip_checks=True,
                nstep=self._nsub,
                state=out_state,
                sensordata=out_sensors,
            )
        finally:
            seconds = time.perf_counter() - start
            if turn is not None:
                turn.acquire()
        new_state = out_state[:, -1]
        sensors = out_sensors[:, -1]
        # rollout stops a world at its first MuJoCo warning (e.g. an unstable qacc): its clock
        # then falls short of n_substeps steps. Non-finite or runaway values also mean failure.
        advanced = new_state[:, 0] - state0[:, 0] > (self._nsub - 0.5) * self._dt
        ok = (
            advanced
            & np.isfinite(new_state).all(axis=1)
            & np.isfinite(sensors).all(axis=1)
            & (np.abs(new_state[:, self._qvel]) < self.task.blowup_qvel).all(axis=1)
        )
        self.steps[rows] += 1
        if ok.all():
            self.state[rows] = new_state
            self.sensordata[rows] = sensors
            self.success[rows] = self.task.success(sensors)
        else:
            good = idx[ok]
            self.state[good] = new_state[ok]
            self.sensordata[good] = sensors[ok]  # failed worlds keep their last good observation
            self.failed[idx[~ok]] = True
            self.success[rows] = False
            self.success[good] = self.task.success(sensors[ok])
        if self.terminate_on_success:
            self.terminated[rows] = self.success[rows]
        self.truncated[rows] = ((self.steps[rows] >= self.horizon) | self.failed[rows]) & ~self.terminated[rows]
        return seconds


class _Lane:
    """One part's own physics (`BatchedEnv.use_parts`): a rollout pool with its data and output
    buffers, so that parts stepped at once from different threads never share them."""

    def __init__(self, env: BatchedEnv, nthread: int, num_worlds: int) -> None:
        m, nsub = env.model, env.task.n_substeps
        self.nthread, self.seconds = nthread, 0.0  # seconds: this part's time in the physics
        self.pool = PhysicsPool(nthread)
        self.datas = [mujoco.MjData(m) for _ in range(nthread)]
        self.control = np.zeros((num_worlds, nsub, mujoco.mj_stateSize(m, CONTROL_SPEC)))
        self.out_state = np.zeros((num_worlds, nsub, env.task.nstate))
        self.out_sensors = np.zeros((num_worlds, nsub, m.nsensordata))
