"""Markdown table of finished training runs, from their summary.json, TensorBoard events and
.hydra/overrides.yaml.

python scripts/report_runs.py runs/train/<date>_<time> [more run dirs ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from grpo_robot.machine import one_line


def interval(record: dict | None) -> str:
    if not record:
        return "-"
    low, high = record["wilson95"]
    return f"{record['success_rate']:.1%} [{low:.1%}, {high:.1%}]"


def first_reaching(run: Path, target: float) -> str:
    """Env steps and GRPO seconds (from the first logged eval) at the first eval >= target."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tb"))
    events.Reload()
    if "charts/eval_success" not in events.Tags()["scalars"]:
        return "-"
    evals = events.Scalars("charts/eval_success")
    for e in evals:
        if e.value >= target:
            return f"{e.step / 1e6:.2f} M, {e.wall_time - evals[0].wall_time:.0f} s"
    return "not reached"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--target", type=float, default=0.95, help="report when eval success first reached this")
    args = parser.parse_args()
    print(
        "| task | seed | demos | start (BC) success, 95% CI | GRPO success, 95% CI | env steps | wall-clock "
        f"| first eval >= {args.target:.0%} | command |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    machines = set()
    for run in args.runs:
        if not (run / "summary.json").is_file():
            print(f"skipped {run}: no summary.json (not finished)", file=sys.stderr)
            continue
        summary = json.loads((run / "summary.json").read_text())
        config = yaml.safe_load((run / "resolved_config.yaml").read_text())
        overrides_file = run / ".hydra" / "overrides.yaml"
        overrides = yaml.safe_load(overrides_file.read_text()) if overrides_file.is_file() else []
        overrides = [o for o in overrides if not o.startswith("hydra.")]
        initial = summary.get("initial_policy") or {}
        demos = initial.get("demo_episodes", "-")
        print(
            f"| {config['env']['task']} | {config['seed']} | {demos} | {interval(initial.get('eval'))} | "
            f"{interval(summary['eval'])} | {summary['env_steps'] / 1e6:.2f} M | {summary['seconds']:.0f} s | "
            f"{first_reaching(run, args.target)} | "
            f"`python scripts/train.py {' '.join(overrides)}` |"
        )
        if "machine" in summary:
            machines.add(one_line(summary["machine"]))
    for m in sorted(machines):
        print(f"\n{m}")


if __name__ == "__main__":
    main()
