"""The printed tables, from given numbers."""

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from grpo_robot.bench import compare, envs
from grpo_robot.bench.markdown import rate_interval, row

ROWS = [
    envs.Row("Reach", 64, 43_411.4, 63_328.0, 6_344.2, 23, 0.9871, 0, 193,
             {"batched": 0.004, "limit": 0.012, "sync": 0.02}, 0.0234, 0),
    envs.Row("PushCube", 256, 25_691.0, 28_624.0, 4_745.0, 3, 0.998, 2, 37,
             {"batched": 0.01, "limit": 0.0, "sync": 0.31}, 0.5, 3),
]  # fmt: skip
INFO = {"cpu": "AMD EPYC", "cores": 2, "logical_cores": 4, "os": "Linux-6", "python": "3.11.7", "mujoco": "3.3.7",
        "numpy": "2.4.6", "gymnasium": "1.4.0"}  # fmt: skip


def test_markdown_pieces():
    assert row("a", 1, 2.5) == "| a | 1 | 2.5 |"
    assert rate_interval(0.25, (0.1, 0.4)) == "25% [10%, 40%]"
    assert rate_interval(0.985, (0.957, 0.995), decimals=1) == "98.5% [95.7%, 99.5%]"


def test_env_throughput_tables():
    assert envs.table(ROWS).splitlines()[2:] == [
        "| Reach | 64 | 43,411 | 63,328 | 0.69 | 6,344 | 6.8 |",
        "| PushCube | 256 | 25,691 | 28,624 | 0.90 | 4,745 | 5.4 |",
    ]
    assert envs.details(ROWS).splitlines()[2:] == [
        "| Reach | 64 | 23 | 0.987 | 0 | 193 | 0% / 1% / 2% | 0.02 | 0 |",
        "| PushCube | 256 | 3 | 0.998 | 2 | 37 | 1% / 0% / 31% | 0.50 | 3 |",
    ]


def test_env_throughput_header():
    s = envs.Settings(tasks=["Reach"], worlds=[64], min_time=2.0, repeats=3, nthread=2)
    assert envs.header(s, 0.06, 222.3, INFO).splitlines() == [
        "machine: AMD EPYC, 4 logical cores (2 usable), 2 threads used",
        "os: Linux-6",
        "python 3.11.7, mujoco 3.3.7, numpy 2.4.6, gymnasium 1.4.0",
        "settings: seed 0, best of 3 repeats, ~2 s per repeat, repeats redone above 0.1 cores of other load "
        "(budget 120 s)",
        "run took 222 s wall; other processes used 0.1 CPU s of the 889 available",
    ]
    quick = envs.Settings(["Reach"], [16], 0.1, 1, 1, seed=3, episodes=1, max_foreign_load=0.5, max_wait=5)
    lines = envs.header(quick, None, 4.0, INFO).splitlines()
    assert lines[3] == (
        "settings: seed 3, best of 1 repeats, ~0.1 s per repeat, 1 episodes per repeat, "
        "repeats redone above 0.5 cores of other load (budget 5 s)"
    )
    assert lines[4] == "run took 4 s wall; other processes used an unknown amount of CPU of the 16 available"


def parse_env_options(*argv):
    parser = argparse.ArgumentParser()
    envs.add_arguments(parser)

    def error(message):
        raise ValueError(message)

    return envs.settings_from_args(parser.parse_args(argv), error)


def test_env_options_quick_fills_only_what_was_not_given():
    quick = parse_env_options("--quick", "--worlds", "8", "--tasks", "Reach")
    assert (quick.tasks, quick.worlds, quick.min_time, quick.repeats, quick.episodes) == (["Reach"], [8], 0.1, 1, 1)
    full = parse_env_options("--repeats", "5")
    assert (full.worlds, full.min_time, full.repeats, full.episodes, full.sync_steps) == ([64, 256], 2.0, 5, None, None)
    assert full.tasks == list(envs.TASKS)
    with pytest.raises(ValueError, match="--min-time > 0"):
        parse_env_options("--min-time", "0")


