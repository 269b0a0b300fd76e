"""The sweep runner's pieces: algorithm entries, run configs, records and the results table."""

from argparse import Namespace
from pathlib import Path

import pytest

from grpo_robot.bench import sweep
from grpo_robot.bench.results import train_table
from grpo_robot.bench.sweep import AlgoSpec, Sweep, parse_algo


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("grpo", AlgoSpec("grpo", "grpo", [])),
        ("dr_grpo", AlgoSpec("dr_grpo", "dr_grpo", [])),
        ("k2=grpo", AlgoSpec("k2", "grpo", [])),
        ("grpo_k10=grpo:algo.epochs=10,algo.minibatches=16",
         AlgoSpec("grpo_k10", "grpo", ["algo.epochs=10", "algo.minibatches=16"])),
        ("lr-3e-4=ppo:algo.lr=3e-4,", AlgoSpec("lr-3e-4", "ppo", ["algo.lr=3e-4"])),
    ],
)  # fmt: skip
def test_good_algorithm_entries(spec, expected):
    assert parse_algo(spec) == expected


@pytest.mark.parametrize(
    "spec", ["", "=grpo", "k2=", "grpo:algo.epochs=2", "k2=grpo:algo.epochs", "a/b=grpo", "k 2=grpo", "k2=gr po"]
)
def test_bad_algorithm_entries_name_the_expected_form(spec):
    with pytest.raises(ValueError) as e:
        parse_algo(spec)
    assert str(e.value) == "expected PRESET or LABEL=PRESET:KEY=VALUE,KEY=VALUE"


@pytest.mark.parametrize(
    "algos, starts, message",
    [
        (["grpo", "bad=grpo:algo.epochs=0"], ["scratch"],
         "--algos 'bad=grpo:algo.epochs=0': algo.epochs=0 is invalid: must be >= 1"),
        (["x=nope"], ["scratch"], "--algos 'x=nope': In 'config': Could not find 'algo/nope'"),
        (["k2=grpo:algo"], ["scratch"], "--algos 'k2=grpo:algo': expected PRESET or LABEL=PRESET:KEY=VALUE,KEY=VALUE"),
        (["grpo"], ["bc"], "--task Reach has no BC preset; --starts bc takes PushCube, LiftCube, PlaceCube"),
    ],
)  # fmt: skip
def test_check_rejects_a_sweep_with_one_line(algos, starts, message):
    with pytest.raises(ValueError) as e:
        sweep.check(Sweep(task="Reach", algos=algos, starts=starts))
    assert str(e.value) == message


def test_run_config_composes_the_entry_on_the_start():
    s = Sweep(task="Reach", target=0.8, eval_every=2, eval_seeds=30, iterations=7, time_limit_min=1.5)
    cfg = sweep.run_config(s, parse_algo("k2=grpo:algo.epochs=2,algo.minibatches=4"), "scratch", 3, None)
    assert (cfg.env.task, cfg.seed, cfg.algo.epochs, cfg.algo.minibatches) == ("Reach", 3, 2, 4)
    assert (cfg.target_success, cfg.eval_every, cfg.eval_seeds, cfg.iterations) == (0.8, 2, 30, 7)
    assert (cfg.time_limit_min, cfg.eval_at_start, cfg.pretrain, cfg.progress) == (1.5, True, False, False)
    bc = sweep.run_config(Sweep(task="LiftCube"), parse_algo("ppo"), "bc", 0, Path("/runs/bc_seed0/bc.pt"))
    assert (bc.env.task, bc.algo.advantage, bc.init_from) == ("LiftCube", "gae", "/runs/bc_seed0/bc.pt")
    # PushCube's pipeline and default job act in the mirror frame; the sweep compares in the world's
    push = sweep.run_config(Sweep(task="PushCube"), parse_algo("grpo"), "bc", 0, Path("/runs/bc_seed0/bc.pt"))
    scratch = sweep.run_config(Sweep(task="PushCube"), parse_algo("grpo"), "scratch", 0, None)
    assert push.policy.mirror is False and scratch.policy.mirror is False


def test_sweep_from_parsed_arguments():
    args = Namespace(command="train", task="Reach", algos=["grpo"], starts=["scratch"], seeds=[4], target=0.5,
                     eval_every=1, eval_seeds=20, iterations=2, time_limit_min=3.0, sb3_steps=0,
                     sb3_eval_every=100, out="runs/x")  # fmt: skip
    s = Sweep.from_args(args)
    assert s == Sweep("Reach", ["grpo"], ["scratch"], [4], 0.5, 1, 20, 2, 3.0, 0, 100, Path("runs/x"))


def summary(env_steps: int, seconds: float, eval_seconds: float, success: float, target: dict) -> dict:
    return {"target": {"target": 0.9, **target}, "iterations": 5, "env_steps": env_steps,
            "seconds": seconds, "eval_seconds": eval_seconds, "eval": {"success_rate": success},
            "machine": {"cpu": "test"}}  # fmt: skip


def hit(env_steps: int, train_seconds: float) -> dict:
    return {"reached": True, "env_steps": env_steps, "train_seconds": train_seconds}


CURVE = {"env_steps": [0, 10], "seconds": [0.0, 1.0], "success": [0.0, 1.0]}


def test_records_and_the_results_table():
    s = Sweep(task="Reach")
    records = [
        sweep.record(s, "scratch", "grpo", 0, summary(2000, 30, 10, 0.9, hit(1000, 10)), CURVE),
        sweep.record(s, "scratch", "grpo", 1, summary(4000, 25, 5, 0.75, hit(3000, 30)), CURVE),
        sweep.record(s, "bc", "k2", 0, summary(1000, 11, 1, 0.5, {"reached": False}), CURVE, "k2=ppo:algo.epochs=2"),
    ]
    assert list(records[2]) == ["task", "start", "algo", "spec", "seed", "target", "iterations", "env_steps",
                                "seconds", "eval_seconds", "final_success", "curve", "machine"]  # fmt: skip
    assert "spec" not in records[0] and records[0]["final_success"] == 0.9 and records[0]["machine"] == {"cpu": "test"}
    assert train_table(records, 0.9).splitlines() == [
        "| start | algorithm | reached 90% | env steps to target (median) | training s to target (median) "
        "| per seed: s to target | final success | training env steps/s |",
        "| --- | --- | ---: | ---: | ---: | --- | --- | ---: |",
        "| bc | k2 | 0/1 | - | - | - | 50% | 100 |",
        "| scratch | grpo | 2/2 | 2,000 | 20 | 10, 30 | 90%, 75% | 150 |",
    ]


def test_the_behaviour_cloned_start_is_made_once_and_is_the_pipelines_clone(tmp_path):
    # `benchmark.py train --starts bc` made it with a Trainer method the trainer no longer has (an AttributeError)
    import json

    from grpo_robot import checkpoint

    path = sweep.bc_checkpoint("LiftCube", 0, tmp_path)
    assert path == tmp_path / "bc_seed0" / "bc.pt"
    ckpt = checkpoint.load(path)
    assert checkpoint.is_bc(ckpt) and ckpt["config"]["env"]["task"] == "LiftCube-v1"
    summary = json.loads((tmp_path / "bc_seed0" / "summary.json").read_text())
    assert summary["iterations"] == 0 and summary["error"] is None
    assert 0.0 <= summary["initial_policy"]["eval"]["success_rate"] <= 1.0
    made = path.stat().st_mtime_ns
    assert sweep.bc_checkpoint("LiftCube", 0, tmp_path) == path and path.stat().st_mtime_ns == made  # shared
