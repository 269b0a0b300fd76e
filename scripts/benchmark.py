"""grpo-robot benchmarks, one command with subcommands.

    python scripts/benchmark.py envs [options of scripts/benchmark_envs.py]
    python scripts/benchmark.py update [--device cpu cuda] [--minibatch 256 1024 4096 16384]
    python scripts/benchmark.py profile [--iterations 3]

- `envs`: the environment throughput table (batched backend against the physical limit and
  against Gymnasium's SyncVectorEnv); see scripts/benchmark_envs.py.
- `update`: GRPO update throughput in samples (action steps) per second, for each policy type and
  minibatch size, on the CPU and on CUDA when present. One sample is one step's log-prob,
  clipped-surrogate term, backward pass and its share of the Adam step. The batch is synthetic
  but shaped like PushCube's (22 observations, 4 actions, 100-step trajectories), with the
  default 128x128 policy of the `push_from_scratch` experiment.
- `profile`: where one training iteration of the default job (`experiment=push_from_scratch`)
  spends its time: physics, policy inference, bookkeeping, and the update.

Every table is printed with the machine and versions.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import grpo_robot  # noqa: F401  (sets the thread policy before torch loads)

# isort: split
import numpy as np
import torch

from grpo_robot import machine

SCRIPTS = Path(__file__).resolve().parent


def compose(*overrides: str):
    """The training config exactly as `scripts/train.py <overrides>` composes it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from grpo_robot.config import register_configs, to_train_config

    register_configs()
    with initialize_config_dir(str(SCRIPTS.parent / "conf"), version_base="1.3"):
        return to_train_config(hydra_compose("config", overrides=list(overrides)))


# -- update ---------------------------------------------------------------------------------------
POLICY_PRESETS = ("gaussian", "tokenized_factorized", "tokenized_autoregressive")


def synthetic_batch(trainer, n_traj: int, horizon: int, generator: torch.Generator):
    """A packed batch of `n_traj` full-length trajectories sampled from the trainer's policy."""
    policy, device = trainer.policy, trainer.device
    obs = torch.randn(n_traj * horizon, policy.obs_dim, generator=generator).to(device)
    with torch.no_grad():
        raw, _, logp = policy.sample(obs)
    traj = torch.arange(n_traj, device=device).repeat(horizon)  # t-major, like Batch.packed()
    lengths = torch.full((n_traj,), horizon, device=device)
    advantages = torch.randn(n_traj, generator=generator).to(device)
    return (obs, raw, logp, traj, lengths), advantages


