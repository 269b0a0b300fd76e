"""Hyperparameter search with Optuna: each trial trains a preset on several seeds and scores the
env steps (or the seconds) it took to reach a target success (`scripts/tune.py`, search spaces in
`conf/tune/`).

A trial's cost on one seed is the env steps at the first evaluation at or above `target`; a run
that ends its budget (`max_env_steps`) below it costs `max_env_steps * (2 - best / target)`, so
censored runs still rank by how far they got (`best`: the best of the run's evaluations and its
last iterations' training success on the task's own starts, none of a curriculum's easier ones). A
run that diverges (`TrainingDiverged`: non-finite steps in a row, or behaviour cloning's loss) is
such a censored run, not the end of the search. With `objective: seconds` the cost is the run's wall-clock to
that evaluation, every stage counted (demos, cloning, rollouts, updates) but the evaluations (how
often a preset evaluates is its own choice), and the budget is `time_limit_min`: a censored run
costs `60 * time_limit_min * (2 - best / target)`. Seconds are what a user waits for, update cost
included, but they carry the machine's noise: compare trials run on one machine in one period
(a `seconds` study whose runs were timed on another CPU, core count or GPU is refused, unless
`--any-machine`).

The trial's value is the mean over `seeds`; Optuna's TPE sampler (seeded) proposes the next
trial and its median pruner stops a trial whose running mean after a seed is worse than the
median of earlier trials there, from the `prune_after`-th seed on (1 by default; null: never, so
that one noisy first seed cannot end a trial). The study lives in `<out>/study.db` (SQLite), so an interrupted
search resumes where it stopped, and every finished run appends a line to `<out>/runs.jsonl`.
Params valid alone can clash (`algo.std_anneal.final` at or above the drawn `policy.init_std`):
each seed's config is validated before any run, and a refused draw trains nothing, is kept as a
pruned trial marked `refused` (the sampler ranks it last) and does not count toward `--trials`.

Why not Hydra's Optuna sweeper: it runs one job per trial (a trial here is several seeds' runs,
aggregated), and its current release pins optuna < 3.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from grpo_robot.cli import compose_config
from grpo_robot.cli import compose_train_config as compose

TUNE_KEYS = {"experiment", "overrides", "seeds", "target", "max_env_steps", "eval_every", "eval_seeds", "params",
             "objective", "time_limit_min", "prune_after"}  # fmt: skip
OBJECTIVES = ("env_steps", "seconds")
# the keys every run of a space sets (Space.base_overrides) -> the space key that sets them
SPACE_OWNED = {"experiment": "use the space's experiment", "seed": "use the space's seeds",
               "target_success": "use the space's target", "max_env_steps": "use the space's max_env_steps",
               "eval_every": "use the space's eval_every", "eval_seeds": "use the space's eval_seeds",
               "time_limit_min": "use the space's time_limit_min", "iterations": "", "progress": ""}  # fmt: skip

# keys a search's runs must not take from a space: each trial's seeds are runs of their own
RUN_KEYS = {"resume": "every trial's seeds are new runs (to go on with a search, run tune.py again with its --out)",
            "init_from": "name the clone in the experiment or its pretrain settings, not per trial",
            "hooks": "", "plugins": ""}  # fmt: skip


class OtherMachine(ValueError):
    """A `seconds` study's earlier runs were timed on another machine: its costs and new ones
    would not compare (`check_machine`)."""


MACHINE_KEYS = ("cpu", "cores", "gpu")  # what makes seconds on one machine not seconds on another


def check_machine(space: Space, out: Path, current: dict | None = None) -> None:
    """`OtherMachine` (one line) when `space` scores seconds and a run in `<out>/runs.jsonl` was
    timed on a machine whose CPU, cores or GPU differ from this one (`current`, by default
    `machine.describe()`): TPE would rank new trials against costs from a faster or slower
    machine. An env-steps search may move between machines."""
    from grpo_robot import machine

    runs = out / "runs.jsonl"
    if space.objective != "seconds" or not runs.is_file():
        return
    current = machine.describe() if current is None else current
    mine = {k: current.get(k) for k in MACHINE_KEYS}
    for record in run_records(out):
        theirs = record.get("machine") or {}
        if theirs and {k: theirs.get(k) for k in MACHINE_KEYS} != mine:
            raise OtherMachine(f"{out}: its runs were timed on {machine.one_line(theirs)}, this is "
                               f"{machine.one_line(current)}; seconds do not compare across machines: go on "
                               "there, start a new --out, or pass --any-machine")  # fmt: skip


def run_records(out: Path) -> list[dict]:
    """The runs of `<out>/runs.jsonl`, one record per seed run (none where there is no file)."""
    runs = out / "runs.jsonl"
    records = []
    for line in runs.read_text().splitlines() if runs.is_file() else []:
        try:
            record = json.loads(line)
        except ValueError:  # a blank line, or one cut short by a kill
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


class OtherScoring(ValueError):
    """A study whose trials were scored otherwise (objective, target, budget, seeds, preset)."""


def should_prune(st, number: int, step: int, value: float, prune_after: int | None) -> bool:
    """Whether trial `number`, whose mean cost after seed `step` (0-based) is `value`, is worse than
    the median of the other trials' means after that seed: only from seed `prune_after` on, and
    once 4 trials are complete (Optuna's median pruner compared a trial's best mean so far, so one
    lucky first seed kept a trial from being stopped however its later seeds went)."""
    if prune_after is None or step < prune_after - 1:
        return False
    trials = [t for t in st.trials if t.number != number and "refused" not in t.user_attrs]
    if sum(t.state.name == "COMPLETE" for t in trials) < 4:
        return False
    seen = [t.intermediate_values[step] for t in trials
            if t.state.name in ("COMPLETE", "PRUNED") and step in t.intermediate_values]  # fmt: skip
    return bool(seen) and value > float(np.median(seen))


class TuneInterrupted(RuntimeError):
    """A trial's run ended by a signal or an error: the trial is not scored (it is left failed in
    the study, and `run` stops); run the command again to go on. `signal`: the signal's name
    (`SIGINT`), for the command's exit code."""

    def __init__(self, message: str, signal: str | None = None) -> None:
        super().__init__(message)
        self.signal = signal


