"""Evaluation curves from TensorBoard events, and the table of finished runs built on them."""

import json
from pathlib import Path

import yaml
from torch.utils.tensorboard import SummaryWriter

from grpo_robot.bench.curves import EVAL_TAG, RUN_TIME_TAG, eval_curve, first_reaching, read_scalars
from grpo_robot.bench.report import report

MACHINE = {"cpu": "Test CPU", "cores": 2, "gpu": None, "python": "3.11", "torch": "2", "mujoco": "3", "numpy": "1"}


def write_events(run_dir, evals, first_wall_time=1000.0):
    """A loss logged first, then `evals`: (env steps, wall time, success)."""
    writer = SummaryWriter(str(run_dir / "tb"))
    writer.add_scalar("losses/policy", 0.5, 0, walltime=first_wall_time)
    for step, wall_time, success in evals:
        writer.add_scalar(EVAL_TAG, success, step, walltime=wall_time)
    writer.close()


def test_eval_curve_of_a_run_without_run_time_counts_wall_clock_from_the_first_event(tmp_path):
    write_events(tmp_path, [(0, 1004.0, 0.25), (5000, 1010.5, 0.5), (12000, 1030.0, 1.0)])
    curve = eval_curve(tmp_path)
    assert curve == {"env_steps": [0, 5000, 12000], "seconds": [4.0, 10.5, 30.0], "success": [0.25, 0.5, 1.0]}
    assert first_reaching(curve, 0.5) == (5000, 10.5)
    assert first_reaching(curve, 0.0) == (0, 4.0)
    assert first_reaching(eval_curve(tmp_path) | {"success": [0.25, 0.5, 0.5]}, 0.9) is None


def test_the_run_report_counts_time_to_target_from_the_runs_first_event(tmp_path):
    """It counted from the first evaluation, leaving out the iterations before it (20 s of a 48 s run)."""
    from grpo_robot.bench.report import reaching

    write_events(tmp_path, [(4000, 1020.0, 0.25), (8000, 1047.5, 0.95)])
    assert reaching(tmp_path, 0.9) == "0.01 M, 48 s"


def test_a_resumed_runs_time_leaves_out_the_wait_between_its_processes(tmp_path):
    """Wall times counted the hour between a killed run and its resume; the run's own seconds
    (`time/run_s`, which `summary.json`'s target reports too) go on from the checkpoint's."""
    from grpo_robot.bench.report import reaching
    from grpo_robot.plots import find_runs

    writer = SummaryWriter(str(tmp_path / "tb"))
    for step, wall, run_s, success in [(0, 1000.0, 2.0, 0.1), (4000, 1030.0, 32.0, 0.5),  # first process
                                       (8000, 4630.0, 61.0, 0.97)]:  # resumed an hour later at 31 s  # fmt: skip
        writer.add_scalar("losses/policy", 0.5, step, walltime=wall - 1)
        writer.add_scalar(RUN_TIME_TAG, run_s - 1, step, walltime=wall - 1)  # the iteration's own log
        writer.add_scalar(EVAL_TAG, success, step, walltime=wall)
        writer.add_scalar(RUN_TIME_TAG, run_s, step, walltime=wall)  # and the evaluation's
    writer.close()
    assert eval_curve(tmp_path)["seconds"] == [2.0, 32.0, 61.0]
    assert reaching(tmp_path, 0.95) == "0.01 M, 61 s"  # wall-clock: 3631 s
    (run,) = find_runs([tmp_path])
    assert run.seconds.tolist() == [2.0, 32.0, 61.0] and run.steps.tolist() == [0, 4000, 8000]


def test_an_eval_at_the_target_reaches_it_after_tensorboards_float32(tmp_path):
    write_events(tmp_path, [(0, 1000.0, 0.9), (100, 1001.0, 0.945), (200, 1002.0, 190 / 200), (300, 1003.0, 1.0)])
    points = read_scalars(tmp_path)[EVAL_TAG]
    assert points[2].value < 0.95  # what float32 makes of 0.95
    assert first_reaching(eval_curve(tmp_path), 0.95) == (200, 2.0)


def make_run(run_dir, evals, summary, overrides):
    run_dir.mkdir()
    write_events(run_dir, evals)
    (run_dir / "summary.json").write_text(json.dumps(summary))
    (run_dir / "resolved_config.yaml").write_text(yaml.safe_dump({"env": {"task": "LiftCube"}, "seed": 2}))
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))


