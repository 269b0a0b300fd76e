"""Success after the same env-step budget for each policy type and each GRPO-family preset, on
the default task, several training seeds each; prints a Markdown table for docs/algorithms.md.

    python scripts/compare_algorithms.py                      # 2M env steps, seeds 0 1 2
    python scripts/compare_algorithms.py --env-steps 500000 --seeds 0 --rows gaussian dapo

Each run is `scripts/train.py` with the row's overrides plus `max_env_steps`, evaluated once at
the end on 200 held-out seeds (deterministic). Success counts each seed's run separately.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import grpo_robot  # noqa: F401  (before torch: sets the OpenMP wait policy)

# isort: split
import mujoco
import numpy as np
import torch

from grpo_robot.cli import compose_train_config
from grpo_robot.stats import wilson_interval
from grpo_robot.trainer import Trainer

ROWS: dict[str, list[str]] = {
    "gaussian": [],  # the default: Gaussian policy, grpo preset
    "tokenized factorized": ["policy=tokenized_factorized", "algo.ratio=token"],
    "tokenized autoregressive": ["policy=tokenized_autoregressive", "algo.ratio=token"],
    "dr_grpo": ["algo=dr_grpo"],
    "dapo": ["algo=dapo"],
    "rloo": ["algo=rloo"],
}
ROW_KEYS = {name.replace(" ", "_"): name for name in ROWS}


def run(row: str, seed: int, env_steps: int, n_eval: int, out: Path) -> dict:
    overrides = [*ROWS[row], f"seed={seed}", f"max_env_steps={env_steps}", "iterations=100000"]
    overrides += ["eval_every=100000", f"eval_seeds={n_eval}", "time_limit_min=null", "progress=false"]
    cfg = compose_train_config(*overrides)
    start = time.perf_counter()
    trainer = Trainer(cfg, out / f"{row.replace(' ', '_')}-seed{seed}")
    summary = trainer.run()
    result = trainer.last_eval
    return {
        "row": row,
        "seed": seed,
        "overrides": ROWS[row],
        "env_steps": summary["env_steps"],
        "seconds": time.perf_counter() - start,
        "successes": int(result.success.sum()),
        "n": len(result.success),
    }


def cell(runs: list[dict]) -> str:
    parts = []
    for r in runs:
        low, high = wilson_interval(r["successes"], r["n"])
        parts.append(f"{r['successes'] / r['n']:.0%} [{low:.0%}, {high:.0%}]")
    mean = np.mean([r["successes"] / r["n"] for r in runs])
    return f"**{mean:.0%}** | " + " · ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-steps", type=int, default=2_000_000, help="training budget per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rows", nargs="+", default=list(ROW_KEYS), choices=list(ROW_KEYS))
    parser.add_argument("--eval-seeds", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("runs/compare"))
    args = parser.parse_args()
    results = []
    for key in args.rows:
        for seed in args.seeds:
            results.append(run(ROW_KEYS[key], seed, args.env_steps, args.eval_seeds, args.out))
            print(json.dumps(results[-1]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    print(f"\n{platform.processor() or platform.machine()}, torch {torch.__version__}, mujoco {mujoco.__version__}")
    print(f"budget {args.env_steps:,} env steps per run; eval on {args.eval_seeds} held-out seeds, deterministic\n")
    print("| row | overrides | mean success | per training seed: success [95% Wilson] | minutes per run |")
    print("| --- | --- | --- | --- | --- |")
    for key in args.rows:
        runs = [r for r in results if r["row"] == ROW_KEYS[key]]
        minutes = np.mean([r["seconds"] for r in runs]) / 60
        print(f"| {ROW_KEYS[key]} | `{' '.join(ROWS[ROW_KEYS[key]]) or '(default)'}` | {cell(runs)} | {minutes:.1f} |")


if __name__ == "__main__":
    main()