@dataclass(frozen=True)
class Param:
    """One searched key: a float or int range (`low`, `high`, `log`) or a list of `choices`.
    `when` makes it conditional: ((key, allowed values), ...) of earlier params with choices; a
    trial draws it only when each of those keys drew an allowed value, and otherwise leaves the
    preset's value (algo.desired_kl, say, only when algo.lr_schedule is adaptive)."""

    key: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple | None = None
    when: tuple[tuple[str, tuple], ...] = ()

    def active(self, values: dict[str, Any]) -> bool:
        """Whether a trial whose earlier params drew `values` draws this one."""
        return all(key in values and values[key] in allowed for key, allowed in self.when)

    def condition(self) -> str:
        return " and ".join(f"{key} in {list(allowed)}" for key, allowed in self.when)

    def suggest(self, trial) -> Any:
        if self.choices is not None:
            return trial.suggest_categorical(self.key, list(self.choices))
        if isinstance(self.low, int) and isinstance(self.high, int):
            return trial.suggest_int(self.key, self.low, self.high, log=self.log)
        return trial.suggest_float(self.key, float(self.low), float(self.high), log=self.log)

    def extremes(self) -> list[Any]:
        """The values that bound the space, for checking it before any work."""
        return list(self.choices) if self.choices is not None else [self.low, self.high]

    def nearest(self, value: Any) -> Any:
        """`value` when this param can draw it, else the nearest value it can (the first choice)."""
        if self.choices is not None:
            return value if value in self.choices else self.choices[0]
        if isinstance(value, bool) or not isinstance(value, int | float):
            return self.low
        return min(max(value, self.low), self.high)


@dataclass(frozen=True)
class Space:
    """A search: the preset, fixed overrides, seeds, target, budget and the searched params."""

    experiment: str
    params: tuple[Param, ...]
    overrides: tuple[str, ...] = ()
    seeds: tuple[int, ...] = (0, 1, 2)
    target: float = 0.9
    max_env_steps: int | None = 5_000_000
    eval_every: int = 5
    eval_seeds: int = 100
    objective: str = "env_steps"  # or "seconds": wall-clock to the target, all stages
    time_limit_min: float | None = None  # the budget of a `seconds` search (each run's time limit)
    prune_after: int | None = 1  # seeds a trial runs before the pruner may stop it; None: never pruned
    source: str = field(default="", compare=False)
    # the env its runs train on, as composed (a built-in task's version id: a preset's env moves to a new
    # version when the task does, and a study's costs would then not compare)
    task: str | None = field(default=None, compare=False)

    @property
    def budget(self) -> float:
        """A run's budget in the objective's unit: env steps, or seconds."""
        return 60.0 * self.time_limit_min if self.objective == "seconds" else float(self.max_env_steps)

    @property
    def unit(self) -> tuple[str, float]:
        """(name, divisor) to print a value: M env steps, or seconds."""
        return ("M env steps", 1e6) if self.objective == "env_steps" else ("s", 1.0)

    def base_overrides(self, seed: int) -> list[str]:
        return [f"experiment={self.experiment}", *self.overrides, f"seed={seed}", f"target_success={self.target}",
                f"max_env_steps={_hydra(self.max_env_steps)}", f"eval_every={self.eval_every}",
                f"eval_seeds={self.eval_seeds}", "iterations=1000000", "progress=false",
                f"time_limit_min={_hydra(self.time_limit_min)}"]  # fmt: skip

    def trial_config(self, values: dict[str, Any], seed: int):
        return compose(*self.base_overrides(seed), *(f"{k}={_hydra(v)}" for k, v in values.items()))


