"""Throughput of the batched MuJoCo backend against the physics alone and against Gymnasium's
SyncVectorEnv, for every built-in task and several batch sizes B.

Run from the repository root (about 3-4 minutes on 2 cores with the defaults):

    python scripts/benchmark_envs.py
    python scripts/benchmark_envs.py --tasks Reach LiftCube --worlds 256 --min-time 3
    python scripts/benchmark_envs.py --quick          # smoke run, a few seconds per task

Columns of the printed table (all rates are control steps per second, one control step being
`n_substeps` physics steps of one world):

- batched steps/s: `BatchedEnv(task, B)` driven by uniform random actions in [-1, 1]. Whole
  episodes run until every world is done, then all worlds are reset with fresh seeds; the resets
  are inside the timed region. Only steps of live worlds count (the sum of `info["active"]`), so
  worlds that finished early add nothing.
- limit steps/s: the physical limit. The episodes the batched run went through are replayed
  open-loop through `mujoco.rollout` alone, one `Rollout.rollout` call per episode of
  `horizon * n_substeps` physics steps for all B worlds, with the same thread count, the ctrl
  and mocap inputs the batched run applied, no state or sensor outputs and `skip_checks=True`.
  Every replayed world runs the full horizon, so it counts `B * horizon * n_substeps` physics
  steps per episode, divided by `n_substeps` to give control steps. Only the rollout calls are
  timed; building their inputs is not. (One long call warm-starts the constraint solver across
  control steps, which `BatchedEnv` does not: the physics cost per step is comparable but the
  trajectories are not bit-identical.)
- batched/limit: the fraction of the physics-only throughput that `BatchedEnv` keeps; the rest
  goes to its per-step Python and numpy work, its resets, and splitting the physics into one
  short rollout call per control step.
- SyncVectorEnv steps/s: `gymnasium.vector.SyncVectorEnv` over B `gymnasium.make(...)` envs
  (each a one-world `BatchedEnv` on the calling thread) with its default autoreset, random
  actions, `B * vector steps / s`. Autoreset steps count as steps, as a training loop sees them.
- batched/Sync: speed-up of the batched backend over the plain Gymnasium vector env.

A second table gives, per row, the episodes per repeat, the fraction of `B * horizon` steps that
were live, the worlds whose physics failed under random actions, the SyncVectorEnv steps per
repeat, the spread of the repeats ((max - min) / median), the load other processes put on the
machine during the kept repeats, and how many repeats were redone because of it.

Each figure is the best of `--repeats` timed repeats (noise on a shared machine only slows a
run down) after an untimed warm-up; the timer is `time.perf_counter`. The three measurements
take turns repeat by repeat. Other busy processes take a core from the threaded runs first, so a
repeat during which they used more than `--max-foreign-load` cores (from /proc/stat, minus this
process) is redone once the machine is quiet again; waiting and redoing may take at most
`--max-wait` s over the whole run, after which repeats are kept as they come. The batched
timing is of the plain loop: the applied controls are recorded in a separate, untimed pass over
the same episodes (same world seeds, same action stream), which also checks that it ran the
same number of live steps.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import gymnasium
import mujoco
import numpy as np
from mujoco import rollout

import grpo_robot  # importing it registers the gym ids grpo_robot/<Task>-v0
from grpo_robot.batched import ACTION_MATRIX, ACTION_OFFSET, CONTROL_SPEC, BatchedEnv, default_threads
from grpo_robot.machine import cpu_model

TASKS = grpo_robot.envs.TASKS


# -- episode plan -------------------------------------------------------------------------------
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


# -- 1. batched ---------------------------------------------------------------------------------
def run_batched(env: BatchedEnv, plan: Sequence[Episode]) -> tuple[int, float]:
    """The plain loop, timed: `(live control steps, seconds)`, resets included."""
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


# -- 2. physical limit --------------------------------------------------------------------------
class LimitReplay:
    """Open-loop replay of recorded episodes through `mujoco.rollout` only."""

    def __init__(self, env: BatchedEnv, nthread: int) -> None:
        m = env.model
        self.nsub = env.task.n_substeps
        self.nstep = env.horizon * self.nsub
        self.nu = m.nu
        # same pool layout as BatchedEnv: 0 threads runs on the calling thread
        self.pool = rollout.Rollout(nthread=nthread if nthread > 1 else 0)
        self.datas = [mujoco.MjData(m) for _ in range(max(nthread, 1))]
        self.models = [m] * env.num_worlds
        ncontrol = mujoco.mj_stateSize(m, CONTROL_SPEC)
        self.control = np.zeros((env.num_worlds, self.nstep, ncontrol))  # C-contiguous float64
        self.state0 = np.zeros((env.num_worlds, env.task.nstate))

    def load(self, rec: Recording) -> None:
        """Lay out one episode as CONTROL_SPEC expects: [ctrl (nu), mocap_pos (3*nmocap)]."""
        ctrl = rec.actions @ ACTION_MATRIX.T + ACTION_OFFSET  # [horizon, B, nu]
        # each control step holds its ctrl for n_substeps physics steps
        self.control[:, :, : self.nu] = np.repeat(ctrl.transpose(1, 0, 2), self.nsub, axis=1)
        self.control[:, :, self.nu :] = rec.mocap_pos[:, None, :]
        self.state0[:] = rec.state0

    def rollout(self) -> float:
        """One rollout call for the loaded episode; returns its duration in seconds."""
        start = time.perf_counter()
        self.pool.rollout(
            self.models,
            self.datas,
            self.state0,
            self.control,
            control_spec=CONTROL_SPEC,
            skip_checks=True,
            nstep=self.nstep,
            state=None,
            sensordata=None,
        )
        return time.perf_counter() - start

    def run(self, recordings: Sequence[Recording]) -> float:
        """Seconds spent inside rollout over all episodes (input building is excluded)."""
        total = 0.0
        for rec in recordings:
            self.load(rec)
            total += self.rollout()
        return total


# -- 3. SyncVectorEnv ---------------------------------------------------------------------------
def make_sync(task: str, num_worlds: int) -> gymnasium.vector.SyncVectorEnv:
    env_id = f"grpo_robot/{task}-v{TASKS[task].version}"
    return gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make(env_id) for _ in range(num_worlds)])


def run_sync(envs: gymnasium.vector.SyncVectorEnv, rng: np.random.Generator, vector_steps: int) -> float:
    """Seconds for `vector_steps` steps with random actions, autoresets included."""
    shape = envs.action_space.shape
    start = time.perf_counter()
    for _ in range(vector_steps):
        envs.step(rng.uniform(-1.0, 1.0, shape).astype(np.float32))
    return time.perf_counter() - start


# -- guarding against other work on the machine --------------------------------------------------
def busy_cpu_seconds() -> float | None:
    """CPU seconds the whole machine has been busy (all processes, steal included), or None."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # all threads of this process
    return usage.ru_utime + usage.ru_stime


