"""Success after the same env-step budget for each policy type and each GRPO-family preset, on
the default task, several training seeds each; prints a Markdown table for docs/algorithms.md.

    python scripts/compare_algorithms.py                      # 2M env steps, seeds 0 1 2
    python scripts/compare_algorithms.py --env-steps 500000 --seeds 0 --rows gaussian dapo
    python scripts/compare_algorithms.py --variant dapo_no_ds dapo algo.dynamic_sampling.enabled=false

A `--variant NAME WORD...` is a row of one's own: each WORD an override or the name of a row whose
overrides it adds (the last value of a key wins; a preset choice such as `algo=my_algo` is
applied before every key, wherever it stands). With variants, `--rows` defaults to `gaussian`
(the default job) alone, and `--rows` with no name leaves the built-in rows out. `--config-dir
DIR` puts a folder of one's own presets on the search path of every row (`--variant mine
algo=my_algo`).

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
from grpo_robot.cli import search_path_override
from grpo_robot.machine import one_line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-steps", type=int, default=2_000_000, help="training budget per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rows", nargs="*", choices=list(compare.ROW_KEYS),
                        help="built-in rows (default: all; gaussian alone when --variant is given; none: "
                             "--rows and no name)")  # fmt: skip
    parser.add_argument("--variant", nargs="+", action="append", default=[], metavar=("NAME", "WORD"),
                        help="a row of one's own: its name, then overrides or rows' names")  # fmt: skip
    parser.add_argument("--config-dir", help="a folder of one's own presets, on the search path of every row")
    parser.add_argument("--eval-seeds", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("runs/compare"))
    args = parser.parse_args()
    for key in ("env_steps", "eval_seeds"):
        if getattr(args, key) < 1:
            parser.error(f"--{key.replace('_', '-')}={getattr(args, key)} is invalid: must be >= 1")
    try:
        extra = [search_path_override(args.config_dir)] if args.config_dir else []
        variants = compare.variant_rows(args.variant)
        chosen = args.rows if args.rows is not None else ["gaussian"] if variants else list(compare.ROW_KEYS)
        if not chosen and not variants:
            raise ValueError("--rows with no name and no --variant: there is nothing to compare")
        overrides = {compare.ROW_KEYS[key]: compare.ROWS[compare.ROW_KEYS[key]] for key in chosen} | variants
        compare.check_rows(overrides, extra)  # every row's config before any run
    except ValueError as err:
        parser.error(str(err))
    rows = list(overrides)
    taken = compare.taken(args.out, rows, args.seeds)
    if taken:
        parser.error(f"--out={args.out} holds runs already ({', '.join(p.name for p in taken)}); new runs would log "
                     "over them: give another --out, or move them")  # fmt: skip
    results = []
    for row in rows:
        for seed in args.seeds:
            try:
                results.append(compare.run(row, seed, args.env_steps, args.eval_seeds, args.out, overrides[row], extra))
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
    if args.config_dir:
        print(f"presets also from --config-dir {args.config_dir}")
    print(f"budget {args.env_steps:,} env steps per run (a run ends with the iteration that reaches it); eval on "
          f"{args.eval_seeds} held-out seeds, deterministic\n")  # fmt: skip
    print(compare.table(results, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
