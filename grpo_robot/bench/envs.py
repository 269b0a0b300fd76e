"""Throughput of the batched MuJoCo backend against the physics alone and against Gymnasium's
SyncVectorEnv, for every built-in task and several batch sizes B.

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

Each figure is the best of `repeats` timed repeats (noise on a shared machine only slows a
run down) after an untimed warm-up; the timer is `time.perf_counter`. The three measurements
take turns repeat by repeat. Other busy processes take a core from the threaded runs first, so a
repeat during which they used more than `max_foreign_load` cores (from /proc/stat, minus this
process) is redone once the machine is quiet again; waiting and redoing may take at most
`max_wait` s over the whole run, after which repeats are kept as they come. The batched
timing is of the plain loop: the applied controls are recorded in a separate, untimed pass over
the same episodes (same world seeds, same action stream), which also checks that it ran the
same number of live steps.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

import gymnasium
import numpy as np

from grpo_robot import machine
from grpo_robot.batched import BatchedEnv
from grpo_robot.bench import cpu
from grpo_robot.bench.cpu import CpuGuard
from grpo_robot.bench.limit import LimitReplay, episode_plan, record_batched, run_batched
from grpo_robot.envs import TASKS  # importing grpo_robot registers the gym ids grpo_robot/<Task>-v<version>


@dataclass(frozen=True)
class Settings:
    tasks: Sequence[str]
    worlds: Sequence[int]  # batch sizes B
    min_time: float  # seconds per timed repeat, sizing the plans
    repeats: int  # timed repeats per figure, best kept
    nthread: int
    seed: int = 0
    episodes: int | None = None  # batched episodes per repeat (default: from min_time)
    sync_steps: int | None = None  # SyncVectorEnv steps per repeat (default: from min_time)
    max_foreign_load: float = 0.1
    max_wait: float = 120.0


# -- command-line options, shared by scripts/benchmark_envs.py and `scripts/benchmark.py envs` ----
QUICK = {"worlds": [16], "min_time": 0.1, "repeats": 1, "episodes": 1}
FULL = {"worlds": [64, 256], "min_time": 2.0, "repeats": 3}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS), help="tasks (default: all)")
    p.add_argument("--worlds", nargs="+", type=int, default=None, help="batch sizes B (default: 64 256)")
    p.add_argument("--episodes", type=int, default=None, help="batched episodes per repeat (default: from --min-time)")
    p.add_argument("--sync-steps", type=int, default=None, help="SyncVectorEnv steps per repeat (default: --min-time)")
    p.add_argument("--min-time", type=float, default=None, help="seconds per timed repeat (default: 2)")
    p.add_argument("--repeats", type=int, default=None, help="timed repeats per figure, best kept (default: 3)")
    p.add_argument("--nthread", type=int, default=machine.usable_cores(), help="rollout threads (default: all cores)")
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


def settings_from_args(args: argparse.Namespace, error: Callable[[str], None]) -> Settings:
    """`--quick` only changes what was not given explicitly; `error` reports invalid values."""
    given, defaults = vars(args), QUICK if args.quick else FULL
    s = Settings(**{f.name: defaults.get(f.name) if given[f.name] is None else given[f.name] for f in fields(Settings)})
    if s.nthread < 1 or s.repeats < 1 or s.min_time <= 0 or min(s.worlds) < 1 or s.seed < 0:
        error("--nthread, --repeats, --worlds must be >= 1, --min-time > 0 and --seed >= 0")
    return s


# -- SyncVectorEnv -------------------------------------------------------------------------------
def make_sync(task: str, num_worlds: int) -> gymnasium.vector.SyncVectorEnv:
    env_id = f"grpo_robot/{TASKS[task].task_id()}"
    return gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make(env_id) for _ in range(num_worlds)])


def run_sync(envs: gymnasium.vector.SyncVectorEnv, rng: np.random.Generator, vector_steps: int) -> float:
    """Seconds for `vector_steps` steps with random actions, autoresets included."""
    shape = envs.action_space.shape
    start = time.perf_counter()
    for _ in range(vector_steps):
        envs.step(rng.uniform(-1.0, 1.0, shape).astype(np.float32))
    return time.perf_counter() - start


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


def measure(task: str, num_worlds: int, s: Settings, guard: CpuGuard, log: Callable[[str], None]) -> Row:
    guard.new_row()
    env = BatchedEnv(task, num_worlds, nthread=s.nthread)
    horizon = env.horizon

    # batched: a warm-up episode, which also sizes the plan to about min_time seconds per repeat
    guard.wait_for_quiet()
    _, warm_s = run_batched(env, episode_plan(s.seed + 10_000, num_worlds, 1))
    num_episodes = s.episodes or max(1, math.ceil(s.min_time / warm_s))
    plan = episode_plan(s.seed, num_worlds, num_episodes)
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
    rng = np.random.default_rng(s.seed)
    envs.reset(seed=s.seed)
    warm_steps = max(5, horizon // 4)
    warm_s = run_sync(envs, rng, warm_steps)
    sync_steps = s.sync_steps or max(warm_steps, math.ceil(s.min_time * warm_steps / warm_s))

    def batched_rate() -> float:
        steps, seconds = run_batched(env, plan)
        if steps != live:
            raise RuntimeError("batched episodes are not deterministic")
        return steps / seconds

    # the three measurements take turns, so a slow spell on the machine does not hit only one
    batched, limit, sync = [], [], []
    for _ in range(s.repeats):
        batched.append(guard.run(batched_rate))
        limit.append(guard.run(lambda: replayed / replay.run(recordings)))
        sync.append(guard.run(lambda: num_worlds * sync_steps / run_sync(envs, rng, sync_steps)))
    envs.close()

    (b, sb), (lim, sl), (sy, ss) = best_rate(batched), best_rate(limit), best_rate(sync)
    log(f"  {task} B={num_worlds}: batched {b:,.0f}  limit {lim:,.0f}  sync {sy:,.0f} control steps/s")
    return Row(
        task=task,
        num_worlds=num_worlds,
        batched=b,
        limit=lim,
        sync=sy,
        episodes=num_episodes,
        live_fraction=live / (num_episodes * num_worlds * horizon),
        failed=sum(r.failed for r in recordings),
        sync_steps=sync_steps,
        spread={"batched": sb, "limit": sl, "sync": ss},
        foreign_load=guard.worst,
        discarded=guard.discarded,
    )


def log_to_stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def benchmark(s: Settings, log: Callable[[str], None] = log_to_stderr) -> str:
    """Every (task, B) of the settings (progress to `log`), then the report: header, table and
    details."""
    before = cpu.sample()
    guard = CpuGuard(s.max_foreign_load, s.max_wait)
    rows = [measure(task, b, s, guard, log) for task in s.tasks for b in s.worlds]
    after = cpu.sample()
    seconds = after.time - before.time
    return "\n\n".join([header(s, cpu.foreign_cpu_seconds(before, after), seconds), table(rows), details(rows)])


# -- report -------------------------------------------------------------------------------------
def header(s: Settings, foreign_cpu: float | None, seconds: float, info: dict | None = None) -> str:
    """The machine (`machine.describe("gymnasium")` unless `info` is given), the settings, and
    how much CPU other processes used during the run."""
    info = machine.describe("gymnasium") if info is None else info
    logical = info["logical_cores"]
    lines = [
        f"machine: {info['cpu']}, {logical} logical cores ({info['cores']} usable), {s.nthread} threads used",
        f"os: {info['os']}",
        f"python {info['python']}, mujoco {info['mujoco']}, numpy {info['numpy']}, gymnasium {info['gymnasium']}",
        f"settings: seed {s.seed}, best of {s.repeats} repeats, ~{s.min_time:g} s per repeat"
        + (f", {s.episodes} episodes per repeat" if s.episodes else "")
        + f", repeats redone above {s.max_foreign_load:g} cores of other load (budget {s.max_wait:g} s)",
        # other work on the machine takes cores from the threaded runs first, so say how much there was
        f"run took {seconds:.0f} s wall; other processes used "
        + ("an unknown amount of CPU" if foreign_cpu is None else f"{max(foreign_cpu, 0.0):.1f} CPU s")
        + f" of the {seconds * (logical or 1):.0f} available",
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
