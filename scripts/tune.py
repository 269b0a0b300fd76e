"""Search a preset's hyperparameters with Optuna: every trial trains on several seeds and scores
the mean env steps (or seconds) to the target success (grpo_robot/bench/tune.py says how
censored runs count).

    python scripts/tune.py conf/tune/push_from_scratch.yaml --trials 30 --out runs/tune/push
    python scripts/tune.py conf/tune/push_from_scratch.yaml --out runs/tune/push --report

The study is kept in <out>/study.db: run the same command again to add trials or resume after an
interruption; `--enqueue KEY=VALUE ...` has the next trial take those values (the preset's, say)
instead of drawing them; a seconds search timed on another machine is refused unless
`--any-machine`. Confirm the best trial on seeds the search never saw, e.g.
`python scripts/train.py -m seed=3,4,5,6,7 <the best trial's overrides>`. `--config-dir DIR`
searches a preset of one's own, in DIR/experiment/ as train.py's `--config-dir` finds it. Needs Optuna
(`pip install -e ".[tune]"`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from grpo_robot.bench import tune
from grpo_robot.config import ConfigError


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("space", help="a search space, e.g. conf/tune/push_from_scratch.yaml")
    parser.add_argument("--out", type=Path, required=True, help="the study, its runs and runs.jsonl")
    parser.add_argument("--trials", type=int, default=20, help="finished or pruned trials the study should hold")
    parser.add_argument("--report", action="store_true", help="print the trials so far and stop")
    parser.add_argument("--enqueue", nargs="+", metavar="KEY=VALUE", default=[],
                        help="values of searched params that the next trial takes instead of drawing them "
                             "(e.g. the current preset's), unless a trial already has them")
    parser.add_argument("--config-dir", "-cd", metavar="DIR",
                        help="a folder of one's own presets (experiment/<name>.yaml, ...) on the search path of "
                             "every run, as train.py's --config-dir")  # fmt: skip
    parser.add_argument("--any-machine", action="store_true",
                        help="go on with a seconds search whose runs were timed on another machine "
                             "(refused otherwise: its costs would not compare)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.trials < 1:
        print(f"error: --trials={args.trials} is invalid: must be >= 1", file=sys.stderr)
        return 2
    try:
        import optuna  # noqa: F401
    except ImportError:
        print('error: scripts/tune.py needs Optuna: pip install -e ".[tune]"', file=sys.stderr)
        return 2
    try:
        space = tune.load_space(args.space, args.config_dir)
        enqueue = tune.parse_enqueue(space, args.enqueue)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.out.exists() and not args.out.is_dir():
        print(f"error: --out={args.out} is a file; the study needs a directory", file=sys.stderr)
        return 2
    if (args.out / "study.db").is_file() and not _is_sqlite(args.out / "study.db"):
        print(f"error: --out={args.out}: its study.db is not an SQLite database (a study's)", file=sys.stderr)
        return 2
    if not args.report:
        import signal

        def terminated(signum, frame):  # SIGTERM (timeout, a scheduler, docker stop) outside a run: as Ctrl-C
            raise _Terminated()

        previous = signal.signal(signal.SIGTERM, terminated)  # a run installs its own and puts this one back
        try:
            tune.run(space, args.out, args.trials, log=lambda line: print(line, flush=True), enqueue=enqueue,
                     any_machine=args.any_machine)  # fmt: skip
        except (ConfigError, tune.OtherMachine, tune.OtherScoring) as err:  # refused draws; another machine or score
            print(f"error: {err}", file=sys.stderr)
            return 2
        except tune.TuneInterrupted as err:
            print(f"error: the search stopped: {err}; the trial is left failed, run the command again to go on",
                  file=sys.stderr)  # fmt: skip
            return 128 + int(getattr(signal, err.signal)) if err.signal else 1  # a stop, not a failure
        except OSError as err:
            print(f"error: --out={args.out}: {err.strerror or err} ({err.filename or args.out})", file=sys.stderr)
            return 1
        except KeyboardInterrupt as err:  # outside a run (composing a draw, between seeds): nothing to save
            name = "SIGTERM" if isinstance(err, _Terminated) else "SIGINT"
            print(f"error: the search stopped ({name}); the trial in progress is left failed, run the command "
                  "again to go on", file=sys.stderr)  # fmt: skip
            return 128 + int(getattr(signal, name))
        finally:
            signal.signal(signal.SIGTERM, previous)
    if args.report and not (args.out / "study.db").is_file():  # a mistyped --out made an empty study
        print(f"error: --out={args.out}: no study there (study.db); give the --out of a search", file=sys.stderr)
        return 2
    try:
        print("\n".join(tune.report(space, args.out)))
    except tune.OtherScoring as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


class _Terminated(KeyboardInterrupt):
    """SIGTERM outside a run: ends the search as Ctrl-C does, the trial in progress left failed (it
    stayed "running" in the study for good)."""


def _is_sqlite(path: Path) -> bool:
    with open(path, "rb") as f:
        head = f.read(16)
    return head == b"SQLite format 3\x00" or head == b""


if __name__ == "__main__":
    sys.exit(main())