def _hydra(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_hydra(v) for v in value) + "]"
    if value is None:
        return "null"
    return repr(value) if isinstance(value, float) else str(value)


def load_space(path: str | Path, config_dir: str | Path | None = None) -> Space:
    """A search space from YAML, checked: every key known, every param a range or choices, and
    the preset composed and validated with each param at each of its bounds (one line on error).
    `config_dir` (tune.py's `--config-dir`) is a folder of one's own presets, put on Hydra's
    search path of every run as a fixed override (`hydra.searchpath=[file://...]`, which a space
    may also give among its `overrides`, but not both)."""
    from grpo_robot.config import ConfigError
    from grpo_robot.config.validate import validate

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"search space {path} is not a file")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        at = f" (line {where.line + 1}, column {where.column + 1})" if where is not None else ""
        raise ValueError(f"{path}: not valid YAML{at}: {getattr(err, 'problem', None) or err}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: a search space is a mapping of keys ({', '.join(sorted(TUNE_KEYS))}), "
                         f"got a {type(raw).__name__}")  # fmt: skip
    if not isinstance(raw.get("params") or {}, dict):
        raise ValueError(f"{path}: params must map each searched key to its range or choices, got a "
                         f"{type(raw['params']).__name__}")  # fmt: skip
    unknown = sorted(set(raw) - TUNE_KEYS)
    if unknown:
        raise ValueError(f"{path}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(TUNE_KEYS))}")
    params: list[Param] = []
    for key, spec in (raw.get("params") or {}).items():
        if key in SPACE_OWNED or key in RUN_KEYS:  # every run would have another value than its record says
            raise ValueError(f"{path}: params.{key} is not a setting to search: "
                             f"{SPACE_OWNED.get(key) or RUN_KEYS.get(key) or 'every run has it as the space fixes it'}")
        if not isinstance(spec, dict) or not (set(spec) <= {"low", "high", "log", "choices", "when"}):
            raise ValueError(f"{path}: params.{key} must be {{low, high[, log]}} or {{choices: [...]}} "
                             f"(each with an optional when: {{KEY: VALUES}}), got {spec!r}")  # fmt: skip
        when = _when(path, key, spec.get("when"), {p.key: p for p in params})
        if "choices" in spec:
            if not isinstance(spec["choices"], list) or not spec["choices"]:
                raise ValueError(f"{path}: params.{key}.choices must be a non-empty list, got {spec['choices']!r}")
            if not all(c is None or isinstance(c, (bool, int, float, str)) for c in spec["choices"]):
                raise ValueError(f"{path}: params.{key}.choices must be numbers, strings or null (a list as a "
                                 f"string, e.g. '[128,128]'), got {spec['choices']!r}")  # fmt: skip
            params.append(Param(key, choices=tuple(spec["choices"]), when=when))
            continue
        low, high = spec.get("low"), spec.get("high")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)) or not low < high:
            raise ValueError(f"{path}: params.{key} needs numbers low < high, got low={low!r} high={high!r}")
        if spec.get("log") and low <= 0:
            raise ValueError(f"{path}: params.{key} has log: true, so low must be > 0, got {low!r}")
        params.append(Param(key, low, high, bool(spec.get("log", False)), when=when))
    if not params:
        raise ValueError(f"{path}: params is empty; nothing to search")
    seeds = raw.get("seeds", (0, 1, 2))
    if not (isinstance(seeds, (list, tuple)) and seeds and all(isinstance(s, int) and not isinstance(s, bool)
                                                                and s >= 0 for s in seeds)
            and len(set(seeds)) == len(seeds)):  # fmt: skip
        raise ValueError(f"{path}: seeds must be a non-empty list of distinct integers >= 0 (each a run of "
                         f"its own), got {seeds!r}")  # fmt: skip
    seeds = tuple(seeds)
    objective = raw.get("objective", "env_steps")
    if objective not in OBJECTIVES:
        raise ValueError(f"{path}: objective={objective!r} is invalid: allowed: {', '.join(OBJECTIVES)}")
    limit = raw.get("time_limit_min")
    if objective == "seconds" and not (isinstance(limit, (int, float)) and not isinstance(limit, bool) and limit > 0):
        raise ValueError(f"{path}: objective: seconds needs time_limit_min > 0 (each run's budget), got {limit!r}")
    if objective == "env_steps" and raw.get("max_env_steps", 1) is None:
        raise ValueError(f"{path}: objective: env_steps needs max_env_steps (each run's budget), got null")
    prune_after = raw.get("prune_after", 1)
    whole = isinstance(prune_after, int) and not isinstance(prune_after, bool)
    if "prune_after" in raw and prune_after is not None and not (whole and 1 <= prune_after < len(seeds)):
        raise ValueError(f"{path}: prune_after={prune_after!r} is invalid: allowed: an integer from 1 to "
                         f"{len(seeds) - 1} (seeds run before the pruner may stop a trial), or null (never)")
    overrides = raw.get("overrides") or []
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise ValueError(f"{path}: overrides must be a list of KEY=VALUE strings, got {overrides!r}")
    searched = {p.key for p in params}
    for override in overrides:  # the keys the space sets itself would replace these silently
        key = override.partition("=")[0].lstrip("+~")
        if key in SPACE_OWNED:
            raise ValueError(f"{path}: overrides sets {key}, which the space sets itself: "
                             f"{SPACE_OWNED[key] or 'every run has it as the space fixes it'}")  # fmt: skip
        if key in RUN_KEYS:
            raise ValueError(f"{path}: overrides sets {key}: {RUN_KEYS[key]}")
        if key in searched:  # the draw would train, and the fixed value would win in the report's command line
            raise ValueError(f"{path}: overrides fixes {key}, which params searches; keep it in one of the two")
    if config_dir is not None:
        from grpo_robot.cli import search_path_override

        if any(o.lstrip("+~").startswith("hydra.searchpath=") for o in overrides):
            raise ValueError(f"--config-dir={config_dir} and {path}'s overrides both set hydra.searchpath: "
                             "give one of them")  # fmt: skip
        overrides = [*overrides, search_path_override(str(config_dir))]
    for key, kinds in (("target", (int, float)), ("max_env_steps", (int,)), ("eval_every", (int,)),
                       ("eval_seeds", (int,)), ("time_limit_min", (int, float))):  # fmt: skip
        value = raw.get(key)
        if value is not None and (not isinstance(value, kinds) or isinstance(value, bool) or value <= 0):
            kind = "a whole number" if kinds == (int,) else "a number"
            raise ValueError(f"{path}: {key}={value!r} is invalid: must be {kind} > 0")
    if "target" in raw and not 0 < raw["target"] <= 1:
        raise ValueError(f"{path}: target={raw['target']!r} is invalid: must be a success rate in (0, 1]")
    if objective == "seconds" and "max_env_steps" not in raw:
        raw["max_env_steps"] = None  # a seconds search's budget is its time limit alone
    space = Space(experiment=str(raw.get("experiment", "push_from_scratch")), params=tuple(params),
                  overrides=tuple(overrides), seeds=seeds,
                  **{k: raw[k] for k in ("target", "max_env_steps", "eval_every", "eval_seeds", "objective",
                                         "time_limit_min", "prune_after") if k in raw},
                  source=str(path))  # fmt: skip
    try:

        base = compose_config(*space.base_overrides(seeds[0]))  # composed once: each check sets leaves on it
        # a range of whole numbers on a float key ({low: 0, high: 1} for an entropy coefficient) is searched
        # as floats: the schema's type decides, not how the bounds were written (nor a preset's null)
        params = [replace(p, low=float(p.low), high=float(p.high)) if p.choices is None and isinstance(p.low, int)
                  and isinstance(p.high, int) and _is_float_key(base, p.key) else p
                  for p in params]  # fmt: skip
        space = replace(space, params=tuple(params), task=_env_of(base))
        checks = [({}, seed) for seed in seeds]
        for p in params:
            enabling = {key: allowed[0] for key, allowed in p.when}  # a conditional param where it is drawn
            checks += [({**enabling, p.key: value}, seeds[0]) for value in p.extremes()]
        # the other params at the preset's values, or else at values they can draw (the preset's, or the
        # nearest bound): a bound that clashes only with a preset value the search never trains is no error
        # (a draw that clashes is refused when drawn, and the search goes on)
        anchor = {p.key: p.nearest(_selected(base, p.key)) for p in params if not p.when}
        for values, seed in checks:
            try:
                validate(_with_values(space, base, values, seed))
            except ConfigError:
                validate(_with_values(space, base, {**anchor, **values}, seed))
    except (ConfigError, ValueError) as err:
        raise ValueError(f"{path}: {str(err).splitlines()[0]}") from None
    except Exception as err:  # noqa: BLE001  (Hydra's own errors on a bad override)
        raise ValueError(f"{path}: {type(err).__name__}: {str(err).splitlines()[0]}") from None
    return space


