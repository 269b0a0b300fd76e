"""Success after the same env-step budget for each policy type and each GRPO-family preset, on
the default task, several training seeds each.

Each run is `scripts/train.py` with the row's overrides plus `max_env_steps`, evaluated once at
the end on held-out seeds (deterministic). Success counts each seed's run separately.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from grpo_robot.bench.markdown import rate_interval, row
from grpo_robot.cli import checked_train_config
from grpo_robot.stats import wilson_interval


def variant_overrides(name: str) -> list[str]:
    """The settings that `conf/algo/<name>.yaml` makes (a GRPO-family variant), as overrides of the
    default job's own algo preset: the variant's row then differs from the default job in its
    defining settings alone, where `algo=<name>` would also drop the searched lr, group sizes,
    epochs and the start curriculum."""
    import yaml

    from grpo_robot.cli import CONF_DIR
    from grpo_robot.resume import flatten

    spec = yaml.safe_load((Path(CONF_DIR) / "algo" / f"{name}.yaml").read_text()) or {}
    spec.pop("defaults", None)

    def value(v) -> str:
        return "null" if v is None else str(v).lower() if isinstance(v, bool) else str(v)

    return [f"algo.{key}={value(v)}" for key, v in flatten(spec).items()]


ROWS: dict[str, list[str]] = {
    "gaussian": [],  # the default job as it is (Gaussian policy, algo=grpo_from_scratch)
    "tokenized factorized": ["policy=tokenized_factorized", "algo.ratio=token"],
    "tokenized autoregressive": ["policy=tokenized_autoregressive", "algo.ratio=token"],
    **{name: variant_overrides(name) for name in ("dr_grpo", "dapo", "rloo")},
}
ROW_KEYS = {name.replace(" ", "_"): name for name in ROWS}  # the names on the command line


VARIANT_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"  # a variant's name: its runs' folder names start with it
# the keys `run` sets for every row, after the row's own overrides: a row's value for one would be dropped
RUN_KEYS = {"seed": "--seeds", "max_env_steps": "--env-steps", "eval_seeds": "--eval-seeds",
            "iterations": "the budget is --env-steps", "eval_every": "one evaluation, at the end",
            "time_limit_min": "none: the budget is --env-steps", "progress": "off"}  # fmt: skip


def variant_rows(specs: Sequence[Sequence[str]]) -> dict[str, list[str]]:
    """Rows of one's own, from `--variant NAME WORD...` (`specs`: one `[NAME, WORD, ...]` each): each
    WORD an override (`algo.clip.high=0.32`) or the name of a row (built-in, or a variant given
    before it) whose overrides it adds, so that `--variant dapo_no_ds dapo
    algo.dynamic_sampling.enabled=false` is DAPO without its dynamic sampling. Hydra takes the
    last value of a key. A ValueError (one line) names a bad name or word."""
    import re

    rows: dict[str, list[str]] = {}
    for name, *words in specs:
        if not re.fullmatch(VARIANT_NAME, name):
            raise ValueError(f"--variant {name}: the name must match {VARIANT_NAME} (it names the runs' folders)")
        owners = {n.casefold(): "an earlier --variant" for n in rows}  # folder names may not tell case apart
        owners |= {n.casefold(): "a built-in row" for n in ROW_KEYS}
        if (by := owners.get(name.casefold())) is not None:
            raise ValueError(f"--variant {name}: the name is taken (by {by}); rows: {', '.join([*ROW_KEYS, *rows])}")
        if not words:
            raise ValueError(f"--variant {name} needs overrides after its name (key=value, or a row's name)")
        overrides: list[str] = []
        for word in words:
            key = word.split("=", 1)[0].lstrip("+~")
            if key in RUN_KEYS:
                raise ValueError(f"--variant {name}: {word} is set by every run ({RUN_KEYS[key]}); a row does "
                                 "not set it")  # fmt: skip
            if "=" in word or word.startswith(("+", "~")):
                overrides.append(word)
            elif word in ROW_KEYS or word in rows:
                overrides += ROWS[ROW_KEYS[word]] if word in ROW_KEYS else rows[word]
            else:
                raise ValueError(f"--variant {name}: {word!r} is neither an override (key=value) nor a row "
                                 f"({', '.join([*ROW_KEYS, *rows])})")  # fmt: skip
        rows[name] = overrides
    return rows


def check_rows(rows: dict[str, list[str]], extra: Sequence[str] = ()) -> None:
    """Compose and validate each row's config (with `extra`, such as a search path) as
    `scripts/train.py` checks a command line, before any run: a bad override is one line, not a
    failure after the rows before it have trained."""
    for name, overrides in rows.items():
        try:
            checked_train_config(*overrides, *extra)
        except ValueError as err:
            raise ValueError(f"row {name!r} ({' '.join(overrides) or 'the default job'}): {err}") from None


def run_dir(out: Path, row_name: str, seed: int) -> Path:
    return out / f"{row_name.replace(' ', '_')}-seed{seed}"


def taken(out: Path, rows: Sequence[str], seeds: Sequence[int]) -> list[Path]:
    """The run directories of this call that hold something already (an earlier call's runs, which
    a new run would log over: each TensorBoard point twice, the checkpoints replaced)."""
    return [d for name in rows for seed in seeds if (d := run_dir(out, name, seed)).exists() and any(d.iterdir())]


def merged(earlier: Path, results: list[dict]) -> list[dict]:
    """`results` after the records of `earlier` (a results.json of an earlier call into the same
    folder) that are not of the same row and seed, so that calls for other rows add up."""
    import json

    try:
        before = json.loads(earlier.read_text()) if earlier.is_file() else []
    except (OSError, ValueError):
        before = []
    mine = {(r["row"], r["seed"]) for r in results}
    return [r for r in before if isinstance(r, dict) and (r.get("row"), r.get("seed")) not in mine] + results


class Interrupted(RuntimeError):
    """A run ended by a signal or an error before its budget: not a row's figure. `signal`: the
    signal's name (`SIGTERM`), for the command's exit code."""

    def __init__(self, message: str, signal: str | None = None) -> None:
        super().__init__(message)
        self.signal = signal


def run(row_name: str, seed: int, env_steps: int, n_eval: int, out: Path, row_overrides: Sequence[str] | None = None,
        extra: Sequence[str] = ()) -> dict:  # fmt: skip
    """Train one row's config for `env_steps` env steps; its record. `row_overrides`: the row's
    (a built-in row's by default); `extra`: overrides for every row that are not the row's own
    (a search path), recorded apart."""
    from grpo_robot.trainer import Trainer

    row_overrides = list(ROWS[row_name] if row_overrides is None else row_overrides)
    overrides = [*row_overrides, *extra, f"seed={seed}", f"max_env_steps={env_steps}", "iterations=100000"]
    overrides += ["eval_every=100000", f"eval_seeds={n_eval}", "time_limit_min=null", "progress=false"]
    cfg = checked_train_config(*overrides)
    start = time.perf_counter()
    trainer = Trainer(cfg, run_dir(out, row_name, seed))
    try:
        summary = trainer.run()
    finally:
        trainer.close()
    if summary.get("stopped") in ("signal", "error"):  # no measurement: its budget was not spent
        by = summary.get("signal") or "an error"
        raise Interrupted(f"{run_dir(out, row_name, seed)} ended by {by}"
                          + (f": {summary['error']}" if summary.get("error") else ""), summary.get("signal"))
    result = trainer.last_eval
    return {
        "row": row_name,
        "seed": seed,
        "overrides": row_overrides,
        **({"extra": list(extra)} if extra else {}),
        "env_steps": summary["env_steps"],
        "iterations": summary["iterations"],  # each one update (dynamic sampling may draw several times in one)
        "seconds": time.perf_counter() - start,
        "successes": int(result.success.sum()),
        "n": len(result.success),
    }


def cell(runs: list[dict]) -> str:
    """Mean success in bold, then each seed's success with its 95% Wilson interval."""
    parts = [rate_interval(r["successes"] / r["n"], wilson_interval(r["successes"], r["n"])) for r in runs]
    mean = np.mean([r["successes"] / r["n"] for r in runs])
    return f"**{mean:.0%}** | " + " · ".join(parts)


def table(results: list[dict], rows: Sequence[str]) -> str:
    """Markdown, a line per row name (as in `ROWS`) over the records of `run`."""
    lines = [
        "| row | overrides | mean success | per training seed: success [95% Wilson] | env steps per run | "
        "iterations per run | minutes per run |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in rows:
        runs = [r for r in results if r["row"] == name]
        minutes = np.mean([r["seconds"] for r in runs]) / 60
        steps = [r["env_steps"] for r in runs]  # a budget ends after the iteration that reaches it
        spent = f"{min(steps):,}" if min(steps) == max(steps) else f"{min(steps):,}-{max(steps):,}"
        ran = runs[0].get("overrides", ROWS.get(name, []))  # what the runs trained with, as recorded
        counts = [r["iterations"] for r in runs if "iterations" in r]  # not recorded before
        iterations = "-" if not counts else f"{min(counts)}" if min(counts) == max(counts) else \
            f"{min(counts)}-{max(counts)}"  # fmt: skip
        lines.append(row(name, f"`{' '.join(ran) or '(default)'}`", cell(runs), spent, iterations, f"{minutes:.1f}"))
    return "\n".join(lines)
