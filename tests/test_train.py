"""Training end to end on Reach: it learns, it is deterministic, it resumes exactly, and the
command line refuses bad configs."""

import json
import math
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_harness import run_main

from grpo_robot import checkpoint
from grpo_robot.bench.curves import eval_curve, first_reaching, read_scalars
from grpo_robot.config import AlgoConfig, EnvConfig, KLConfig, PolicyConfig, TrainConfig
from grpo_robot.hooks import Hook
from grpo_robot.policies.gaussian import GaussianPolicy
from grpo_robot.rollout import Batch
from grpo_robot.trainer import Trainer, episode_scalars

ROOT = Path(__file__).resolve().parents[1]


def small_config(**overrides) -> TrainConfig:
    cfg = TrainConfig(
        env=EnvConfig(task="Reach"),
        policy=PolicyConfig(hidden_sizes=[64, 64]),
        algo=AlgoConfig(group_size=8, groups_per_iter=16, epochs=2, minibatches=2),
        iterations=2,
        eval_every=1000,
        eval_seeds=50,
        progress=False,
    )
    return replace(cfg, **overrides)


def params(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in trainer.policy.state_dict().items()}


class CrashAfter(Hook):
    """Interrupts a run after `iteration`, once the default hooks have saved its checkpoint (with
    `late`: a user's hooks run before the periodic checkpoint)."""

    def __init__(self, iteration: int) -> None:
        self.iteration = iteration

    def after_iteration(self, trainer, record):
        if record.iteration == self.iteration:
            raise KeyboardInterrupt


def late(trainer: Trainer, *hooks: Hook) -> Trainer:
    """`trainer` with `hooks` after all of its own, the checkpoint and loggers included."""
    trainer.hooks.extend(hooks)
    return trainer


def resumed_after_crash(cfg: TrainConfig, tmp_path: Path, iteration: int) -> Trainer:
    """A run of `cfg` (`checkpoint_every=1`) interrupted after `iteration`, then a trainer resuming it."""
    with pytest.raises(KeyboardInterrupt):
        late(Trainer(cfg, tmp_path / "first"), CrashAfter(iteration)).run()
    return Trainer(replace(cfg, resume=str(tmp_path / "first")), tmp_path / "second")


def resume_matches_straight_run(cfg: TrainConfig, tmp_path: Path, iteration: int) -> Trainer:
    """Runs `cfg` straight through and again interrupted after `iteration` then resumed; asserts the
    two end with the same env steps and bit-identical weights -> the resumed trainer."""
    straight = Trainer(cfg, tmp_path / "straight")
    straight.run()
    resumed = resumed_after_crash(cfg, tmp_path, iteration)
    resumed.run()
    a, b = params(straight), params(resumed)
    assert resumed.env_steps == straight.env_steps and all(torch.equal(a[k], b[k]) for k in a)
    return resumed


def test_short_training_run_beats_initial_policy(tmp_path):
    cfg = small_config(iterations=20, eval_seeds=100, algo=AlgoConfig(group_size=8, groups_per_iter=32, lr=1e-3))
    trainer = Trainer(cfg, tmp_path)
    before = trainer.evaluate().rate
    start = time.perf_counter()
    summary = trainer.run()
    seconds = time.perf_counter() - start
    after = trainer.last_eval.rate
    assert seconds < 180, f"took {seconds:.0f} s"  # a loop gone slow by far, not a benchmark
    assert after >= before + 0.4, f"success {before:.2f} -> {after:.2f}"
    assert summary["env_steps"] > 0
    ckpt = torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["iteration"] == 20
    assert (tmp_path / "checkpoints" / "best.pt").is_file()
    assert not list((tmp_path / "checkpoints").glob("*.tmp"))  # atomic writes leave no temp files
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    expected = {
        "charts/train_success",
        "charts/eval_success",
        "charts/eval_success_low",
        "charts/eval_success_high",
        "charts/mixed_groups",
        "charts/episode_steps",
        "charts/success_steps",
        "charts/success_steps_max",
        "charts/mean_abs_advantage",
        "charts/env_steps_per_s",
        "charts/learning_rate",
        "losses/policy_loss",
        "losses/clip_fraction",
        "losses/approx_kl",
        "losses/kl_ref",
        "losses/entropy",
        "losses/grad_norm",
        "time/rollout_s",
        "time/update_s",
        "time/run_s",
    }
    assert expected <= tags, expected - tags
    (final,) = events.Scalars("charts/eval_success")
    assert final.value == pytest.approx(after) and final.step == summary["env_steps"]


def test_episode_scalars_count_the_valid_steps_of_all_and_of_the_successful_rollouts():
    lengths, success = [3, 7, 10, 10], [1.0, 1.0, 0.0, 0.0]
    mask = torch.arange(10)[:, None] < torch.tensor(lengths)[None, :]
    batch = Batch(torch.zeros(10, 4, 2), torch.zeros(10, 4, 1), torch.zeros(10, 4, 1), mask, torch.tensor(success),
                  torch.zeros(4, dtype=torch.bool))  # fmt: skip
    assert episode_scalars(batch) == {"charts/episode_steps": 7.5, "charts/success_steps": 5.0,
                                      "charts/success_steps_max": 7.0}  # fmt: skip
    none_won = Batch(batch.obs, batch.raw, batch.logp, mask, torch.zeros(4), batch.failed)
    assert episode_scalars(none_won) == {"charts/episode_steps": 7.5}


def test_two_runs_with_same_seed_are_identical(tmp_path):
    cfg = small_config(seed=7)
    runs = []
    for i in range(2):
        trainer = Trainer(cfg, tmp_path / str(i))
        losses = []
        for _ in range(2):
            scalars = trainer.train_iteration().scalars
            losses.append({k: v for k, v in scalars.items() if k.startswith("losses/")})
        runs.append((losses, params(trainer)))
    assert runs[0][0] == runs[1][0] and len(runs[0][0][0]) >= 6
    assert all(torch.equal(runs[0][1][k], runs[1][1][k]) for k in runs[0][1])
    other = Trainer(small_config(seed=8), tmp_path / "other")
    other.run()
    assert not torch.equal(params(other)["mean_head.0.weight"], runs[0][1]["mean_head.0.weight"])


def test_a_linear_learning_rate_reaches_zero_with_the_env_step_budget(tmp_path):
    """`algo.lr_schedule=linear` decays over whichever budget ends the run: here max_env_steps, long
    before the 1000 iterations. Each update's rate is lr x (1 - env steps before it / budget)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    algo = AlgoConfig(group_size=8, groups_per_iter=16, epochs=1, minibatches=1, lr=1e-3, lr_schedule="linear")
    trainer = Trainer(small_config(iterations=1000, max_env_steps=20_000, algo=algo), tmp_path)
    summary = trainer.run()
    assert summary["stopped"] == "max_env_steps" and 3 <= summary["iterations"] <= 20
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    logged = events.Scalars("charts/learning_rate")  # x-axis: env steps after the iteration
    assert len(logged) == summary["iterations"] and logged[0].value == pytest.approx(1e-3)
    before = [0] + [e.step for e in logged[:-1]]
    for e, spent in zip(logged, before, strict=True):
        assert e.value == pytest.approx(1e-3 * (1 - spent / 20_000), rel=1e-5), (e.step, e.value)
    assert logged[-1].value < 0.3e-3  # well decayed; by the iteration count it would still be 0.999e-3


@pytest.mark.parametrize("schedule", ["linear", "adaptive"])
def test_resume_matches_uninterrupted_run(tmp_path, schedule):
    """Bit for bit, the learning rate included: linear from the env steps, adaptive from the
    rate the checkpoint's optimizer state left (desired_kl 1e-9 makes it fall at every update)."""
    algo = AlgoConfig(group_size=8, groups_per_iter=16, epochs=2, minibatches=2, kl=KLConfig(beta=0.05),
                      lr_schedule=schedule, desired_kl=1e-9 if schedule == "adaptive" else 0.01)  # fmt: skip
    cfg = small_config(iterations=4, algo=algo, checkpoint_every=1)
    straight = Trainer(cfg, tmp_path / "straight")
    straight.run()

    interrupted = late(Trainer(cfg, tmp_path / "first"), CrashAfter(2))
    interrupted.pretrained = {"source": "clone.pt", "demo_episodes": 3}  # as a pretraining stage records it
    with pytest.raises(KeyboardInterrupt):
        interrupted.run()
    first_seconds = interrupted.elapsed()
    resumed = Trainer(replace(cfg, resume=str(tmp_path / "first")), tmp_path / "second")
    assert resumed.iteration == 2
    summary = resumed.run()
    assert resumed.iteration == 4 and resumed.env_steps == straight.env_steps
    # the summary speaks for the whole run: the first process's time and the policy's origin carry over
    assert 0 < resumed.seconds_before <= first_seconds
    assert summary["seconds_total"] == pytest.approx(resumed.seconds_before + summary["seconds"], abs=0.5)
    # its logged time goes on from the checkpoint's, not from the resume's wall-clock (plots, reports)
    run_time = [e.value for e in read_scalars(tmp_path / "second")["time/run_s"]]
    first_time = [e.value for e in read_scalars(tmp_path / "first")["time/run_s"]]
    assert first_time[0] < resumed.seconds_before < run_time[0] and run_time == sorted(run_time)
    assert run_time[-1] <= summary["seconds_total"]
    assert summary["initial_policy"] == interrupted.pretrained and interrupted.pretrained["demo_episodes"] == 3
    assert interrupted.pretrained["eval"]["n"] == cfg.eval_seeds  # the start's evaluation, from the first process
    a, b = params(straight), params(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)
    opt_a, opt_b = straight.learner.optimizer.state_dict()["state"], resumed.learner.optimizer.state_dict()["state"]
    assert all(torch.equal(opt_a[i]["exp_avg"], opt_b[i]["exp_avg"]) for i in opt_a)
    assert resumed.learner.lr == straight.learner.lr < (algo.lr / 1.5**3 * 1.0001 if schedule == "adaptive" else 1)


