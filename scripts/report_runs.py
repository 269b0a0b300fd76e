"""Markdown table of finished training runs, from their summary.json, TensorBoard events and
.hydra/overrides.yaml.

python scripts/report_runs.py runs/train/<date>_<time> [more run dirs ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grpo_robot.bench.report import report


def _rate(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not a success rate in (0, 1]")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--target", type=_rate, default=0.95, help="report when eval success first reached this")
    args = parser.parse_args()
    rows = 0
    for line in report(args.runs, args.target, lambda msg: print(msg, file=sys.stderr)):
        print(line)
        rows += line.startswith("| ") and not line.startswith(("| task ", "| --- "))
    if not rows:  # a mistyped path is not an empty report
        print(f"error: no finished run in {', '.join(map(str, args.runs))}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