def _env_of(base) -> str:
    """What a composed config trains on: a built-in task's version id, or a Gymnasium env's id or entry point."""
    from grpo_robot.envs import pinned_id

    env = base.env
    return pinned_id(env.task) if env.task else str(env.id or env.entry_point)


def _selected(base, key: str) -> Any:
    """`key`'s value in the composed config `base` (None where it has none)."""
    from omegaconf import OmegaConf

    return OmegaConf.select(base, key, default=None)


def _is_float_key(base, key: str) -> bool:
    """Whether the config's schema types `key` as a float (an optional one too)."""
    from grpo_robot.config.store import schema_field

    field_ = schema_field(key)
    if field_ is not None:
        return str(field_.type).split(" |")[0] == "float"
    from omegaconf import OmegaConf

    return isinstance(OmegaConf.select(base, key), float)


def _with_values(space: Space, base, values: dict[str, Any], seed: int):
    """The config `space.trial_config(values, seed)` composes, built from `base` (the space's
    composition) by setting the seed and each value as Hydra parses it on the command line; a key
    that is no leaf of `base` (a config group, or a key Hydra would refuse) is composed in full."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import DictConfig, OmegaConf

    from grpo_robot.config import to_train_config

    cfg = copy.deepcopy(base)
    cfg.seed = seed
    parser = OverridesParser.create()
    for key, value in values.items():
        if isinstance(OmegaConf.select(cfg, key, default=DictConfig({})), DictConfig):
            return space.trial_config(values, seed)
        OmegaConf.update(cfg, key, parser.parse_override(f"{key}={_hydra(value)}").value(), merge=False)
    return to_train_config(cfg)


def _when(path: Path, key: str, spec: Any, earlier: dict[str, Param]) -> tuple[tuple[str, tuple], ...]:
    """A param's `when: {KEY: VALUE or [VALUES]}`, checked: each KEY a param listed before it with
    choices, each value one of those choices."""
    if spec is None:
        return ()
    if not isinstance(spec, dict) or not spec:
        raise ValueError(f"{path}: params.{key}.when must be {{KEY: VALUES}} over params listed before it, "
                         f"got {spec!r}")  # fmt: skip
    when = []
    for other, values in spec.items():
        allowed = tuple(values) if isinstance(values, list) else (values,)
        if other not in earlier or earlier[other].choices is None:
            choice_params = [k for k, p in earlier.items() if p.choices is not None]
            raise ValueError(f"{path}: params.{key}.when names {other!r}; allowed: a param with choices listed "
                             f"before it ({', '.join(choice_params) or 'none'})")  # fmt: skip
        bad = [v for v in allowed if v not in earlier[other].choices]
        if not allowed or bad:
            raise ValueError(f"{path}: params.{key}.when: {other}={bad[0] if bad else values!r} is not one of its "
                             f"choices {list(earlier[other].choices)}")  # fmt: skip
        when.append((other, allowed))
    return tuple(when)


def run_cost(space: Space, summary: dict, train_success: float) -> tuple[float, float]:
    """(cost in env steps or seconds, best success) of one finished run (see the module's docstring)."""
    target = summary.get("target") or {}
    final = (summary.get("eval") or {}).get("success_rate", 0.0)
    best = max(summary.get("best_eval") or 0.0, final, train_success)
    if target.get("reached"):
        # the budget is checked after an iteration, whose evaluation may reach the target past it: such a
        # run costs the budget, below any censored run (which costs more than it), never above one
        cost = min(float(target["env_steps" if space.objective == "env_steps" else "train_seconds"]), space.budget)
        return cost, float(target["success"])
    return space.budget * (2.0 - min(best, space.target) / space.target), best


def own_starts_success(scalars: dict[str, float]) -> float | None:
    """An iteration's training success as a measure of the task (`scalars`: its logged scalars), or
    None where it ran on a curriculum's easier starts (`charts/difficulty` below 1)."""
    if scalars.get("charts/difficulty", 1.0) < 1.0:
        return None
    from grpo_robot.hooks import policy_success

    return policy_success(scalars)  # over every group drawn, under dynamic sampling too


def train_one(space: Space, cfg, run_dir: Path) -> dict:
    """Train one seed of a trial, its composed and validated config `cfg`; its record (cost,
    steps, seconds, success)."""
    from grpo_robot.hooks import Hook
    from grpo_robot.trainer import Trainer

    class TrainSuccess(Hook):  # the training batches' success over the last iterations on the task's own starts
        def __init__(self) -> None:
            self.recent: list[float] = []

        def after_iteration(self, trainer, record) -> None:
            success = own_starts_success(record.scalars)
            if success is not None:
                self.recent = [*self.recent[-4:], success]

        def mean(self) -> float:
            return sum(self.recent) / len(self.recent) if self.recent else 0.0

    watch = TrainSuccess()
    trainer = Trainer(cfg, run_dir, hooks=[watch])
    try:
        summary = trainer.run()
    finally:
        trainer.close()
    diverged = summary.get("stopped") == "error" and summary.get("diverged")  # the settings' result: censored
    if summary.get("stopped") in ("signal", "error") and not diverged:  # not a measurement: the search stops here
        by = summary.get("signal") or summary["stopped"] if summary["stopped"] == "signal" else "error"
        raise TuneInterrupted(f"{run_dir} ended by {by}" + (f": {summary['error']}" if summary.get("error") else ""),
                              summary.get("signal") if summary["stopped"] == "signal" else None)  # fmt: skip
    cost, best = run_cost(space, summary, watch.mean())
    target = summary.get("target") or {}
    return {"seed": cfg.seed, "cost": cost, "reached": bool(target.get("reached")), "env_steps": summary["env_steps"],
            "seconds": summary["seconds"], "seconds_to_target": target.get("seconds"),
            "train_seconds_to_target": target.get("train_seconds"),
            "final_success": (summary.get("eval") or {}).get("success_rate"), "best": best,
            "stopped": "diverged" if diverged else summary.get("stopped"),
            "machine": summary.get("machine")}  # fmt: skip


def study(space: Space, out: Path, sampler_seed: int = 0, record: bool = True):
    """The study in `out` (made if new). Its scoring (preset, objective, target, budgets, seeds,
    evaluations) is kept with it; a space scored otherwise is `OtherScoring`. `record`: keep the
    space's scoring in a study that has none yet (`report` only reads)."""
    import optuna

    # errors only: a trial that an interrupt or a failed run ends is told in one line of this module's
    # own (`TuneInterrupted`), not with Optuna's warning and its traceback first
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    out.mkdir(parents=True, exist_ok=True)
    # pruning is `should_prune`'s (Optuna's median pruner compares a trial's best step, not its last)
    st = optuna.create_study(
        study_name="tune", storage=f"sqlite:///{out / 'study.db'}", load_if_exists=True, direction="minimize",
        pruner=optuna.pruners.NopPruner(),
    )  # fmt: skip
    scoring = {"experiment": space.experiment, "objective": space.objective, "target": space.target,
               "max_env_steps": space.max_env_steps, "time_limit_min": space.time_limit_min,
               "seeds": list(space.seeds), "eval_every": space.eval_every, "eval_seeds": space.eval_seeds}  # fmt: skip
    if space.task is not None:
        scoring["task"] = space.task
    held = st.user_attrs.get("scoring")
    if held is None:
        if record:
            st.set_user_attr("scoring", scoring)
    # values scored otherwise would be ranked, and learned from, as one (a study made before the task was
    # kept with it is compared on the rest)
    elif differs := [k for k, v in scoring.items() if (k != "task" or k in held) and held.get(k) != v]:
        key = differs[0]
        raise OtherScoring(f"{out} holds a study scored with {key}={held.get(key)!r}, and {space.source} has "
                           f"{key}={scoring[key]!r}; its values would not compare: start a new --out")  # fmt: skip
    # The sampler's stream starts over in every process: seeded with the seed alone, a resumed
    # study drew its first trials' values again (its random start-up trials, and TPE's candidates).
    # Seeded from (seed, trials the study holds), a new study is reproducible and a resumed one
    # goes on. Hashed, not added: numpy's legacy generator under seeds 0 and 3 starts almost alike
    # (0.549 and 0.551), so seed + 3 drew trial 0's values to within 1%.
    seed = int(np.random.SeedSequence([sampler_seed, len(st.trials)]).generate_state(1)[0])
    st.sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=min(5, max(1, len(space.params))))
    return st


