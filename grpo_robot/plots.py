"""Learning curves across training seeds, from the runs' TensorBoard logs (`scripts/plot.py`).

Runs are found under the given paths (a run directory, a `-m` multirun directory, or any folder
above them: every `tb/` folder with events counts) and grouped into lines by the config keys that
differ between them (`resolved_config.yaml`: env, algorithm, policy, preset keys), so one line
stands for one algorithm or preset, its runs the training seeds.

Estimators (as rliable recommends for few runs, Agarwal et al., NeurIPS 2021):
- a curve is the mean over a line's runs of `charts/eval_success` (each run's value carried
  forward from its last evaluation, past its end for a run that ended first), with a 95%
  percentile-bootstrap band over runs (2,000 resamples of the runs with replacement); the x-axis
  is env steps or the run's own seconds (`time/run_s`: from the start of training, over all the
  processes of a resumed run, without the wait between them; wall-clock since the first logged
  value for runs without it);
- the final success of a line is the interquartile mean (IQM: the mean of the middle 50% of its
  runs' last evaluations) with a 95% percentile-bootstrap interval over runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

TAG = "charts/eval_success"
LABEL_KEYS = ("env.task", "env.id", "env.entry_point", "algo.advantage", "algo.policy_loss", "algo.ratio",
              "algo.aggregation", "policy.type", "policy.head", "pretrain", "init_from")  # fmt: skip


@dataclass
class Run:
    path: Path  # the run directory (holding tb/)
    config: dict  # its resolved_config.yaml, flattened
    steps: np.ndarray  # env steps of each evaluation
    seconds: np.ndarray  # the run's own seconds at each evaluation (grpo_robot.bench.curves.curve)
    success: np.ndarray  # eval success rate
    choices: dict = field(default_factory=dict)  # the presets it was composed from (algo=dapo), from .hydra/
    given: frozenset = frozenset()  # the config keys its command line set (algo.lr=0.01), from .hydra/


@dataclass
class Line:
    label: str
    runs: list[Run] = field(default_factory=list)


def find_runs(paths: Sequence[str | Path], tag: str = TAG) -> list[Run]:
    """Every run under `paths` whose TensorBoard log holds `tag`, in path order."""
    from omegaconf import OmegaConf

    from grpo_robot.bench.curves import curve, read_scalars
    from grpo_robot.resume import flatten

    runs, seen = [], set()
    for root in paths:
        root = Path(root)
        if not root.exists():
            raise FileNotFoundError(f"{root}: no such run directory")
        folders = [root / "tb"] if (root / "tb").is_dir() else sorted(p for p in root.rglob("tb") if p.is_dir())
        for tb in folders:
            if tb.resolve() in seen:  # a run named twice (a multirun folder and one of its jobs) counts once
                continue
            seen.add(tb.resolve())
            scalars = read_scalars(tb.parent)
            if not scalars.get(tag):
                continue
            points = curve(scalars, tag)
            config_file = tb.parent / "resolved_config.yaml"
            try:
                config = OmegaConf.to_container(OmegaConf.load(config_file)) if config_file.exists() else {}
            except Exception as err:  # a file cut short or edited: the run is named, not plotted
                raise ValueError(f"{config_file} cannot be read ({type(err).__name__}: {str(err).splitlines()[0]})"
                                 ) from err  # fmt: skip
            runs.append(Run(tb.parent, flatten(config), *(np.array(points[k], dtype=np.float64)
                                                            for k in ("env_steps", "seconds", "success")),
                            *_composed(tb.parent)))  # fmt: skip
    return runs


def _choices(run_dir: Path) -> dict[str, str]:
    """The config groups' choices a run was composed with (`algo: dapo`, `experiment: ...`), as
    Hydra recorded them in `.hydra/hydra.yaml`; empty for a run made through the Python API."""
    from omegaconf import OmegaConf

    path = run_dir / ".hydra" / "hydra.yaml"
    if not path.is_file():
        return {}
    try:
        choices = OmegaConf.to_container(OmegaConf.load(path)).get("hydra", {}).get("runtime", {}).get("choices", {})
    except Exception:  # noqa: BLE001  (a hand-edited or cut file: the run is labelled by its config alone)
        return {}
    return {str(k): str(v) for k, v in (choices or {}).items() if "/" not in str(k) and not str(k).startswith("hydra")
            and not str(k).endswith("_schema")}  # fmt: skip


def _composed(run_dir: Path) -> tuple[dict[str, str], frozenset]:
    """(the presets a run was composed from, the config keys its command line set: `algo.lr=0.01`
    -> `algo.lr`), from `.hydra/`; a preset choice (`algo=dapo`) is no key. Empty without them."""
    import yaml

    choices, path = _choices(run_dir), run_dir / ".hydra" / "overrides.yaml"
    try:
        overrides = yaml.safe_load(path.read_text()) if path.is_file() else []
    except (OSError, yaml.YAMLError):
        return choices, frozenset()
    keys = {str(o).partition("=")[0].lstrip("+~") for o in overrides or []}
    return choices, frozenset(k for k in keys if k not in choices and not k.startswith("hydra"))


MEASURED_KEYS = ("eval_deterministic",)  # keys that change what an evaluation measures (mean action or samples)


def _same_training(key: str) -> bool:
    """Whether config `key` leaves what is trained and measured alone: a seed (the runs a line
    pools), or what a resumed run may change (budgets, evaluation and saving, the device, the
    console) but how the evaluation acts."""
    from grpo_robot.resume import SAFE_KEYS

    if key in MEASURED_KEYS:
        return False
    return key == "seed" or key.endswith(".seed") or any(key == k or key.startswith(f"{k}.") for k in SAFE_KEYS)


def _short(key: str) -> str:
    """A label's name for config `key`: its last part, with its parent where it is nested deeper
    (`clip.high`, `dynamic_sampling.enabled`), since a last part alone may be another key's."""
    parts = key.split(".")
    return ".".join(parts[-2:]) if len(parts) > 2 else parts[-1]


