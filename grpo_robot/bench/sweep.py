"""Time to a target success: training runs over algorithms, starts and seeds on one task.

A start is `bc` (the task's pipeline preset, from one behaviour-cloned checkpoint per seed that
every algorithm of that seed shares) or `scratch` (the default job's settings on the task). An
algorithm is a preset of conf/algo/ (`grpo`) or a labelled variant of one with Hydra overrides
(`grpo_k10=grpo:algo.epochs=10,algo.minibatches=16`). Every run stops at the target success or
its budget. One record per run goes to `<out>/results.json` as soon as the run ends, and runs
already recorded there are skipped, so an interrupted sweep picks up where it stopped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import NamedTuple

from grpo_robot.cli import compose_train_config as compose

BC_PRESETS = {"PushCube": "push_cube_bc", "LiftCube": "lift_cube_bc", "PlaceCube": "place_cube_bc"}
# The sweep compares the algorithms in the world frame: SB3's actor has no mirror frame to copy a
# clone into, and the sweep's recorded runs (docs/benchmarks.md) were made before the presets took it
WORLD_FRAME = "policy.mirror=false"
ENV_PRESETS = {"Reach": "reach", "PushCube": "push_cube", "LiftCube": "lift_cube", "PlaceCube": "place_cube"}
STARTS = ("bc", "scratch")


@dataclass(frozen=True)
class Sweep:
    """What to run and each run's budget (the options of `scripts/benchmark.py train`)."""

    task: str = "LiftCube"
    algos: Sequence[str] = ("grpo", "dr_grpo", "ppo")  # `AlgoSpec` strings
    starts: Sequence[str] = STARTS
    seeds: Sequence[int] = (0, 1, 2)
    target: float = 0.9  # eval success that ends a run
    eval_every: int = 5  # iterations
    eval_seeds: int = 100
    iterations: int = 300  # at most, per run
    time_limit_min: float = 20  # at most, per run
    sb3_steps: int = 0  # env steps of Stable-Baselines3 PPO per seed and start; 0: none
    sb3_eval_every: int = 20_000  # SB3: env steps between evaluations
    out: Path = field(default=Path("runs/benchmark"))  # run dirs and results.json

    @classmethod
    def from_args(cls, args: object) -> Sweep:
        """From an object with an attribute per field (e.g. parsed arguments)."""
        values = {f.name: getattr(args, f.name) for f in fields(cls)}
        return cls(**{**values, "out": Path(values["out"])})


class AlgoSpec(NamedTuple):
    label: str  # names the runs and the rows of the results
    preset: str  # conf/algo/<preset>.yaml
    overrides: list[str]  # Hydra overrides on top of the preset


_NAME = re.compile(r"[A-Za-z0-9_.-]+")
SPEC_FORM = "expected PRESET or LABEL=PRESET:KEY=VALUE,KEY=VALUE"


def parse_algo(spec: str) -> AlgoSpec:
    """`grpo` -> (grpo, grpo, []); `grpo_k10=grpo:algo.epochs=10,algo.minibatches=16` ->
    (grpo_k10, grpo, [algo.epochs=10, algo.minibatches=16]). Anything else (an empty or unusable
    label or preset, overrides without a label, an override without `=`) is a `ValueError`
    naming the expected form."""
    head, colon, extra = spec.partition(":")
    label, eq, preset = head.partition("=")
    if not eq:
        label = preset = head
    overrides = [o for o in extra.split(",") if o]
    ok = (eq or not colon) and _NAME.fullmatch(label) and _NAME.fullmatch(preset)
    if not ok or any("=" not in o for o in overrides):
        raise ValueError(SPEC_FORM)
    return AlgoSpec(label, preset, overrides)


def run_config(s: Sweep, algo: AlgoSpec, start: str, seed: int, init: Path | None):
    """The training config of one run: the task's pipeline preset from a BC start, the default
    job's settings on the task from scratch; the algorithm preset and its overrides; stop at the
    target."""
    experiment = f"experiment={BC_PRESETS[s.task]}" if start == "bc" else "experiment=push_from_scratch"
    overrides = [experiment, f"env={ENV_PRESETS[s.task]}", f"algo={algo.preset}", f"seed={seed}", "pretrain=false",
                 f"target_success={s.target}", f"eval_every={s.eval_every}", f"eval_seeds={s.eval_seeds}",
                 f"iterations={s.iterations}", f"time_limit_min={s.time_limit_min}",
                 "progress=false"]  # fmt: skip
    overrides.append("eval_at_start=true" if init is None else f"init_from={init}")
    return compose(*overrides, WORLD_FRAME, *algo.overrides)


