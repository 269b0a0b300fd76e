"""Markdown table of finished training runs, from their summary.json (and .hydra/overrides.yaml).

python scripts/report_runs.py runs/train/<date>_<time> [more run dirs ...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from grpo_robot.machine import one_line


def interval(record: dict | None) -> str:
    if not record:
        return "-"
    low, high = record["wilson95"]
    return f"{record['success_rate']:.1%} [{low:.1%}, {high:.1%}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()
    print("| task | demos | start (BC) success, 95% CI | GRPO success, 95% CI | env steps | wall-clock | command |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    machines = set()
    for run in args.runs:
        summary = json.loads((run / "summary.json").read_text())
        config = yaml.safe_load((run / "resolved_config.yaml").read_text())
        overrides_file = run / ".hydra" / "overrides.yaml"
        overrides = yaml.safe_load(overrides_file.read_text()) if overrides_file.is_file() else []
        overrides = [o for o in overrides if not o.startswith("hydra.")]
        initial = summary.get("initial_policy") or {}
        demos = initial.get("demo_episodes", "-")
        print(
            f"| {config['env']['task']} | {demos} | {interval(initial.get('eval'))} | {interval(summary['eval'])} | "
            f"{summary['env_steps'] / 1e6:.2f} M | {summary['seconds']:.0f} s | "
            f"`python scripts/train.py {' '.join(overrides)}` |"
        )
        if "machine" in summary:
            machines.add(one_line(summary["machine"]))
    for m in sorted(machines):
        print(f"\n{m}")


if __name__ == "__main__":
    main()