def group(runs: list[Run], keys: Sequence[str] = LABEL_KEYS) -> list[Line]:
    """Runs -> lines, labelled by the presets (`algo=dapo`) and the keys among `keys` whose values
    differ between runs, then by any other key that changes what is trained or how it is evaluated
    and differs (a learning rate, a preset's epochs), so that runs of different settings are never
    pooled as seeds; the env name when none does. A key that the differing presets set alike on
    all their runs is told by the preset's name, and left out of the label, unless a run's command
    line set it (the preset's name would then hide that it was not the preset's value)."""
    def differs(k: str) -> bool:
        return len({str(r.config.get(k)) for r in runs}) > 1

    groups = sorted({g for r in runs for g in r.choices})
    presets = [g for g in groups if len({r.choices.get(g) for r in runs}) > 1]
    varying = [k for k in keys if differs(k)]
    others = sorted({k for r in runs for k in r.config} - set(keys))
    varying += [k for k in others if not _same_training(k) and differs(k)]
    if presets:  # the keys each combination of presets sets to one value: the presets' names tell them

        def told(k: str) -> bool:
            values: dict[tuple, set[str]] = {}
            for r in runs:
                values.setdefault(tuple(r.choices.get(g) for g in presets), set()).add(str(r.config.get(k)))
            return all(len(v) == 1 for v in values.values()) and not any(k in r.given for r in runs)

        varying = [k for k in varying if not told(k)]
    lines: dict[str, Line] = {}
    for run in runs:
        if presets or varying:
            label = ", ".join([f"{g}={run.choices.get(g)}" for g in presets]
                              + [f"{_short(k)}={run.config.get(k)}" for k in varying])  # fmt: skip
        else:
            c = run.config
            label = str(c.get("env.task") or c.get("env.id") or c.get("env.entry_point") or run.path.name)
        lines.setdefault(label, Line(label)).runs.append(run)
    return list(lines.values())


