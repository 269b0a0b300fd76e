"""The training loop's benchmarks: GRPO update throughput (`update_table`) and where one
training iteration of the default job spends its time (`cmd_profile`)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator, Sequence

import numpy as np
import torch

from grpo_robot import machine
from grpo_robot.bench.markdown import row
from grpo_robot.cli import compose_train_config as compose
from grpo_robot.rollout import Batch

POLICY_PRESETS = ("gaussian", "tokenized_factorized", "tokenized_autoregressive")


def synthetic_batch(trainer, n_traj: int, horizon: int, generator: torch.Generator) -> tuple[Batch, torch.Tensor]:
    """`n_traj` full-length trajectories sampled from the trainer's policy on random observations,
    and one random advantage per step (the same along each trajectory)."""
    policy, device = trainer.policy, trainer.device
    obs = torch.randn(horizon, n_traj, policy.obs_dim, generator=generator).to(device)
    with torch.no_grad():
        raw, _, logp = policy.sample(obs.flatten(0, 1))
    mask = torch.ones(horizon, n_traj, dtype=torch.bool, device=device)
    success = torch.zeros(n_traj, device=device)
    batch = Batch(obs, raw.view(horizon, n_traj, -1), logp.view(horizon, n_traj, -1), mask, success, success > 0)
    per_traj = torch.randn(n_traj, generator=generator).to(device)
    return batch, per_traj[batch.packed()[3]]


def time_update(policy: str, device: str, minibatch_steps: int, horizon: int, repeats: int) -> float:
    """Samples/s of `Learner.update` with minibatches of `minibatch_steps` steps."""
    from dataclasses import replace

    from grpo_robot.trainer import Trainer

    n_traj = max(1, minibatch_steps // horizon) * 8  # 8 minibatches per epoch
    cfg = compose("experiment=push_from_scratch", f"policy={policy}", f"device={device}", "progress=false")
    cfg = replace(cfg, algo=replace(cfg.algo, epochs=1, minibatches=8, group_size=8, groups_per_iter=n_traj // 8))
    trainer = Trainer(cfg, "/tmp/grpo-robot-benchmark-unused")
    batch, advantages = synthetic_batch(trainer, n_traj, horizon, torch.Generator().manual_seed(0))
    trainer.learner.update(batch, advantages, 0)  # warm-up: allocations, kernels
    best = 0.0
    for _ in range(repeats):
        if trainer.device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        trainer.learner.update(batch, advantages, 0)
        if trainer.device.type == "cuda":
            torch.cuda.synchronize()
        best = max(best, batch.valid_steps / (time.perf_counter() - start))
    trainer.close()
    return best


def update_table(
    policies: Sequence[str], devices: Sequence[str] | None, minibatches: Sequence[int], horizon: int, repeats: int
) -> Iterator[str]:
    """Lines of the samples/s table of `Trainer.update`, a row per policy and device (default: the
    CPU, and CUDA when present), a column per minibatch size."""
    devices = devices or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    yield f"machine: {machine.one_line()}, torch threads {torch.get_num_threads()}"
    yield f"GRPO update samples/s (one sample = one action step), best of {repeats}\n"
    yield row("policy", "device", *(f"minibatch {m}" for m in minibatches))
    yield "| --- | --- |" + " ---: |" * len(minibatches)
    for policy in policies:
        for device in devices:
            rates = [time_update(policy, device, m, horizon, repeats) for m in minibatches]
            yield row(policy, device, *(f"{r:,.0f}" for r in rates))


class ProfiledEnv:
    """A `GroupEnv` around a `BatchedEnv` that times its steps and records what the physics
    received (initial states and actions, for the open-loop replay that gives the physical limit)
    and the observations the policy was given (to time the policy alone afterwards)."""

    def __init__(self, env) -> None:
        self.env, self.step_seconds = env, 0.0
        self.recordings: list = []
        self.observations: list[np.ndarray] = []

    def __getattr__(self, name):  # every other attribute of the GroupEnv interface
        return getattr(self.env, name)

    @property
    def done(self) -> np.ndarray:
        return self.env.done

    def reset(self, seeds):
        from grpo_robot.bench.limit import Recording

        env = self.env
        obs = env.reset(seeds)
        actions = np.zeros((env.horizon, env.num_worlds, env.action_dim))  # rows after a world ends stay 0
        self.recordings.append(Recording(env.state.copy(), env.mocap_pos.copy(), actions))
        self.observations.append(obs.copy())
        return obs

    def step(self, actions):
        env = self.env
        live = ~env.done  # every live world has taken the same number of steps
        self.recordings[-1].actions[int(env.steps[live][0]), live] = np.clip(actions[live], -1.0, 1.0)
        start = time.perf_counter()
        out = env.step(actions)
        self.step_seconds += time.perf_counter() - start
        if not env.done.all():
            self.observations.append(out[0].copy())
        return out


def cmd_profile(args: argparse.Namespace) -> None:
    """Time one iteration's parts: the env and its physics from inside (`ProfiledEnv`,
    `BatchedEnv.physics_seconds`), the policy by replaying its inputs, the update around it."""
    import grpo_robot.batched as batched
    from grpo_robot.bench.limit import LimitReplay
    from grpo_robot.environment import make_env
    from grpo_robot.seeding import iteration_generator
    from grpo_robot.trainer import Trainer

    cfg = compose("experiment=push_from_scratch", "progress=false", *args.overrides)
    env = ProfiledEnv(make_env(cfg.env, cfg.algo.groups_per_iter * cfg.algo.group_size))
    trainer = Trainer(cfg, "/tmp/grpo-robot-profile-unused", env=env)
    rollout_s = update_s = 0.0
    steps = 0
    for _ in range(args.iterations):
        record = trainer.train_iteration()
        rollout_s += record.scalars["time/rollout_s"]
        update_s += record.scalars["time/update_s"]
    steps = trainer.env_steps
    # the policy alone: the same calls on the same observations, with the iteration's own stream
    generator = iteration_generator(cfg.seed, 0, trainer.device)
    start = time.perf_counter()
    with torch.no_grad():
        for obs in env.observations:
            trainer.policy.sample(torch.as_tensor(obs, device=trainer.device), generator)
    if trainer.device.type == "cuda":
        torch.cuda.synchronize()
    sample = time.perf_counter() - start
    replay = LimitReplay(env.env, env.nthread)
    limit_s = min(replay.run(env.recordings) for _ in range(2))  # best of 2
    limit_rate = len(env.recordings) * env.num_worlds * env.horizon / limit_s
    n = args.iterations
    physics = env.physics_seconds
    env_other = env.step_seconds - physics
    other = rollout_s - env.step_seconds - sample
    print(f"machine: {machine.one_line()}; {batched.default_threads()} physics threads")
    print(f"{n} iterations of experiment=push_from_scratch, {steps / n:,.0f} env steps each; mean s per iteration\n")
    print("| part | s/iteration | share |")
    print("| --- | ---: | ---: |")
    total = rollout_s + update_s
    for name, value in (
        ("rollout: physics (mujoco.rollout)", physics),
        ("rollout: env bookkeeping (step minus physics)", env_other),
        ("rollout: policy inference (sample, replayed)", sample),
        ("rollout: collect loop and tensors", other),
        ("update (advantages, K epochs, obs-norm)", update_s),
    ):
        print(f"| {name} | {value / n:.3f} | {value / total:.0%} |")
    print(f"| total | {total / n:.3f} | |")
    rate = steps / rollout_s
    print(f"\nrollout during training: {rate:,.0f} env steps/s (physics calls alone: {steps / physics:,.0f})")
    print(f"physical limit, the same episodes replayed open-loop in one mujoco.rollout call each: {limit_rate:,.0f}")
    print(f"rollout / limit: {rate / limit_rate:.2f}")
