"""scripts/plot.py: curves and final-success summaries across training seeds, read back from the
runs' own TensorBoard logs."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch
from test_train import small_config

from grpo_robot.plots import iqm, plot_runs
from grpo_robot.trainer import Trainer

pytest.importorskip("matplotlib")  # the `plot` extra, in the README's test install


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three tiny runs evaluated every iteration: GRPO on seeds 0 and 1, RLOO on seed 0."""
    root = tmp_path_factory.mktemp("runs")
    finals = {}
    for name, advantage, seed in (("grpo0", "grpo", 0), ("grpo1", "grpo", 1), ("rloo0", "rloo", 0)):
        cfg = small_config(iterations=3, eval_every=1, eval_seeds=20, seed=seed)
        cfg = replace(cfg, algo=replace(cfg.algo, advantage=advantage))
        summary = Trainer(cfg, root / name).run()
        finals[name] = summary["eval"]["success_rate"]
    return root, finals


def test_plot_draws_one_line_per_algorithm_from_the_logs(runs, tmp_path):
    root, finals = runs
    rows = plot_runs([root], tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 10_000
    by_label = {row["label"]: row for row in rows}
    assert set(by_label) == {"advantage=grpo", "advantage=rloo"}
    grpo = by_label["advantage=grpo"]
    assert sorted(grpo["final"]) == sorted([finals["grpo0"], finals["grpo1"]])  # the logs' last evaluations
    assert grpo["iqm"] == pytest.approx(np.mean(grpo["final"]))  # two runs: the IQM is their mean
    assert grpo["iqm_low"] <= grpo["iqm"] <= grpo["iqm_high"]
    assert by_label["advantage=rloo"]["final"] == [finals["rloo0"]]
    assert json.loads((tmp_path / "curves.json").read_text()) == rows


def test_one_run_directory_and_nothing_to_plot(runs, tmp_path):
    root, finals = runs
    rows = plot_runs([root / "grpo1"], tmp_path / "one.png")
    assert rows[0]["label"] == "Reach-v1" and rows[0]["final"] == [finals["grpo1"]]
    with pytest.raises(ValueError, match="no run with charts/eval_success"):
        plot_runs([tmp_path], tmp_path / "none.png")


def test_runs_of_different_settings_are_never_pooled_as_seeds(tmp_path):
    from grpo_robot.plots import Run, group

    def run(name, **config):
        base = {"env.task": "Reach-v1", "algo.advantage": "grpo", "algo.lr": 1e-3, "seed": 0, "bc.seed": 0,
                "iterations": 100, "eval_every": 5}  # fmt: skip
        return Run(tmp_path / name, {**base, **config}, np.zeros(1), np.zeros(1), np.zeros(1))

    runs = [run("a"), run("b", seed=1, **{"bc.seed": 1}), run("c", **{"algo.lr": 3e-4}), run("d", iterations=200)]
    lines = {line.label: sorted(r.path.name for r in line.runs) for line in group(runs)}
    # lr (no label key) told two presets apart, which were pooled as seeds; seeds and budgets do not
    assert lines == {"lr=0.001": ["a", "b", "d"], "lr=0.0003": ["c"]}


def test_iqm_is_the_mean_of_the_middle_half():
    assert iqm(np.array([0.0, 0.5, 0.6, 1.0])) == pytest.approx(0.55)
    assert iqm(np.array([0.2, 0.4])) == pytest.approx(0.3)


def test_wandb_online_without_a_login_is_one_line_before_any_work(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from cli_harness import run_main

    for key in [k for k in __import__("os").environ if k.startswith("WANDB_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.netrc, no W&B settings
    monkeypatch.setenv("WANDB_MODE", "online")
    run = tmp_path / "run"
    out = run_main("train", "env=reach", "loggers=[tensorboard,wandb]", "wandb.project=p", "iterations=1",
                   "algo.groups_per_iter=2", "algo.group_size=2", "algo.minibatches=1", "pretrain=true",
                   "demos.episodes=2", "bc.max_steps=2", "progress=false", f"hydra.run.dir={run}")  # fmt: skip
    assert out.code == 2 and len(out.error_lines) == 1, out.stderr[-3000:]
    assert out.error_lines[0].startswith("error: loggers=[...,wandb]: Weights & Biases could not start a run ("), \
        out.error_lines[0]  # fmt: skip
    assert "Traceback" not in out.stderr
    assert not (run / "bc.pt").exists() and not (run / "checkpoints").exists()  # the clone was not made first
    assert not run.exists() or {p.name for p in run.iterdir()} == {"wandb"}, list(run.iterdir())  # no empty run


def test_wandb_offline_logs_the_tensorboard_metric_names_and_videos(tmp_path):
    pytest.importorskip("wandb")  # the `wandb` extra, in the README's test install
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from grpo_robot.config import RenderConfig, WandbConfig

    cfg = replace(small_config(iterations=2, eval_every=1, eval_seeds=10), loggers=["tensorboard", "wandb"],
                  wandb=WandbConfig(mode="offline"), video_every=2, video_episodes=2,
                  render=RenderConfig(width=64, height=48))  # fmt: skip
    Trainer(cfg, tmp_path).run()
    records = list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(records) == 1 and records[0].stat().st_size > 1000
    videos = sorted(records[0].parent.glob("files/media/videos/**/*.mp4"))
    assert len(videos) == 2 and all(v.stat().st_size > 1000 for v in videos)  # the filmed episodes
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert "charts/eval_success" in tags and len(tags) > 10
    (text,) = events.Tensors("config/text_summary")  # the run's settings in the Text tab
    assert b"group_size: 8" in text.tensor_proto.string_val[0], text.tensor_proto.string_val[0][:200]
    data = records[0].read_bytes()
    assert all(tag.encode() in data for tag in tags)  # every TensorBoard metric, by the same name


def test_an_output_without_a_suffix_is_written_and_named_as_png(runs, tmp_path, capsys):
    """`--output curves` printed "written: curves and curves.json" where matplotlib wrote curves.png."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("plot_script", Path(__file__).parents[1] / "scripts" / "plot.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    root, _ = runs
    assert script.main([str(root / "grpo1"), "--output", str(tmp_path / "curves")]) == 0
    assert f"written: {tmp_path / 'curves.png'} and {tmp_path / 'curves.json'}" in capsys.readouterr().out
    assert (tmp_path / "curves.png").stat().st_size > 10_000 and (tmp_path / "curves.json").exists()


def test_a_line_spans_its_runs_to_the_last_evaluation_with_runs_that_ended_first_at_their_last_value(tmp_path):
    """Runs that stopped at their target (or whose step ranges do not meet) ended the line at the
    earliest run's end, or drew nothing."""
    from grpo_robot.plots import Line, Run, curve

    def run(name, steps, success):
        steps = np.array(steps, dtype=np.float64)
        return Run(tmp_path / name, {}, steps, steps / 1000, np.array(success, dtype=np.float64))

    fast, slow = run("fast", [0, 100, 200], [0.0, 0.5, 0.95]), run("slow", [0, 200, 400, 600], [0, 0.2, 0.6, 1])
    line = Line("x", [fast, slow])
    grid, mean, low, high = curve(line, "steps", points=7)
    assert grid.tolist() == [0, 100, 200, 300, 400, 500, 600]
    assert mean.tolist() == pytest.approx([0.0, 0.25, 0.575, 0.575, 0.775, 0.775, 0.975])
    assert (low <= mean + 1e-12).all() and (mean <= high + 1e-12).all()
    apart = Line("y", [run("early", [0, 100], [0.0, 0.5]), run("late", [200, 300], [0.25, 0.75])])
    grid, mean, _, _ = curve(apart, "seconds", points=2)
    assert grid.tolist() == [0.2, 0.3] and mean.tolist() == [0.375, 0.625]


def test_presets_label_their_lines_and_evaluation_modes_or_duplicates_are_not_pooled(tmp_path):
    """A sweep `-m algo=grpo,dapo`: labelled by the keys the presets set (`aggregation=token-mean,
    high=0.28, low=0.2, enabled=True`: neither name, and `high` was algo.clip.high), now by the
    presets' names. Runs evaluated with the mean action and with samples were one line of
    "seeds"; a run named twice counted twice."""
    from grpo_robot.plots import Run, find_runs, group

    def run(name, choice, seed=0, **config):
        base = {"env.task": "Reach-v1", "algo.aggregation": "seq-mean-token-mean", "algo.clip.high": None,
                "algo.lr": 1e-3, "seed": seed, "eval_deterministic": True}  # fmt: skip
        if choice == "dapo":
            base.update({"algo.aggregation": "token-mean", "algo.clip.high": 0.28})
        return Run(tmp_path / name, {**base, **config}, np.zeros(1), np.zeros(1), np.zeros(1),
                   {"algo": choice, "env": "reach", "experiment": "reach_from_scratch"})  # fmt: skip

    runs = [run("g0", "grpo"), run("g1", "grpo", 1), run("d0", "dapo"), run("d1", "dapo", 1),
            run("d2", "dapo", 2, **{"algo.lr": 3e-4})]  # fmt: skip
    lines = {line.label: sorted(r.path.name for r in line.runs) for line in group(runs)}
    assert lines == {"algo=grpo, lr=0.001": ["g0", "g1"], "algo=dapo, lr=0.001": ["d0", "d1"],
                     "algo=dapo, lr=0.0003": ["d2"]}, lines  # fmt: skip
    # a command line's own value on every run of one preset (`algo=grpo algo.lr=0.01`) was hidden behind the name
    given = [run("g0", "grpo", **{"algo.lr": 0.01}), run("g1", "grpo", 1, **{"algo.lr": 0.01}), run("d0", "dapo")]
    for r in given[:2]:
        r.given = frozenset({"algo.lr", "seed"})
    lines = {line.label: sorted(r.path.name for r in line.runs) for line in group(given)}
    assert lines == {"algo=grpo, lr=0.01": ["g0", "g1"], "algo=dapo, lr=0.001": ["d0"]}, lines
    sampled = [run("s0", "grpo"), run("s1", "grpo", 1, eval_deterministic=False)]
    assert sorted(line.label for line in group(sampled)) == ["eval_deterministic=False", "eval_deterministic=True"]
    nested = [Run(tmp_path / n, {"env.task": "Reach-v1", "algo.clip.high": h}, *[np.zeros(1)] * 3)
              for n, h in (("a", 0.2), ("b", 0.28))]  # fmt: skip
    assert sorted(line.label for line in group(nested)) == ["clip.high=0.2", "clip.high=0.28"]
    trained = tmp_path / "trained"
    Trainer(small_config(iterations=1, eval_every=1, eval_seeds=4), trained / "job").run()
    assert len(find_runs([trained, trained / "job", trained / "job"])) == 1


def test_a_runs_broken_config_is_named_in_one_line(runs, tmp_path):
    import shutil

    root, _ = runs
    shutil.copytree(root / "grpo0", tmp_path / "run")
    (tmp_path / "run" / "resolved_config.yaml").write_text("algo: [unclosed\n")
    with pytest.raises(ValueError, match=r"resolved_config.yaml cannot be read \(ParserError: while parsing"):
        plot_runs([tmp_path / "run"], tmp_path / "out.png")


def test_wandb_gets_the_resumed_checkpoints_iteration_again_as_tensorboard_does(tmp_path, monkeypatch):
    """An iteration saved but not logged when its process ended came back in TensorBoard on resume,
    and never in W&B: the two loggers disagreed for good."""
    wandb = pytest.importorskip("wandb")
    from grpo_robot.config import WandbConfig

    logged = []

    class Run:
        def log(self, scalars, step):
            logged.append((step, dict(scalars)))

        def finish(self):
            pass

    inits = []
    monkeypatch.setattr(wandb, "init", lambda **kwargs: inits.append(kwargs) or Run())
    cfg = small_config(iterations=2, checkpoint_every=1)
    first = Trainer(cfg, tmp_path)
    first.run()
    first.close()
    saved = torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)
    resumed = Trainer(replace(cfg, iterations=3, resume=str(tmp_path), loggers=["wandb"],
                              wandb=WandbConfig(mode="offline")), tmp_path)  # fmt: skip
    resumed.run()
    resumed.close()
    assert logged[0] == (saved["env_steps"], saved["scalars"]) and saved["scalars"]["charts/train_success"] >= 0
    assert logged[-1][0] > saved["env_steps"]  # then the resumed run's own iteration
    assert inits[0]["name"] == tmp_path.name and inits[0]["group"] is None
    # a -m sweep's job: named with its sweep and grouped by it (every sweep's jobs were all just `seed=0`)
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "multirun.yaml").write_text("{}")
    job = Trainer(replace(cfg, iterations=1, loggers=["wandb"], wandb=WandbConfig(mode="offline", tags=["a"])),
                  tmp_path / "sweep" / "seed=0")  # fmt: skip
    job.run()
    job.close()
    assert (inits[-1]["name"], inits[-1]["group"], inits[-1]["tags"]) == ("sweep/seed=0", "sweep", ["a"])


def test_the_bootstrap_band_covers_the_middle_95_percent():
    """The mean of 0..19 over 20,000 resamples: 9.5 +- 1.96 x its standard error (1.29), so about
    [6.97, 12.03]; a 90% band would be about [7.4, 11.6]."""
    from grpo_robot.plots import bootstrap

    low, high = bootstrap(np.arange(20.0), np.mean, n=20000)
    assert low == pytest.approx(6.97, abs=0.15) and high == pytest.approx(12.03, abs=0.15)
