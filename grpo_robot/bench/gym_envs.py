"""What the Gymnasium backend costs: env steps/s of `GymGroupEnv` against the same env stepped alone.

For each env preset of conf/env/ (composed exactly as `scripts/train.py env=<preset>` would):

- alone steps/s: one env from `gymnasium.make` / the entry point, stepped in a plain Python loop
  with uniform random actions from its action space, reset at the end of each episode (resets
  inside the timed region). This is what the env itself can do on one core.
- group steps/s: `GymGroupEnv(cfg, B)` (the trainer's backend) from B fresh seeds, uniform random
  actions in [-1, 1], until every world is done, counting only the steps of live worlds; the
  resets, the flattening of observations, the action mapping and the vector env are all inside
  the timed region.
- group/alone: the fraction of the env's own speed that the backend keeps.

Each figure is the best of `repeats` repeats, taken in turns (alone, group, ...) so that both
see the same machine load.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from grpo_robot import machine
from grpo_robot.bench.markdown import row
from grpo_robot.cli import compose_train_config
from grpo_robot.gym_vector import GymGroupEnv, make_inner


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--envs", nargs="+", default=["fetch_reach", "fetch_push", "robosuite_lift"])
    parser.add_argument("--worlds", type=int, default=16, help="worlds in the group env")
    parser.add_argument("--horizon", type=int, default=50, help="control steps per episode (all envs)")
    parser.add_argument("--episodes", type=int, default=1, help="group episodes per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--vector", nargs="+", default=["sync"], choices=["sync", "async"])


def time_alone(cfg, horizon: int, steps: int, seed: int) -> float:
    """Steps/s of one env in a plain loop, reset at each episode's end."""
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
    """Live steps/s of the group env over `episodes` episodes from fresh seeds."""
    rng = np.random.default_rng(seed)
    steps, start = 0, time.perf_counter()
    for e in range(episodes):
        env.reset(seed + e * env.num_worlds + np.arange(env.num_worlds))
        while not env.done.all():
            *_, info = env.step(rng.uniform(-1, 1, (env.num_worlds, env.action_dim)))
            steps += int(info["active"].sum())
    return steps / (time.perf_counter() - start)


def measure(name: str, vector: str, args: argparse.Namespace) -> tuple[float, float]:
    """(alone, group) steps/s of env preset `name` with the given vector env, best of repeats."""
    cfg = replace(compose_train_config(f"env={name}").env, horizon=args.horizon, vector=vector)
    env = GymGroupEnv(cfg, args.worlds)
    time_group(env, 1, 10**6)  # warm-up (and the seeding check)
    alone_steps = args.worlds * args.horizon * args.episodes // 4  # about a quarter of the group's time
    alone, group = [], []
    for r in range(args.repeats):
        alone.append(time_alone(cfg, args.horizon, alone_steps, 1000 * r))
        group.append(time_group(env, args.episodes, 1000 * r))
    env.close()
    return max(alone), max(group)


def benchmark(args: argparse.Namespace) -> Iterator[str]:
    """The report's lines, each row as soon as it is measured."""
    yield f"machine: {machine.one_line()}"
    yield f"B = {args.worlds} worlds, horizon {args.horizon}, best of {args.repeats} repeats\n"
    yield "| env | vector | alone steps/s | group steps/s | group/alone |"
    yield "| --- | --- | ---: | ---: | ---: |"
    for name in args.envs:
        for vector in args.vector:
            a, g = measure(name, vector, args)
            yield row(name, vector, f"{a:,.0f}", f"{g:,.0f}", f"{g / a:.2f}")