def check_choices(space: Space, st, out: Path) -> None:
    """`OtherScoring` when a categorical param's choices differ from those the study's trials drew
    from: Optuna's TPE samples one categorical's choices over a whole study (a new list raised its
    own traceback, in every trial after)."""
    for t in st.trials:
        for p in space.params:
            drawn = getattr(t.distributions.get(p.key), "choices", None)
            if p.choices is not None and drawn is not None and tuple(drawn) != tuple(p.choices):
                raise OtherScoring(f"{out} holds trials that drew {p.key} from {list(drawn)}, and {space.source} "
                                   f"offers {list(p.choices)}; a study keeps a categorical's choices: start a new "
                                   "--out (or keep the list and narrow it with when:)")  # fmt: skip


def parse_enqueue(space: Space, items: Sequence[str]) -> dict[str, Any]:
    """`KEY=VALUE` strings -> values for a trial to run next, each a searched param inside its range
    or among its choices (ValueError naming the bad item otherwise). Keys left out are drawn."""
    params = {p.key: p for p in space.params}
    values: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or key not in params:
            raise ValueError(f"--enqueue {item!r} is invalid: must be KEY=VALUE with KEY one of the searched "
                             f"params ({', '.join(params)})")  # fmt: skip
        from hydra.core.override_parser.overrides_parser import OverridesParser

        try:  # as the command line reads it (1e-3 a number, null None)
            value = OverridesParser.create().parse_override(item).value()
        except Exception:  # noqa: BLE001
            value = yaml.safe_load(text)
        p = params[key]
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        inside = value in p.choices if p.choices is not None else number and p.low <= value <= p.high
        whole = p.choices is not None or not isinstance(p.low, int) or isinstance(value, int)
        if not (inside and whole):
            allowed = list(p.choices) if p.choices is not None else f"[{p.low}, {p.high}]"
            kind = "" if whole else "a whole number "
            raise ValueError(f"--enqueue {item!r} is invalid: {key} must be {kind}in {allowed}")
        values[key] = value
    for key in values:
        missing = [other for other, _ in params[key].when if other not in values]
        if missing:  # a draw of the condition could leave the enqueued value unused, without a word
            raise ValueError(f"--enqueue {key}={values[key]!r} is invalid: {key} is searched only when "
                             f"{params[key].condition()}: enqueue {missing[0]} too")  # fmt: skip
        unmet = [other for other, allowed in params[key].when if other in values and values[other] not in allowed]
        if unmet:
            raise ValueError(f"--enqueue {key}={values[key]!r} is invalid: {key} is searched only when "
                             f"{params[key].condition()}, and it gives {unmet[0]}={values[unmet[0]]!r}")  # fmt: skip
    return values


