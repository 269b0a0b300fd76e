"""grpo-robot benchmarks, one command with subcommands.

    python scripts/benchmark.py envs [options of scripts/benchmark_envs.py]
    python scripts/benchmark.py gym-envs [options of scripts/benchmark_gym_envs.py]
    python scripts/benchmark.py update [--device cpu cuda] [--minibatch 256 1024 4096 16384]
    python scripts/benchmark.py profile [--iterations 3]

- `envs`: the environment throughput table (batched backend against the physical limit and
  against Gymnasium's SyncVectorEnv); see scripts/benchmark_envs.py.
- `gym-envs`: what the Gymnasium backend costs on Fetch and robosuite envs against the env
  stepped alone; see scripts/benchmark_gym_envs.py.
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
from grpo_robot.cli import compose_train_config as compose

SCRIPTS = Path(__file__).resolve().parent


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


# -- train: time to target -------------------------------------------------------------------------
BC_PRESETS = {"PushCube": "push_cube_bc", "LiftCube": "lift_cube_bc", "PlaceCube": "place_cube_bc"}
ENV_PRESETS = {"Reach": "reach", "PushCube": "push_cube", "LiftCube": "lift_cube", "PlaceCube": "place_cube"}


def bc_checkpoint(task: str, seed: int, out: Path) -> Path:
    """The behaviour-cloned start of `experiment=<task>_bc seed=<seed>`, made once and shared by every
    algorithm of that seed: demos, cloning and its evaluation, as the pipeline would."""
    from grpo_robot.trainer import Trainer

    run_dir = out / f"bc_seed{seed}"
    if not (run_dir / "bc.pt").is_file():
        trainer = Trainer(compose(f"experiment={BC_PRESETS[task]}", f"seed={seed}", "progress=false"), run_dir)
        trainer.pretrain()
        trainer.close()
    return run_dir / "bc.pt"


def parse_algo(spec: str) -> tuple[str, str, list[str]]:
    """`--algos` entry -> (label, algo preset, extra Hydra overrides). An entry is a preset name
    (`grpo`) or `label=preset:override,override` (`grpo_k10=grpo:algo.epochs=10,algo.minibatches=16`)."""
    if "=" not in spec.split(":")[0]:
        return spec, spec, []
    label, _, rest = spec.partition("=")
    preset, _, extra = rest.partition(":")
    if not label or not preset:
        raise SystemExit(f"--algos {spec!r}: expected PRESET or LABEL=PRESET:KEY=VALUE,KEY=VALUE")
    return label, preset, [o for o in extra.split(",") if o]


def run_config(task: str, algo: str, start: str, seed: int, args: argparse.Namespace, init: Path | None):
    """The training config of one benchmark run: the task's pipeline preset from a BC start, the
    default job's settings on the task from scratch; the algorithm preset (and the `--algos`
    entry's overrides); stop at the target."""
    _, preset, extra = parse_algo(algo)
    experiment = f"experiment={BC_PRESETS[task]}" if start == "bc" else "experiment=push_from_scratch"
    overrides = [experiment, f"env={ENV_PRESETS[task]}", f"algo={preset}", f"seed={seed}", "pretrain=false",
                 f"target_success={args.target}", f"eval_every={args.eval_every}", f"eval_seeds={args.eval_seeds}",
                 f"iterations={args.iterations}", f"time_limit_min={args.time_limit_min}",
                 "progress=false"]  # fmt: skip
    if init is not None:
        overrides.append(f"init_from={init}")
    else:
        overrides.append("eval_at_start=true")
    return compose(*overrides, *extra)