def time_update(policy: str, device: str, minibatch_steps: int, horizon: int, repeats: int) -> float:
    """Samples/s of `Trainer.update` with minibatches of `minibatch_steps` steps."""
    from dataclasses import replace

    from grpo_robot.trainer import Trainer

    n_traj = max(1, minibatch_steps // horizon) * 8  # 8 minibatches per epoch
    cfg = compose("experiment=push_from_scratch", f"policy={policy}", f"device={device}", "progress=false")
    cfg = replace(cfg, algo=replace(cfg.algo, epochs=1, minibatches=8, group_size=8, groups_per_iter=n_traj // 8))
    trainer = Trainer(cfg, "/tmp/grpo-robot-benchmark-unused")
    packed, adv = synthetic_batch(trainer, n_traj, horizon, torch.Generator().manual_seed(0))
    trainer.update(packed, adv, 0)  # warm-up: allocations, kernels
    best = 0.0
    for _ in range(repeats):
        if trainer.device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        trainer.update(packed, adv, 0)
        if trainer.device.type == "cuda":
            torch.cuda.synchronize()
        best = max(best, len(packed[0]) / (time.perf_counter() - start))
    trainer.close()
    return best


def cmd_update(args: argparse.Namespace) -> None:
    devices = args.device or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    print(f"machine: {machine.one_line()}, torch threads {torch.get_num_threads()}")
    print(f"GRPO update samples/s (one sample = one action step), best of {args.repeats}\n")
    print("| policy | device | " + " | ".join(f"minibatch {m}" for m in args.minibatch) + " |")
    print("| --- | --- |" + " ---: |" * len(args.minibatch))
    for policy in args.policies:
        for device in devices:
            rates = [time_update(policy, device, m, args.horizon, args.repeats) for m in args.minibatch]
            print(f"| {policy} | {device} | " + " | ".join(f"{r:,.0f}" for r in rates) + " |", flush=True)


# -- profile --------------------------------------------------------------------------------------
def cmd_profile(args: argparse.Namespace) -> None:
    """Time one iteration's parts by wrapping the pieces the trainer calls."""
    import grpo_robot.batched as batched
    from grpo_robot.trainer import Trainer

    cfg = compose("experiment=push_from_scratch", "progress=false", *args.overrides)
    trainer = Trainer(cfg, "/tmp/grpo-robot-profile-unused")
    totals: dict[str, float] = {"physics": 0.0, "env step (all)": 0.0, "policy sample": 0.0}

    def timed(name, fn):
        def wrapper(*a, **k):
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                totals[name] += time.perf_counter() - start

        return wrapper

    env, policy = trainer.env, trainer.policy
    env._simulate = timed("physics", env._simulate)
    policy.sample = timed("policy sample", policy.sample)
    # record what the physics received, for the open-loop replay that gives the physical limit
    sys.path.insert(0, str(SCRIPTS))
    from benchmark_envs import LimitReplay, Recording

    recordings: list[Recording] = []
    reset, step = env.reset, timed("env step (all)", env.step)

    def recording_reset(seeds):
        obs = reset(seeds)
        actions = np.zeros((env.horizon, env.num_worlds, env.action_dim))  # rows after a world ends stay 0
        recordings.append(Recording(env.state.copy(), env.mocap_pos.copy(), actions))
        return obs

    def recording_step(actions):
        live = ~env.done  # every live world has taken the same number of steps
        recordings[-1].actions[int(env.steps[live][0]), live] = np.clip(actions[live], -1.0, 1.0)
        return step(actions)

    env.reset, env.step = recording_reset, recording_step
    rollout_s = update_s = 0.0
    steps = 0
    for it in range(args.iterations):
        start = time.perf_counter()
        batch = trainer.rollout(it)
        mid = time.perf_counter()
        adv, _ = trainer.advantages(batch)
        packed = batch.packed()
        trainer.update(packed, adv, it)
        trainer.policy.obs_norm.update(packed[0])
        rollout_s += mid - start
        update_s += time.perf_counter() - mid
        steps += batch.simulated_steps
    replay = LimitReplay(env, env.nthread)
    limit_s = min(replay.run(recordings) for _ in range(2))  # best of 2
    limit_rate = len(recordings) * env.num_worlds * env.horizon / limit_s
    n = args.iterations
    physics = totals["physics"]
    env_other = totals["env step (all)"] - physics
    sample = totals["policy sample"]
    other = rollout_s - totals["env step (all)"] - sample
    print(f"machine: {machine.one_line()}; {batched.default_threads()} physics threads")
    print(f"{n} iterations of experiment=push_from_scratch, {steps / n:,.0f} env steps each; mean s per iteration\n")
    print("| part | s/iteration | share |")
    print("| --- | ---: | ---: |")
    total = rollout_s + update_s
    for name, value in (
        ("rollout: physics (mujoco.rollout)", physics),
        ("rollout: env bookkeeping (step minus physics)", env_other),
        ("rollout: policy inference (sample)", sample),
        ("rollout: collect loop and tensors", other),
        ("update (advantages, K epochs, obs-norm)", update_s),
    ):
        print(f"| {name} | {value / n:.3f} | {value / total:.0%} |")
    print(f"| total | {total / n:.3f} | |")
    rate = steps / rollout_s
    print(f"\nrollout during training: {rate:,.0f} env steps/s (physics calls alone: {steps / physics:,.0f})")
    print(f"physical limit, the same episodes replayed open-loop in one mujoco.rollout call each: {limit_rate:,.0f}")
    print(f"rollout / limit: {rate / limit_rate:.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("envs", help="environment throughput (scripts/benchmark_envs.py)", add_help=False)
    update = sub.add_parser("update", help="update throughput, samples/s")
    update.add_argument("--device", nargs="+", choices=["cpu", "cuda"], help="default: cpu, and cuda when present")
    update.add_argument("--policies", nargs="+", default=list(POLICY_PRESETS), choices=POLICY_PRESETS)
    update.add_argument("--minibatch", nargs="+", type=int, default=[256, 1024, 4096, 16384], help="steps")
    update.add_argument("--horizon", type=int, default=100, help="steps per synthetic trajectory")
    update.add_argument("--repeats", type=int, default=3)
    profile = sub.add_parser("profile", help="one training iteration of the default job, split by part")
    profile.add_argument("--iterations", type=int, default=3)
    profile.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. policy=tokenized_factorized")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["envs"]:
        sys.path.insert(0, str(SCRIPTS))
        import benchmark_envs

        return benchmark_envs.main(argv[1:])
    args = parser.parse_args(argv)
    {"update": cmd_update, "profile": cmd_profile}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