def test_report_of_runs(tmp_path):
    final = {"n": 200, "success_rate": 0.985, "wilson95": [0.957, 0.995]}
    start = {"n": 200, "success_rate": 0.33, "wilson95": [0.269, 0.398]}
    summary = {"eval": final, "env_steps": 3_530_000, "seconds": 279.4, "machine": MACHINE,
               "initial_policy": {"demo_episodes": 10, "eval": start}}  # fmt: skip
    make_run(tmp_path / "a", [(0, 1001.0, 0.3), (3_030_000, 1241.0, 0.96)], summary,
             ["experiment=lift_cube_bc", "seed=2", "hydra.run.dir=x"])  # fmt: skip
    make_run(tmp_path / "b", [(0, 1001.0, 0.3)], {**summary, "initial_policy": None}, [])
    for n, overrides in [(2, ["resume=a", "iterations=900"]), (1, ["resume=a", "iterations=400", "hydra.x=1"])]:
        (tmp_path / "a" / ".hydra" / f"resume-{n}").mkdir()  # resumed twice (it showed the first command only)
        (tmp_path / "a" / ".hydra" / f"resume-{n}" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (tmp_path / "c").mkdir()
    (tmp_path / "multi").mkdir()  # a folder of runs (a -m sweep's): its runs, in order; one made through the API
    make_run(tmp_path / "multi" / "seed=0", [(0, 1001.0, 0.3)], summary, [])
    (tmp_path / "multi" / "seed=0" / ".hydra" / "overrides.yaml").unlink()
    skipped = []
    lines = list(report([tmp_path / "a", tmp_path / "c", tmp_path / "b", tmp_path / "multi", tmp_path / "nope"], 0.95,
                        skipped.append))  # fmt: skip
    assert lines[0].endswith("| first eval >= 95% | command |")
    assert lines[2:] == [
        "| LiftCube | 2 | 10 | 33.0% [26.9%, 39.8%] | 98.5% [95.7%, 99.5%] | 3.53 M | 279 s | 3.03 M, 241 s "
        "| `python scripts/train.py experiment=lift_cube_bc seed=2`, then `python scripts/train.py resume=a "
        "iterations=400`, then `python scripts/train.py resume=a iterations=900` |",
        "| LiftCube | 2 | - | - | 98.5% [95.7%, 99.5%] | 3.53 M | 279 s | not reached | `python scripts/train.py ` |",
        "| LiftCube | 2 | 10 | 33.0% [26.9%, 39.8%] | 98.5% [95.7%, 99.5%] | 3.53 M | 279 s | not reached "
        "| - (made through the Python API: its config is resolved_config.yaml) |",  # it said `python scripts/train.py `
        "\nTest CPU, 2 cores, no GPU; Python 3.11, torch 2, mujoco 3, numpy 1",
    ]
    assert skipped == [f"skipped {tmp_path / 'c'}: no summary.json in it or below (no finished run)",
                       f"skipped {tmp_path / 'nope'}: no such directory"]  # fmt: skip


def test_a_run_whose_files_cannot_be_read_is_skipped_and_no_run_at_all_is_an_error(tmp_path):
    """An empty summary.json or a broken resolved_config.yaml gave a traceback; a mistyped path an
    empty table with exit 0."""
    import subprocess
    import sys

    summary = {"eval": None, "env_steps": 1, "seconds": 1.0}
    make_run(tmp_path / "empty", [(0, 1001.0, 0.3)], summary, [])
    (tmp_path / "empty" / "summary.json").write_text("")
    make_run(tmp_path / "broken", [(0, 1001.0, 0.3)], summary, [])
    (tmp_path / "broken" / "resolved_config.yaml").write_text("env: [unclosed\n")
    skipped = []
    assert list(report([tmp_path / "empty", tmp_path / "broken"], 0.95, skipped.append))[2:] == []
    assert skipped == [f"skipped {tmp_path / 'empty'}: its files cannot be read (JSONDecodeError: Expecting value: "
                       "line 1 column 1 (char 0))", f"skipped {tmp_path / 'broken'}: its files cannot be read "
                       "(ParserError: while parsing a flow sequence)"]  # fmt: skip
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, str(root / "scripts" / "report_runs.py"), str(tmp_path / "typo")],
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 1 and out.stderr.splitlines()[-1] == f"error: no finished run in {tmp_path / 'typo'}"