def eval_curve(run_dir: Path) -> dict[str, list[float]]:
    """Evaluation success against env steps and seconds since the run's first event, from TensorBoard."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tb"))
    events.Reload()
    points = events.Scalars("charts/eval_success")
    t0 = min(e.wall_time for tag in events.Tags()["scalars"] for e in events.Scalars(tag)[:1])
    return {
        "env_steps": [p.step for p in points],
        "seconds": [p.wall_time - t0 for p in points],
        "success": [p.value for p in points],
    }


def cmd_train(args: argparse.Namespace) -> None:
    import json

    from grpo_robot.config import validate
    from grpo_robot.trainer import Trainer

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.is_file() else []
    done = {(r["start"], r["algo"], r["seed"]) for r in results}
    if "bc" in args.starts and args.task not in BC_PRESETS:
        raise SystemExit(f"--task {args.task} has no BC preset; --starts bc takes {', '.join(BC_PRESETS)}")
    for spec in args.algos:  # a bad preset or override fails here, before any run starts
        try:
            validate(run_config(args.task, spec, "scratch", 0, args, None))
        except Exception as e:  # Hydra's composition errors and ConfigError alike
            raise SystemExit(f"--algos {spec!r}: {str(e).splitlines()[0]}") from None
    for seed in args.seeds:
        for start in args.starts:
            init = bc_checkpoint(args.task, seed, out) if start == "bc" else None
            for spec in args.algos:
                algo = parse_algo(spec)[0]
                if (start, algo, seed) in done:
                    continue
                run_dir = out / f"{start}_{algo}_seed{seed}"
                trainer = Trainer(run_config(args.task, spec, start, seed, args, init), run_dir)
                summary = trainer.run()
                trainer.close()
                record = {"task": args.task, "start": start, "algo": algo, "spec": spec, "seed": seed,
                          "target": summary["target"],
                          "iterations": summary["iterations"], "env_steps": summary["env_steps"],
                          "seconds": summary["seconds"], "eval_seconds": summary["eval_seconds"],
                          "final_success": summary["eval"]["success_rate"], "curve": eval_curve(run_dir),
                          "machine": summary["machine"]}  # fmt: skip
                results.append(record)
                results_path.write_text(json.dumps(results, indent=1))
                t = record["target"]
                when = f"{t['env_steps']:,} env steps, {t['train_seconds']:.0f} s" if t["reached"] else "not reached"
                print(f"{args.task} {start} {algo} seed {seed}: target {args.target:.0%} {when}", flush=True)
    if args.sb3_steps:
        from sb3_reference import run_sb3

        for seed in args.seeds:
            for start in args.starts:
                if (start, "sb3_ppo", seed) not in done:
                    init = bc_checkpoint(args.task, seed, out) if start == "bc" else None
                    results.append(run_sb3(args.task, seed, args, out, init))
                    results_path.write_text(json.dumps(results, indent=1))
    print(train_table(results, args.target))
    plot_curves(results, out / f"{args.task}_success.png", args.target)


def train_table(results: list[dict], target: float) -> str:
    """Markdown: per start and algorithm, the seeds that reached the target, median env steps and
    training seconds to it (evaluations excluded), and the final success rates."""
    import statistics

    lines = [f"| start | algorithm | reached {target:.0%} | env steps to target (median) | "
             "training s to target (median) | per seed: s to target | final success | training env steps/s |",
             "| --- | --- | ---: | ---: | ---: | --- | --- | ---: |"]  # fmt: skip
    keys = sorted({(r["start"], r["algo"]) for r in results})
    for start, algo in keys:
        runs = sorted((r for r in results if (r["start"], r["algo"]) == (start, algo)), key=lambda r: r["seed"])
        hit = [r for r in runs if r["target"]["reached"]]
        steps = statistics.median(r["target"]["env_steps"] for r in hit) if hit else None
        secs = statistics.median(r["target"]["train_seconds"] for r in hit) if hit else None
        per_seed = ", ".join(f"{r['target']['train_seconds']:.0f}" if r["target"]["reached"] else "-" for r in runs)
        finals = ", ".join(f"{r['final_success']:.0%}" for r in runs)
        rate = sum(r["env_steps"] for r in runs) / sum(r["seconds"] - r["eval_seconds"] for r in runs)
        lines.append(f"| {start} | {algo} | {len(hit)}/{len(runs)} | {'-' if steps is None else f'{steps:,.0f}'} | "
                     f"{'-' if secs is None else f'{secs:.0f}'} | {per_seed} | {finals} | {rate:,.0f} |")  # fmt: skip
    return "\n".join(lines)


def plot_curves(results: list[dict], path: Path, target: float) -> None:
    """Eval success against env steps and against wall-clock: mean over seeds, shaded min-max.
    A run that stopped at the target keeps its last value afterwards."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for start, algo in sorted({(r["start"], r["algo"]) for r in results}):
        runs = [r for r in results if (r["start"], r["algo"]) == (start, algo)]
        for ax, x_key in zip(axes, ("env_steps", "seconds"), strict=True):
            end = max(r["curve"][x_key][-1] for r in runs)
            grid = np.linspace(0, end, 200)
            ys = np.stack([np.interp(grid, r["curve"][x_key], r["curve"]["success"]) for r in runs])
            line = ax.plot(grid, ys.mean(0), label=f"{algo} ({start})")[0]
            ax.fill_between(grid, ys.min(0), ys.max(0), color=line.get_color(), alpha=0.15)
    task = results[0]["task"]
    for ax, label in zip(axes, ("env steps", "wall-clock s (evaluations included)"), strict=True):
        ax.axhline(target, color="grey", lw=0.8, ls="--")
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("eval success (mean action, held-out seeds)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{task}: mean over seeds, shaded min-max")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("envs", help="environment throughput (scripts/benchmark_envs.py)", add_help=False)
    sub.add_parser("gym-envs", help="Gymnasium backend cost (scripts/benchmark_gym_envs.py)", add_help=False)
    update = sub.add_parser("update", help="update throughput, samples/s")
    update.add_argument("--device", nargs="+", choices=["cpu", "cuda"], help="default: cpu, and cuda when present")
    update.add_argument("--policies", nargs="+", default=list(POLICY_PRESETS), choices=POLICY_PRESETS)
    update.add_argument("--minibatch", nargs="+", type=int, default=[256, 1024, 4096, 16384], help="steps")
    update.add_argument("--horizon", type=int, default=100, help="steps per synthetic trajectory")
    update.add_argument("--repeats", type=int, default=3)
    profile = sub.add_parser("profile", help="one training iteration of the default job, split by part")
    profile.add_argument("--iterations", type=int, default=3)
    profile.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. policy=tokenized_factorized")
    train = sub.add_parser("train", help="time to target success: GRPO, Dr. GRPO, PPO from BC and from scratch")
    train.add_argument("--task", default="LiftCube", choices=list(ENV_PRESETS))
    train.add_argument("--algos", nargs="+", default=["grpo", "dr_grpo", "ppo"],
                       help="algo presets, or LABEL=PRESET:KEY=VALUE,... for a variant, "
                            "e.g. grpo_k10=grpo:algo.epochs=10,algo.minibatches=16")  # fmt: skip
    train.add_argument("--starts", nargs="+", default=["bc", "scratch"], choices=["bc", "scratch"])
    train.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    train.add_argument("--target", type=float, default=0.9)
    train.add_argument("--eval-every", type=int, default=5)
    train.add_argument("--eval-seeds", type=int, default=100)
    train.add_argument("--iterations", type=int, default=300, help="at most, per run")
    train.add_argument("--time-limit-min", type=float, default=20, help="at most, per run")
    train.add_argument(
        "--sb3-steps", type=int, default=0, help="also run Stable-Baselines3 PPO, this many env steps per seed"
    )
    train.add_argument("--sb3-eval-every", type=int, default=20_000, help="SB3: env steps between evaluations")
    train.add_argument("--out", default="runs/benchmark", help="run dirs, results.json and the plot")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["envs"], ["gym-envs"]):  # the older scripts keep their own options
        sys.path.insert(0, str(SCRIPTS))
        import benchmark_envs
        import benchmark_gym_envs

        return {"envs": benchmark_envs, "gym-envs": benchmark_gym_envs}[argv[0]].main(argv[1:])
    args = parser.parse_args(argv)
    {"update": cmd_update, "profile": cmd_profile, "train": cmd_train}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