def test_a_resumed_run_takes_its_reference_policy_from_the_checkpoint(tmp_path):
    """The KL term's reference comes back from the checkpoint. Rebuilt from the run's seed it would
    equal the saved one here too, so the saved one is moved first: the resumed run holds the moved one."""
    algo = AlgoConfig(group_size=8, groups_per_iter=8, epochs=1, minibatches=1, kl=KLConfig(beta=0.05))
    cfg = small_config(iterations=2, algo=algo, checkpoint_every=1)
    with pytest.raises(KeyboardInterrupt):
        late(Trainer(cfg, tmp_path / "first"), CrashAfter(1)).run()
    path = tmp_path / "first" / "checkpoints" / "last.pt"
    ckpt = torch.load(path, weights_only=True)
    moved = {k: v + 0.1 if v.is_floating_point() else v for k, v in ckpt["reference"].items()}
    checkpoint.save_atomic({**ckpt, "reference": moved}, path)
    held = Trainer(replace(cfg, resume=str(tmp_path / "first")), tmp_path / "second").learner.reference.state_dict()
    assert held.keys() == moved.keys() and all(torch.equal(held[k], moved[k]) for k in moved)


def test_final_step_outcome_runs_to_horizon(tmp_path):
    cfg = small_config(iterations=1, env=EnvConfig(task="Reach", outcome="final_step", horizon=20))
    trainer = Trainer(cfg, tmp_path)
    batch, _ = trainer.sampler.sample(trainer.policy, 0)
    assert (batch.mask.sum(0) == 20).all()


def run_cli(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / script), *args], cwd=cwd, capture_output=True, text=True, timeout=1800
    )


@pytest.mark.parametrize(
    "override, key",
    [
        ("algo.group_size=1", "algo.group_size"),
        ("algo.clip.eps=1.0", "algo.clip.eps"),
        ("env.horizon=0", "env.horizon"),
        ("env.task=Stack", "env.task"),
        ("policy.activation=swish", "policy.activation"),
        ("device=tpu", "device"),
    ],
)
def test_bad_config_exits_with_one_line(tmp_path, monkeypatch, override, key):
    if key == "algo.group_size":  # the script itself, in its own process, once
        out = run_cli("train.py", override, cwd=tmp_path)
        code, stderr = out.returncode, out.stderr
    else:  # the same entry point in this process
        monkeypatch.chdir(tmp_path)
        out = run_main("train", override)
        code, stderr = out.code, "\n".join(out.error_lines)
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {key}=") and "must be" in lines[0]
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("*.pt"))


def test_cli_train_then_evaluate(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the entry points in this process, as the scripts run them
    out = run_main(
        "train",
        "iterations=2",
        "eval_every=1",
        "eval_seeds=20",
        "algo.groups_per_iter=8",
        "algo.group_size=4",
        "policy.hidden_sizes=[32]",
        "progress=false",
        f"hydra.run.dir={tmp_path / 'run'}",
    )
    assert out.code == 0, out.stderr
    assert "held-out seeds: success" in out.stdout
    run = tmp_path / "run"
    assert (run / ".hydra" / "config.yaml").is_file() and (run / "resolved_config.yaml").is_file()
    for mode in ("true", "false"):
        ev = run_main("evaluate", f"checkpoint={run}", "n_seeds=30", f"deterministic={mode}")
        assert ev.code == 0, ev.stderr
        assert "95% Wilson, n=30" in ev.stdout
    record = json.loads((run / "checkpoints" / "last_eval_test_30_deterministic.json").read_text())
    assert record["n"] == 30 and len(record["episodes"]) == 30
    summary = json.loads((run / "summary.json").read_text())  # which state of last.pt was measured
    assert (record["checkpoint"], record["iteration"], record["env_steps"]) == (
        str(run / "checkpoints" / "last.pt"), 2, summary["env_steps"])  # fmt: skip
    seeds = [e["seed"] for e in record["episodes"]]
    # the test seeds: held out from training (below 1e9) and from the run's own evaluations
    assert (record["seeds"], record["first_seed"], min(seeds)) == ("test", 1_500_000_000, 1_500_000_000)
    # seeds=validation evaluates on the run's own evaluation seeds: its last evaluation again, exactly
    ev = run_main("evaluate", f"checkpoint={run}", "n_seeds=20", "seeds=validation")
    assert ev.code == 0 and ", validation seeds, " in ev.stdout, ev.stderr
    again = json.loads((run / "checkpoints" / "last_eval_validation_20_deterministic.json").read_text())
    own = json.loads((run / "eval.json").read_text())
    validation = list(range(10**9, 10**9 + 20))
    assert [e["seed"] for e in again["episodes"]] == [e["seed"] for e in own["episodes"]] == validation
    assert [e["success"] for e in again["episodes"]] == [e["success"] for e in own["episodes"]]
    assert record["success_rate"] == pytest.approx(np.mean([e["success"] for e in record["episodes"]]))
    assert (own["seeds"], own["iteration"], own["outcome"], own["seeded"]) == ("validation", 2, "any_step", True)
    ev = run_main("evaluate", f"checkpoint={run}", "n_seeds=30", "outcome=final_step")  # as published Fetch numbers
    assert ev.code == 0 and ", test seeds, success at the final step, " in ev.stdout, ev.stderr
    final = json.loads((run / "checkpoints" / "last_eval_test_30_deterministic_final_step.json").read_text())
    assert final["outcome"] == "final_step" and record["outcome"] == "any_step"
    assert {e["steps"] for e in final["episodes"]} == {final["horizon"]} == {record["horizon"]}  # none ends early
    assert final["success_rate"] <= record["success_rate"]
    bad = run_main("evaluate", f"checkpoint={tmp_path / 'missing'}")
    assert bad.code == 2 and "no checkpoint at" in bad.stderr
    bad = run_main("evaluate", f"checkpoint={run}", "decode=mean")
    assert bad.code == 2 and "decode='mean' is invalid: applies to tokenized policies only" in bad.stderr


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "c.pt"
    checkpoint.save_atomic({"a": torch.ones(2)}, path)

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(OSError):
        checkpoint.save_atomic({"a": torch.zeros(2)}, path)
    assert torch.equal(torch.load(path, weights_only=True)["a"], torch.ones(2))  # old file intact
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]


def test_multirun_over_seeds(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # -m after an override: Hydra reads only the overrides after it (the rest was an 8-line usage text)
    command = ("train", "seed=0,1", "-m", "iterations=1", "eval_seeds=10", "algo.groups_per_iter=4",
               "algo.group_size=4", "progress=false", f"hydra.sweep.dir={tmp_path / 'sweep'}")  # fmt: skip
    out = run_main(*command)  # in this process: Hydra's launcher runs the two jobs one after the other here too
    assert out.code == 0, out.stderr
    weights = []
    for seed in (0, 1):
        ckpt = torch.load(tmp_path / "sweep" / f"seed={seed}" / "checkpoints" / "last.pt", weights_only=True)
        assert ckpt["config"]["seed"] == seed
        weights.append(ckpt["policy"]["state_dict"]["mean_head.0.weight"])
    assert not torch.equal(*weights)
    # the same sweep directory again: its jobs' runs would be overwritten (they were), so it is refused
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "sweep").rglob("*") if p.is_file()}
    again = run_main(command[0], "seed=0,2", *command[2:])
    assert again.code == 2 and again.error_lines == [
        f"error: hydra.sweep.dir={str(tmp_path / 'sweep')!r} holds runs already (seed=0/checkpoints/last.pt); "
        "choose another directory, or continue each run with resume=<its directory>"]  # fmt: skip
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "sweep").rglob("*") if p.is_file()} == before


