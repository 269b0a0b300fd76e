"""grpo-robot benchmarks, one command with subcommands.

    python scripts/benchmark.py envs [options of scripts/benchmark_envs.py]
    python scripts/benchmark.py gym-envs [options of scripts/benchmark_gym_envs.py]
    python scripts/benchmark.py update [--device cpu cuda] [--minibatch 256 1024 4096 16384]
    python scripts/benchmark.py profile [--iterations 3] [OVERRIDE ...] [--before OVERRIDE ...]
    python scripts/benchmark.py sample [--calls 200] [OVERRIDE ...]
    python scripts/benchmark.py train [--task LiftCube] [--algos grpo dr_grpo ppo] [--sb3-steps N]
    python scripts/benchmark.py her [--seeds 0 1 2] [--target 0.95]

- `envs`: the environment throughput table (batched backend against the physical limit and
  against Gymnasium's SyncVectorEnv); see grpo_robot/bench/envs.py.
- `gym-envs`: what the Gymnasium backend costs on Fetch and robosuite envs against the env
  stepped alone; see grpo_robot/bench/gym_envs.py.
- `update`: GRPO update throughput in samples (action steps) per second, for each policy type and
  minibatch size, on the CPU and on CUDA when present. One sample is one step's log-prob,
  clipped-surrogate term, backward pass and its share of the Adam step. The batch is synthetic
  but shaped like PushCube's (22 observations, 4 actions, 100-step trajectories), with the
  default 128x128 policy of the `push_from_scratch` experiment.
- `profile`: where one training iteration of the default job (`experiment=push_from_scratch`)
  spends its time: physics, policy inference, bookkeeping, and the update, against a baseline
  (`--before`, default the unsplit rollout) and the physical limit of the same episodes.
- `sample`: what one policy call of the rollout costs (thread CPU time), back to back, right
  after a physics step as inside the rollout, and right after sleeping as long as that step.
- `train`: time to a target success for GRPO, Dr. GRPO, PPO (and variants) from a BC start and
  from scratch, with Stable-Baselines3 PPO as an outside reference; see grpo_robot/bench/sweep.py.
- `her`: GRPO on Gymnasium-Robotics FetchReach against Stable-Baselines3 SAC + HER, seed by seed
  on the same machine, time to a target success; see grpo_robot/bench/her.py.

Every table is printed with the machine and versions.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from grpo_robot.bench import envs, gym_envs, her, profile, results, sweep


def cmd_envs(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    print(envs.benchmark(envs.settings_from_args(args, parser.error)))


def cmd_gym_envs(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    for line in gym_envs.benchmark(args):
        print(line, flush=True)


def cmd_update(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    for line in profile.update_table(args.policies, args.device, args.minibatch, args.horizon, args.repeats,
                                     args.overrides):  # fmt: skip
        print(line, flush=True)


def cmd_profile(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    profile.cmd_profile(args)


def cmd_sample(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    profile.cmd_sample(args)


def cmd_train(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    s = sweep.Sweep.from_args(args)
    try:
        sweep.check(s)  # a bad entry fails here, before any run starts
    except ValueError as e:
        raise SystemExit(str(e)) from None
    records = sweep.run(s)
    from grpo_robot.machine import one_line

    machines = sorted({one_line(r["machine"]) for r in records if r.get("machine")})  # as each run recorded it
    print("\n".join(f"machine: {m}" for m in machines or [one_line()]))
    print(results.train_table(records, s.target))
    plot = s.out / f"{s.task}_success.png"
    results.plot_curves(records, plot, s.target)
    print(f"plot: {plot}")


def cmd_her(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    b = her.HerBench(seeds=args.seeds, target=args.target, eval_seeds=args.eval_seeds,
                     grpo_iterations=args.grpo_iterations, sb3_steps=args.sb3_steps,
                     sb3_eval_every=args.sb3_eval_every, out=Path(args.out))  # fmt: skip
    for missing in ("stable_baselines3", "gymnasium_robotics"):
        if importlib.util.find_spec(missing) is None:
            parser.error(f"{missing} is not installed: pip install -e \".[bench,fetch]\"")
    print(her.benchmark(b, lambda line: print(line, flush=True)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    envs.add_arguments(
        sub.add_parser("envs", help="environment throughput (scripts/benchmark_envs.py)",
                       description=envs.__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    )  # fmt: skip
    gym_envs.add_arguments(
        sub.add_parser("gym-envs", help="Gymnasium backend cost (scripts/benchmark_gym_envs.py)",
                       description=gym_envs.__doc__.split("\n\n")[0])
    )  # fmt: skip
    update = sub.add_parser("update", help="update throughput, samples/s")
    update.add_argument("--device", nargs="+", choices=["cpu", "cuda"], help="default: cpu, and cuda when present")
    update.add_argument("--policies", nargs="+", default=list(profile.POLICY_PRESETS), choices=profile.POLICY_PRESETS)
    update.add_argument("--minibatch", nargs="+", type=int, default=[256, 1024, 4096, 16384], help="steps")
    update.add_argument("--horizon", type=int, default=100, help="steps per synthetic trajectory")
    update.add_argument("--repeats", type=int, default=3)
    update.add_argument("overrides", nargs="*", help="Hydra overrides of every policy, e.g. policy.bins=64")
    prof = sub.add_parser("profile", help="one training iteration of the default job, split by part")
    prof.add_argument("--iterations", type=int, default=3)
    prof.add_argument("--warmup", type=int, default=0,
                      help="untimed iterations of each variant first (a run that has begun to succeed)")
    prof.add_argument("--before", nargs="+", metavar="OVERRIDE",
                      help=f"the baseline's overrides (default: {' '.join(profile.BEFORE)})")
    prof.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. policy=tokenized_factorized")
    samp = sub.add_parser("sample", help="one rollout policy call: back to back, after physics, after as long a sleep")
    samp.add_argument("--calls", type=int, default=200)
    samp.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. rollout.split=1")
    train = sub.add_parser("train", help="time to target success: GRPO, Dr. GRPO, PPO from BC and from scratch")
    d = sweep.Sweep()
    train.add_argument("--task", default=d.task, choices=list(sweep.ENV_PRESETS))
    train.add_argument("--algos", nargs="+", default=list(d.algos),
                       help="algo presets, or LABEL=PRESET:KEY=VALUE,... for a variant, "
                            "e.g. grpo_k10=grpo:algo.epochs=10,algo.minibatches=16")  # fmt: skip
    train.add_argument("--starts", nargs="+", default=list(d.starts), choices=sweep.STARTS)
    train.add_argument("--seeds", nargs="+", type=int, default=list(d.seeds))
    train.add_argument("--target", type=float, default=d.target)
    train.add_argument("--eval-every", type=int, default=d.eval_every)
    train.add_argument("--eval-seeds", type=int, default=d.eval_seeds)
    train.add_argument("--iterations", type=int, default=d.iterations, help="at most, per run")
    train.add_argument("--time-limit-min", type=float, default=d.time_limit_min, help="at most, per run")
    train.add_argument("--sb3-steps", type=int, default=d.sb3_steps,
                       help="also run Stable-Baselines3 PPO, this many env steps per seed")  # fmt: skip
    train.add_argument("--sb3-eval-every", type=int, default=d.sb3_eval_every,
                       help="SB3: env steps between evaluations")  # fmt: skip
    train.add_argument("--out", default=str(d.out), help="run dirs, results.json and the plot")
    h, hd = sub.add_parser("her", help="GRPO against SB3 SAC + HER on FetchReach, time to target"), her.HerBench()
    h.add_argument("--seeds", nargs="+", type=int, default=list(hd.seeds))
    h.add_argument("--target", type=float, default=hd.target, help="held-out success that ends a run")
    h.add_argument("--eval-seeds", type=int, default=hd.eval_seeds)
    h.add_argument("--grpo-iterations", type=int, default=hd.grpo_iterations, help="at most, per GRPO run")
    h.add_argument("--sb3-steps", type=int, default=hd.sb3_steps, help="at most, per SAC+HER run")
    h.add_argument("--sb3-eval-every", type=int, default=hd.sb3_eval_every, help="SAC+HER: env steps per evaluation")
    h.add_argument("--out", default=str(hd.out), help="GRPO run directories")
    args = parser.parse_args(argv)
    commands = {"envs": cmd_envs, "gym-envs": cmd_gym_envs, "update": cmd_update, "profile": cmd_profile,
                "sample": cmd_sample, "train": cmd_train, "her": cmd_her}  # fmt: skip
    commands[args.command](args, sub.choices[args.command])


if __name__ == "__main__":
    sys.exit(main())
