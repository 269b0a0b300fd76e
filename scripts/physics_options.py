"""Which MJCF options make the built-in scene cheaper to simulate, and what they do to the tasks.

For each variant of the scene's <option> (solver, iterations, tolerance, cone, Jacobian,
integrator, a contact exclusion, another timestep with the substeps that keep 25 Hz control, the
5 ms step of the tasks' previous versions among them):
the physical limit of each task (256 worlds, random actions, the same starts, replayed
open-loop through mujoco.rollout as `scripts/benchmark.py envs` does; best of 3) relative to the
current scene, and the scripted expert's success over seeds 0-999. The variants are built here
only; the tasks are unchanged.

    python scripts/physics_options.py                 # all tasks, all variants (about 6 minutes, 2 cores)
    python scripts/physics_options.py --tasks PushCube --variants current "timestep=0.005 x8"
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import mujoco
import numpy as np

from grpo_robot import BatchedEnv, machine
from grpo_robot.bench.limit import LimitReplay, episode_plan, record_batched
from grpo_robot.envs import TASKS, make_task, scene

OPTION = f'<option timestep="{scene.TIMESTEP}" integrator="implicitfast">'
# name -> (attributes added to <option>, MJCF put before <sensor>, (timestep, substeps) or None)
VARIANTS: dict[str, tuple[str, str, tuple[float, int] | None]] = {
    "current": ("", "", None),
    "iterations=10 ls_iterations=10": ('iterations="10" ls_iterations="10"', "", None),
    "iterations=4 ls_iterations=5": ('iterations="4" ls_iterations="5"', "", None),
    "tolerance=1e-6": ('tolerance="1e-6"', "", None),
    "solver=CG": ('solver="CG"', "", None),
    "solver=PGS": ('solver="PGS"', "", None),
    "cone=elliptic": ('cone="elliptic"', "", None),
    "jacobian=sparse": ('jacobian="sparse"', "", None),
    "integrator=Euler": ("integrator=Euler", "", None),
    "exclude finger-finger": ("", '<contact><exclude body1="finger_left" body2="finger_right"/></contact>', None),
    "timestep=0.005 x8": ("", "", (0.005, 8)),  # the previous task versions (PushCube-v1 ...)
    "timestep=0.02 x2": ("", "", (0.02, 2)),
}


def variant_env(task_name: str, variant: str, worlds: int) -> BatchedEnv:
    """A `BatchedEnv` of the task with the scene's options changed as `variant` says."""
    attrs, extra, timing = VARIANTS[variant]
    task = make_task(task_name)
    xml = scene.build_xml(task.name, task.bodies, task.sensors)
    assert OPTION in xml, "the scene's <option> line changed; update OPTION"
    option = OPTION
    if attrs == "integrator=Euler":
        option = option.replace('integrator="implicitfast"', 'integrator="Euler"')
    elif attrs:
        option = option.replace(">", f" {attrs}>")
    if timing is not None:
        option = option.replace(f'timestep="{scene.TIMESTEP}"', f'timestep="{timing[0]}"')
        task.n_substeps = timing[1]  # the same 25 Hz control
        assert abs(timing[0] * timing[1] - scene.TIMESTEP * scene.N_SUBSTEPS) < 1e-12
    xml = xml.replace(OPTION, option).replace("  <sensor>", f"{extra}\n  <sensor>", 1)
    task.model = mujoco.MjModel.from_xml_string(xml)
    task._data = mujoco.MjData(task.model)
    return BatchedEnv(task, worlds, nthread=2)


def expert_success(task_name: str, variant: str, seeds: int = 1000) -> float:
    env = variant_env(task_name, variant, seeds)
    env.reset(np.arange(seeds))
    while not env.done.all():
        env.step(env.task.expert(env.sensordata))
    return float(env.terminated.mean())


def limit_rate(task_name: str, variant: str, worlds: int = 256, episodes: int = 2) -> tuple[float, float]:
    """(env steps/s of the open-loop replay, best of 3; fraction of worlds whose physics failed
    under the random actions)."""
    env = variant_env(task_name, variant, worlds)
    recordings = record_batched(env, episode_plan(0, worlds, episodes))
    replay = LimitReplay(env, 2)
    seconds = min(replay.run(recordings) for _ in range(3))
    failed = sum(r.failed for r in recordings) / (worlds * episodes)
    return episodes * worlds * env.horizon / seconds, failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=sorted(TASKS), choices=sorted(TASKS))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    args = parser.parse_args(argv)
    variants = ["current", *(v for v in args.variants if v != "current")]
    print(f"machine: {machine.one_line()}; 2 physics threads\n")
    print("| variant | " + " | ".join(f"{t}: limit x, expert %, failed %" for t in args.tasks) + " |")
    print("| --- |" + " ---: |" * len(args.tasks))
    base: dict[str, float] = {}
    for variant in variants:
        cells = []
        for task in args.tasks:
            rate, failed = limit_rate(task, variant)
            base.setdefault(task, rate)
            cells.append(f"{rate / base[task]:.2f}x, {100 * expert_success(task, variant):.1f}, {100 * failed:.1f}")
        print(f"| {variant} | " + " | ".join(cells) + " |", flush=True)
    print("\nlimit x: the physical limit relative to the current scene's (" +
          ", ".join(f"{t} {r:,.0f} env steps/s" for t, r in base.items()) + ")")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
