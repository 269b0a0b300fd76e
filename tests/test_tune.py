"""`scripts/tune.py`: an Optuna search whose trials train on several seeds; costs follow the
runs' summaries, the study resumes, and a bad search space is one line before any work."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
import sqlite3
from pathlib import Path

import pytest
import yaml

from grpo_robot.bench import tune
from grpo_robot.cli import compose_config

optuna = pytest.importorskip("optuna")  # the `tune` extra, which the README's test install includes
ROOT = Path(__file__).resolve().parents[1]

TINY = """
experiment: reach_from_scratch
overrides: ["policy.hidden_sizes=[32,32]", "algo.group_size=4", "algo.groups_per_iter=8"]
seeds: [0, 1]
target: 0.3
max_env_steps: 6000
eval_every: 1
eval_seeds: 20
params:
  algo.lr: {low: 1.0e-4, high: 1.0e-2, log: true}
  algo.epochs: {low: 1, high: 3}
  policy.init_std: {choices: [0.3, 1.0]}
"""


def run_cli(*args: str) -> tuple[int, str, str]:
    spec = importlib.util.spec_from_file_location("tune_script", ROOT / "scripts" / "tune.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = module.main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_a_search_trains_every_seed_scores_the_runs_and_resumes(tmp_path):
    space_file = tmp_path / "space.yaml"
    space_file.write_text(TINY)
    out = tmp_path / "study"
    code, stdout, stderr = run_cli(str(space_file), "--out", str(out), "--trials", "2")
    assert code == 0, stderr
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert [(r["trial"], r["seed"]) for r in runs] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    space = tune.load_space(space_file)
    for r in runs:  # each run's cost follows its own summary
        summary = json.loads((out / f"trial_{r['trial']:03d}" / f"seed_{r['seed']}" / "summary.json").read_text())
        assert summary["env_steps"] == r["env_steps"] and summary["env_steps"] <= 6000 + 8 * 4 * 50
        if r["reached"]:
            assert r["cost"] == summary["target"]["env_steps"] <= r["env_steps"]
            assert summary["target"]["success"] >= 0.3
        else:
            assert r["cost"] == pytest.approx(6000 * (2 - min(r["best"], 0.3) / 0.3))
            assert summary["stopped"] == "max_env_steps"
        assert set(r["params"]) == {"algo.lr", "algo.epochs", "policy.init_std"}
        run_dir = out / f"trial_{r['trial']:03d}" / f"seed_{r['seed']}"
        config = yaml.safe_load((run_dir / "resolved_config.yaml").read_text())
        assert config["algo"]["epochs"] == r["params"]["algo.epochs"]
        assert config["policy"]["init_std"] == r["params"]["policy.init_std"]
        assert config["seed"] == r["seed"] and config["target_success"] == 0.3
    study = tune.study(space, out)
    values = {t.number: t.value for t in study.trials}
    for trial in (0, 1):
        costs = [r["cost"] for r in runs if r["trial"] == trial]
        assert values[trial] == pytest.approx(sum(costs) / len(costs))
    assert "| trial | state | value (M) | reached | algo.lr | algo.epochs | policy.init_std |" in stdout
    for trial in (0, 1):  # how many of its seeds reached the target, as the runs recorded it
        share = f"{sum(r['reached'] for r in runs if r['trial'] == trial)}/2"
        assert re.search(rf"^\| {trial} \| complete \| [0-9.]+ \| {share} \|", stdout, re.M), stdout
    assert "best: trial " in stdout
    from grpo_robot.machine import one_line

    assert f"runs on: {one_line(runs[0]['machine'])} (4 runs)" in stdout  # the machine the costs were measured on
    # the same command with more trials resumes the study: trials 0 and 1 are not run again
    code, stdout, _ = run_cli(str(space_file), "--out", str(out), "--trials", "3")
    assert code == 0
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert [r["trial"] for r in runs] == [0, 0, 1, 1, 2, 2]
    # a new draw, not trial 0's again, nor close to it
    assert all(abs(runs[4]["params"]["algo.lr"] / r["params"]["algo.lr"] - 1) > 0.05 for r in runs[:4])
    code, report_only, _ = run_cli(str(space_file), "--out", str(out), "--report")
    assert code == 0 and len((out / "runs.jsonl").read_text().splitlines()) == 6
    assert report_only.count("| complete |") + report_only.count("| pruned |") == 3


def test_run_cost_counts_steps_to_target_and_ranks_censored_runs_by_how_far_they_got(tmp_path):
    space_file = tmp_path / "space.yaml"
    space_file.write_text(TINY)
    space = tune.load_space(space_file)
    reached = {"target": {"reached": True, "env_steps": 4096, "success": 0.35}, "eval": {"success_rate": 0.35},
               "best_eval": 0.35}  # fmt: skip
    assert tune.run_cost(space, reached, 0.0) == (4096.0, 0.35)
    short = {"target": {"reached": False}, "eval": {"success_rate": 0.15}, "best_eval": 0.2}
    assert tune.run_cost(space, short, 0.1) == (pytest.approx(6000 * (2 - 0.2 / 0.3)), 0.2)
    assert tune.run_cost(space, short, 0.25)[0] == pytest.approx(6000 * (2 - 0.25 / 0.3))  # training success counts
    nothing = {"target": {"reached": False}, "eval": {"success_rate": 0.0}, "best_eval": 0.0}
    assert tune.run_cost(space, nothing, 0.0)[0] == 12000 > tune.run_cost(space, short, 0.1)[0] > 4096
    # reached at the evaluation of the iteration that passed the budget: it costs the budget, below every
    # censored run (its 6144 env steps ranked it behind a run that never reached the target)
    late = {**reached, "target": {**reached["target"], "env_steps": 6144}}
    assert tune.run_cost(space, late, 0.0) == (6000.0, 0.35) and 6000 < tune.run_cost(space, short, 0.29)[0]


def test_a_seconds_search_scores_wall_clock_without_evaluations_and_budgets_by_time(tmp_path):
    space_file = tmp_path / "space.yaml"
    seconds = "objective: seconds\ntime_limit_min: 0.5\nmax_env_steps: 6000"
    space_file.write_text(TINY.replace("max_env_steps: 6000", seconds))
    space = tune.load_space(space_file)
    assert (space.objective, space.budget, space.unit) == ("seconds", 30.0, ("s", 1.0))
    overrides = space.base_overrides(0)
    assert "time_limit_min=0.5" in overrides and "max_env_steps=6000" in overrides  # both budgets apply
    config = space.trial_config({}, 0)
    assert config.time_limit_min == 0.5 and config.max_env_steps == 6000
    reached = {"target": {"reached": True, "env_steps": 4096, "success": 0.35, "seconds": 21.0, "train_seconds": 17.5},
               "eval": {"success_rate": 0.35}, "best_eval": 0.35}  # fmt: skip
    assert tune.run_cost(space, reached, 0.0) == (17.5, 0.35)  # evaluations left out
    short = {"target": {"reached": False}, "eval": {"success_rate": 0.15}, "best_eval": 0.2}
    assert tune.run_cost(space, short, 0.1)[0] == pytest.approx(30 * (2 - 0.2 / 0.3))
    code, stdout, stderr = run_cli(str(space_file), "--out", str(tmp_path / "study"), "--trials", "1")
    assert code == 0, stderr
    (run,) = [json.loads(line) for line in (tmp_path / "study" / "runs.jsonl").read_text().splitlines()][:1]
    summary = json.loads((tmp_path / "study" / "trial_000" / "seed_0" / "summary.json").read_text())
    if run["reached"]:
        assert run["cost"] == summary["target"]["train_seconds"] <= summary["target"]["seconds"] <= summary["seconds"]
    else:
        assert run["cost"] == pytest.approx(30 * (2 - min(run["best"], 0.3) / 0.3))
    assert "| trial | state | value (s) |" in stdout and "mean seconds to target" in stdout
    # going on with it on another machine is refused in one line, before anything runs or is queued
    runs_file = tmp_path / "study" / "runs.jsonl"
    lines = [json.loads(line) for line in runs_file.read_text().splitlines()]
    runs_file.write_text("".join(json.dumps({**r, "machine": {"cpu": "Another CPU"}}) + "\n"  # and a partial record
                                 for r in lines) + '{"seed": 1, "cost"')  # fmt: skip  (a line cut short by a kill)
    code, _, stderr = run_cli(str(space_file), "--out", str(tmp_path / "study"), "--trials", "2",
                              "--enqueue", "algo.lr=0.002")  # fmt: skip
    errors = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2 and len(errors) == 1
    assert "timed on Another CPU, ? cores" in errors[0] and "--any-machine" in errors[0]
    assert len(runs_file.read_text().splitlines()) == len(lines) + 1
    assert len(tune.study(space, tmp_path / "study").trials) == 1  # the enqueued trial was not added
    assert run_cli(str(space_file), "--out", str(tmp_path / "study"), "--trials", "1")[0] == 0  # nothing to run
    tune.check_machine(space, tmp_path / "study", current={"cpu": "Another CPU", "python": "3.11.7"})
    space_file.write_text(TINY)  # an env-steps search may move: env steps do not depend on the machine
    tune.check_machine(tune.load_space(space_file), tmp_path / "study")


@pytest.mark.parametrize(
    "text, message",
    [
        ("experiment: reach_from_scratch\nparams: {}\n", "params is empty"),
        ("experimnt: reach\nparams: {algo.lr: {low: 1, high: 2}}\n", "unknown key 'experimnt'"),
        ("params: {algo.lr: {low: 0.01, high: 0.001}}\n", "needs numbers low < high"),
        ("params: {algo.lr: {low: 0, high: 0.1, log: true}}\n", "low must be > 0"),
        ("params: {algo.lr: [1, 2]}\n", r"must be \{low, high\[, log\]\} or \{choices"),
        ("params: {algo.lr: {choices: []}}\n", "non-empty list"),
        ("params: {algo.lr: {low: 1.0e-4, high: 2.0}}\n", "algo.lr=2.0"),  # out of the schema's range
        ("params: {algo.group_size: {choices: [8, 0]}}\n", "algo.group_size=0"),
        ("params: {algo.nonsense: {low: 1, high: 2}}\n", "nonsense"),
        ("seeds: [-1]\nparams: {algo.lr: {low: 1.0e-4, high: 1.0e-3}}\n", "seeds must be"),
        ("objective: wallclock\nparams: {algo.lr: {low: 1.0e-4, high: 1.0e-3}}\n", "objective='wallclock' is invalid"),
        ("objective: seconds\nparams: {algo.lr: {low: 1.0e-4, high: 1.0e-3}}\n", "needs time_limit_min > 0"),
        ("max_env_steps: null\nparams: {algo.lr: {low: 1.0e-4, high: 1.0e-3}}\n", "needs max_env_steps"),
        ("prune_after: 3\nparams: {algo.lr: {low: 1.0e-4, high: 1.0e-3}}\n",
         r"prune_after=3 is invalid: allowed: an integer from 1 to 2 .* or null \(never\)"),
        ("prune_after: true\nparams: {algo.lr: {low: 1.0e-4, high: 1.0e-3}}\n", "prune_after=True is invalid"),
        (
            "params: {algo.desired_kl: {low: 0.01, high: 0.1, when: {algo.lr_schedule: adaptive}},\n"
            "         algo.lr_schedule: {choices: [constant, adaptive]}}\n",
            "names 'algo.lr_schedule'; allowed: a param with choices listed before it \\(none\\)",
        ),
        (
            "params: {algo.lr: {low: 1.0e-4, high: 1.0e-3}, algo.epochs: {low: 1, high: 3, when: {algo.lr: 0.001}}}\n",
            "names 'algo.lr'; allowed",
        ),
        (
            "params: {algo.lr_schedule: {choices: [constant, adaptive]},\n"
            "         algo.desired_kl: {low: 0.01, high: 0.1, when: {algo.lr_schedule: linear}}}\n",
            r"algo.lr_schedule='linear' is not one of its choices \['constant', 'adaptive'\]",
        ),
        (
            "params: {algo.lr_schedule: {choices: [constant, adaptive]},\n"
            "         algo.desired_kl: {low: -0.01, high: 0.1, when: {algo.lr_schedule: adaptive}}}\n",
            "desired_kl=-0.01",
        ),
        # these were tracebacks: YAML's own error, an AttributeError, a TypeError; two equal seeds shared a run
        ("params: {algo.lr: {low: 1.0e-4, high: 1.0e-3}\n", r"not valid YAML \(line 2, column 1\)"),
        ("- algo.lr\n", r"a search space is a mapping of keys \(.*\), got a list"),
        ("params: [algo.lr]\n", r"params must map each searched key to its range or choices, got a list"),
        ("seeds: 3\nparams: {algo.lr: {low: 1.0e-4, high: 1.0e-3}}\n", r"seeds must be a non-empty list of "
         r"distinct integers >= 0 \(each a run of its own\), got 3"),
        ("seeds: [0, 0]\nparams: {algo.lr: {low: 1.0e-4, high: 1.0e-3}}\n", r"got \[0, 0\]"),
    ],
)
def test_a_bad_search_space_is_one_line_before_any_work(tmp_path, text, message):
    space_file = tmp_path / "bad.yaml"
    space_file.write_text(text)
    code, stdout, stderr = run_cli(str(space_file), "--out", str(tmp_path / "study"))
    assert code == 2
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(space_file) in lines[0], stderr
    assert re.search(message, lines[0]), lines[0]
    assert not (tmp_path / "study").exists()


def test_a_conditional_param_is_drawn_only_when_its_condition_holds(tmp_path, monkeypatch):
    """`when:` draws algo.desired_kl only in trials whose algo.lr_schedule drew adaptive; the other
    trials train with the preset's value, and the report leaves their cell empty."""
    space_file = tmp_path / "space.yaml"
    space_file.write_text(TINY.replace("  policy.init_std: {choices: [0.3, 1.0]}\n",
                                       "  algo.lr_schedule: {choices: [constant, adaptive]}\n"
                                       "  algo.desired_kl: {low: 0.005, high: 0.05, log: true, "
                                       "when: {algo.lr_schedule: adaptive}}\n"))  # fmt: skip
    space = tune.load_space(space_file)
    assert space.params[-1].when == (("algo.lr_schedule", ("adaptive",)),)

    def fake_train(space, config, run_dir):  # the draw is what is checked here, not training
        return {"seed": config.seed, "cost": 1000.0 * config.algo.epochs, "reached": True, "final_success": 0.5,
                "seconds": 1.0, "desired_kl": config.algo.desired_kl}  # fmt: skip

    monkeypatch.setattr(tune, "train_one", fake_train)
    out = tmp_path / "study"
    tune.run(space, out, 10, log=lambda line: None)
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    schedules = [r["params"]["algo.lr_schedule"] for r in runs]
    assert len({r["trial"] for r in runs}) == 10 and set(schedules) == {"constant", "adaptive"}
    default_kl = tune.compose("experiment=reach_from_scratch").algo.desired_kl
    for r in runs:
        adaptive = r["params"]["algo.lr_schedule"] == "adaptive"
        assert ("algo.desired_kl" in r["params"]) == adaptive
        if adaptive:
            assert 0.005 <= r["params"]["algo.desired_kl"] <= 0.05 and r["desired_kl"] == r["params"]["algo.desired_kl"]
        else:
            assert r["desired_kl"] == default_kl
    report = tune.report(space, out)
    assert "algo.desired_kl in [0.005, 0.05] log (when algo.lr_schedule in ['adaptive'])" in report[0]
    rows = [line for line in report if "| constant |" in line]
    assert rows and all(line.rstrip(" |").endswith("| -") for line in rows)
    code, _, stderr = run_cli(str(space_file), "--out", str(out), "--trials", "11", "--enqueue",
                              "algo.lr_schedule=constant", "algo.desired_kl=0.01")  # fmt: skip
    assert code == 2 and re.search(r"algo.desired_kl is searched only when algo.lr_schedule in \['adaptive'\], "
                                   r"and it gives algo.lr_schedule='constant'", stderr), stderr  # fmt: skip


