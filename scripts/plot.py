"""Learning curves across training seeds from runs' TensorBoard logs: eval success against env
steps and against training time (mean over seeds, 95% bootstrap band), and the final success (IQM
with a 95% bootstrap interval), one line per algorithm or preset.

    python scripts/plot.py runs/train-multirun/2026-11-23_10-00-00              # a -m seed=0,1,2 sweep
    python scripts/plot.py runs/a runs/b --output curves.png --label-by algo.advantage

Estimators: grpo_robot/plots.py. Needs matplotlib (`pip install -e ".[plot]"`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from grpo_robot.plots import LABEL_KEYS, plot_runs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="run directories, multirun directories, or folders above them")
    parser.add_argument("--output", type=Path, default=Path("success.png"), help="the PNG (a .json summary beside it)")
    parser.add_argument("--label-by", nargs="+", default=list(LABEL_KEYS),
                        help="config keys that name a line (those that differ between runs are used)")  # fmt: skip
    args = parser.parse_args(argv)
    if not args.output.suffix:  # matplotlib would add .png, and the line below would name another file
        args.output = args.output.with_name(args.output.name + ".png")
    try:
        rows = plot_runs(args.runs, args.output, args.label_by)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for row in rows:
        print(f"{row['label']}: final success IQM {row['iqm']:.3f} [{row['iqm_low']:.3f}, {row['iqm_high']:.3f}] "
              f"(95% bootstrap over {len(row['final'])} runs), mean {row['mean']:.3f}")  # fmt: skip
    print(f"written: {args.output} and {args.output.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