def carried(x: np.ndarray, y: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """`y` at each `grid` point: its value at the last `x` at or before it (NaN before the first)."""
    idx = np.searchsorted(x, grid, side="right") - 1
    return np.where(idx >= 0, y[np.clip(idx, 0, None)], np.nan)


def bootstrap(samples: np.ndarray, statistic, n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of `statistic` over the rows of `samples` (runs)."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(samples), (n, len(samples)))
    stats = np.array([statistic(samples[p]) for p in picks])
    low, high = np.percentile(stats, [2.5, 97.5], axis=0)
    return low, high


def iqm(values: np.ndarray) -> float:
    """The interquartile mean: the mean of the middle 50% of `values` (the whole mean below 4)."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    cut = int(np.floor(len(v) * 0.25))
    return float(v[cut : len(v) - cut].mean())


def curve(line: Line, x: str, points: int = 200) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(grid, mean, band low, band high) of a line along `x` ("steps" or "seconds"), from the
    latest first evaluation of its runs to the latest last one. A run that ended before (at its
    target, its budget) counts with its last evaluation from there on, as the final-success panel
    counts it; the line ended at the earliest run's end, and drew nothing where runs' step ranges
    did not overlap."""
    start = max(getattr(r, x)[0] for r in line.runs)  # every run evaluated from here on
    end = max(getattr(r, x)[-1] for r in line.runs)
    grid = np.linspace(start, end, points)
    ys = np.stack([carried(getattr(r, x), r.success, grid) for r in line.runs])
    mean = ys.mean(axis=0)
    low, high = bootstrap(ys, lambda s: s.mean(axis=0))
    return grid, mean, low, high


def summary(lines: list[Line]) -> list[dict]:
    """Per line: runs, the final success of each, IQM and its bootstrap interval, the mean."""
    out = []
    for line in lines:
        finals = np.array([r.success[-1] for r in line.runs])
        low, high = bootstrap(finals[:, None], lambda s: iqm(s[:, 0]))
        out.append({"label": line.label, "runs": [str(r.path) for r in line.runs], "final": finals.tolist(),
                    "iqm": iqm(finals), "iqm_low": float(low), "iqm_high": float(high),
                    "mean": float(finals.mean())})  # fmt: skip
    return out


def draw(lines: list[Line], path: Path, title: str = "") -> None:
    """Eval success against env steps and against the run's own time (mean, bootstrap band), and the
    final IQM with its interval, into the PNG `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4), gridspec_kw={"width_ratios": [3, 3, 2]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, line in enumerate(lines):
        color = colors[i % len(colors)]
        for ax, x in zip(axes[:2], ("steps", "seconds"), strict=True):
            grid, mean, low, high = curve(line, x)
            ax.plot(grid, mean, color=color, label=f"{line.label} ({len(line.runs)} runs)")
            ax.fill_between(grid, low, high, color=color, alpha=0.2, linewidth=0)
    for row, item in enumerate(summary(lines)):
        color = colors[row % len(colors)]
        axes[2].errorbar(item["iqm"], row, xerr=[[item["iqm"] - item["iqm_low"]], [item["iqm_high"] - item["iqm"]]],
                         fmt="o", color=color, capsize=4)  # fmt: skip
        axes[2].scatter(item["final"], [row] * len(item["final"]), color=color, alpha=0.35, s=12)
    axes[0].set(xlabel="env steps", ylabel="eval success", ylim=(-0.02, 1.02))
    axes[0].ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
    axes[1].set(xlabel="training time (s)", ylabel="eval success", ylim=(-0.02, 1.02))
    import textwrap

    axes[2].set(xlabel="final eval success: IQM, 95% CI (dots: runs)", xlim=(-0.02, 1.02), yticks=range(len(lines)),
                yticklabels=[textwrap.fill(line.label, 28) for line in lines])  # wrapped: the curves keep their width
    axes[2].invert_yaxis()
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(title or "mean over training seeds, 95% bootstrap band", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_runs(paths: Sequence[str | Path], output: Path, keys: Sequence[str] = LABEL_KEYS) -> list[dict]:
    """Find, group, draw and summarize -> the summary (also written next to the PNG as JSON)."""
    from grpo_robot.config.validate import run_record

    for path in (output, output.with_suffix(".json")):
        record = run_record(path, checkpoints_too=True)
        if record is not None:
            raise ValueError(f"--output {output}: {path} is {record}, which this would replace; give another path")
    runs = find_runs(paths)
    if not runs:
        raise ValueError(f"no run with {TAG} in its TensorBoard log under {', '.join(map(str, paths))}")
    lines = group(runs, keys)
    draw(lines, output)
    rows = summary(lines)
    from grpo_robot.checkpoint import write_text_atomic

    write_text_atomic(output.with_suffix(".json"), json.dumps(rows, indent=1))
    return rows