class CpuGuard:
    """Times a repeat only while other processes leave the cores alone.

    A threaded run loses a whole core to any other busy process, so a repeat during which other
    processes averaged more than `max_load` cores is thrown away and run again (at most
    `attempts` times), after waiting for the machine to quieten. Waiting and redone repeats draw
    on one time budget for the whole run, `max_wait` seconds, so a busy machine delays the run by
    a bounded amount; once it is spent, repeats are kept as they come and the load they saw is
    reported. Without /proc/stat it only runs the repeats.
    """

    def __init__(self, max_load: float, max_wait: float, attempts: int = 4) -> None:
        self.max_load, self.budget, self.attempts = max_load, max_wait, attempts
        self.worst = 0.0  # highest foreign load (cores) over the kept repeats since `new_row`
        self.discarded = 0  # repeats redone since `new_row`

    def new_row(self) -> None:
        self.worst, self.discarded = 0.0, 0

    def foreign_load(self, fn: Callable[[], float]) -> tuple[float, float | None, float]:
        """`(fn(), average cores used by other processes while it ran, seconds it took)`."""
        busy0, own0, t0 = busy_cpu_seconds(), own_cpu_seconds(), time.perf_counter()
        result = fn()
        busy1, own1, t1 = busy_cpu_seconds(), own_cpu_seconds(), time.perf_counter()
        if busy0 is None or busy1 is None:
            return result, None, t1 - t0
        return result, max(0.0, ((busy1 - busy0) - (own1 - own0)) / (t1 - t0)), t1 - t0

    def wait_for_quiet(self) -> None:
        while self.budget > 0:
            _, load, seconds = self.foreign_load(lambda: time.sleep(0.25) or 0.0)
            if load is None or load <= self.max_load:
                return
            self.budget -= seconds

    def run(self, fn: Callable[[], float]) -> float:
        """One repeat of `fn` (which returns a rate), redone while the machine is busy."""
        for attempt in range(self.attempts):
            self.wait_for_quiet()
            rate, load, seconds = self.foreign_load(fn)
            if load is None or load <= self.max_load or attempt == self.attempts - 1 or self.budget <= 0:
                self.worst = max(self.worst, load or 0.0)
                return rate
            self.budget -= seconds
            self.discarded += 1
        raise AssertionError("unreachable")


