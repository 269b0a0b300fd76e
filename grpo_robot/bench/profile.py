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


def time_update(policy: str, device: str, minibatch_steps: int, horizon: int, repeats: int,
                overrides: Sequence[str] = ()) -> float:  # fmt: skip
    """Samples/s of `Learner.update` with minibatches of `minibatch_steps` steps; `overrides`:
    Hydra overrides of the policy (e.g. `policy.bins=64`)."""
    from dataclasses import replace

    from grpo_robot.trainer import Trainer

    n_traj = max(1, minibatch_steps // horizon) * 8  # 8 minibatches per epoch
    cfg = compose("experiment=push_from_scratch", f"policy={policy}", f"device={device}", "progress=false", *overrides)
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
    policies: Sequence[str], devices: Sequence[str] | None, minibatches: Sequence[int], horizon: int, repeats: int,
    overrides: Sequence[str] = (),
) -> Iterator[str]:
    """Lines of the samples/s table of `Trainer.update`, a row per policy and device (default: the
    CPU, and CUDA when present), a column per minibatch size; `overrides` apply to every policy."""
    devices = devices or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    yield f"machine: {machine.one_line()}, torch threads {torch.get_num_threads()}"
    extra = f", overrides: {' '.join(overrides)}" if overrides else ""
    yield f"GRPO update samples/s (one sample = one action step), best of {repeats}{extra}\n"
    yield row("policy", "device", *(f"minibatch {m}" for m in minibatches))
    yield "| --- | --- |" + " ---: |" * len(minibatches)
    for policy in policies:
        for device in devices:
            rates = [time_update(policy, device, m, horizon, repeats, overrides) for m in minibatches]
            yield row(policy, device, *(f"{r:,.0f}" for r in rates))


class ProfiledEnv:
    """A `GroupEnv` around a `BatchedEnv` that keeps what the physics of each episode received
    (start states and mocap positions at `reset`, the actions from the batch afterwards, `take`)
    for the open-loop replay that gives the physical limit, and the observations the policy was
    given (to time the policy alone afterwards). Nothing is recorded between reset and the end of
    the rollout, so the rollout it times runs as it does in training."""

    def __init__(self, env) -> None:
        self.env = env
        self.recordings: list = []
        self.observations: list[torch.Tensor] = []  # per control step of every episode: [B, obs_dim]
        self._physics_before = 0.0  # the env's physics seconds at the last `forget`

    def __getattr__(self, name):  # every other attribute of the GroupEnv interface
        return getattr(self.env, name)

    @property
    def physics_seconds(self) -> float:
        """The env's physics seconds since the last `forget`."""
        return self.env.physics_seconds - self._physics_before

    def forget(self) -> None:
        """Drop what was recorded so far (warm-up iterations) and count physics from now."""
        self.recordings.clear()
        self.observations.clear()
        self._physics_before = self.env.physics_seconds

    def reset(self, seeds):
        from grpo_robot.bench.limit import Recording

        env = self.env
        obs = env.reset(seeds)
        actions = np.zeros((env.horizon, env.num_worlds, env.action_dim))  # rows after a world ends stay 0
        self.recordings.append(Recording(env.state.copy(), env.mocap_pos.copy(), actions))
        return obs

    def take(self, batch: Batch, policy) -> None:
        """Complete the last episode's recording from its `batch` (the rollout has ended): each
        world's actions on its live steps (`batch.mask`) as the env received them (`to_action` of
        the raw sample, clipped), its length, and the policy's observations."""
        rec = self.recordings[-1]
        mask = batch.mask.cpu().numpy()
        with torch.no_grad():
            actions = policy.to_action(batch.raw).cpu().numpy()
        t, b = np.nonzero(mask)
        rec.actions[t, b] = np.clip(actions[t, b], -1.0, 1.0)
        rec.lengths = self.env.steps.copy()
        self.observations.extend(batch.obs.unbind(0))


BEFORE = ("rollout.split=1", "rollout.policy_threads=null")  # the rollout as it was before the split


def profiled_trainer(overrides: Sequence[str]):
    """A `Trainer` of the default job with `overrides`, its env wrapped in a `ProfiledEnv` that
    completes each episode's recording from the batch the sampler draws."""
    from grpo_robot.environment import make_env
    from grpo_robot.trainer import Trainer

    cfg = compose("experiment=push_from_scratch", "progress=false", *overrides)
    env = ProfiledEnv(make_env(cfg.env, cfg.algo.groups_per_iter * cfg.algo.group_size))
    trainer = Trainer(cfg, "/tmp/grpo-robot-profile-unused", env=env)
    sampler, recorded = trainer.sampler, trainer.sampler.recorded

    def take_then_record(groups, batch):
        env.take(batch, trainer.policy)
        return recorded(groups, batch)

    sampler.recorded = take_then_record
    return trainer


