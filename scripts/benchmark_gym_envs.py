"""What the Gymnasium backend costs: env steps/s of `GymGroupEnv` against the same env stepped alone.

    python scripts/benchmark_gym_envs.py                                   # Fetch presets and robosuite Lift
    python scripts/benchmark_gym_envs.py --envs fetch_reach --worlds 64 --vector sync async

For each env preset of conf/env/ (composed exactly as `scripts/train.py env=<preset>` would):

- alone steps/s: one env from `gymnasium.make` / the entry point, stepped in a plain Python loop
  with uniform random actions from its action space, reset at the end of each episode (resets
  inside the timed region). This is what the env itself can do on one core.
- group steps/s: `GymGroupEnv(cfg, B)` (the trainer's backend) from B fresh seeds, uniform random
  actions in [-1, 1], until every world is done, counting only the steps of live worlds; the
  resets, the flattening of observations, the action mapping and the vector env are all inside
  the timed region.
- group/alone: the fraction of the env's own speed that the backend keeps.

Each figure is the best of `--repeats` repeats, taken in turns (alone, group, ...) so that both
see the same machine load. The machine and versions are printed with the table.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

import grpo_robot  # noqa: F401  (sets the thread policy before torch loads)

# isort: split
import numpy as np

from grpo_robot import machine
from grpo_robot.cli import compose_train_config
from grpo_robot.config import EnvConfig
from grpo_robot.gym_vector import GymGroupEnv, make_inner


def preset(name: str) -> EnvConfig:
    return compose_train_config(f"env={name}").env


def time_alone(cfg: EnvConfig, horizon: int, steps: int, seed: int) -> float:
    env = make_inner(cfg)
    rng = np.random.default_rng(seed)
    low, high = env.action_space.low, env.action_space.high
    env.reset(seed=seed)
    t, done, start = 0, 0, time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(rng.uniform(low, high).astype(env.action_space.dtype))
        t += 1
        if terminated or truncated or t == horizon:
            seed, t = seed + 1, 0
            env.reset(seed=seed)
        done += 1
    seconds = time.perf_counter() - start
    env.close()
    return done / seconds


def time_group(env: GymGroupEnv, episodes: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    steps, start = 0, time.perf_counter()
    for e in range(episodes):
        env.reset(seed + e * env.num_worlds + np.arange(env.num_worlds))
        while not env.done.all():
            *_, info = env.step(rng.uniform(-1, 1, (env.num_worlds, env.action_dim)))
            steps += int(info["active"].sum())
    return steps / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=["fetch_reach", "fetch_push", "robosuite_lift"])
    parser.add_argument("--worlds", type=int, default=16, help="worlds in the group env")
    parser.add_argument("--horizon", type=int, default=50, help="control steps per episode (all envs)")
    parser.add_argument("--episodes", type=int, default=1, help="group episodes per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--vector", nargs="+", default=["sync"], choices=["sync", "async"])
    args = parser.parse_args(argv)

    print(f"machine: {machine.one_line()}")
    print(f"B = {args.worlds} worlds, horizon {args.horizon}, best of {args.repeats} repeats\n")
    print("| env | vector | alone steps/s | group steps/s | group/alone |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name in args.envs:
        for vector in args.vector:
            cfg = replace(preset(name), horizon=args.horizon, vector=vector)
            env = GymGroupEnv(cfg, args.worlds)
            time_group(env, 1, 10**6)  # warm-up (and the seeding check)
            alone_steps = args.worlds * args.horizon * args.episodes // 4  # about a quarter of the group's time
            alone, group = [], []
            for r in range(args.repeats):
                alone.append(time_alone(cfg, args.horizon, alone_steps, 1000 * r))
                group.append(time_group(env, args.episodes, 1000 * r))
            env.close()
            a, g = max(alone), max(group)
            print(f"| {name} | {vector} | {a:,.0f} | {g:,.0f} | {g / a:.2f} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
