"""What `rollout.backend=ray` costs and gains: env steps/s of one iteration's draw of groups.

For each env preset (composed as `scripts/train.py env=<preset>` would, with the groups and
horizon given here) and a policy with its initial weights:

- local (T threads): `GroupSampler.draw` on the trainer's own env, `env.nthread=T` (built-in
  tasks; a Gymnasium env steps in this one process, so it is timed with one thread only);
- ray K: `RaySampler.draw` with K workers, each one thread; the weights go through the object
  store and the slices come back, all inside the timed region.

steps/s counts the env steps the draw simulated. Every configuration draws the same groups
(iteration 0, 1, ...), in turns (local, ray 1, ray 2, ...), so all see the same machine load; each
figure is the best of `repeats`. Ratios are against `local (1 thread)` for the overhead of one
worker and against `ray 1` for scaling. Ray workers reserve `--cpus-per-worker` CPUs (0.01 by
default, so that the samplers of every K can stay up side by side; each still runs one thread).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import torch

from grpo_robot import machine
from grpo_robot.bench.markdown import row
from grpo_robot.cli import compose_train_config
from grpo_robot.config import RolloutConfig, policy_kwargs
from grpo_robot.environment import make_env
from grpo_robot.policies import build_policy
from grpo_robot.rollout import GroupSampler

PRESETS = {  # env preset -> (groups, group size, horizon): a draw of a few seconds on one core
    "push_cube": (32, 16, None),
    "robosuite_lift": (4, 4, 50),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--envs", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--threads", nargs="+", type=int, default=None,
                        help="local physics threads to time (default: 1 and the largest worker count)")  # fmt: skip
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cpus-per-worker", type=float, default=0.01)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--train-iterations", type=int, default=0,
                        help="also train each env this many iterations, local then ray (--train-workers)")  # fmt: skip
    parser.add_argument("--train-workers", type=int, default=2)
    parser.add_argument("--plot", type=Path, default=None,
                        help="draw env steps/s against workers (with linear scaling from ray 1) into this PNG")
    parser.add_argument("--plot-only", type=Path, default=None, metavar="JSON",
                        help="only draw --plot from the figures a previous --json wrote")  # fmt: skip


def draw_rate(sampler: GroupSampler, policy, it: int) -> float:
    start = time.perf_counter()
    batch = sampler.draw(policy, it)
    return batch.simulated_steps / (time.perf_counter() - start)


def measure(name: str, args: argparse.Namespace) -> dict[str, float]:
    """{configuration: best steps/s} for env preset `name`."""
    from grpo_robot.ray_rollout import RaySampler

    groups, size, horizon = PRESETS[name]
    overrides = [f"env={name}", f"algo.groups_per_iter={groups}", f"algo.group_size={size}", "device=cpu"]
    cfg = compose_train_config(*overrides, *([f"env.horizon={horizon}"] if horizon else []))
    probe = make_env(cfg.env, 1)
    torch.manual_seed(0)
    policy = build_policy(cfg.policy.type, probe.obs_dim, probe.action_dim, **policy_kwargs(cfg.policy, cfg.env))
    probe.close()
    samplers: dict[str, GroupSampler] = {}
    threads = args.threads or sorted({1, max(args.workers)})
    for t in threads if cfg.env.task else [1]:  # a Gymnasium env steps in one thread whatever nthread is
        env = make_env(replace(cfg.env, nthread=t), groups * size)
        samplers[f"local ({t} thread{'s' * (t > 1)})"] = GroupSampler(env, 0, groups, size, torch.device("cpu"))
    for k in args.workers:
        rollout = RolloutConfig(backend="ray", workers=k, cpus_per_worker=args.cpus_per_worker)
        samplers[f"ray {k}"] = RaySampler(replace(cfg, rollout=rollout), policy, torch.device("cpu"))
    best: dict[str, float] = {}
    try:
        for sampler in samplers.values():  # warm-up: first resets, worker start-up
            draw_rate(sampler, policy, 10**6)
        for r in range(args.repeats):
            for key, sampler in samplers.items():
                best[key] = max(best.get(key, 0.0), draw_rate(sampler, policy, r))
    finally:
        for sampler in samplers.values():
            sampler.close()
            if sampler.env is not None:
                sampler.env.close()
    return best


def train_compare(name: str, iterations: int, workers: int, run_dir: Path) -> dict[str, object]:
    """Train env preset `name` for `iterations` (the draw sizes of PRESETS, seed 0) on the local
    backend and on `workers` Ray workers -> wall-clock of each and whether the final parameters
    are bit-identical."""
    from grpo_robot.trainer import Trainer

    groups, size, horizon = PRESETS[name]
    overrides = [f"env={name}", f"algo.groups_per_iter={groups}", f"algo.group_size={size}", "device=cpu",
                 f"iterations={iterations}", "eval_seeds=4", "eval_every=1000000", "progress=false",
                 *([f"env.horizon={horizon}"] if horizon else [])]  # fmt: skip
    out: dict[str, object] = {}
    weights = []
    for backend in ("local", "ray"):
        cfg = compose_train_config(*overrides, f"rollout.backend={backend}", f"rollout.workers={workers}",
                                   "rollout.cpus_per_worker=0.01")  # fmt: skip
        trainer = Trainer(cfg, run_dir / f"{name}_{backend}")
        start = time.perf_counter()
        try:
            trainer.run()
        finally:
            trainer.close()
        out[f"{backend}_seconds"] = time.perf_counter() - start
        weights.append(trainer.policy.state_dict())
    out["identical"] = all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    return out


def plot(record: dict, path: Path) -> None:
    """Env steps/s against Ray workers, one panel per env, with linear scaling from one worker
    and the local backend's best as references."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = record["steps_per_s"]
    fig, axes = plt.subplots(1, len(envs), figsize=(4.2 * len(envs), 3.6), squeeze=False)
    for ax, (name, best) in zip(axes[0], envs.items(), strict=True):
        ks = sorted(int(key.split()[1]) for key in best if key.startswith("ray "))
        rates = [best[f"ray {k}"] for k in ks]
        ax.plot(ks, rates, "o-", label="ray workers")
        ax.plot(ks, [rates[0] * k / ks[0] for k in ks], "--", color="gray", label="linear from 1 worker")
        local = max(v for key, v in best.items() if key.startswith("local"))
        ax.axhline(local, color="tab:orange", linestyle=":", label="local backend (best)")
        ax.set(title=name, xlabel="Ray workers", ylabel="env steps/s", xticks=ks)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    m = record["machine"]
    fig.suptitle(f"{m['cpu']}, {m['cores']} cores; ray {m.get('ray')}, mujoco {m['mujoco']}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def benchmark(args: argparse.Namespace) -> Iterator[str]:
    """The report's lines, each env's rows as soon as they are measured."""
    import ray

    if args.plot_only is not None:
        plot(json.loads(args.plot_only.read_text()), args.plot or args.plot_only.with_suffix(".png"))
        yield f"written: {args.plot or args.plot_only.with_suffix('.png')}"
        return

    info = machine.describe("ray")
    yield f"machine: {machine.one_line(info)}, ray {info['ray']}"
    yield f"best of {args.repeats} draws per configuration, taken in turns\n"
    yield "| env | backend | env steps/s | / local 1 thread | / ray 1 |"
    yield "| --- | --- | ---: | ---: | ---: |"
    started = not ray.is_initialized()
    if started:
        ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    results: dict[str, dict[str, float]] = {}
    try:
        for name in args.envs:
            best = results[name] = measure(name, args)
            local1, ray1 = best.get("local (1 thread)"), best.get("ray 1")
            for key, rate in best.items():
                yield row(name, key, f"{rate:,.0f}", f"{rate / local1:.2f}" if local1 else "-",
                          f"{rate / ray1:.2f}" if ray1 and key.startswith("ray") else "-")  # fmt: skip
        trained: dict[str, dict[str, object]] = {}
        if args.train_iterations:
            import tempfile

            yield f"\ntraining {args.train_iterations} iterations, seed 0: local against ray {args.train_workers}\n"
            yield "| env | local s | ray s | local / ray | parameters |"
            yield "| --- | ---: | ---: | ---: | --- |"
            with tempfile.TemporaryDirectory() as tmp:
                for name in args.envs:
                    t = trained[name] = train_compare(name, args.train_iterations, args.train_workers, Path(tmp))
                    yield row(name, f"{t['local_seconds']:.1f}", f"{t['ray_seconds']:.1f}",
                              f"{t['local_seconds'] / t['ray_seconds']:.2f}",
                              "bit-identical" if t["identical"] else "DIFFER")  # fmt: skip
    finally:
        if started:
            ray.shutdown()
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        record = {"machine": info, "repeats": args.repeats, "steps_per_s": results, "training": trained}
        args.json.write_text(json.dumps(record, indent=1))
        yield f"\nwritten: {args.json}"
    if args.plot is not None:
        plot({"machine": info, "steps_per_s": results}, args.plot)
        yield f"written: {args.plot}"