def profile_parts(trainer, rollout_s: float, update_s: float, limit_s: float, steps: int) -> dict[str, float]:
    """Seconds of each part over the `steps` env steps a `profiled_trainer` ran since its env's
    last `forget`, and the rates; `limit_s`: the open-loop replay of the same episodes
    (`replay_seconds`)."""
    from grpo_robot.rollout import torch_threads
    from grpo_robot.seeding import iteration_generator

    env, cfg = trainer.sampler.env, trainer.cfg
    # the policy alone: the same calls on the same observations, with the iteration's own stream
    # and the rollout's thread setting
    generator = iteration_generator(cfg.seed, 0, trainer.device)
    threads = cfg.rollout.policy_threads if trainer.device.type == "cpu" else None
    start = time.perf_counter()
    with torch.no_grad(), torch_threads(threads):
        for obs in env.observations:
            trainer.policy.sample(obs, generator)
    if trainer.device.type == "cuda":
        torch.cuda.synchronize()
    sample = time.perf_counter() - start
    return {
        "physics": env.physics_seconds,
        "sample": sample,
        "rest": rollout_s - env.physics_seconds,
        "rollout": rollout_s,
        "update": update_s,
        "total": rollout_s + update_s,
        "rate": steps / rollout_s,
        "physics_rate": steps / env.physics_seconds,
        "limit_rate": sum(int(r.lengths.sum()) for r in env.recordings) / limit_s,
        "steps": steps,
    }


def replay_seconds(replay, recordings) -> float:
    """Seconds of the open-loop replay of `recordings` (`LimitReplay`), best of 2."""
    return min(replay.run(recordings) for _ in range(2))


def cmd_profile(args: argparse.Namespace) -> None:
    """Time one iteration's parts, the rollout as it was (`args.before`, default `BEFORE`) and as
    configured, side by side: their iterations alternate, and each iteration's episodes are
    replayed open loop right after it (the physical limit), so machine drift hits all alike. The
    env and its physics are timed from inside (`ProfiledEnv`, `BatchedEnv.physics_seconds`, on the
    physics thread when the rollout is split), the policy by replaying its inputs, the update
    around it."""
    from grpo_robot.bench.limit import LimitReplay

    before = tuple(args.before or BEFORE)
    variants = {"before": profiled_trainer([*args.overrides, *before]), "after": profiled_trainer(args.overrides)}
    replays = {name: LimitReplay(t.sampler.env.env, t.sampler.env.nthread) for name, t in variants.items()}
    for trainer in variants.values():  # untimed: the state of a run that has begun to succeed
        for _ in range(args.warmup):
            trainer.train_iteration()
        trainer.sampler.env.forget()
    start_steps = {name: t.env_steps for name, t in variants.items()}
    times = {name: [0.0, 0.0, 0.0] for name in variants}  # rollout, update, limit
    for _ in range(args.iterations):
        for name, trainer in variants.items():
            recordings = trainer.sampler.env.recordings
            first = len(recordings)
            scalars = trainer.train_iteration().scalars
            times[name][0] += scalars["time/rollout_s"]
            times[name][1] += scalars["time/update_s"]
            times[name][2] += replay_seconds(replays[name], recordings[first:])
    parts = {name: profile_parts(trainer, *times[name], trainer.env_steps - start_steps[name])
             for name, trainer in variants.items()}  # fmt: skip
    n = args.iterations
    after = variants["after"].cfg.rollout
    print(f"machine: {machine.one_line()}; {machine.usable_cores()} physics threads")
    warm = f", after {args.warmup} untimed" if args.warmup else ""
    print(f"{n} iterations each of experiment=push_from_scratch {' '.join(args.overrides)}".rstrip()
          + f"{warm}, {parts['after']['steps'] / n:,.0f} env steps each, alternating; "
          "mean s per iteration")  # fmt: skip
    threads = "null" if after.policy_threads is None else after.policy_threads
    ran = variants["after"].sampler._settings  # the split and threads the rollout ran with (at most env.nthread parts)
    split = after.split if ran is None or ran[0] == after.split else f"{after.split} (ran {ran[0]})"
    print(f"before: {' '.join(before)}; after: rollout.split={split} rollout.policy_threads={threads} "
          f"rollout.parallel_parts={str(after.parallel_parts).lower()} "
          f"rollout.take_turns={str(after.take_turns).lower()}\n")  # fmt: skip
    print("| part | before | after |")
    print("| --- | ---: | ---: |")
    for key, name in (
        ("physics", "rollout: physics (mujoco.rollout; on threads of its own when split)"),
        ("sample", "rollout: policy inference (sample, replayed alone)"),
        ("rest", "rollout: not hidden behind physics (policy, bookkeeping, tensors, waits)"),
        ("update", "update (advantages, K epochs, obs-norm)"),
        ("total", "total"),
    ):
        print(f"| {name} | {parts['before'][key] / n:.3f} | {parts['after'][key] / n:.3f} |")
    print()
    for name, p in parts.items():
        print(f"{name}: rollout during training {p['rate']:,.0f} env steps/s (physics calls alone: "
              f"{p['physics_rate']:,.0f}); physical limit {p['limit_rate']:,.0f}; "
              f"rollout / limit: {p['rate'] / p['limit_rate']:.2f}")  # fmt: skip
    print("(physical limit: each iteration's episodes replayed open-loop right after it, each world "
          "for its own length, one mujoco.rollout call per distinct length, best of 2)")
    ratio = parts["before"]["total"] / parts["after"]["total"]
    print(f"rollout / limit: {parts['after']['rate'] / parts['after']['limit_rate']:.2f} "
          f"(after); iteration speed-up {ratio:.2f}x")  # fmt: skip