def test_the_shipped_search_spaces_load():
    for path in sorted((ROOT / "conf" / "tune").glob("*.yaml")):
        space = tune.load_space(path)
        assert space.params and space.target in (0.9, 0.95) and 3 not in space.seeds  # 3-7 are for confirming


def test_the_space_check_sets_values_on_one_composition_as_hydra_composes_them():
    """load_space checks each bound on one composed config, setting the value as Hydra parses it;
    that config equals a full composition, and a config group falls back to composing."""
    space = tune.load_space(ROOT / "conf" / "tune" / "push_cube_bc.yaml")
    base = compose_config(*space.base_overrides(space.seeds[0]))
    checks = [({"algo.lr": 0.0031}, 0), ({"algo.group_size": 12}, 4), ({"algo.std_anneal.final": None}, 0),
              ({"policy.hidden_sizes": "[64,32]"}, 1),
              ({"policy": "tokenized_factorized", "algo.epochs": 3}, 0)]  # fmt: skip
    for values, seed in checks:
        assert tune._with_values(space, base, values, seed) == space.trial_config(values, seed)
    assert space.trial_config(values, 0).policy.type != space.trial_config({}, 0).policy.type  # the group changed
    assert tune._with_values(space, base, {}, 4).seed == 4
    assert tune._with_values(space, base, {"policy.hidden_sizes": "[64,32]"}, 0).policy.hidden_sizes == [64, 32]