def test_a_multirun_job_that_fails_leaves_the_other_jobs_to_run(tmp_path):
    """A job refused at its start (an env known only once built) used to end the whole sweep; it is
    told in its line, its empty folder goes, the next job runs, and the command exits with its code."""
    out = run_main("train", "-m", "experiment=reach_from_scratch", "env=gym", "env.id=Nope-v0,grpo_robot/Reach-v1",
                   "env.horizon=20", "algo.train_horizon=null", "iterations=1", "eval_seeds=4",
                   "algo.groups_per_iter=2", "progress=false", f"hydra.sweep.dir={tmp_path / 'sweep'}")  # fmt: skip
    assert out.code == 2, out.stderr[-2000:]
    assert out.error_lines[0].startswith("error: env.id='Nope-v0' is not a registered Gymnasium env")
    assert out.error_lines[0].endswith(f"(job {tmp_path / 'sweep' / 'env.id=Nope-v0'})")
    assert json.loads((tmp_path / "sweep" / "env.id=grpo_robot" / "Reach-v1" / "summary.json").read_text())[
        "iterations"] == 1  # fmt: skip
    assert not (tmp_path / "sweep" / "env.id=Nope-v0").exists()
    # the sweep's jobs nest where a value holds a `/`: running into it again is refused all the same
    again = run_main("train", "-m", "experiment=reach_from_scratch", "env=gym", "env.id=grpo_robot/Reach-v1",
                     "env.horizon=20", f"hydra.sweep.dir={tmp_path / 'sweep'}")  # fmt: skip
    assert again.code == 2 and "holds runs already (env.id=grpo_robot/Reach-v1/checkpoints/last.pt)" in \
        again.error_lines[0]  # fmt: skip
    # what -m does not use is refused, not ignored
    for extra, message in [(f"hydra.run.dir={tmp_path / 'x'}", "hydra.run.dir is not used with -m"),
                           (f"resume='{tmp_path / 'sweep' / 'env.id=grpo_robot' / 'Reach-v1'}'",
                            "continues a run in its own directory, which -m does not")]:  # fmt: skip
        refused = run_main("train", "-m", "seed=0,1", extra)
        assert refused.code == 2 and message in refused.error_lines[0], refused.stderr[-1000:]


def test_a_sweep_over_presets_composes():
    """`-m experiment=a,b`: the keys the presets set were looked up as one file named after the sweep."""
    from grpo_robot.cli import _precompose, _touched_keys

    overrides = ["experiment=reach_from_scratch,push_from_scratch"]
    touched = _touched_keys(overrides, _precompose("config", overrides)[0])
    assert {"iterations", "max_env_steps", "env.task"} <= touched


@pytest.mark.parametrize("scheme", ["file", "pkg"])
def test_the_keys_of_a_preset_on_the_search_path_count_as_set(tmp_path, monkeypatch, scheme):
    """A preset in a package on Hydra's search path (`pkg://`) was not read: none of its keys counted
    as set, so a resume took their values from the checkpoint instead of the preset."""
    from grpo_robot.cli import _precompose, _touched_keys

    package = tmp_path / "my_presets"
    (package / "experiment").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "experiment" / "mine.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /env: reach\n  - _self_\niterations: 7\nalgo:\n  lr: 0.002\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    where = f"file://{package}" if scheme == "file" else "pkg://my_presets"
    overrides = ["experiment=mine", f"hydra.searchpath=[{where}]"]
    composed = _precompose("config", overrides)[0]
    assert (composed.iterations, composed.algo.lr) == (7, 0.002)
    touched = _touched_keys(overrides, composed)
    assert {"iterations", "algo.lr", "env.task"} <= touched and "algo.epochs" not in touched


def test_every_value_of_a_large_sweep_is_checked_first_and_a_plus_key_names_its_jobs(tmp_path, monkeypatch):
    from grpo_robot import cli
    from grpo_robot.cli import _precompose, _run_dir_overrides

    # more jobs than the combinations checked (64, here 4): algo.lr=5 comes only after the first
    # ones, and is refused before any job runs (it was never checked, and failed mid-sweep)
    monkeypatch.setattr(cli, "CHECKED_COMBINATIONS", 4)
    out = run_main("train", "-m", "algo.lr=0.001,5", "seed=range(0,4)", f"hydra.sweep.dir={tmp_path / 'big'}")
    assert (out.code, out.error_lines) == (2, ["error: algo.lr=5.0 is invalid: must be in (0, 1]"]), out.stderr
    assert not (tmp_path / "big").exists()
    # a swept key added with +: the jobs' directories are named by the key (its + made Hydra's
    # interpolation of the name fail after the sweep directory was made)
    overrides = ["env=gym", "env.id=toy/PointReach-v0", "env.horizon=10", "+env.kwargs.speed=1,2",
                 f"hydra.sweep.dir={tmp_path / 'plus'}"]  # fmt: skip
    extra = _run_dir_overrides(_precompose("config", overrides)[0], overrides, multirun=True)
    assert extra[1] == "hydra.sweep.subdir='env.kwargs.speed=${env.kwargs.speed}'"


def test_training_stops_at_the_target_success_and_records_when(tmp_path):
    cfg = small_config(iterations=60, eval_every=2, eval_seeds=100, target_success=0.5)  # reached in about 26
    summary = Trainer(cfg, tmp_path).run()
    target = summary["target"]
    assert target["reached"] and target["success"] >= 0.5
    assert summary["iterations"] == target["iteration"] < 60  # stopped at the first evaluation at the target
    assert target["env_steps"] == summary["env_steps"]
    assert 0 < target["train_seconds"] == pytest.approx(target["seconds"] - summary["eval_seconds"])
    assert torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)["iteration"] == target["iteration"]
    # plots and reports time it by the same clock (`time/run_s`; they read wall-clock from the first event)
    steps, seconds = first_reaching(eval_curve(tmp_path), 0.5)
    assert steps == target["env_steps"] and seconds == pytest.approx(target["seconds"], abs=0.5)
    # resumed, it has nothing to do and keeps its record: it used to train on to its 60 iterations and
    # then report the target as never reached
    again = Trainer(replace(cfg, resume=str(tmp_path)), tmp_path / "again")
    resumed = again.run()
    assert resumed["iterations"] == target["iteration"] and resumed["stopped"] == "target_success"
    assert resumed["target"] == target
    higher = Trainer(replace(cfg, resume=str(tmp_path), target_success=0.99, iterations=target["iteration"] + 1),
                     tmp_path / "higher").run()  # fmt: skip
    assert higher["iterations"] == target["iteration"] + 1 and higher["target"] == {"target": 0.99, "reached": False}
    # a run whose start already meets the target has it as its result: last.pt and best.pt (none was written)
    start = Trainer(replace(cfg, init_from=str(tmp_path)), tmp_path / "start").run()
    assert start["iterations"] == 0 and start["stopped"] == "target_success"
    assert start["best_eval"] == start["initial_policy"]["eval"]["success_rate"] == target["success"]
    for name in ("last", "best"):
        saved = torch.load(tmp_path / "start" / "checkpoints" / f"{name}.pt", weights_only=True)
        assert saved["iteration"] == 0 and saved["best_eval"] == target["success"]


def test_a_resumed_run_times_its_target_over_the_whole_run():
    # as its env steps are: the processes it was resumed from count (their time was left out)
    from types import SimpleNamespace

    from grpo_robot.evaluation import EvalResult
    from grpo_robot.hooks import Evaluation

    trainer = SimpleNamespace(run_seconds=lambda: 12.0, eval_seconds_before=3.0, eval_seconds=1.0,
                              iteration=5, env_steps=100, target={"target": 0.5, "reached": False}, stopped=None)
    result = EvalResult(np.arange(4), np.array([True, True, True, False]), np.full(4, 7))
    assert Evaluation(1, 0.5, False)._reached(trainer, result)
    assert trainer.target == {"target": 0.5, "reached": True, "iteration": 5, "env_steps": 100, "success": 0.75,
                              "seconds": 12.0, "train_seconds": 8.0}  # fmt: skip
    # a success rate equal to the target reaches it; one just below does not
    for successes, reached in ((2, True), (1, False)):
        trainer.target, trainer.stopped = {"target": 0.5, "reached": False}, None
        result = EvalResult(np.arange(4), np.arange(4) < successes, np.full(4, 7))
        assert Evaluation(1, 0.5, False)._reached(trainer, result) is reached
        assert trainer.target["reached"] is reached and trainer.stopped == ("target_success" if reached else None)