def test_comparison_table_and_calls_into_one_folder(tmp_path, capsys):
    """The table says how many env steps each row's runs took (a budget ends with the iteration
    that reaches it: one DAPO iteration spent 204,800 of a 20,000 budget). A second call into the
    same --out logged over the first one's runs (each TensorBoard point twice) and dropped its
    rows from results.json; now it is refused if its runs are there, and other rows add up."""

    results = [
        {"row": "gaussian", "seed": 0, "seconds": 60.0, "successes": 0, "n": 200, "env_steps": 20480},
        {"row": "gaussian", "seed": 1, "seconds": 120.0, "successes": 150, "n": 200, "env_steps": 20480},
        {"row": "dr_grpo", "seed": 0, "seconds": 90.0, "successes": 100, "n": 200, "env_steps": 204800,
         "overrides": ["algo.advantage=dr_grpo"], "iterations": 12},
    ]
    assert compare.table(results, ["gaussian", "dr_grpo"]).splitlines()[2:] == [
        "| gaussian | `(default)` | **38%** | 0% [0%, 2%] · 75% [69%, 80%] | 20,480 | - | 1.5 |",  # not counted
        "| dr_grpo | `algo.advantage=dr_grpo` | **50%** | 50% [43%, 57%] | 204,800 | 12 | 1.5 |",
    ]
    (tmp_path / "results.json").write_text(json.dumps(results[:2]))
    assert [r["row"] for r in compare.merged(tmp_path / "results.json", results[2:])] == ["gaussian", "gaussian",
                                                                                          "dr_grpo"]  # fmt: skip
    (tmp_path / "dapo-seed0").mkdir()
    (tmp_path / "dapo-seed0" / "summary.json").write_text("{}")
    script = Path(__file__).parents[1] / "scripts" / "compare_algorithms.py"
    spec = importlib.util.spec_from_file_location("compare_script", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for argv, message in [(["--rows", "dapo", "--seeds", "0"], "holds runs already (dapo-seed0)"),
                          (["--env-steps", "0"], "--env-steps=0 is invalid: must be >= 1")]:  # fmt: skip
        sys.argv = [str(script), "--out", str(tmp_path), *argv]
        with pytest.raises(SystemExit) as code:
            module.main()
        assert code.value.code == 2 and message in capsys.readouterr().err


def test_a_variant_row_is_the_default_job_with_its_defining_settings_alone():
    """compare_algorithms.py's Dr. GRPO, DAPO and RLOO rows: `algo=<name>` dropped the default job's
    searched settings (lr, group sizes, epochs, the start curriculum), so the rows compared untuned
    variants against a tuned GRPO. Each now changes only what its preset file sets."""
    from grpo_robot.cli import compose_train_config
    from grpo_robot.config import config_dict
    from grpo_robot.resume import flatten

    base = flatten(config_dict(compose_train_config()))
    for name, keys in [("dr_grpo", {"algo.advantage", "algo.aggregation"}),
                       ("dapo", {"algo.aggregation", "algo.clip.low", "algo.clip.high",  # low: null (= eps, 0.2) -> 0.2
                                "algo.dynamic_sampling.enabled"}),
                       ("rloo", {"algo.advantage"})]:  # fmt: skip
        variant = flatten(config_dict(compose_train_config(*compare.ROWS[name])))
        changed = {k for k in base if base[k] != variant[k]}
        assert changed == keys, (name, changed)
        preset = flatten(config_dict(compose_train_config(f"algo={name}")))
        assert all(variant[k] == preset[k] for k in changed)  # the values of the variant's own preset
        assert base["algo.curriculum.start"] == variant["algo.curriculum.start"] != preset["algo.curriculum.start"]


def test_a_stopped_comparison_keeps_the_runs_it_finished(tmp_path, capsys, monkeypatch):
    """SIGTERM during a run of compare_algorithms.py gave a traceback (the stopped run has no final
    evaluation), and the figures of the runs before it, written only at the end, were lost."""
    import grpo_robot.trainer

    class StoppedRun:  # a Trainer whose run a signal ends before its budget
        def __init__(self, cfg, run_dir):
            self.last_eval = None

        def run(self):
            return {"stopped": "signal", "signal": "SIGTERM", "env_steps": 10}

        def close(self):
            pass

    monkeypatch.setattr(grpo_robot.trainer, "Trainer", StoppedRun)
    with pytest.raises(compare.Interrupted, match="gaussian-seed0 ended by SIGTERM") as err:
        compare.run("gaussian", 0, 1000, 10, tmp_path)
    assert err.value.signal == "SIGTERM"
    done = {"row": "gaussian", "seed": 0, "overrides": [], "env_steps": 1000, "seconds": 1.0, "successes": 3, "n": 10}

    def run(row, seed, env_steps, n_eval, out, *rest):
        if seed == 1:
            raise compare.Interrupted(f"{compare.run_dir(out, row, seed)} ended by SIGTERM", "SIGTERM")
        return done

    monkeypatch.setattr(compare, "run", run)
    script = Path(__file__).parents[1] / "scripts" / "compare_algorithms.py"
    spec = importlib.util.spec_from_file_location("compare_script", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", [str(script), "--out", str(tmp_path / "out"), "--rows", "gaussian"])
    assert module.main() == 143
    assert json.loads((tmp_path / "out" / "results.json").read_text()) == [done]
    assert capsys.readouterr().err.startswith(f"error: the comparison stopped: {tmp_path / 'out' / 'gaussian-seed1'} "
                                              "ended by SIGTERM; 1 runs of this call are in")  # fmt: skip


def test_variants_of_ones_own_are_rows_checked_before_any_run(tmp_path, capsys, monkeypatch):
    """compare_algorithms.py compared its six built-in rows only: DAPO's three changes could not be
    told apart without editing the script, and a preset of one's own (--config-dir) had no way in.
    A --variant is a row built from overrides and rows' names; every row is composed and validated
    before the first run trains."""
    assert compare.variant_rows([["no_ds", "dapo", "algo.dynamic_sampling.enabled=false"],
                                 ["no_ds_lr", "no_ds", "algo.lr=1e-3"]]) == {  # fmt: skip
        "no_ds": [*compare.ROWS["dapo"], "algo.dynamic_sampling.enabled=false"],
        "no_ds_lr": [*compare.ROWS["dapo"], "algo.dynamic_sampling.enabled=false", "algo.lr=1e-3"],
    }
    for specs, message in [([["dapo", "algo.lr=1e-3"]], "--variant dapo: the name is taken (by a built-in row)"),
                           ([["a", "x=1"], ["a", "y=1"]], "--variant a: the name is taken (by an earlier --variant)"),
                           ([["../up", "x=1"]], "--variant ../up: the name must match"),
                           ([["a"]], "--variant a needs overrides after its name"),
                           ([["a", "dapoo"]], "--variant a: 'dapoo' is neither an override")]:  # fmt: skip
        with pytest.raises(ValueError, match=re.escape(message)):
            compare.variant_rows(specs)
    # DAPO without dynamic sampling is DAPO's config with that one key changed
    from grpo_robot.cli import compose_train_config

    no_ds = compose_train_config(*compare.variant_rows([["v", "dapo", "algo.dynamic_sampling.enabled=false"]])["v"])
    assert (no_ds.algo.dynamic_sampling.enabled, no_ds.algo.clip.high, no_ds.algo.aggregation) == (False, 0.28,
                                                                                                    "token-mean")

    presets = tmp_path / "presets" / "algo"
    presets.mkdir(parents=True)
    (presets / "mine.yaml").write_text("defaults:\n  - grpo_from_scratch\n  - _self_\nlr: 0.00123\n")
    calls = []

    def run(row, seed, env_steps, n_eval, out, row_overrides, extra):
        cfg = compose_train_config(*row_overrides, *extra)
        calls.append((row, seed, row_overrides, cfg.algo.lr))
        return {"row": row, "seed": seed, "overrides": list(row_overrides), "env_steps": env_steps, "seconds": 6.0,
                "successes": 1, "n": n_eval, "iterations": 3}  # fmt: skip

    monkeypatch.setattr(compare, "run", run)
    script = Path(__file__).parents[1] / "scripts" / "compare_algorithms.py"
    spec = importlib.util.spec_from_file_location("compare_script", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    base = [str(script), "--out", str(tmp_path / "out"), "--seeds", "0", "--eval-seeds", "2", "--config-dir",
            str(tmp_path / "presets")]
    monkeypatch.setattr(sys, "argv", [*base, "--variant", "mine", "algo=mine"])
    assert module.main() == 0
    default_lr = compose_train_config().algo.lr
    assert calls == [("gaussian", 0, [], default_lr), ("mine", 0, ["algo=mine"], 0.00123)]  # gaussian: the default
    assert "| mine | `algo=mine` | **50%** |" in capsys.readouterr().out
    calls.clear()
    monkeypatch.setattr(sys, "argv", [*base[:1], "--out", str(tmp_path / "alone"), "--seeds", "0", "--rows",
                                      "--variant", "v", "algo.lr=1e-3"])  # fmt: skip
    assert module.main() == 0 and [c[0] for c in calls] == ["v"]  # `--rows` with no name: the variants alone
    calls.clear()
    # checked as scripts/train.py checks a command line: the same one-line messages
    for argv, message in [(["--variant", "bad", "dapo", "algo.lr=-1"], "algo.lr=-1.0 is invalid: must be in (0, 1]"),
                          (["--variant", "bad", "algo=nope"], "row 'bad' (algo=nope): algo=nope is not an option of "
                           "algo; options: dapo,"),
                          (["--rows", "dapo", "--variant", "v", "algo.nokey=1"],
                           "row 'v' (algo.nokey=1): algo.nokey is not a key of algo; keys: advantage,"),
                          (["--variant", "v", "algo.dynamic_sampling.enabled=1"],
                           "algo.dynamic_sampling.enabled=1 is invalid: must be true or false"),
                          (["--variant", "v", "algo.clip.high=abc"], "algo.clip.high='abc' is invalid: must be a"),
                          (["--variant", "v", "dapo", "seed=3"], "--variant v: seed=3 is set by every run (--seeds)"),
                          (["--variant", "DAPO", "algo.lr=1e-3"], "--variant DAPO: the name is taken (by a built-in"),
                          (["--rows"], "--rows with no name and no --variant: there is nothing to compare"),
                          ]:  # fmt: skip
        monkeypatch.setattr(sys, "argv", [*base[:-2], "--out", str(tmp_path / "out2"), *argv])
        with pytest.raises(SystemExit) as code:
            module.main()
        err = capsys.readouterr().err
        assert code.value.code == 2 and message in err.strip().splitlines()[-1], err  # one line
    assert calls == [] and not (tmp_path / "out2").exists()  # nothing ran, nothing written
    # a dict's new key, which scripts/train.py takes (env.kwargs of a Gymnasium env)
    compare.check_rows({"v": ["env=robosuite_lift", "env.kwargs.control_freq=10"]})


def test_the_refit_comparison_pairs_each_seeds_clones_and_counts_them():
    from grpo_robot.bench.bc_demos import refit_config, refit_pairs, refit_summary

    (record,) = refit_pairs("lift_cube_bc", [1], 8, ["demos.episodes=3", "bc.max_steps=100", "bc.eval_every=20"])
    assert (record["experiment"], record["seed"], record["episodes"]) == ("lift_cube_bc", 1, 3)
    assert record["split"]["steps"] == record["refit"]["steps"] > 0  # the refit ran the steps the split chose
    assert record["split"]["n"] == record["refit"]["n"] == 8
    made = [{"experiment": "a", "seed": s, "split": {"successes": x, "n": 10, "steps": 50},
             "refit": {"successes": y, "n": 10, "steps": k}}
            for s, (x, y, k) in enumerate([(1, 2, 50), (5, 5, 0), (4, 1, 50)])]  # fmt: skip
    assert refit_summary(made)[2] == "| a | 3 | 33.3% | 26.7% | 1 / 1 / 1 | 1 |"
    for experiment, message in [("push_from_scratch", "is not a demo pipeline on a built-in task"),
                                ("fetch_push_bc", "is not a demo pipeline on a built-in task"),
                                ("nope", "experiment=nope is not an option of experiment")]:  # fmt: skip
        with pytest.raises(ValueError, match=message):
            refit_config(experiment, 0)