def test_a_null_choice_turns_an_option_off_and_its_conditional_param_with_it():
    space = tune.load_space(ROOT / "conf" / "tune" / "push_cube_bc.yaml")
    assert tune.parse_enqueue(space, ["algo.std_anneal.final=null"]) == {"algo.std_anneal.final": None}
    config = space.trial_config({"algo.std_anneal.final": None}, seed=0)  # composed and typed as off
    assert config.algo.std_anneal.final is None
    with pytest.raises(ValueError, match=r"std_anneal.iterations is searched only when algo.std_anneal.final in"):
        tune.parse_enqueue(space, ["algo.std_anneal.final=null", "algo.std_anneal.iterations=100"])


def test_a_run_ended_by_a_signal_is_not_scored_and_stops_the_search(tmp_path, monkeypatch):
    """An interrupted run is no measurement: the trial is left failed, nothing is appended to
    runs.jsonl, the command says so in one line, and running it again goes on with a new trial."""
    from grpo_robot.trainer import Trainer

    space_file = tmp_path / "space.yaml"
    space_file.write_text(TINY)
    run = Trainer.run

    def interrupted(self):
        summary = run(self)
        return {**summary, "stopped": "signal", "signal": "SIGTERM"}

    monkeypatch.setattr(Trainer, "run", interrupted)
    enqueue = ("--enqueue", "algo.lr=0.002", "algo.epochs=2", "policy.init_std=1.0")
    code, _, stderr = run_cli(str(space_file), "--out", str(tmp_path / "study"), "--trials", "1", *enqueue)
    # 128 + the signal, as train.py exits (it was 1, which a scheduler reads as a failure)
    assert code == 143 and "the search stopped" in stderr and "ended by SIGTERM" in stderr, (code, stderr)
    code, _, stderr = run_cli(str(space_file), "--out", str(tmp_path / "studyy"), "--report")  # mistyped: no study
    assert code == 2 and "no study there" in stderr and not (tmp_path / "studyy").exists(), stderr
    assert [line for line in stderr.splitlines() if line.strip()] == [stderr.strip()]  # Optuna's warning came first
    assert not (tmp_path / "study" / "runs.jsonl").exists()
    monkeypatch.setattr(Trainer, "run", run)
    code, stdout, _ = run_cli(str(space_file), "--out", str(tmp_path / "study"), "--trials", "1", *enqueue)
    assert code == 0 and "| 0 | fail | - |" in stdout and "| 1 | complete |" in stdout
    # the interrupted trial's enqueued values run again (a failed trial with them used to count as run)
    (again,) = [json.loads(line)["params"] for line in (tmp_path / "study" / "runs.jsonl").read_text().splitlines()[:1]]
    assert again == {"algo.lr": 0.002, "algo.epochs": 2, "policy.init_std": 1.0}