def _append_line(path: Path, line: str) -> None:
    """Append `line` to `path` as a line of its own, on disk before the search goes on: a line cut
    short by a kill is ended first, so that the record after it stays readable."""
    with open(path, "a+b") as f:
        f.seek(0, 2)
        if f.tell():
            f.seek(-1, 2)
            if f.read(1) != b"\n":
                f.write(b"\n")
        f.write(line.encode() + b"\n")
        f.flush()
        os.fsync(f.fileno())


MAX_REFUSED_DRAWS = 50  # draws in a row the config refuses before the search gives up


def _has_trial(st, values: dict[str, Any]) -> int | None:
    """The number of a trial of the study with `values` that ran (finished or pruned) or waits to
    run, or None; a failed one (an interrupted run) does not count, so the values are run again."""
    for t in st.trials:
        params = t.params if t.state.name in ("COMPLETE", "PRUNED") else (
            t.system_attrs.get("fixed_params", {}) if t.state.name == "WAITING" else None)
        if params is not None and all(k in params and params[k] == v for k, v in values.items()):
            return t.number
    return None


def run(space: Space, out: Path, trials: int, log: Callable[[str], None] = print,
        enqueue: dict[str, Any] | None = None, any_machine: bool = False) -> Any:  # fmt: skip
    """Run trials until the study holds `trials` finished or pruned ones; the study. `enqueue`:
    values (`parse_enqueue`) that the next trial takes instead of drawing them, unless a trial
    of the study already has them. A `seconds` study timed on another machine is refused
    (`check_machine`) unless `any_machine`."""
    import optuna

    from grpo_robot.config import ConfigError
    from grpo_robot.config.validate import validate

    st = study(space, out)
    if not st.trials and (any(out.glob("trial_*")) or (out / "runs.jsonl").is_file()):
        # a study.db removed, or another search's folder: its trial 0 would log into their runs' folders
        raise OtherScoring(f"{out} holds runs of a search whose study (study.db) is not there: start a new --out, "
                           "or put the study back")  # fmt: skip

    def done() -> int:  # refused draws do not count
        return sum(t.state.name in ("COMPLETE", "PRUNED") and "refused" not in t.user_attrs for t in st.trials)

    if done() < trials and not any_machine:
        check_machine(space, out)  # before anything is added to the study
    check_choices(space, st, out)
    if enqueue:
        earlier = _has_trial(st, enqueue)
        if earlier is not None:  # it said nothing, and a reader looked for the trial that never came
            log(f"--enqueue: trial {earlier} {'waits to run' if st.trials[earlier].state.name == 'WAITING' else 'ran'} "
                "these values already; nothing enqueued")  # fmt: skip
        elif done() >= trials:
            log(f"--enqueue: the study holds --trials={trials} already; nothing enqueued (raise --trials to run it)")
        else:
            st.enqueue_trial(enqueue)

    base = []  # the space's composition, made at the first draw: each seed's config sets leaves on it

    def objective(trial) -> float:
        values: dict[str, Any] = {}
        for p in space.params:  # in the space's order, so that a conditional param sees what it depends on
            if p.active(values):
                values[p.key] = p.suggest(trial)
        trial.set_user_attr("overrides", list(space.overrides))  # fixed values, which a space may change
        try:  # params valid alone can clash (an std cap above the start std): such a draw trains nothing
            if not base:
                base.append(compose_config(*space.base_overrides(space.seeds[0])))
            configs = [_with_values(space, base[0], values, seed) for seed in space.seeds]
            for cfg in configs:
                validate(cfg)
        except ConfigError as err:
            trial.set_user_attr("refused", str(err))
            log(f"trial {trial.number}: not run, the config refuses the draw: {err}")
            raise optuna.TrialPruned() from None  # pruned without a value: the sampler ranks it last
        costs = []
        for k, (seed, cfg) in enumerate(zip(space.seeds, configs, strict=True)):
            rec = train_one(space, cfg, out / f"trial_{trial.number:03d}" / f"seed_{seed}")
            rec.update(trial=trial.number, params=values, overrides=list(space.overrides))
            _append_line(out / "runs.jsonl", json.dumps(rec))
            costs.append(rec["cost"])
            outcome = "reached" if rec["reached"] else "not reached"
            unit, div = space.unit
            final = "no evaluation" if rec.get("final_success") is None else f"final {rec['final_success']:.1%}"
            if rec.get("stopped") == "diverged":
                final += ", diverged"
            log(f"trial {trial.number} seed {seed}: {outcome}, cost {rec['cost'] / div:.2f} {unit}, "
                f"{final}, {rec['seconds']:.0f} s")  # fmt: skip
            trial.report(sum(costs) / len(costs), k)
            if k < len(space.seeds) - 1 and should_prune(st, trial.number, k, sum(costs) / len(costs),
                                                         space.prune_after):  # fmt: skip
                raise optuna.TrialPruned()
        return sum(costs) / len(costs)

    refused = 0
    while done() < trials:
        st.optimize(objective, n_trials=1, catch=())
        refused = refused + 1 if "refused" in st.trials[-1].user_attrs else 0
        if refused >= MAX_REFUSED_DRAWS:
            raise ConfigError(f"the config refused {refused} draws in a row, the last: "
                              f"{st.trials[-1].user_attrs['refused']}; narrow the search space")  # fmt: skip
    return st