def test_the_progress_bar_counts_the_iterations_an_env_step_budget_leaves(tmp_path):
    # its total was `iterations` (1000 here, an ETA 250 times too long) whatever the env-step budget
    from grpo_robot.hooks import ProgressBar

    class Totals(Hook):
        def __init__(self):
            self.seen = []

        def after_iteration(self, trainer, record):
            self.seen.append(next(h for h in trainer.hooks if isinstance(h, ProgressBar)).bar.total)

    totals = Totals()
    summary = late(Trainer(small_config(iterations=1000, max_env_steps=20_000), tmp_path), totals).run()
    assert summary["stopped"] == "max_env_steps"
    assert totals.seen == [summary["iterations"]] * summary["iterations"] and 3 <= summary["iterations"] <= 6


def test_evaluations_below_the_training_success_gate_are_skipped_and_training_is_unchanged(tmp_path):
    class Seen(Hook):
        def __init__(self):
            self.rows = []  # (iteration, training success, evaluated)

        def after_iteration(self, trainer, record):
            self.rows.append((record.iteration, record.scalars["charts/train_success"], record.evaluation is not None))

    def run(name, gate):
        seen = Seen()
        trainer = Trainer(small_config(iterations=8, eval_every=1, eval_min_train_success=gate), tmp_path / name,
                          hooks=[seen])  # fmt: skip
        summary = trainer.run()
        return seen.rows, params(trainer), summary

    rows, weights, summary = run("every", None)
    assert all(evaluated for _, _, evaluated in rows)
    successes = sorted(s for _, s, _ in rows[:-1])
    gate = successes[len(successes) // 2]  # about half the iterations clear it
    gated_rows, gated_weights, gated_summary = run("gated", gate)
    assert [(i, s) for i, s, _ in gated_rows] == [(i, s) for i, s, _ in rows]  # the same training
    assert all(torch.equal(gated_weights[k], weights[k]) for k in weights)
    evaluated = [i for i, s, e in gated_rows if e]
    expected = [i for i, s, _ in rows if s >= gate or i == 8]  # the final evaluation always runs
    assert evaluated == expected and 1 < len(evaluated) < 8
    assert gated_summary["eval"] == summary["eval"]  # the final evaluation is the same one


def test_a_new_advantage_estimator_is_one_function_and_one_config_value(tmp_path):
    from grpo_robot.algo import ADVANTAGE_ESTIMATORS, register_advantage

    @register_advantage("toy_centred")
    def toy(rewards, eps):  # +0.5 for a success, -0.5 for a failure, whatever the group
        return rewards - 0.5

    try:
        cfg = small_config(iterations=1, algo=AlgoConfig(advantage="toy_centred", group_size=4, groups_per_iter=8))
        record = Trainer(cfg, tmp_path).train_iteration()
        assert record.scalars["charts/mean_abs_advantage"] == 0.5
        assert record.scalars["losses/approx_kl"] > 0  # every step had a non-zero advantage to learn from
    finally:
        del ADVANTAGE_ESTIMATORS["toy_centred"]
    with pytest.raises(ValueError, match="algo.advantage='toy_centred' is invalid: must be one of grpo, "):
        Trainer(cfg, tmp_path)


def test_a_new_hook_logs_and_stops_without_touching_the_loop(tmp_path):
    class Recorder(Hook):
        def __init__(self):
            self.logged, self.ended = [], None

        def should_stop(self, trainer, record):
            return record.iteration == 3

        def after_iteration(self, trainer, record):
            record.scalars["charts/steps_per_iteration"] = record.env_steps / record.iteration

        def on_log(self, trainer, scalars, step):
            self.logged.append((step, scalars.get("charts/steps_per_iteration")))

        def on_end(self, trainer, summary):
            self.ended = summary["iterations"]

    recorder = Recorder()
    trainer = Trainer(small_config(iterations=10, eval_every=2, eval_seeds=10), tmp_path, hooks=[recorder])
    summary = trainer.run()
    assert summary["iterations"] == recorder.ended == 3  # it ended the run after its third iteration
    steps = [step for step, _ in recorder.logged]
    assert len(steps) == 3 and steps == sorted(steps) and steps[-1] == summary["env_steps"]
    assert all(value == pytest.approx(step / (i + 1)) for i, (step, value) in enumerate(recorder.logged))
    assert torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)["iteration"] == 3
    assert summary["eval"]["n"] == 10  # the last iteration was evaluated, as the final one of any run


def test_renamed_keys_fail_with_the_new_name_and_old_checkpoints_still_load():
    from grpo_robot.config import migrate, renamed_key_error, to_train_config

    message = renamed_key_error(["seed=1", "algo.kl_beta=0.1"])
    assert message == "algo.kl_beta is now algo.kl.beta (e.g. algo.kl.beta=...)"
    assert renamed_key_error(["algo.dynamic_sampling=true"]).endswith("algo.dynamic_sampling.enabled=true")
    assert renamed_key_error(["algo.kl.beta=0.1", "algo.dynamic_sampling.enabled=true"]) is None
    old = {"algo": {"name": "dapo", "clip_high": 0.28, "dynamic_sampling": True, "kl_beta": 0.1, "vf_coef": 0.7}}
    cfg = to_train_config({"env": {"task": "Reach"}, **old})
    assert (cfg.algo.clip.high, cfg.algo.dynamic_sampling.enabled, cfg.algo.kl.beta) == (0.28, True, 0.1)
    assert cfg.algo.critic.vf_coef == 0.7 and migrate({"seed": 3}) == {"seed": 3}


def test_max_std_bounds_the_learned_std_without_freezing_it(tmp_path):
    """An entropy bonus raises the std at the optimizer's pace; `policy.max_std` stops it at the
    bound (projected after every step), and from the bound the std can still come down."""
    algo = AlgoConfig(group_size=8, groups_per_iter=4, epochs=4, minibatches=2, lr=0.05, entropy_coef=1.0)
    free = Trainer(small_config(algo=algo, iterations=3), tmp_path / "free")
    free.run()
    free.close()
    assert free.policy.log_std.exp().min() > 0.9  # 0.5 -> over 0.9 in 3 iterations
    bounded = Trainer(small_config(algo=algo, iterations=3, policy=PolicyConfig(hidden_sizes=[64, 64], max_std=0.6)),
                      tmp_path / "bounded")  # fmt: skip
    bounded.run()
    bounded.close()
    log_std = bounded.policy.log_std.detach()
    assert torch.equal(log_std, torch.full_like(log_std, math.log(0.6)))
    # at the bound the parameter still has a gradient, so an objective for a narrower policy narrows it
    policy = bounded.policy
    optimizer = torch.optim.SGD([policy.log_std], lr=0.1)
    _, entropy = policy.log_probs(torch.zeros(1, policy.obs_dim), torch.zeros(1, policy.action_dim))
    entropy.sum().backward()
    optimizer.step()  # descent on the entropy: narrower
    policy.after_step()
    assert (policy.log_std.detach() < math.log(0.6)).all()


def test_min_std_floors_the_learned_std_without_freezing_it():
    """`policy.min_std` is the floor the same projection keeps: descent on the entropy stops at it
    (in the parameter and in the distribution), and from the floor an entropy bonus widens it again."""
    policy = GaussianPolicy(3, 2, hidden_sizes=[8], init_std=0.5, min_std=0.3)
    optimizer = torch.optim.SGD([policy.log_std], lr=0.5)
    obs, raw = torch.zeros(1, 3), torch.zeros(1, 2)
    floor = torch.full((2,), math.log(0.3))

    def entropy_step(sign):  # SGD on sign x entropy: each dimension's log-std moves by 0.5
        optimizer.zero_grad()
        (sign * policy.log_probs(obs, raw)[1].sum()).backward()
        optimizer.step()
        policy.after_step()

    for _ in range(5):  # narrower, 2.5 in log-std in all: far past the floor
        entropy_step(1.0)
    assert torch.equal(policy.log_std.detach(), floor)
    entropy_step(-1.0)  # wider: the parameter at the floor still has its gradient
    assert torch.allclose(policy.log_std.detach(), floor + 0.5)
    narrow = GaussianPolicy(3, 2, hidden_sizes=[8], init_std=0.5, min_std=0.3)
    with torch.no_grad():
        narrow.log_std.fill_(-3.0)  # set past the floor by hand: the distribution still reads the floor
    assert torch.allclose(narrow.distribution(obs)[1].exp(), torch.full((1, 2), 0.3))


