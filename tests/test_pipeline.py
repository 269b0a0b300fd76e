"""The one-command pipelines reach the issue's target (slow: `pytest -m slow -k preset_reaches
tests/test_pipeline.py`, about 4 minutes for all six on 2 cores): behaviour cloning from at most 10
demos gives some success below 90%, and GRPO from the clone reaches at least 95% on 200 held-out
seeds with a Wilson lower bound of at least 0.90; PushCube's, in its mirror frame, within issue
18's 2 minutes, all stages counted (23-48 s on a 2-core Intel Xeon), the others within 5 (34-178
s measured). Seed 0 of each; the other seeds are in docs/results.md."""

import json
from pathlib import Path

import pytest
from test_train import run_cli


@pytest.mark.slow
@pytest.mark.parametrize(
    "experiment", [f"{task}_cube_bc{policy}" for policy in ("", "_tokenized") for task in ("lift", "push", "place")]
)
def test_pipeline_preset_reaches_target(tmp_path, experiment):
    run = tmp_path / "run"
    out = run_cli("train.py", f"experiment={experiment}", "progress=false", f"hydra.run.dir={run}", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    summary = json.loads((run / "summary.json").read_text())
    start, final = summary["initial_policy"]["eval"], summary["eval"]
    assert summary["initial_policy"]["demo_episodes"] <= 10
    assert 0 < start["success_rate"] < 0.9, start
    assert final["success_rate"] >= 0.95 and final["wilson95"][0] >= 0.90, final
    assert summary["seconds"] < (2 if experiment.startswith("push") else 5) * 60, summary["seconds"]


ROOT = Path(__file__).resolve().parents[1]
# preset -> (demonstrations at most, gain over the clone at least, final success at least, minutes at
# most), from docs/results.md (seed 0 measured: +60.5, +53.5, 28.5% -> 95.5%, +87 points)
OUTSIDE = {
    "fetch_push_minari": (10, 0.20, 0.0, 30),
    "fetch_push_bc": (20, 0.30, 0.0, 30),
    # seed 0 alone on a 2-core AMD EPYC: 31.0% -> 94.0% in 27 minutes (custom_envs.md)
    "fetch_push_bc_mirror": (20, 0.40, 0.0, 30),
    "fetch_pick_and_place_bc": (20, 0.30, 0.90, 30),
    # seed 0 alone on a 2-core AMD EPYC: 31.5% -> 98.5% at 0.25 M env steps, 95.5% at the end
    "fetch_pick_and_place_bc_mirror": (20, 0.40, 0.90, 30),
    "robosuite_lift_bc": (20, 0.30, 0.0, 60),
}


@pytest.mark.slow
@pytest.mark.parametrize("experiment", list(OUTSIDE))
def test_outside_pipeline_raises_the_clone(tmp_path, experiment):
    """The outside tasks' pipelines (`pytest -m slow -k outside`, 30-60 minutes each on 2 cores):
    GRPO from the clone gains at least the measured margin within the budget, and FetchPickAndPlace
    reaches 90% (Wilson lower bound 0.85). FetchPush and robosuite Lift end below 90% in their
    budgets on 2 cores; docs/results.md says what they reached."""
    demos, gain, least, minutes = OUTSIDE[experiment]
    run = tmp_path / "run"
    minari = ROOT / "tests" / "data" / "minari" / "grpo-robot" / "fetch-push-expert-v0"
    extra = [f"demos.path={minari}"] if "minari" in experiment else []  # the preset's path is relative to the root
    args = (f"experiment={experiment}", *extra, "progress=false", f"hydra.run.dir={run}")
    out = run_cli("train.py", *args, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    summary = json.loads((run / "summary.json").read_text())
    start, final = summary["initial_policy"]["eval"], summary["eval"]
    assert summary["initial_policy"]["demo_episodes"] <= demos
    assert final["success_rate"] >= start["success_rate"] + gain, (start, final)
    assert final["success_rate"] >= least and (not least or final["wilson95"][0] >= least - 0.05), final
    assert summary["seconds"] < minutes * 60