def sample_costs(
    overrides: Sequence[str] = (), calls: int = 200
) -> tuple[int, str, dict[str, tuple[float, float, float]]]:
    """`(rows, clock, costs)`: ms per call of the default job's policy on one part of its rollout's
    worlds (`rows` of them, as `rollout.split` cuts the batch), `(back to back, each right after a
    physics step of the whole batch, each right after the thread slept as long as a physics step
    takes)`, in thread CPU time (wall time on CUDA, synchronized): `sample` (what the rollout
    calls) and, for the Gaussian, `distribution` (observation normalization, the network, its
    mean and std). Inside the rollout every call comes right after a physics call; the third
    column tells how much of what that costs comes from the physics' use of the caches and how
    much from the time the thread spent away from the policy's code alone."""
    from grpo_robot.environment import make_env
    from grpo_robot.rollout import split_bounds, torch_threads
    from grpo_robot.trainer import Trainer

    cfg = compose("experiment=push_from_scratch", "progress=false", *overrides)
    num_worlds = cfg.algo.groups_per_iter * cfg.algo.group_size
    env = make_env(cfg.env, num_worlds)
    trainer = Trainer(cfg, "/tmp/grpo-robot-benchmark-unused", env=env)
    policy, device = trainer.policy, trainer.device
    part = split_bounds(num_worlds, max(1, cfg.rollout.split))[0]
    seeds = np.repeat(np.arange(cfg.algo.groups_per_iter), cfg.algo.group_size)
    obs_np = env.reset(seeds)[part]
    generator = torch.Generator(device=device).manual_seed(0)
    clock = time.perf_counter if device.type == "cuda" else time.thread_time

    def obs() -> torch.Tensor:
        return torch.as_tensor(obs_np.astype(np.float32), device=device)

    candidates = {"sample": lambda: policy.sample(obs(), generator)}
    if hasattr(policy, "distribution"):  # the Gaussian's
        candidates["distribution"] = lambda: policy.distribution(obs())

    def physics_step() -> None:
        if env.done.all():
            env.reset(seeds)
        env.step(np.zeros((num_worlds, env.action_dim), np.float32))

    physics_wall = []

    def timed_physics_step() -> None:
        start = time.perf_counter()
        physics_step()
        physics_wall.append(time.perf_counter() - start)

    def pause() -> None:
        time.sleep(float(np.mean(physics_wall)))

    def per_call(fn, before) -> float:
        total = 0.0
        for _ in range(calls):
            if before is not None:
                before()
            start = clock()
            fn()
            if device.type == "cuda":
                torch.cuda.synchronize()
            total += clock() - start
        return 1e3 * total / calls

    threads = cfg.rollout.policy_threads if device.type == "cpu" else None
    out = {}
    with torch.no_grad(), torch_threads(threads):
        for name, fn in candidates.items():
            for _ in range(20):
                fn()  # warm-up: allocations, lazy imports
            out[name] = (per_call(fn, None), per_call(fn, timed_physics_step), per_call(fn, pause))
    trainer.close()
    return part.stop - part.start, "wall time" if device.type == "cuda" else "thread CPU time", out


def cmd_sample(args: argparse.Namespace) -> None:
    """Print `sample_costs` as a table, with the machine and versions."""
    rows, clock, costs = sample_costs(args.overrides, args.calls)
    print(f"machine: {machine.one_line()}; {machine.usable_cores()} physics threads")
    print(f"experiment=push_from_scratch {' '.join(args.overrides)}".rstrip()
          + f": one part of the rollout, {rows} worlds; ms of {clock} per call, mean of {args.calls}\n")
    print("| call | back to back | right after a physics step | extra | right after sleeping as long | extra |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, (warm, cold, paused) in costs.items():
        print(f"| {name} | {warm:.3f} | {cold:.3f} | {cold - warm:+.3f} | {paused:.3f} | {paused - warm:+.3f} |")