def test_an_adaptive_learning_rate_follows_the_kl_of_each_update(tmp_path):
    """`algo.lr_schedule=adaptive`: after an update whose last epoch ran over 2 x desired_kl the rate
    falls by 1.5x, under half of it the rate rises by 1.5x, always within lr_range; a resumed run
    continues from the rate its checkpoint left."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def run(desired_kl: float, lr: float, lr_range: list[float], out: Path, **overrides) -> tuple[list, list]:
        algo = AlgoConfig(group_size=8, groups_per_iter=16, epochs=3, minibatches=1, lr=lr, lr_schedule="adaptive",
                          desired_kl=desired_kl, lr_range=lr_range, entropy_coef=0.01)  # fmt: skip
        trainer = Trainer(small_config(iterations=6, algo=algo, **overrides), out)
        trainer.run()
        events = EventAccumulator(str(out / "tb"))
        events.Reload()
        return [e.value for e in events.Scalars("charts/learning_rate")], [e.value for e in events.Scalars(
            "losses/approx_kl")]  # fmt: skip

    # a huge target: every update is "too small", so the rate climbs by 1.5x per update until the cap
    rates, _ = run(10.0, 1e-4, [1e-5, 4e-4], tmp_path / "up")
    assert rates == pytest.approx([1e-4, 1.5e-4, 2.25e-4, 3.375e-4, 4e-4, 4e-4], rel=1e-5)
    # a tiny target: every update is "too large", so the rate falls by 1.5x per update until the floor
    rates, kls = run(1e-9, 1e-2, [5e-3, 1e-2], tmp_path / "down")
    assert min(kls) > 2e-9
    assert rates == pytest.approx([1e-2, 1e-2 / 1.5, 5e-3, 5e-3, 5e-3, 5e-3], rel=1e-5)


def _update_twice(batch: Batch, policy: GaussianPolicy, **algo) -> dict[bool, tuple[dict, dict, dict]]:
    """One `Learner.update` of a copy of `policy` on `batch` with `algo.forward_every_step` true and
    false -> {flag: (weights, metrics, Adam state)}."""
    import copy

    from grpo_robot.update import GroupAdvantages, Learner

    out = {}
    for every in (True, False):
        p = copy.deepcopy(policy)
        cfg = AlgoConfig(group_size=4, groups_per_iter=4, epochs=2, minibatches=2, forward_every_step=every, **algo)
        learner = Learner(p, cfg, batch.obs.shape[0], 10, 0, torch.device("cpu"))
        advantages, _ = GroupAdvantages(cfg).advantages(batch, p)
        metrics = learner.update(batch, advantages, 0)
        weights = {k: v.clone() for k, v in p.state_dict().items()}
        out[every] = (weights, metrics, learner.optimizer.state_dict()["state"])
    return out


def _four_groups(success: list[int]) -> tuple[Batch, GaussianPolicy]:
    """4 groups of 4 trajectories of 3-12 steps from a small Gaussian policy, with `success` outcomes."""
    torch.manual_seed(0)
    policy = GaussianPolicy(5, 2, hidden_sizes=[16], init_std=0.5)
    obs = torch.randn(12, 16, 5)
    with torch.no_grad():
        raw, _, logp = policy.sample(obs.flatten(0, 1))
    mask = torch.arange(12)[:, None] < torch.randint(3, 13, (16,))[None]
    outcome = torch.tensor(success, dtype=torch.float32)
    return Batch(obs, raw.view(12, 16, 2), logp.view(12, 16, 2), mask, outcome, outcome > 0), policy


@pytest.mark.parametrize("ratio,aggregation", [("action", "seq-mean-token-mean"), ("token", "token-mean"),
                                               ("sequence", "seq-mean-token-sum-norm")])  # fmt: skip
def test_zero_advantage_steps_score_their_entropy_bonus_without_a_forward_pass(ratio, aggregation):
    """With an entropy bonus and a free std, a zero-advantage step's only term is the bonus, which
    depends on the std alone: the update scores it without the step's forward pass, and ends with
    the weights, the Adam moments and the loss of the full pass, to float rounding."""
    batch, policy = _four_groups([1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 0, 0])  # groups 2 and 3 unmixed
    runs = _update_twice(batch, policy, entropy_coef=0.05, ratio=ratio, aggregation=aggregation)
    (full_w, full_m, full_adam), (idle_w, idle_m, idle_adam) = runs[True], runs[False]
    for key in full_w:
        assert torch.allclose(full_w[key], idle_w[key], rtol=0, atol=1e-6), key
        assert not torch.equal(full_w[key], policy.state_dict()[key]) or "obs_norm" in key  # the update moved it
    for i in full_adam:
        assert torch.allclose(full_adam[i]["exp_avg_sq"], idle_adam[i]["exp_avg_sq"], rtol=1e-4, atol=1e-12)
    assert idle_m["policy_loss"] == pytest.approx(full_m["policy_loss"], abs=1e-6)
    assert idle_m["entropy"] == pytest.approx(full_m["entropy"], abs=1e-6)
    # what each minibatch scored differs: without the pass, the KL and clip fraction cover moved steps
    assert idle_m["approx_kl"] != full_m["approx_kl"]


def test_advantages_standardized_per_minibatch_count_the_zero_advantage_steps():
    """`algo.normalize_advantages`: the minibatch's mean and std are over all its steps, so a
    zero-advantage step gets a weight and is scored, as with every step sent through the network.
    They were left out without an entropy bonus or a KL term (over the moved steps only): a bonus of
    1e-12 changed the update by about half."""
    batch, policy = _four_groups([1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 0, 0])  # groups 2 and 3 unmixed
    runs = _update_twice(batch, policy, normalize_advantages=True)
    (full_w, _, _), (skip_w, _, _) = runs[True], runs[False]
    assert all(torch.equal(full_w[key], skip_w[key]) for key in full_w)
    bonus, _, _ = _update_twice(batch, policy, normalize_advantages=True, entropy_coef=1e-12)[False]
    assert all(torch.allclose(bonus[key], skip_w[key], rtol=0, atol=1e-7) for key in full_w)


def test_advantages_standardized_per_minibatch_reach_the_loss_with_mean_0_and_std_1(monkeypatch):
    from grpo_robot.update import GroupAdvantages, Learner

    batch, policy = _four_groups([1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 0, 0])
    cfg = AlgoConfig(group_size=4, groups_per_iter=4, epochs=1, minibatches=1, normalize_advantages=True)
    learner = Learner(policy, cfg, batch.obs.shape[0], 10, 0, torch.device("cpu"))
    advantages = GroupAdvantages(cfg).advantages(batch, policy)[0] * 2.0 + 3.0  # a critic's can be off-centre
    seen, loss = [], learner.policy_loss

    def spied(logp, logp_old, adv, *rest):
        seen.append(adv)
        return loss(logp, logp_old, adv, *rest)

    monkeypatch.setattr(learner, "policy_loss", spied)
    learner.update(batch, advantages, 0)
    (adv,) = seen  # one epoch of one minibatch: every step
    assert len(adv) == batch.valid_steps and adv.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert adv.std().item() == pytest.approx(1.0, abs=1e-6)
    torch.testing.assert_close(adv, ((advantages - advantages.mean()) / advantages.std()).to(adv.dtype))


@pytest.mark.parametrize("minibatches", [7, 15, 16])
def test_an_epoch_takes_exactly_the_minibatches_asked_for(minibatches):
    # torch's chunk made fewer parts where they do not divide the trajectories: 6 of 16 for 7, 8 for 15
    from grpo_robot.update import GroupAdvantages, Learner

    batch, policy = _four_groups([1, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0])  # every group mixed
    cfg = AlgoConfig(group_size=4, groups_per_iter=4, epochs=2, minibatches=minibatches)
    learner = Learner(policy, cfg, batch.obs.shape[0], 10, 0, torch.device("cpu"))
    learner.update(batch, GroupAdvantages(cfg).advantages(batch, policy)[0], 0)
    assert [s["step"].item() for s in learner.optimizer.state_dict()["state"].values()] == [2.0 * minibatches] * 5


def _learner(success: list[int], **algo):
    """A `Learner` on `_four_groups(success)` -> (learner, batch, advantages)."""
    from grpo_robot.update import GroupAdvantages, Learner

    batch, policy = _four_groups(success)
    cfg = AlgoConfig(group_size=4, groups_per_iter=4, **{"epochs": 1, "minibatches": 1, **algo})
    learner = Learner(policy, cfg, batch.obs.shape[0], 10, 0, torch.device("cpu"))
    return learner, batch, GroupAdvantages(cfg).advantages(batch, policy)[0]


def test_the_adaptive_rate_holds_between_half_and_twice_the_desired_kl():
    """The adaptive schedule's dead zone: the rate moves by 1.5x only when the update's KL leaves
    [desired_kl / 2, 2 x desired_kl] (the run-level test sees only KLs far outside it)."""
    learner, _, _ = _learner([1, 0] * 8, lr=1e-3, lr_schedule="adaptive", desired_kl=0.01, lr_range=[1e-5, 0.1])
    after = {}
    for kl in (0.0049, 0.0051, 0.015, 0.0199, 0.0201):
        learner._set_lr(1e-3)
        learner._adapt_lr(kl)
        after[kl] = learner.optimizer.param_groups[0]["lr"]
    assert after == pytest.approx({0.0049: 1.5e-3, 0.0051: 1e-3, 0.015: 1e-3, 0.0199: 1e-3, 0.0201: 1e-3 / 1.5})


def test_the_adaptive_rate_follows_the_last_epochs_kl_alone(monkeypatch):
    """The KL that adapts the rate is the mean over the last epoch's steps, the policy's distance
    from the rollout policy once the update is done, not the mean over every epoch."""
    learner, batch, advantages = _learner([1, 0] * 8, epochs=2, lr=1e-3, lr_schedule="adaptive", desired_kl=0.01)
    loss, calls = learner.policy_loss, []

    def reported(*args):  # the first epoch's step reports no KL, the second 3 x desired_kl (mean: 1.5 x)
        value, metrics = loss(*args)
        calls.append(1)
        return value, {**metrics, "approx_kl": torch.tensor(0.0 if len(calls) == 1 else 0.03)}

    monkeypatch.setattr(learner, "policy_loss", reported)
    metrics = learner.update(batch, advantages, 0)
    assert len(calls) == 2 and metrics["approx_kl"] == pytest.approx(0.015)
    assert learner.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3 / 1.5)


def test_a_good_step_clears_the_count_of_skipped_steps_in_a_row():
    learner, batch, advantages = _learner([1, 0] * 8)
    learner.skipped_in_a_row = 2  # two non-finite steps before this update
    assert learner.update(batch, advantages, 0)["skipped_fraction"] == 0.0 and learner.skipped_in_a_row == 0


def test_max_grad_norm_null_clips_nothing(monkeypatch):
    norms = []
    clip = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda params, max_norm: norms.append(max_norm) or clip(
        params, max_norm))  # fmt: skip
    for value, expected in ((None, math.inf), (0.5, 0.5)):
        learner, batch, advantages = _learner([1, 0] * 8, max_grad_norm=value, epochs=2)
        norms.clear()
        learner.update(batch, advantages, 0)
        assert norms == [expected, expected]


def test_a_kl_penalty_scores_every_step_zero_advantage_or_not(monkeypatch):
    """With algo.kl.beta > 0 the penalty pulls every step toward the reference, so the update's
    pass covers the steps of unmixed groups (zero advantage) too; without it, the moved ones."""
    rows = {}
    for beta in (0.05, 0.0):
        learner, batch, advantages = _learner([1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 0, 0],
                                              kl=KLConfig(beta=beta))  # groups 2 and 3 unmixed  # fmt: skip
        log_probs = learner.policy.log_probs
        monkeypatch.setattr(learner.policy, "log_probs", lambda obs, raw, f=log_probs, b=beta: rows.setdefault(
            b, len(obs)) and f(obs, raw))  # fmt: skip
        learner.update(batch, advantages, 0)
    mask = batch.mask  # groups 0 and 3 mixed: trajectories 0-3 and 12-15
    assert rows == {0.05: int(mask.sum()), 0.0: int(mask[:, :4].sum() + mask[:, 12:].sum())}


def test_standardizing_a_one_step_minibatch_leaves_its_advantage_as_it_is():
    """`algo.normalize_advantages` over a minibatch of one step (a 1-step trajectory alone in its
    minibatch): its std is undefined, so the advantage is kept; it made a NaN loss, a skipped step."""
    from grpo_robot.update import Learner

    batch, policy = _four_groups([1, 0] * 8)
    lengths = torch.tensor([1] + [5] * 15)
    batch = Batch(batch.obs, batch.raw, batch.logp, torch.arange(12)[:, None] < lengths[None], batch.success,
                  batch.failed)  # fmt: skip
    cfg = AlgoConfig(group_size=4, groups_per_iter=4, epochs=1, minibatches=16, normalize_advantages=True)
    learner = Learner(policy, cfg, batch.obs.shape[0], 10, 0, torch.device("cpu"))
    advantages = torch.ones(int(lengths.sum()))
    assert learner.update(batch, advantages, 0)["skipped_fraction"] == 0.0


def test_an_update_with_no_mixed_group_moves_only_the_std_as_the_full_pass_does():
    """Every group failed: the entropy bonus is the whole loss. Without any forward pass the network
    gets the zero gradient the full pass gives it (so Adam's step count and moments are the same),
    and the std widens by the same step, bit for bit."""
    batch, policy = _four_groups([0] * 16)
    runs = _update_twice(batch, policy, entropy_coef=0.05)
    (full_w, full_m, full_adam), (idle_w, idle_m, idle_adam) = runs[True], runs[False]
    for key in full_w:
        assert torch.equal(full_w[key], idle_w[key]), key
    assert torch.equal(idle_w["log_std"], full_w["log_std"]) and (idle_w["log_std"] > policy.log_std).all()
    assert [s["step"].item() for s in idle_adam.values()] == [s["step"].item() for s in full_adam.values()] == [4.0] * 5
    assert idle_m["entropy"] == pytest.approx(full_m["entropy"])
    assert "approx_kl" in full_m and "approx_kl" not in idle_m  # no step moved the policy's mean


@pytest.mark.parametrize("fault", ["infinite learning rate", "NaN advantage"])
def test_a_rolled_back_step_restores_the_weights_and_the_whole_adam_state(fault):
    """A step that leaves a weight or a moment non-finite (an infinite rate), or whose loss is NaN,
    is undone: the weights, Adam's moments and its step counts are those from before, bit for bit."""
    import copy

    from grpo_robot.update import GroupAdvantages, Learner

    batch, policy = _four_groups([1, 0, 0, 1, 0, 1, 0, 0, 1, 1, 0, 1, 0, 1, 0, 0])
    cfg = AlgoConfig(group_size=4, groups_per_iter=4, epochs=2, minibatches=2, max_skipped_steps=1000)
    learner = Learner(policy, cfg, batch.obs.shape[0], 10, 0, torch.device("cpu"))
    advantages, _ = GroupAdvantages(cfg).advantages(batch, policy)
    assert learner.update(batch, advantages, 0)["skipped_fraction"] == 0.0  # Adam has state now
    weights = copy.deepcopy(policy.state_dict())
    adam = copy.deepcopy(learner.optimizer.state_dict()["state"])
    assert adam and all(int(s["step"]) == 4 for s in adam.values())
    if fault == "infinite learning rate":
        learner.cfg = replace(cfg, lr=math.inf)
    else:
        advantages = torch.full_like(advantages, math.nan)  # every minibatch's loss
    metrics = learner.update(batch, advantages, 1)
    assert metrics["skipped_fraction"] == 1.0 and learner.skipped_in_a_row == 4
    assert all(torch.equal(weights[k], v) for k, v in policy.state_dict().items())
    after = learner.optimizer.state_dict()["state"]
    assert after.keys() == adam.keys()
    for i, s in adam.items():
        assert after[i].keys() == s.keys() and all(torch.equal(s[k], after[i][k]) for k in s), i
    learner.cfg = cfg  # a good update trains on from the restored state
    assert learner.update(batch, GroupAdvantages(cfg).advantages(batch, policy)[0], 2)["skipped_fraction"] == 0.0
    assert all(int(s["step"]) == 8 for s in learner.optimizer.state_dict()["state"].values())


def test_a_roll_back_restores_the_target_record_and_the_evaluation(tmp_path, monkeypatch):
    """A second Ctrl-C while `best.pt` of the iteration that reached the target is written rolls back
    to the iteration before; `last.pt` and the summary used to keep the thrown-away iteration's
    `target.reached`, so the resume said "finished already" and trained nothing."""
    import signal

    from grpo_robot.signals import Interrupted

    cfg = small_config(iterations=6, eval_every=2, eval_seeds=50, target_success=0.01, checkpoint_every=1)
    real, hit = checkpoint.save_atomic, []

    def save_atomic(obj, path):
        if Path(path).name == "best.pt" and obj["target"].get("reached"):
            hit.append(obj["iteration"])
            raise Interrupted(signal.SIGINT)
        return real(obj, path)

    monkeypatch.setattr(checkpoint, "save_atomic", save_atomic)
    trainer = Trainer(cfg, tmp_path)
    summary = trainer.run()
    trainer.close()
    assert len(hit) == 1 and summary["stopped"] == "signal" and summary["iterations"] == hit[0] - 1, (hit, summary)
    saved = torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)
    assert saved["iteration"] == hit[0] - 1
    assert saved["target"] == summary["target"] == {"target": 0.01, "reached": False}
    # the evaluation reported is the restored iteration's (its own, below the target), not the one thrown away
    assert summary["eval"] is not None and summary["eval"]["success_rate"] < 0.01
    monkeypatch.setattr(checkpoint, "save_atomic", real)
    resumed = Trainer(replace(cfg, resume=str(tmp_path)), tmp_path)
    again = resumed.run()
    resumed.close()
    assert again["stopped"] == "target_success" and again["iterations"] == hit[0] and again["target"]["reached"]


