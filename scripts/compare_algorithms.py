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
import signal
import sys
from pathlib import Path

from grpo_robot.bench import compare
from grpo_robot.checkpoint import write_text_atomic
from grpo_robot.machine import one_line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-steps", type=int, default=2_000_000, help="training budget per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rows", nargs="+", default=list(compare.ROW_KEYS), choices=list(compare.ROW_KEYS))
    parser.add_argument("--eval-seeds", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("runs/compare"))
    args = parser.parse_args()
    for key in ("env_steps", "eval_seeds"):
        if getattr(args, key) < 1:
            parser.error(f"--{key.replace('_', '-')}={getattr(args, key)} is invalid: must be >= 1")
    rows = [compare.ROW_KEYS[key] for key in args.rows]
    taken = compare.taken(args.out, rows, args.seeds)
    if taken:
        parser.error(f"--out={args.out} holds runs already ({', '.join(p.name for p in taken)}); new runs would log "
                     "over them: give another --out, or move them")  # fmt: skip
    results = []
    for row in rows:
        for seed in args.seeds:
            try:
                results.append(compare.run(row, seed, args.env_steps, args.eval_seeds, args.out))
            except compare.Interrupted as err:  # the runs before it are kept in results.json
                print(f"error: the comparison stopped: {err}; {len(results)} runs of this call are in "
                      f"{args.out / 'results.json'} (--rows and --seeds for the rest; move the stopped run's "
                      "folder first)", file=sys.stderr)  # fmt: skip
                return 128 + int(getattr(signal, err.signal)) if err.signal else 1
            print(json.dumps(results[-1]), flush=True)
            args.out.mkdir(parents=True, exist_ok=True)
            # after every run, so that a stopped call keeps its figures; an earlier call's rows (other rows or
            # seeds) stay
            kept = compare.merged(args.out / "results.json", results)
            write_text_atomic(args.out / "results.json", json.dumps(kept, indent=1))
    print(f"\n{one_line()}")
    print(f"budget {args.env_steps:,} env steps per run (a run ends with the iteration that reaches it); eval on "
          f"{args.eval_seeds} held-out seeds, deterministic\n")  # fmt: skip
    print(compare.table(results, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
