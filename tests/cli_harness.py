"""Running the command-line entry points in this process (no interpreter start-up per case):
`run_main("train", "algo.lr=-1")` -> `Outcome(code, stdout, stderr)`, as `scripts/train.py
algo.lr=-1` would end. For what needs a process of its own (signals, kills) use subprocesses."""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass

from grpo_robot import cli

ENTRY_POINTS = {
    "train": cli.train_main,
    "evaluate": cli.evaluate_main,
    "collect_demos": cli.collect_demos_main,
    "pretrain_bc": cli.pretrain_bc_main,
}


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        """The non-empty lines on stderr, progress bars and warnings of libraries left out."""
        return [line for line in self.stderr.splitlines() if line.strip() and "Warning" not in line]


def run_main(command: str, *args: str) -> Outcome:
    """Run `scripts/<command>.py <args>` in this process -> its exit code and output."""
    old_argv = sys.argv
    sys.argv = [f"{command}.py", *args]
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            ENTRY_POINTS[command]()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        sys.argv = old_argv
    return Outcome(code, out.getvalue(), err.getvalue())
