"""A Markdown table of finished training runs, from their summary.json, resolved_config.yaml,
TensorBoard events and .hydra/overrides.yaml."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import yaml

from grpo_robot.bench.curves import EVAL_TAG, curve, first_reaching, read_scalars
from grpo_robot.bench.markdown import rate_interval, row
from grpo_robot.config import env_name
from grpo_robot.machine import one_line


def interval(record: dict | None) -> str:
    """A stored evaluation (`EvalResult.to_json()`) as `rate [low, high]`, or `-`."""
    if not record:
        return "-"
    return rate_interval(record["success_rate"], record["wilson95"], decimals=1)


def reaching(run: Path, target: float) -> str:
    """Env steps and seconds at the first eval >= target: the run's own seconds from the start of
    training (`curves.curve`), which `summary.json`'s `target` reports too."""
    scalars = read_scalars(run)
    if not scalars.get(EVAL_TAG):
        return "-"
    hit = first_reaching(curve(scalars), target)
    return "not reached" if hit is None else f"{hit[0] / 1e6:.2f} M, {hit[1]:.0f} s"


def run_row(run: Path, summary: dict, target: float) -> str:
    config = yaml.safe_load((run / "resolved_config.yaml").read_text())
    initial = summary.get("initial_policy") or {}
    return row(
        env_name(config["env"]),
        config["seed"],
        initial.get("demo_episodes", "-"),
        interval(initial.get("eval")),
        interval(summary["eval"]),
        f"{summary['env_steps'] / 1e6:.2f} M",
        f"{summary.get('seconds_total', summary['seconds']):.0f} s",  # a resumed run: all its processes
        reaching(run, target),
        commands(run),
    )


def commands(run: Path) -> str:
    """The run's command lines from `.hydra/overrides.yaml`, then those of the processes that
    resumed it (`.hydra/resume-<n>/`, in order), `hydra.*` overrides left out."""
    resumes = {int(n): p for p in (run / ".hydra").glob("resume-*") if (n := p.name.removeprefix("resume-")).isdigit()}
    lines = []
    for folder in [run / ".hydra", *(resumes[n] for n in sorted(resumes))]:
        file = folder / "overrides.yaml"
        if file.is_file():  # a run made through the Python API (tune.py, compare_algorithms.py) has none
            overrides = yaml.safe_load(file.read_text()) or []
            lines.append(f"`python scripts/train.py {' '.join(o for o in overrides if not o.startswith('hydra.'))}`")
    return ", then ".join(lines) or "- (made through the Python API: its config is resolved_config.yaml)"


def finished_runs(paths: Sequence[Path]) -> Iterator[Path | str]:
    """Each path that is a run directory, or else the run directories below it (a `-m` multirun
    folder, a folder of runs) in path order; a string saying why for a path that holds none."""
    for path in paths:
        if (path / "summary.json").is_file():
            yield path
            continue
        below = sorted(p.parent for p in path.rglob("summary.json")) if path.is_dir() else []
        if below:
            yield from below
        elif not path.exists():
            yield f"skipped {path}: no such directory"
        else:
            yield f"skipped {path}: no summary.json in it or below (no finished run)"


def report(runs: Sequence[Path], target: float, skipped: Callable[[str], None]) -> Iterator[str]:
    """The table's lines, a row per finished run (`skipped` hears of the others), then a line
    per machine the runs ran on."""
    yield (
        "| task | seed | demos | start (BC) success, 95% CI | GRPO success, 95% CI | env steps | wall-clock "
        f"| first eval >= {target:.0%} | command |"
    )
    yield "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    machines = set()
    for run in finished_runs(runs):
        if isinstance(run, str):
            skipped(run)
            continue
        try:
            summary = json.loads((run / "summary.json").read_text())
            line = run_row(run, summary, target)
        except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as err:  # a file cut short or edited
            skipped(f"skipped {run}: its files cannot be read ({type(err).__name__}: {str(err).splitlines()[0]})")
            continue
        yield line
        if "machine" in summary:
            machines.add(one_line(summary["machine"]))
    for m in sorted(machines):
        yield f"\n{m}"