def test_a_diverged_run_is_a_censored_result_and_the_search_goes_on(tmp_path, monkeypatch):
    """A run that diverges (non-finite steps in a row) says something of its settings: it costs
    what a run that never reached the target costs, and the search draws on."""
    from grpo_robot.trainer import Trainer

    space_file = tmp_path / "space.yaml"
    space_file.write_text(TINY.replace("seeds: [0, 1]", "seeds: [0]"))
    run, calls = Trainer.run, []

    def diverges_first(self):
        summary = run(self)
        calls.append(1)
        if len(calls) > 1:
            return summary
        return {**summary, "stopped": "error", "error": "3 optimizer steps in a row were non-finite", "diverged": True,
                "target": {"target": 0.3, "reached": False}}  # fmt: skip

    monkeypatch.setattr(Trainer, "run", diverges_first)
    code, stdout, stderr = run_cli(str(space_file), "--out", str(tmp_path / "study"), "--trials", "2")
    assert code == 0, stderr
    first, second = [json.loads(line) for line in (tmp_path / "study" / "runs.jsonl").read_text().splitlines()]
    assert first["stopped"] == "diverged" and not first["reached"] and first["cost"] >= 6000
    assert second["trial"] == 1 and "| 0 | complete |" in stdout and "| 1 | complete |" in stdout


def test_a_run_that_diverges_before_any_evaluation_is_censored_too(tmp_path, monkeypatch):
    # its summary has no evaluation: the search's log line raised on the missing success
    from grpo_robot.trainer import Trainer

    space_file = tmp_path / "space.yaml"
    space_file.write_text(TINY.replace("seeds: [0, 1]", "seeds: [0]"))
    run = Trainer.run

    def diverges_at_once(self):
        summary = run(self)
        return {**summary, "stopped": "error", "error": "3 optimizer steps in a row were non-finite", "diverged": True,
                "eval": None, "best_eval": None, "target": {"target": 0.3, "reached": False}}  # fmt: skip

    monkeypatch.setattr(Trainer, "run", diverges_at_once)
    code, stdout, stderr = run_cli(str(space_file), "--out", str(tmp_path / "study"), "--trials", "1")
    assert code == 0, stderr
    assert "trial 0 seed 0: not reached, cost" in stdout and "no evaluation, diverged" in stdout
    (rec,) = [json.loads(line) for line in (tmp_path / "study" / "runs.jsonl").read_text().splitlines()]
    assert rec["final_success"] is None and rec["cost"] >= 6000 and "| 0 | complete |" in stdout


def test_sigterm_outside_a_run_leaves_the_trial_failed_in_one_line(tmp_path, monkeypatch):
    # what timeout, a scheduler or docker stop send: the trial stayed "running" in the study for good
    import os
    import signal
    import time

    space_file = tmp_path / "space.yaml"
    space_file.write_text(TINY)

    def terminated(space, config, run_dir):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)

    monkeypatch.setattr(tune, "train_one", terminated)
    before = signal.getsignal(signal.SIGTERM)
    code, _, stderr = run_cli(str(space_file), "--out", str(tmp_path / "study"), "--trials", "1")
    assert code == 143 and stderr.strip() == ("error: the search stopped (SIGTERM); the trial in progress is left "
                                              "failed, run the command again to go on")  # fmt: skip
    assert signal.getsignal(signal.SIGTERM) == before
    code, stdout, _ = run_cli(str(space_file), "--out", str(tmp_path / "study"), "--report")
    assert code == 0 and "| 0 | fail |" in stdout and "running" not in stdout