def report(space: Space, out: Path) -> list[str]:
    """Markdown lines: the space, and every trial by value (pruned and unfinished ones last); the
    best is a complete trial's.
    Params that earlier trials searched and the space no longer does get columns of their own,
    and so do the fixed overrides when they differ between trials, so that trials run under
    another space are told apart."""
    st = study(space, out, record=False)
    keys = [p.key for p in space.params]
    keys += sorted({k for t in st.trials for k in t.params} - set(keys))
    # a trial of a study older than the recording of fixed overrides: what it ran with is unknown
    fixed = {t.number: " ".join(t.user_attrs["overrides"]) or "-" if "overrides" in t.user_attrs else "not recorded"
             for t in st.trials}
    show_fixed = len(set(fixed.values())) > 1
    unit, div = space.unit
    head = unit.split()[0]  # "M" or "s"
    lines = [f"search space ({space.source}): " + "; ".join(
        (f"{p.key} in {list(p.choices)}" if p.choices is not None else
         f"{p.key} in [{p.low}, {p.high}]{' log' if p.log else ''}") + (f" (when {p.condition()})" if p.when else "")
        for p in space.params),  # fmt: skip
        f"preset {space.experiment}, seeds {list(space.seeds)}, target {space.target:.0%}, budget "
        f"{space.budget / div:g} {unit} per run; value: mean {space.objective.replace('_', ' ')} to target",
        *(f"runs on: {m}" for m in _machines(out)), "",
        f"| trial | state | value ({head}) | reached | " + " | ".join(keys + ["fixed"] * show_fixed) + " |",
        "| ---: | --- | ---: | ---: |" + " --- |" * (len(keys) + show_fixed)]  # fmt: skip
    # how many of a trial's seed runs reached the target (a censored run's cost is no time to target)
    reached: dict[int, list[bool]] = {}
    for record in run_records(out):
        if isinstance(record.get("trial"), int):
            reached.setdefault(record["trial"], []).append(bool(record.get("reached")))
    # complete trials by value, then pruned ones by the mean of the seeds they ran (Optuna keeps that
    # partial mean as a pruned trial's value: it is not comparable with a full one), then the rest
    rank = {"COMPLETE": 0, "PRUNED": 1}
    order = sorted(st.trials, key=lambda t: (rank.get(t.state.name, 2), math.inf if t.value is None else t.value))
    for t in order:
        value = f"{t.value / div:.2f}" if t.value is not None else "-"
        if t.state.name == "PRUNED" and t.value is not None:
            value += f" ({len(t.intermediate_values)} of {len(space.seeds)} seeds)"
        cells = [_fmt(t.params.get(k)) for k in keys] + [fixed[t.number]] * show_fixed
        state = "refused" if "refused" in t.user_attrs else t.state.name.lower()
        runs = reached.get(t.number, [])
        share = f"{sum(runs)}/{len(runs)}" if runs else "-"
        lines.append(f"| {t.number} | {state} | {value} | {share} | " + " | ".join(cells) + " |")
    complete = [t for t in st.trials if t.state.name == "COMPLETE" and t.value is not None]
    if complete:
        best = min(complete, key=lambda t: t.value)
        values = [f"experiment={space.experiment}", *(f"{k}={_hydra(v)}" for k, v in best.params.items()),
                  *best.user_attrs.get("overrides", [])]
        lines += ["", f"best: trial {best.number}: " + " ".join(values)]
        if "overrides" not in best.user_attrs:  # the line would read as complete without them
            lines.append(f"(trial {best.number} ran before trials recorded the space's fixed overrides, so the line "
                         f"above may lack some; the space fixes now: {' '.join(space.overrides) or 'none'})")
    return lines


def _machines(out: Path) -> list[str]:
    """Each machine the study's runs recorded (`runs.jsonl`), as one line, with how many runs it made."""
    from collections import Counter

    from grpo_robot import machine

    counts = Counter(machine.one_line(r["machine"]) for r in run_records(out) if isinstance(r.get("machine"), dict))
    return [f"{line} ({n} runs)" for line, n in sorted(counts.items())]


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return "-" if value is None else str(value)