def test_a_resumed_run_reports_its_last_evaluation_until_it_evaluates_again(tmp_path):
    """`summary.json` and `last.pt` of a resumed run stopped before its next evaluation said
    `"eval": null`, where the run had one."""
    import signal

    class SignalAfter(Hook):
        def after_iteration(self, trainer, record):
            if record.iteration == 3:
                trainer.guard.received = signal.SIGINT

    cfg = small_config(iterations=2, eval_every=1, checkpoint_every=1)
    first = Trainer(cfg, tmp_path)
    evaluated = first.run()["eval"]
    first.close()
    assert evaluated is not None and evaluated["n"] == 50
    resumed = Trainer(replace(cfg, iterations=6, eval_every=1000, resume=str(tmp_path)), tmp_path,
                      hooks=[SignalAfter()])  # fmt: skip
    summary = resumed.run()
    resumed.close()
    assert summary["stopped"] == "signal" and summary["iterations"] == 3
    assert summary["eval"] == evaluated
    assert torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)["eval"] == evaluated
    # and the file: it said null while the returned summary had the evaluation
    on_disk = json.loads((tmp_path / "summary.json").read_text())["eval"]
    assert on_disk == {k: v for k, v in evaluated.items() if k != "episodes"} and on_disk["success_rate"] >= 0