def test_runs_without_their_study_are_not_logged_over(tmp_path, monkeypatch):
    # a study.db deleted: trial 0 of a new study wrote into the old trial_000 (two event files, two "trial 0")
    space_file = tmp_path / "space.yaml"
    space_file.write_text(TINY)
    monkeypatch.setattr(tune, "train_one", lambda space, config, run_dir: {
        "seed": config.seed, "cost": 1.0, "reached": True, "final_success": 0.5, "seconds": 1.0, "stopped": "target"})
    (tmp_path / "study" / "trial_000" / "seed_0").mkdir(parents=True)
    code, _, stderr = run_cli(str(space_file), "--out", str(tmp_path / "study"), "--trials", "1")
    assert code == 2 and stderr.strip() == (f"error: {tmp_path / 'study'} holds runs of a search whose study "
                                            "(study.db) is not there: start a new --out, or put the study back")


def test_a_study_refuses_new_choices_or_another_task_version(tmp_path, monkeypatch):
    space_file = tmp_path / "space.yaml"
    space_file.write_text(TINY)
    monkeypatch.setattr(tune, "train_one", lambda space, config, run_dir: {
        "seed": config.seed, "cost": 1.0, "reached": True, "final_success": 0.5, "seconds": 1.0, "stopped": "target"})
    tune.run(tune.load_space(space_file), tmp_path / "study", 1, log=lambda line: None)
    space_file.write_text(TINY.replace("choices: [0.3, 1.0]", "choices: [0.3, 1.0, 2.0]"))
    code, _, stderr = run_cli(str(space_file), "--out", str(tmp_path / "study"), "--trials", "2")
    assert code == 2 and stderr.strip() == (
        f"error: {tmp_path / 'study'} holds trials that drew policy.init_std from [0.3, 1.0], and {space_file} offers "
        "[0.3, 1.0, 2.0]; a study keeps a categorical's choices: start a new --out (or keep the list and narrow it "
        "with when:)")  # Optuna's own traceback, in this trial and every one after  # fmt: skip
    space_file.write_text(TINY.replace('overrides: [', 'overrides: ["env.task=Reach-v0", '))
    code, _, stderr = run_cli(str(space_file), "--out", str(tmp_path / "study"), "--trials", "2")
    assert code == 2 and stderr.startswith(f"error: {tmp_path / 'study'} holds a study scored with task='Reach-v1', "
                                           f"and {space_file} has task='Reach-v0'")  # fmt: skip


def test_a_curriculums_easier_starts_are_no_measure_of_a_censored_run():
    assert tune.own_starts_success({"charts/train_success": 0.8, "charts/difficulty": 0.5}) is None
    assert tune.own_starts_success({"charts/train_success": 0.25, "charts/difficulty": 1.0}) == 0.25
    assert tune.own_starts_success({"charts/train_success": 0.25}) == 0.25  # no curriculum


def test_whole_number_bounds_on_a_float_key_search_floats(tmp_path):
    space_file = tmp_path / "space.yaml"
    space_file.write_text(TINY.replace("  policy.init_std: {choices: [0.3, 1.0]}",
                                       "  algo.entropy_coef: {low: 0, high: 1}"))  # fmt: skip
    params = {p.key: p for p in tune.load_space(space_file).params}
    assert (params["algo.entropy_coef"].low, params["algo.entropy_coef"].high) == (0.0, 1.0)
    assert isinstance(params["algo.entropy_coef"].low, float)  # it drew only 0 and 1
    assert isinstance(params["algo.epochs"].low, int)  # an int key stays whole


def test_an_enqueued_trial_runs_the_given_values_and_bad_ones_are_one_line(tmp_path):
    space_file = tmp_path / "space.yaml"
    space_file.write_text(TINY.replace("seeds: [0, 1]", "seeds: [0]"))
    out = tmp_path / "study"
    code, _, stderr = run_cli(str(space_file), "--out", str(out), "--trials", "1",
                              "--enqueue", "algo.lr=0.002", "policy.init_std=1.0")  # fmt: skip
    assert code == 0, stderr
    (run,) = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert run["params"]["algo.lr"] == 0.002 and run["params"]["policy.init_std"] == 1.0
    assert 1 <= run["params"]["algo.epochs"] <= 3  # drawn
    for bad, message in [("algo.lr=0.5", r"algo.lr must be in \[0.0001, 0.01\]"),
                         ("policy.init_std=0.5", r"must be in \[0.3, 1.0\]"),
                         ("algo.gamma=0.9", "one of the searched params"), ("algo.lr", "KEY=VALUE"),
                         ("algo.epochs=2.5", r"algo.epochs must be a whole number in \[1, 3\]")]:  # fmt: skip
        code, _, stderr = run_cli(str(space_file), "--out", str(out), "--trials", "2", "--enqueue", bad)
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and re.search(message, lines[0]), stderr
    assert len((out / "runs.jsonl").read_text().splitlines()) == 1  # nothing ran
    # values a trial ran already, or a study that holds --trials: said, not silently skipped or left waiting
    code, stdout, _ = run_cli(str(space_file), "--out", str(out), "--trials", "1", "--enqueue", "algo.lr=0.002")
    assert code == 0 and "--enqueue: trial 0 ran these values already; nothing enqueued" in stdout
    code, stdout, _ = run_cli(str(space_file), "--out", str(out), "--trials", "1", "--enqueue", "algo.lr=0.003")
    assert code == 0 and "--enqueue: the study holds --trials=1 already; nothing enqueued" in stdout
    assert "waiting" not in stdout and len((out / "runs.jsonl").read_text().splitlines()) == 1