# -- measurement of one (task, B) ---------------------------------------------------------------
@dataclass
class Row:
    task: str
    num_worlds: int
    batched: float  # control steps/s, best of repeats
    limit: float
    sync: float
    episodes: int  # per repeat
    live_fraction: float  # live steps / (B * horizon), over the plan
    failed: int  # worlds whose physics failed, over the plan
    sync_steps: int  # vector steps per repeat
    spread: dict[str, float]  # (max - min) / median of each figure's repeats
    foreign_load: float  # highest average load of other processes during a kept repeat, in cores
    discarded: int  # repeats thrown away because other processes were busy


def best_rate(samples: Sequence[float]) -> tuple[float, float]:
    """(best, relative spread) of throughput samples."""
    return max(samples), (max(samples) - min(samples)) / statistics.median(samples)


def measure(task: str, num_worlds: int, args: argparse.Namespace, guard: CpuGuard, log: Callable[[str], None]) -> Row:
    guard.new_row()
    env = BatchedEnv(task, num_worlds, nthread=args.nthread)
    horizon = env.horizon

    # batched: a warm-up episode, which also sizes the plan to about min_time seconds per repeat
    guard.wait_for_quiet()
    _, warm_s = run_batched(env, episode_plan(args.seed + 10_000, num_worlds, 1))
    num_episodes = args.episodes or max(1, math.ceil(args.min_time / warm_s))
    plan = episode_plan(args.seed, num_worlds, num_episodes)
    live, _ = run_batched(env, plan)  # second warm-up, on the plan itself

    # limit: record the plan's inputs (untimed), warm up the replay
    recordings = record_batched(env, plan)
    if sum(r.live_steps for r in recordings) != live:
        raise RuntimeError("the recording pass diverged from the timed runs")
    replay = LimitReplay(env, env.nthread)
    replay.load(recordings[0])
    replay.rollout()
    replayed = num_episodes * num_worlds * horizon  # control steps' worth of physics steps

    # SyncVectorEnv: warm-up steps, which also size its repeats
    envs = make_sync(task, num_worlds)
    rng = np.random.default_rng(args.seed)
    envs.reset(seed=args.seed)
    warm_steps = max(5, horizon // 4)
    warm_s = run_sync(envs, rng, warm_steps)
    sync_steps = args.sync_steps or max(warm_steps, math.ceil(args.min_time * warm_steps / warm_s))

    def batched_rate() -> float:
        steps, seconds = run_batched(env, plan)
        if steps != live:
            raise RuntimeError("batched episodes are not deterministic")
        return steps / seconds

    # the three measurements take turns, so a slow spell on the machine does not hit only one
    batched, limit, sync = [], [], []
    for _ in range(args.repeats):
        batched.append(guard.run(batched_rate))
        limit.append(guard.run(lambda: replayed / replay.run(recordings)))
        sync.append(guard.run(lambda: num_worlds * sync_steps / run_sync(envs, rng, sync_steps)))
    envs.close()

    (b, sb), (lim, sl), (s, ss) = best_rate(batched), best_rate(limit), best_rate(sync)
    log(f"  {task} B={num_worlds}: batched {b:,.0f}  limit {lim:,.0f}  sync {s:,.0f} control steps/s")
    return Row(
        task=task,
        num_worlds=num_worlds,
        batched=b,
        limit=lim,
        sync=s,
        episodes=num_episodes,
        live_fraction=live / (num_episodes * num_worlds * horizon),
        failed=sum(r.failed for r in recordings),
        sync_steps=sync_steps,
        spread={"batched": sb, "limit": sl, "sync": ss},
        foreign_load=guard.worst,
        discarded=guard.discarded,
    )


# -- report -------------------------------------------------------------------------------------
def header(args: argparse.Namespace, foreign_cpu: float | None, seconds: float) -> str:
    cores = default_threads()
    lines = [
        f"machine: {cpu_model()}, {os.cpu_count()} logical cores ({cores} usable), {args.nthread} threads used",
        f"os: {platform.platform()}",
        f"python {platform.python_version()}, mujoco {mujoco.__version__}, numpy {np.__version__}, "
        f"gymnasium {gymnasium.__version__}",
        f"settings: seed {args.seed}, best of {args.repeats} repeats, ~{args.min_time:g} s per repeat"
        + (f", {args.episodes} episodes per repeat" if args.episodes else "")
        + f", repeats redone above {args.max_foreign_load:g} cores of other load (budget {args.max_wait:g} s)",
        # other work on the machine takes cores from the threaded runs first, so say how much there was
        f"run took {seconds:.0f} s wall; other processes used "
        + ("an unknown amount of CPU" if foreign_cpu is None else f"{max(foreign_cpu, 0.0):.1f} CPU s")
        + f" of the {seconds * (os.cpu_count() or 1):.0f} available",
    ]
    return "\n".join(lines)


def table(rows: Sequence[Row]) -> str:
    lines = [
        "| task | B | batched steps/s | limit steps/s | batched/limit | SyncVectorEnv steps/s | batched/Sync |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.task} | {r.num_worlds} | {r.batched:,.0f} | {r.limit:,.0f} | {r.batched / r.limit:.2f} "
            f"| {r.sync:,.0f} | {r.batched / r.sync:.1f} |"
        )
    return "\n".join(lines)


def details(rows: Sequence[Row]) -> str:
    lines = [
        "| task | B | episodes/repeat | live steps / (B*horizon) | failed worlds | Sync vector steps/repeat "
        "| spread batched / limit / Sync | other load (cores) | repeats redone |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        s = r.spread
        lines.append(
            f"| {r.task} | {r.num_worlds} | {r.episodes} | {r.live_fraction:.3f} | {r.failed} | {r.sync_steps} "
            f"| {s['batched']:.0%} / {s['limit']:.0%} / {s['sync']:.0%} | {r.foreign_load:.2f} | {r.discarded} |"
        )
    return "\n".join(lines)


# -- CLI ----------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS), help="tasks (default: all)")
    p.add_argument("--worlds", nargs="+", type=int, default=None, help="batch sizes B (default: 64 256)")
    p.add_argument("--episodes", type=int, default=None, help="batched episodes per repeat (default: from --min-time)")
    p.add_argument("--sync-steps", type=int, default=None, help="SyncVectorEnv steps per repeat (default: --min-time)")
    p.add_argument("--min-time", type=float, default=None, help="seconds per timed repeat (default: 2)")
    p.add_argument("--repeats", type=int, default=None, help="timed repeats per figure, best kept (default: 3)")
    p.add_argument("--nthread", type=int, default=default_threads(), help="rollout threads (default: all cores)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--max-foreign-load",
        type=float,
        default=0.1,
        help="redo a repeat if other processes used more cores than this on average (default: 0.1)",
    )
    p.add_argument(
        "--max-wait",
        type=float,
        default=120.0,
        help="seconds the whole run may spend waiting for a quiet machine and redoing repeats (default: 120)",
    )
    p.add_argument("--quick", action="store_true", help="smoke run: B=16, 1 episode, 1 repeat, short Sync run")
    args = p.parse_args(argv)
    # --quick only changes what was not given explicitly
    quick = {"worlds": [16], "min_time": 0.1, "repeats": 1, "episodes": 1}
    full = {"worlds": [64, 256], "min_time": 2.0, "repeats": 3}
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.nthread < 1 or args.repeats < 1 or args.min_time <= 0 or min(args.worlds) < 1 or args.seed < 0:
        p.error("--nthread, --repeats, --worlds must be >= 1, --min-time > 0 and --seed >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    busy0, own0, start = busy_cpu_seconds(), own_cpu_seconds(), time.perf_counter()
    guard = CpuGuard(args.max_foreign_load, args.max_wait)
    rows = [measure(task, b, args, guard, log) for task in args.tasks for b in args.worlds]
    busy1, own1, seconds = busy_cpu_seconds(), own_cpu_seconds(), time.perf_counter() - start
    foreign = None if busy0 is None or busy1 is None else (busy1 - busy0) - (own1 - own0)
    print(header(args, foreign, seconds))
    print()
    print(table(rows))
    print()
    print(details(rows))


if __name__ == "__main__":
    main()