def test_a_run_whose_only_evaluation_was_at_its_budgets_end_has_no_best_rate(tmp_path):
    """best_eval was -1.0 (a sentinel) in summary.json when no scheduled evaluation had chosen best.pt."""
    summary = Trainer(small_config(iterations=2, eval_every=1000), tmp_path).run()
    assert summary["eval"] is not None and summary["best_eval"] is None
    assert json.loads((tmp_path / "summary.json").read_text())["best_eval"] is None


def test_a_trainer_resuming_a_run_that_spent_its_env_steps_trains_no_more(tmp_path):
    """The budget is checked before the first iteration too: through the API such a resume trained one
    more iteration (the command line says "finished already" before it builds a trainer)."""
    cfg = small_config(iterations=5, max_env_steps=1)
    first = Trainer(cfg, tmp_path / "first").run()
    assert (first["iterations"], first["stopped"]) == (1, "max_env_steps")
    again = Trainer(replace(cfg, resume=str(tmp_path / "first")), tmp_path / "second").run()
    assert (again["iterations"], again["env_steps"], again["stopped"]) == (1, first["env_steps"], "max_env_steps")


class StopNow(Hook):
    """Ends the run without saying why: at its start, or after its first iteration."""

    def __init__(self, at_start: bool) -> None:
        self.at_start = at_start

    def on_start(self, trainer):
        trainer.stop = self.at_start

    def should_stop(self, trainer, record):
        return True


def test_a_hook_that_ends_the_run_without_saying_why_is_named_in_the_summary(tmp_path):
    for at_start, iterations in ((False, 1), (True, 0)):  # it said "iterations", and "target_success" at the start
        summary = Trainer(small_config(iterations=3), tmp_path / str(at_start), hooks=[StopNow(at_start)]).run()
        assert (summary["stopped"], summary["iterations"]) == ("StopNow", iterations)
        assert checkpoint.load(tmp_path / str(at_start), purpose="resume")["iteration"] == iterations


def tensorboard_points(folder: Path, tag: str = "charts/train_success") -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)]


def test_a_resumed_run_purges_what_the_run_before_logged_past_its_checkpoint(tmp_path):
    """Killed after logging iteration 4, its last checkpoint at 3: the resume logs 4 again, and
    TensorBoard showed both points; it now shows each step once, as an unbroken run logs it."""
    cfg = small_config(iterations=6, checkpoint_every=3)
    Trainer(cfg, tmp_path / "straight").run()
    with pytest.raises(KeyboardInterrupt):
        late(Trainer(cfg, tmp_path / "run"), CrashAfter(5)).run()  # before iteration 5 is logged
    assert len(tensorboard_points(tmp_path / "run" / "tb")) == 4
    assert checkpoint.load(tmp_path / "run", purpose="resume")["iteration"] == 3
    Trainer(replace(cfg, resume=str(tmp_path / "run")), tmp_path / "run").run()
    straight = tensorboard_points(tmp_path / "straight" / "tb")
    assert len(straight) == 6 and tensorboard_points(tmp_path / "run" / "tb") == straight


class CrashBeforeLogging(Hook):
    """Interrupts the run in iteration `iteration`'s logging, before the loggers after it write it
    (as a user's hook's `on_log` runs before TensorBoard's), after its checkpoint was written."""

    def __init__(self, iteration: int) -> None:
        self.iteration = iteration

    def on_log(self, trainer, scalars, step):
        if trainer.iteration == self.iteration:
            raise KeyboardInterrupt


def test_an_iteration_checkpointed_but_not_yet_logged_is_logged_by_the_resume(tmp_path):
    """A process that ended after writing last.pt and before its loggers wrote that iteration lost
    it from TensorBoard for good: the resume purged from the step after it."""
    cfg = small_config(iterations=5, checkpoint_every=1, eval_every=2)
    Trainer(cfg, tmp_path / "straight").run()
    with pytest.raises(KeyboardInterrupt):
        Trainer(cfg, tmp_path / "run", hooks=[CrashBeforeLogging(4)]).run()  # evaluated at 4, saved, not logged
    assert checkpoint.load(tmp_path / "run", purpose="resume")["iteration"] == 4
    assert len(tensorboard_points(tmp_path / "run" / "tb")) == 3
    Trainer(replace(cfg, resume=str(tmp_path / "run")), tmp_path / "run").run()
    for tag in ("charts/train_success", "charts/eval_success"):
        straight = tensorboard_points(tmp_path / "straight" / "tb", tag)
        assert tensorboard_points(tmp_path / "run" / "tb", tag) == straight and len(straight) in (5, 3), tag


def test_a_resume_that_evaluates_otherwise_compares_its_evaluations_with_best_pt_evaluated_alike(tmp_path):
    """eval_seeds may change on resume: best.pt's rate on the old seeds was compared with the new
    seeds' rates. best.pt is now evaluated again on the new seeds first; and a resume into a new
    directory writes its own best.pt at its first evaluation (it had none until a rate beat the old run's)."""
    point = EnvConfig(task=None, entry_point="toy_envs:PointReach", horizon=10, kwargs={"tolerance": 0.5})
    cfg = small_config(iterations=2, eval_every=1, eval_seeds=6, env=point)  # a rate between 0 and 1 at the start
    first = Trainer(cfg, tmp_path / "run").run()
    best = checkpoint.load(tmp_path / "run" / "checkpoints" / "best.pt", purpose="resume")
    assert best["best_eval"] == first["best_eval"] > 0
    wider = replace(cfg, eval_seeds=60, resume=str(tmp_path / "run"))
    check = Trainer(replace(wider, resume=None), tmp_path / "check")  # best.pt's policy on the 60 seeds
    check.policy.load_state_dict(best["policy"]["state_dict"])
    expected = check.evaluate().rate  # deterministic: no noise
    resumed = Trainer(wider, tmp_path / "run")
    resumed.run()  # nothing to train (iterations=2 are done): the start's rebase only
    assert resumed.best_eval == expected != first["best_eval"]
    elsewhere = Trainer(replace(wider, iterations=3), tmp_path / "new")
    elsewhere.run()
    assert (tmp_path / "new" / "checkpoints" / "best.pt").exists()