def test_a_draw_the_config_refuses_trains_nothing_and_the_search_goes_on(tmp_path, monkeypatch):
    """Params valid alone can clash (a std cap above the start std): the draw is refused before any
    run, left out of the trial count and of runs.jsonl, and the search draws again; one that keeps
    drawing refused configs stops in one line."""
    space_file = tmp_path / "space.yaml"
    one_seed = TINY.replace("seeds: [0, 1]", "seeds: [0]")
    space_file.write_text(one_seed + "  algo.std_anneal.final: {choices: [null, 0.4]}\n")
    out = tmp_path / "study"
    code, stdout, stderr = run_cli(str(space_file), "--out", str(out), "--trials", "1", "--enqueue",
                                   "policy.init_std=0.3", "algo.std_anneal.final=0.4", "algo.lr=0.002", "algo.epochs=1")
    assert code == 0, stderr
    assert "trial 0: not run, the config refuses the draw: algo.std_anneal.final=0.4 is invalid" in stdout
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert runs and {r["trial"] for r in runs} == {runs[0]["trial"]} != {0}  # one trial ran, not the refused one
    assert not (out / "trial_000").exists() and "| 0 | refused | - |" in stdout
    always = one_seed.replace("choices: [0.3, 1.0]", "choices: [0.3]")
    space_file.write_text(always + "  algo.std_anneal.final: {choices: [0.4]}\n")
    monkeypatch.setattr(tune, "MAX_REFUSED_DRAWS", 3)
    code, _, stderr = run_cli(str(space_file), "--out", str(tmp_path / "never"), "--trials", "1")
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "refused 3 draws in a row" in lines[0], stderr


def test_a_param_moved_out_of_the_space_keeps_its_column_and_the_fixed_values_tell_trials_apart(tmp_path):
    space_file = tmp_path / "space.yaml"
    space_file.write_text(TINY.replace("seeds: [0, 1]", "seeds: [0]"))
    out = tmp_path / "study"
    assert run_cli(str(space_file), "--out", str(out), "--trials", "1", "--enqueue", "policy.init_std=1.0")[0] == 0
    # the next trials hold policy.init_std fixed instead of searching it
    space_file.write_text(TINY.replace("seeds: [0, 1]", "seeds: [0]").replace('"algo.groups_per_iter=8"]',
                          '"algo.groups_per_iter=8", "policy.init_std=0.3"]').replace(
                          "  policy.init_std: {choices: [0.3, 1.0]}\n", ""))  # fmt: skip
    code, stdout, stderr = run_cli(str(space_file), "--out", str(out), "--trials", "2")
    assert code == 0, stderr
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert runs[1]["overrides"][-1] == "policy.init_std=0.3" and "policy.init_std" not in runs[1]["params"]
    config = yaml.safe_load((out / "trial_001" / "seed_0" / "resolved_config.yaml").read_text())
    assert config["policy"]["init_std"] == 0.3
    report = run_cli(str(space_file), "--out", str(out), "--report")[1]
    assert "| algo.lr | algo.epochs | policy.init_std | fixed |" in report
    rows = {int(line.split("|")[1]): line for line in report.splitlines() if re.match(r"\| \d+ \|", line)}
    first = "policy.hidden_sizes=[32,32] algo.group_size=4 algo.groups_per_iter=8"
    assert rows[0].endswith(f"| 1 | {first} |")
    assert rows[1].endswith(f"| - | {first} policy.init_std=0.3 |")


@pytest.mark.parametrize("prune_after,pruned_at", [(1, [0]), (2, [1]), (None, [])])
def test_prune_after_sets_the_first_seed_at_which_a_trial_can_be_pruned(tmp_path, monkeypatch, prune_after, pruned_at):
    """Trials 0-3 cost 1 on every seed; trial 4 costs 100 on every seed, worse than their median:
    the pruner stops it after seed `prune_after` (0-based: the seed index - 1), or never (null)."""
    space_file = tmp_path / "space.yaml"
    three = TINY.replace("seeds: [0, 1]", "seeds: [0, 1, 2]")
    space_file.write_text(three + ("prune_after: null\n" if prune_after is None else f"prune_after: {prune_after}\n"))
    space = tune.load_space(space_file)
    assert space.prune_after == prune_after
    seen: list[tuple[int, int]] = []

    def fake_train(space, config, run_dir):
        trial = int(run_dir.parent.name.split("_")[1])
        seen.append((trial, config.seed))
        return {"seed": config.seed, "cost": 100.0 if trial == 4 else 1.0, "reached": True, "final_success": 0.5,
                "seconds": 1.0}  # fmt: skip

    monkeypatch.setattr(tune, "train_one", fake_train)
    st = tune.run(space, tmp_path / "study", 5, log=lambda line: None)
    assert [t.state.name for t in st.trials[:4]] == ["COMPLETE"] * 4
    last_seed = [seed for trial, seed in seen if trial == 4]
    if pruned_at:
        assert st.trials[4].state.name == "PRUNED" and last_seed == list(range(pruned_at[0] + 1))
    else:
        assert st.trials[4].state.name == "COMPLETE" and last_seed == [0, 1, 2]


def test_a_lucky_first_seed_no_longer_keeps_a_trial_from_being_pruned(tmp_path, monkeypatch):
    """Trials 0-3 cost 2 on each seed; trial 4 costs 1, then 10: its mean after seed 1 (5.5) is
    worse than the median (2). Optuna's median pruner compared its best mean (1.0) and let it run."""
    space_file = tmp_path / "space.yaml"
    space_file.write_text(TINY.replace("seeds: [0, 1]", "seeds: [0, 1, 2]"))
    space = tune.load_space(space_file)

    def fake_train(space, config, run_dir):
        trial = int(run_dir.parent.name.split("_")[1])
        cost = (1.0 if config.seed == 0 else 10.0) if trial == 4 else 2.0
        return {"seed": config.seed, "cost": cost, "reached": True, "final_success": 0.5, "seconds": 1.0}

    monkeypatch.setattr(tune, "train_one", fake_train)
    st = tune.run(space, tmp_path / "study", 5, log=lambda line: None)
    assert st.trials[4].state.name == "PRUNED" and st.trials[4].intermediate_values == {0: 1.0, 1: 5.5}