def check(s: Sweep) -> None:
    """A one-line `ValueError` for a start the task lacks or a bad algorithm entry (a malformed
    spec, an unknown preset, an invalid override), before any run starts."""
    from grpo_robot.config import validate

    if "bc" in s.starts and s.task not in BC_PRESETS:
        raise ValueError(f"--task {s.task} has no BC preset; --starts bc takes {', '.join(BC_PRESETS)}")
    for spec in s.algos:
        try:
            validate(run_config(s, parse_algo(spec), "scratch", 0, None))
        except Exception as e:  # the spec's form, Hydra's composition errors and ConfigError alike
            raise ValueError(f"--algos {spec!r}: {str(e).splitlines()[0]}") from None


def bc_checkpoint(task: str, seed: int, out: Path) -> Path:
    """The behaviour-cloned start of `experiment=<task>_bc seed=<seed>`, made once and shared by every
    algorithm of that seed: demos, cloning and its evaluation, as the pipeline would."""
    from grpo_robot.hooks import Hook
    from grpo_robot.trainer import Trainer

    class AfterCloning(Hook):  # the run's pretrain stage alone: it ends before its first iteration
        def on_start(self, trainer: Trainer) -> None:
            trainer.stop = True

    run_dir = out / f"bc_seed{seed}"
    if not (run_dir / "bc.pt").is_file():
        cfg = compose(f"experiment={BC_PRESETS[task]}", f"seed={seed}", "progress=false", WORLD_FRAME)
        trainer = Trainer(cfg, run_dir, hooks=[AfterCloning()])
        try:
            summary = trainer.run()
        finally:
            trainer.close()
        if summary.get("error"):
            raise RuntimeError(f"the behaviour-cloned start of seed {seed} failed: {summary['error']}")
    return run_dir / "bc.pt"


def record(s: Sweep, start: str, algo: str, seed: int, summary: dict, curve: dict, spec: str | None = None) -> dict:
    """One entry of results.json, from a run's summary (as `Trainer.run` returns it) and its
    evaluation curve (`curves.eval_curve`)."""
    head = {"task": s.task, "start": start, "algo": algo, **({"spec": spec} if spec else {}), "seed": seed}
    return {**head, "target": summary["target"], "iterations": summary["iterations"],
            "env_steps": summary["env_steps"], "seconds": summary["seconds"], "eval_seconds": summary["eval_seconds"],
            "final_success": summary["eval"]["success_rate"], "curve": curve,
            "machine": summary["machine"]}  # fmt: skip


def train_run(s: Sweep, spec: str, start: str, seed: int, init: Path | None) -> dict:
    """Train one run to the target; its record."""
    from grpo_robot.bench.curves import eval_curve
    from grpo_robot.trainer import Trainer

    algo = parse_algo(spec)
    run_dir = s.out / f"{start}_{algo.label}_seed{seed}"
    trainer = Trainer(run_config(s, algo, start, seed, init), run_dir)
    summary = trainer.run()
    trainer.close()
    return record(s, start, algo.label, seed, summary, eval_curve(run_dir), spec)


def print_flush(msg: str) -> None:
    print(msg, flush=True)


def run(s: Sweep, log: Callable[[str], None] = print_flush) -> list[dict]:
    """Every run of the sweep not yet in results.json (SB3 last, if asked); all the records."""
    s.out.mkdir(parents=True, exist_ok=True)
    results_path = s.out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.is_file() else []
    done = {(r["start"], r["algo"], r["seed"]) for r in results}

    def save(record: dict) -> None:
        results.append(record)
        results_path.write_text(json.dumps(results, indent=1))

    def start_from(start: str, seed: int) -> Path | None:
        return bc_checkpoint(s.task, seed, s.out) if start == "bc" else None

    for seed in s.seeds:
        for start in s.starts:
            init = start_from(start, seed)
            for spec in s.algos:
                if (start, parse_algo(spec).label, seed) in done:
                    continue
                rec = train_run(s, spec, start, seed, init)
                save(rec)
                t = rec["target"]
                when = f"{t['env_steps']:,} env steps, {t['train_seconds']:.0f} s" if t["reached"] else "not reached"
                log(f"{s.task} {start} {rec['algo']} seed {seed}: target {s.target:.0%} {when}")
    if s.sb3_steps:
        from grpo_robot.bench.sb3 import run_sb3

        for seed in s.seeds:
            for start in s.starts:
                if (start, "sb3_ppo", seed) not in done:
                    save(run_sb3(s, seed, start_from(start, seed)))
    return results