def test_a_resume_may_change_a_tokenized_policys_decode_and_evaluates_best_pt_with_it(tmp_path):
    # policy.decode only chooses the deterministic action (training samples): a resume refused it as a
    # change of the policy; best.pt is evaluated again with the new decode, as for other eval settings
    point = EnvConfig(task=None, entry_point="toy_envs:PointReach", horizon=10, kwargs={"tolerance": 0.5})
    tokenized = PolicyConfig(type="tokenized", bins=16, hidden_sizes=[32, 32], decode="mode")
    cfg = small_config(iterations=2, eval_every=1, eval_seeds=30, env=point, policy=tokenized)
    Trainer(cfg, tmp_path / "run").run()
    best = checkpoint.load(tmp_path / "run" / "checkpoints" / "best.pt", purpose="resume")
    mean = replace(cfg, policy=replace(tokenized, decode="mean"), resume=str(tmp_path / "run"))
    check = Trainer(replace(mean, resume=None), tmp_path / "check")
    check.policy.load_state_dict(best["policy"]["state_dict"])
    expected = check.evaluate().rate  # best.pt's policy decoded by its mean
    resumed = Trainer(mean, tmp_path / "run")
    assert resumed.policy.decode == "mean"
    resumed.run()
    assert resumed.best_eval == pytest.approx(expected)
    with pytest.raises(ValueError, match="policy.bins=8 differs from the run's policy.bins=16"):
        Trainer(replace(mean, policy=replace(tokenized, bins=8)), tmp_path / "run")  # what is trained still may not


class Counter(Hook):
    """Counts iterations, as state a checkpoint keeps."""

    def __init__(self) -> None:
        self.n = 0

    def after_iteration(self, trainer, record) -> None:
        self.n += 1

    def state_dict(self) -> dict:
        return {"n": self.n}

    def load_state_dict(self, state: dict) -> None:
        self.n = state["n"]


def test_a_run_stopped_between_evaluations_and_resumed_goes_on_as_one_run_straight_through(tmp_path):
    """A run that ended its budget between scheduled evaluations was evaluated there: that result
    could reach the target (the resume then refused to train) or pick best.pt, where the run that
    went straight on never evaluated. And best.pt held the user's hooks' state of the iteration
    before (it was written before they ran)."""
    env = EnvConfig(task=None, entry_point="toy_envs:PointReach", horizon=20, kwargs={"tolerance": 0.3})
    cfg = small_config(env=env, iterations=4, eval_every=4, eval_seeds=20, target_success=0.05)  # easily reached
    straight = Trainer(cfg, tmp_path / "a", hooks=[Counter()])
    summary = straight.run()
    assert summary["target"]["iteration"] == 4 and summary["stopped"] == "target_success"
    first = Trainer(replace(cfg, iterations=2), tmp_path / "b", hooks=[Counter()]).run()
    assert first["eval"]["success_rate"] > 0 and not first["target"].get("reached")  # reported, not the target
    assert checkpoint.load(tmp_path / "b" / "checkpoints" / "best.pt")["iteration"] == 2  # the run had none yet
    resumed = Trainer(replace(cfg, resume=str(tmp_path / "b")), tmp_path / "b", hooks=[Counter()]).run()
    assert resumed["target"]["iteration"] == 4 and resumed["env_steps"] == summary["env_steps"]
    assert resumed["eval_seconds_total"] == pytest.approx(first["eval_seconds"] + resumed["eval_seconds"])
    for name in ("last", "best"):
        a, b = (checkpoint.load(tmp_path / run / "checkpoints" / f"{name}.pt") for run in ("a", "b"))
        assert a["iteration"] == b["iteration"] == 4 and all(
            torch.equal(a["policy"]["state_dict"][k], b["policy"]["state_dict"][k]) for k in a["policy"]["state_dict"])
        assert a["hooks"]["Counter"]["n"] == b["hooks"]["Counter"]["n"] == 4  # best.pt after the user's hooks
    import logging  # a resume with another number of torch threads is not bit-identical: said

    warned: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: warned.append(record.getMessage())
    logger = logging.getLogger("grpo_robot.trainer")  # its own handler: an in-process CLI run may have set others
    logger.disabled = False
    logger.addHandler(handler)
    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)
    try:
        Trainer(replace(cfg, resume=str(tmp_path / "b"), iterations=5), tmp_path / "b").close()
    finally:
        torch.set_num_threads(threads)
        logger.removeHandler(handler)
    assert any(f"the run trained with {threads} torch CPU threads and this process has {threads + 1}" in w
               for w in warned), warned  # fmt: skip


def test_the_runs_seconds_leave_out_the_hooks_set_up(tmp_path):
    """A W&B login (or a filming env built and tried) in `on_begin` counted as training time, so
    runs with and without a logger were timed apart."""
    import time

    class SlowSetUp(Hook):
        def on_begin(self, trainer):
            time.sleep(1.0)

    start = time.perf_counter()
    summary = Trainer(small_config(iterations=1, eval_every=1000), tmp_path, hooks=[SlowSetUp()]).run()
    assert summary["seconds"] <= time.perf_counter() - start - 1.0


def test_a_preset_of_your_own_outside_the_repository(tmp_path, monkeypatch):
    """README (Your own environments): `--config-dir <folder> experiment=<name>` composes a preset
    kept outside the package with the shipped groups, and the preset's values are validated as
    the command line's are."""
    import yaml

    monkeypatch.chdir(tmp_path)
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    preset = tmp_path / "conf" / "experiment" / "my_reach.yaml"
    text = ("# @package _global_\ndefaults:\n  - override /env: reach\nalgo:\n  group_size: 4\n  groups_per_iter: 8\n"
            "policy:\n  hidden_sizes: [32]\niterations: 1\neval_seeds: 10\nprogress: false\n")  # fmt: skip
    preset.write_text(text)
    out = run_main("train", "--config-dir", str(tmp_path / "conf"), "experiment=my_reach",
                   f"hydra.run.dir={tmp_path / 'run'}")  # fmt: skip
    assert out.code == 0, out.stderr
    resolved = yaml.safe_load((tmp_path / "run" / "resolved_config.yaml").read_text())
    assert (resolved["env"]["task"], resolved["algo"]["group_size"], resolved["iterations"]) == ("Reach-v1", 4, 1)
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["iterations"] == 1
    preset.write_text(text.replace("group_size: 4", "group_size: 0"))
    out = run_main("train", "--config-dir", str(tmp_path / "conf"), "experiment=my_reach",
                   f"hydra.run.dir={tmp_path / 'bad'}")  # fmt: skip
    assert out.code == 2 and out.error_lines == ["error: algo.group_size=0 is invalid: must be >= 1"], out.stderr
    assert not (tmp_path / "bad").exists()
    # a multirun of it is checked before any job starts (Hydra's own --config-dir skipped that), in each form
    for flag in (["-cd", str(tmp_path / "conf")], [f"--config-dir={tmp_path / 'conf'}"], [f"-cd={tmp_path / 'conf'}"],
                 ["--config-d", str(tmp_path / "conf")]):  # fmt: skip  (argparse takes a prefix of a long flag)
        out = run_main("train", *flag, "-m", "experiment=my_reach", "seed=0,1", f"hydra.sweep.dir={tmp_path / 'sw'}")
        assert out.code == 2 and out.error_lines == ["error: algo.group_size=0 is invalid: must be >= 1"], out.stderr
        assert not (tmp_path / "sw").exists()
    # beside Hydra's other flags the folder is Hydra's own --config-dir: a primary config of one's own in it
    (tmp_path / "conf" / "mine.yaml").write_text("defaults:\n  - config\n  - _self_\nseed: 77\n")
    out = run_main("train", "-cd", str(tmp_path / "conf"), "--config-name", "mine", "--cfg", "job")
    assert out.code == 0 and "\nseed: 77\n" in out.stdout, out.stderr
    out = run_main("train", "--config-dir", str(tmp_path / "nowhere"), "experiment=my_reach")
    assert out.code == 2 and out.error_lines == [f"error: --config-dir={tmp_path / 'nowhere'} is invalid: must be "
                                                 "a directory of config groups (e.g. experiment/<name>.yaml)"]