def test_the_report_never_names_a_pruned_trial_best(tmp_path, monkeypatch):
    """Trials 0-3 cost 10 on seed 0 and 40 on seed 1; trial 4 costs 12 on seed 0 and is pruned
    there. Optuna keeps its partial mean (12) as its value, and the report ranked it first and named
    it the best, ahead of every trial that ran both seeds (25)."""
    space_file = tmp_path / "space.yaml"
    space_file.write_text(TINY)
    space = tune.load_space(space_file)

    def fake_train(space, config, run_dir):
        trial = int(run_dir.parent.name.split("_")[1])
        cost = 12.0 if trial == 4 else (10.0 if config.seed == 0 else 40.0)
        return {"seed": config.seed, "cost": cost, "reached": True, "final_success": 0.5, "seconds": 1.0}

    monkeypatch.setattr(tune, "train_one", fake_train)
    st = tune.run(space, tmp_path / "study", 5, log=lambda line: None)
    assert st.trials[4].state.name == "PRUNED" and st.trials[4].value == 12.0  # Optuna's partial value
    report = tune.report(space, tmp_path / "study")
    rows = [line for line in report if re.match(r"\| \d+ \|", line)]
    assert [int(r.split("|")[1]) for r in rows][-1] == 4 and "| pruned | 0.00 (1 of 2 seeds) |" in rows[-1], rows
    assert report[-1].startswith("best: trial 0: "), report[-1]


def test_a_study_scored_otherwise_is_refused(tmp_path, monkeypatch):
    space_file = tmp_path / "space.yaml"
    space_file.write_text(TINY)
    monkeypatch.setattr(tune, "train_one", lambda space, config, run_dir: {
        "seed": config.seed, "cost": 1.0, "reached": True, "final_success": 0.5, "seconds": 1.0})
    tune.run(tune.load_space(space_file), tmp_path / "study", 1, log=lambda line: None)
    space_file.write_text(TINY.replace("target: 0.3", "target: 0.5"))
    code, _, stderr = run_cli(str(space_file), "--out", str(tmp_path / "study"), "--trials", "2")
    assert code == 2 and stderr.startswith(f"error: {tmp_path / 'study'} holds a study scored with target=0.3, and "
                                           f"{space_file} has target=0.5; its values would not compare")  # fmt: skip


def test_more_bad_spaces_and_enqueues_are_one_line(tmp_path):
    space_file = tmp_path / "space.yaml"
    for text, message in [
        (TINY.replace('overrides: [', 'overrides: ["eval_seeds=7", '), "overrides sets eval_seeds, which the space "
         "sets itself: use the space's eval_seeds"),  # it was replaced by the space's 20, silently
        (TINY.replace("target: 0.3", "target: 9e-1"), "target='9e-1' is invalid: must be a number > 0"),  # a crash
        # a searched seed or budget trained another value than the record named, silently
        (TINY + "  seed: {choices: [0, 1]}\n", "params.seed is not a setting to search: use the space's seeds"),
        (TINY + "  max_env_steps: {choices: [1000, 2000]}\n", "params.max_env_steps is not a setting to search"),
        (TINY.replace('overrides: [', 'overrides: ["resume=true", '), "overrides sets resume: every trial's seeds"),
        (TINY.replace('overrides: [', 'overrides: ["algo.lr=0.001", '),
         "overrides fixes algo.lr, which params searches; keep it in one of the two"),  # the report's line had both
    ]:
        space_file.write_text(text)
        with pytest.raises(ValueError, match=re.escape(message)):
            tune.load_space(space_file)
    conditional = TINY + "  algo.lr_schedule: {choices: [constant, adaptive]}\n" \
        "  algo.desired_kl: {low: 0.005, high: 0.05, when: {algo.lr_schedule: adaptive}}\n"  # fmt: skip
    space_file.write_text(conditional)
    space = tune.load_space(space_file)
    assert tune.parse_enqueue(space, ["algo.lr=1e-3"]) == {"algo.lr": 0.001}  # refused as a string before
    with pytest.raises(ValueError, match=r"algo.desired_kl is searched only when algo.lr_schedule in \['adaptive'\]: "
                                         r"enqueue algo.lr_schedule too"):  # it could be drawn away, unused
        tune.parse_enqueue(space, ["algo.desired_kl=0.02"])
    # a condition on a param that was not drawn does not hold (None was "in" a null choice)
    chained = tune.Param("c", choices=(1, 2), when=(("b", (None,)),))
    assert not chained.active({"a": "constant"}) and chained.active({"b": None})
    # a whole-number range on a float key whose preset value is null is searched as floats
    space_file.write_text(TINY.replace("  policy.init_std: {choices: [0.3, 1.0]}",
                                       "  policy.max_std: {low: 1, high: 2}"))  # fmt: skip
    params = {p.key: p for p in tune.load_space(space_file).params}
    assert isinstance(params["policy.max_std"].low, float)


def test_a_record_cut_short_by_a_kill_leaves_the_next_one_readable(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text('{"trial": 0}\n{"trial": 1, "co')  # a kill in the middle of a write
    tune._append_line(path, json.dumps({"trial": 2}))
    lines = path.read_text().splitlines()
    assert lines[0] == '{"trial": 0}' and json.loads(lines[2]) == {"trial": 2}


def test_a_space_whose_every_draw_is_valid_loads_though_the_preset_clashes_with_a_bound(tmp_path):
    """Each bound was checked with the other params at the preset's values: a std cap of 0.7 clashes
    with the preset's start std 0.5, which the search never trains (it draws 0.8-1.0), and the
    space was refused. The other params now sit at values they can draw; a real clash still fails."""
    space_file = tmp_path / "space.yaml"
    space = TINY.replace("policy.init_std: {choices: [0.3, 1.0]}", "policy.init_std: {low: 0.8, high: 1.0}")
    space_file.write_text(space + "  algo.std_anneal.final: {low: 0.4, high: 0.7}\n")
    assert [p.key for p in tune.load_space(space_file).params][-1] == "algo.std_anneal.final"
    space_file.write_text(space + "  algo.std_anneal.final: {low: 0.4, high: 0.9}\n")  # 0.9 above a draw of 0.8
    with pytest.raises(ValueError, match=r"algo.std_anneal.final=0.9 is invalid"):
        tune.load_space(space_file)


def test_the_report_says_when_the_best_trial_ran_without_its_fixed_overrides_recorded(tmp_path, monkeypatch):
    """A study started before trials recorded the space's fixed overrides: its best line named the
    searched values alone and read as the whole command."""
    space_file = tmp_path / "space.yaml"
    space_file.write_text(TINY)
    space = tune.load_space(space_file)
    monkeypatch.setattr(tune, "train_one", lambda space, config, run_dir: {
        "seed": config.seed, "cost": 5.0 - int(run_dir.parent.name.split("_")[1]), "reached": True,
        "final_success": 0.5, "seconds": 1.0})  # fmt: skip
    tune.run(space, tmp_path / "study", 2, log=lambda line: None)
    report = tune.report(space, tmp_path / "study")
    assert report[-1].startswith("best: trial 1: ") and report[-1].endswith(" ".join(space.overrides)), report[-1]
    with contextlib.closing(sqlite3.connect(tmp_path / "study" / "study.db")) as db, db:  # as an older study holds it
        db.execute("DELETE FROM trial_user_attributes WHERE key = 'overrides' AND trial_id = "
                   "(SELECT trial_id FROM trials WHERE number = 1)")  # fmt: skip
    report = tune.report(space, tmp_path / "study")
    assert "not recorded" in next(line for line in report if line.startswith("| 1 |"))
    assert report[-2].startswith("best: trial 1: ") and not report[-2].endswith(" ".join(space.overrides))
    assert report[-1] == ("(trial 1 ran before trials recorded the space's fixed overrides, so the line above may "
                          f"lack some; the space fixes now: {' '.join(space.overrides)})")


def test_a_space_searches_a_preset_of_your_own(tmp_path):
    """README (Tune the hyperparameters): a preset outside the package, through hydra.searchpath in
    the space's overrides; its values and the trial's reach the run's config, and its bad value is
    refused when the space loads."""
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    preset = tmp_path / "conf" / "experiment" / "my_reach.yaml"
    preset.write_text("# @package _global_\ndefaults:\n  - override /env: reach\nalgo:\n  group_size: 4\n")
    space_file = tmp_path / "space.yaml"
    space_file.write_text(TINY.replace("experiment: reach_from_scratch", "experiment: my_reach").replace(
        '"algo.group_size=4", ', f'"hydra.searchpath=[file://{tmp_path / "conf"}]", '))  # fmt: skip
    space = tune.load_space(space_file)
    cfg = space.trial_config({"algo.lr": 0.002, "algo.epochs": 2, "policy.init_std": 0.3}, 1)
    assert (cfg.env.task, cfg.algo.group_size, cfg.algo.lr, cfg.seed) == ("Reach", 4, 0.002, 1)
    preset.write_text(preset.read_text().replace("group_size: 4", "group_size: 0"))
    with pytest.raises(ValueError, match=re.escape("algo.group_size=0 is invalid: must be >= 1")):
        tune.load_space(space_file)


def test_config_dir_searches_a_preset_of_your_own_as_train_py_finds_it(tmp_path):
    """`tune.py --config-dir DIR`, as `train.py --config-dir DIR`: the folder's preset composes every
    run, each trial records the search path among its fixed overrides (the report's command line
    needs it), and a missing folder or a second search path is one line before any work."""
    (tmp_path / "mine" / "experiment").mkdir(parents=True)
    (tmp_path / "mine" / "experiment" / "my_reach.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /env: reach\nalgo:\n  group_size: 4\n  epochs: 5\n")
    space_file = tmp_path / "space.yaml"
    space_file.write_text(TINY.replace("experiment: reach_from_scratch", "experiment: my_reach").replace(
        '"algo.group_size=4", ', ""))  # fmt: skip
    with pytest.raises(ValueError, match="my_reach"):  # not on the search path without it
        tune.load_space(space_file)
    space = tune.load_space(space_file, tmp_path / "mine")
    assert space.overrides[-1] == f"hydra.searchpath=['file://{(tmp_path / 'mine').resolve()}']"
    cfg = space.trial_config({"algo.lr": 0.002, "algo.epochs": 2, "policy.init_std": 0.3}, 1)
    assert (cfg.env.task, cfg.algo.group_size, cfg.algo.epochs, cfg.algo.lr) == ("Reach", 4, 2, 0.002)
    code, out, err = run_cli(str(space_file), "--config-dir", str(tmp_path / "mine"), "--out", str(tmp_path / "run"),
                             "--trials", "1", "--enqueue", "algo.lr=0.002", "algo.epochs=1", "policy.init_std=0.3")
    assert code == 0, err
    records = [json.loads(line) for line in (tmp_path / "run" / "runs.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(r["overrides"] == list(space.overrides) for r in records)
    best = out.strip().splitlines()[-1]  # the best trial's command line, the folder in it
    assert best.startswith("best: trial 0: experiment=my_reach ") and best.endswith(f" {space.overrides[-1]}"), best
    code, _, err = run_cli(str(space_file), "-cd", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o"))
    assert code == 2 and err.strip() == (f"error: --config-dir={tmp_path / 'nowhere'} is invalid: must be a "
                                         "directory of config groups (e.g. experiment/<name>.yaml)"), err
    for prefix in ("", "+", "++"):  # the space's own search path, however it is added
        both = tmp_path / "both.yaml"
        both.write_text(TINY.replace('"algo.group_size=4", ',
                                     f'"{prefix}hydra.searchpath=[file://{tmp_path / "mine"}]", '))  # fmt: skip
        code, _, err = run_cli(str(both), "--config-dir", str(tmp_path / "mine"), "--out", str(tmp_path / "o"))
        assert code == 2 and len(err.strip().splitlines()) == 1 and "give one of them" in err, (prefix, err)
    assert not (tmp_path / "o").exists()


def test_a_bad_trial_count_or_a_study_db_of_another_kind_is_one_line(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(TINY)
    code, _, err = run_cli(str(space), "--out", str(tmp_path / "a"), "--trials", "0")
    assert (code, err.strip()) == (2, "error: --trials=0 is invalid: must be >= 1")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "study.db").write_bytes(b"not a database")
    code, _, err = run_cli(str(space), "--out", str(tmp_path / "b"), "--trials", "1")
    assert (code, err.strip()) == (2, f"error: --out={tmp_path / 'b'}: its study.db is not an SQLite database "
                                      "(a study's)")  # fmt: skip
    assert (tmp_path / "b" / "study.db").read_bytes() == b"not a database" and not (tmp_path / "a").exists()
