"""Rendering and videos: frames of every kind of env, videos from evaluation and training, and
the one-line error when no OpenGL platform works. Needs headless OpenGL (README: Install)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import gymnasium
import imageio.v3 as iio
import numpy as np
import pytest
import torch
from cli_harness import run_main
from gymnasium.utils.env_checker import check_env
from test_train import params, small_config
from toy_envs import PointReach

from grpo_robot import render, video
from grpo_robot.batched import BatchedEnv
from grpo_robot.config import AlgoConfig, EnvConfig, RenderConfig
from grpo_robot.evaluation import EvalResult
from grpo_robot.gym_vector import GymGroupEnv
from grpo_robot.trainer import Trainer


def expert_steps(env: BatchedEnv, seeds, steps: int) -> list[np.ndarray]:
    """Reset `env` from `seeds`, step it with the scripted expert; the actions taken."""
    obs, actions = env.reset(seeds), []
    for _ in range(steps):
        actions.append(env.task.expert(obs))
        obs, *_ = env.step(actions[-1])
    return actions


def test_an_opengl_platform_renders_here():
    reasons = {backend: render.probe(backend) for backend in render.CANDIDATES}
    assert None in reasons.values(), reasons  # the README's apt-get line provides both
    assert render.gl_backend() in render.CANDIDATES + (os.environ.get("MUJOCO_GL"),)


def test_mujocos_own_renderer_takes_the_chosen_platform_after_mujoco_was_imported():
    # a user's env rendering with mujoco.Renderer in the trainer's process (a sync video world): mujoco
    # picks its context class by MUJOCO_GL at import, before the choice; unset, that was GLFW, which
    # without a display aborted the process
    script = "import mujoco, sys\nfrom grpo_robot import render\nprint(render.gl_backend())\n" + render._PROBE
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    backend, mean = out.stdout.split()[-2:]
    assert backend in render.CANDIDATES and float(mean) > 0


@pytest.mark.parametrize("platform", ["osmesa", "egl"])
def test_a_pyopengl_platform_set_without_mujoco_gl_is_the_one_tried_first_and_agrees_with_it(platform):
    """Headless images often set PYOPENGL_PLATFORM alone: EGL passed the probe (which dropped it),
    then mujoco refused the mismatch (`Cannot use EGL rendering platform ...`): no video at all."""
    script = "import mujoco, sys\nfrom grpo_robot import render\nprint(render.gl_backend())\n" + render._PROBE
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**env, "PYOPENGL_PLATFORM": platform})  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    backend, mean = out.stdout.split()[-2:]
    assert backend == platform and float(mean) > 0


@pytest.mark.parametrize("camera", ["front", "top", "wrist"])
def test_frames_are_not_blank_and_follow_the_state(camera):
    env = BatchedEnv("PushCube", 2, nthread=1)
    env.reset([3, 4])
    start = env.render(camera=camera)
    assert start.shape == (2, 240, 320, 3) and start.dtype == np.uint8
    for frame in start:
        assert frame.std() > 10 and len(np.unique(frame.reshape(-1, 3), axis=0)) > 50  # a scene, not a fill
    assert np.abs(start[0].astype(int) - start[1]).mean() > 0.5  # other seed, other start, other picture
    expert_steps(env, [3, 4], 30)
    moved = env.render(camera=camera)
    assert np.abs(moved.astype(int) - start).mean() > 1.0  # the hand (and cube) moved
    again = env.render(camera=camera)
    np.testing.assert_array_equal(moved, again)  # the same state, the same picture
    env.close()


def test_rendering_does_not_change_the_simulation():
    plain, filmed = BatchedEnv("LiftCube", 4, nthread=1), BatchedEnv("LiftCube", 4, nthread=1)
    seeds = [0, 0, 5, 9]
    plain.reset(seeds)
    filmed.reset(seeds)
    for t in range(40):
        action = np.sin(0.3 * t + np.arange(16).reshape(4, 4))
        filmed.render([0, 2], "front", 64, 48)
        plain.step(action)
        filmed.step(action)
        np.testing.assert_array_equal(plain.state, filmed.state)
        np.testing.assert_array_equal(plain.sensordata, filmed.sensordata)
    filmed.close()


def test_the_gymnasium_env_renders_the_batched_worlds_picture():
    batched = BatchedEnv("PlaceCube", 3, nthread=1)
    actions = expert_steps(batched, [7, 8, 9], 25)
    single = gymnasium.make("grpo_robot/PlaceCube-v2", render_mode="rgb_array", camera="top")
    single.reset(seed=8)
    for action in actions:
        single.step(action[1])
    np.testing.assert_array_equal(single.render(), batched.render([1], "top")[0])
    check_env(single.unwrapped)  # with its render check
    single.close()
    batched.close()


@pytest.mark.parametrize("vector", ["sync", "async"])
def test_gymnasium_group_env_frames_come_from_each_worlds_render(vector):
    cfg = EnvConfig(task=None, id="grpo_robot/PushCube-v3", horizon=100, vector=vector,
                    kwargs={"render_mode": "rgb_array"})
    env = GymGroupEnv(cfg, 2)
    batched = BatchedEnv("PushCube", 2, nthread=1)
    obs = env.reset([11, 12])
    batched.reset([11, 12])
    for _ in range(10):
        action = batched.task.expert(obs)
        obs, *_ = env.step(action)
        batched.step(action)
    np.testing.assert_array_equal(env.render([1, 0]), batched.render([1, 0]))
    assert env.render_fps == 25
    env.close()
    batched.close()


class AnsiOnly(PointReach):
    metadata = {"render_modes": ["ansi"]}

    def __init__(self, render_mode=None):
        super().__init__()
        self.render_mode = render_mode


class ForgetsRenderMode(PointReach):
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, render_mode=None):
        super().__init__()


def test_an_env_that_cannot_render_is_refused_in_one_line():
    cfg = EnvConfig(task=None, entry_point="toy_envs:PointReach", horizon=20, kwargs={"render_mode": "rgb_array"})
    with pytest.raises(ValueError, match=r"^env.entry_point=toy_envs:PointReach cannot render frames: it takes no "
                                         r"render_mode argument, and video needs render_mode='rgb_array'$"):
        GymGroupEnv(cfg, 1)
    cfg = replace(cfg, entry_point="test_render:AnsiOnly")
    with pytest.raises(ValueError, match=r"^env.entry_point=test_render:AnsiOnly cannot render frames: its render "
                                         r"modes are \['ansi'\], and video needs 'rgb_array'$"):
        GymGroupEnv(cfg, 1)
    cfg = replace(cfg, entry_point="test_render:ForgetsRenderMode")  # it lists rgb_array but does not keep the mode
    with pytest.raises(ValueError, match=r"^env.entry_point=test_render:ForgetsRenderMode cannot render frames: "
                                         r"it was built with render_mode='rgb_array' but its render_mode attribute "
                                         r"is None \(a Gymnasium env keeps the render_mode it was given in "
                                         r"self.render_mode\)$"):
        GymGroupEnv(cfg, 1)


def test_fetch_and_robosuite_render_their_own_frames():
    pytest.importorskip("gymnasium_robotics")
    pytest.importorskip("robosuite")
    import gymnasium_robotics  # noqa: F401

    from grpo_robot.envs.robosuite_env import RobosuiteEnv

    fetch = gymnasium.make("FetchPush-v4", render_mode="rgb_array", width=160, height=120)
    fetch.reset(seed=0)
    first = fetch.render()
    for _ in range(10):
        fetch.step(np.array([1.0, 0.0, -1.0, 0.0], np.float32))
    assert first.shape == (120, 160, 3) and first.std() > 10
    assert np.abs(fetch.render().astype(int) - first).mean() > 0.5
    fetch.close()
    lift = RobosuiteEnv("Lift", render_mode="rgb_array", render_width=160, render_height=120)
    lift.reset(seed=0)
    first = lift.render()
    for _ in range(10):
        lift.step(np.r_[0.0, 0.0, 1.0, np.zeros(3), -1.0])
    assert first.shape == (120, 160, 3) and first.std() > 10
    assert np.abs(lift.render().astype(int) - first).mean() > 0.5
    assert first[:20].mean() != pytest.approx(first[-20:].mean(), abs=1)  # rows not a uniform fill
    lift.close()
    with pytest.raises(ValueError, match="render_camera='nope' is not in Lift's scene; its cameras: frontview"):
        RobosuiteEnv("Lift", render_mode="rgb_array", render_camera="nope")


def test_pick_seeds_shows_successes_and_failures():
    result = EvalResult(np.arange(10), np.array([1, 1, 1, 0, 1, 1, 0, 1, 0, 1], bool), np.full(10, 50))
    np.testing.assert_array_equal(video.pick_seeds(result, 4), [3, 6, 0, 1])
    np.testing.assert_array_equal(video.pick_seeds(result, 5), [3, 6, 8, 0, 1])  # the odd one: a failure
    np.testing.assert_array_equal(video.pick_seeds(result, 8), [3, 6, 8, 0, 1, 2, 4, 5])  # successes fill up
    np.testing.assert_array_equal(video.pick_seeds(result, 2, "successes"), [0, 1])
    np.testing.assert_array_equal(video.pick_seeds(result, 4, "failures"), [3, 6, 8])  # all there are
    all_won = EvalResult(np.arange(3), np.ones(3, bool), np.full(3, 5))
    np.testing.assert_array_equal(video.pick_seeds(all_won, 2), [0, 1])
    assert len(video.pick_seeds(all_won, 2, "failures")) == 0


# -- videos from evaluation and from training ---------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny Reach run, and the same run filming every evaluation."""
    root = tmp_path_factory.mktemp("videos")
    cfg = small_config(iterations=3, eval_every=1, eval_seeds=20)
    plain = Trainer(cfg, root / "plain")
    plain.run()
    filmed = Trainer(replace(cfg, video_every=2, video_episodes=3, render=RenderConfig(width=96, height=64)),
                     root / "filmed")  # fmt: skip
    filmed.run()
    return root, params(plain), params(filmed)


def test_training_with_video_gives_the_same_parameters(trained):
    root, plain, filmed = trained
    assert plain.keys() == filmed.keys()
    for key in plain:
        torch.testing.assert_close(filmed[key], plain[key], rtol=0, atol=0)
    # evaluations at iterations 1, 2, 3: the 2nd (every 2) and the run's last are filmed
    assert sorted(p.name for p in (root / "filmed" / "videos").iterdir()) == ["iter_000002", "iter_000003"]
    assert not (root / "plain" / "videos").exists()


def test_training_videos_reach_tensorboard(trained):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    root = trained[0]
    events = EventAccumulator(str(root / "filmed" / "tb"), size_guidance={"images": 0})
    events.Reload()
    images = events.Images("videos/eval")
    assert len(images) == 2 and 0 < images[0].step < images[1].step  # x-axis: env steps
    gif = images[0].encoded_image_string
    assert gif[:6] == b"GIF89a" and (images[0].width, images[0].height) == (2 * 96, 2 * 64)  # 3 episodes, 2x2
    frames = iio.imread(gif, index=None, extension=".gif")
    assert frames.shape[0] > 1 and frames.std() > 5  # animated, not blank
    files = sorted((root / "filmed" / "videos" / "iter_000002").glob("*.mp4"))
    assert len(files) == 3


def test_evaluate_writes_videos_of_successes_and_failures(trained, tmp_path):
    root = trained[0]
    ckpt = root / "filmed" / "checkpoints" / "last.pt"
    out = run_main("evaluate", f"checkpoint={ckpt}", "n_seeds=30", "video=2", f"video_dir={tmp_path}",
                   "render.gif=true", "render.camera=top", f"output={tmp_path / 'eval.json'}")  # fmt: skip
    assert out.code == 0, out.stderr
    episodes = {e["seed"]: e for e in json.loads((tmp_path / "eval.json").read_text())["episodes"]}
    listed = [line.strip() for line in out.stdout.splitlines() if line.startswith("  ")]
    mp4s = [p for p in listed if p.endswith(".mp4")]
    assert len(mp4s) == 2 and len(listed) == 4  # each episode as MP4 and GIF, each file named
    wins = sum(e["success"] for e in episodes.values())
    expect_wins = min(wins, 2 - min(30 - wins, 1))  # one of each where both occurred
    assert sum("_success.mp4" in p for p in mp4s) == expect_wins
    for path in mp4s:
        seed = int(path.split("_seed")[1].split("_")[0])
        outcome = "success" if episodes[seed]["success"] else "failure"
        assert path.endswith(f"_{outcome}.mp4")  # the replay had the evaluation's outcome
        frames = np.stack(list(iio.imiter(path, plugin="FFMPEG")))
        assert frames.shape == (episodes[seed]["steps"] + 1, 240, 320, 3)  # the start, then one per step
        gif = iio.imread(path.replace(".mp4", ".gif"), index=None)
        assert len(gif) == len(frames)
        scene = np.abs(frames[-1, 20:-20].astype(int) - frames[0, 20:-20]).max(-1)  # between the label bars
        assert (scene > 40).sum() > 100  # the hand moved


def test_a_sampled_evaluations_films_show_the_episodes_it_evaluated(tmp_path):
    """deterministic=false: each film is the evaluated episode, with its noise (its seed's own
    stream under the evaluation's noise seed), so its outcome and length are the evaluation's;
    20 seeds evaluated on 8 worlds (3 chunks), filmed on 3. Filming from a fresh generator on the
    picked worlds alone gave other episodes (a success filmed as a failure)."""
    from test_rollout_split import NoisyExpert

    from grpo_robot import video
    from grpo_robot.environment import make_eval_env
    from grpo_robot.evaluation import evaluate
    from grpo_robot.seeding import STREAM_EVAL, eval_seeds, stream_seed

    cfg = small_config()
    env = make_eval_env(cfg, 8)
    policy = NoisyExpert(env.task, 1.5)
    result = evaluate(env, policy, eval_seeds(20, "test"), torch.device("cpu"), False, stream_seed(0, 0, STREAM_EVAL))
    env.close()
    assert result.noise_seed == stream_seed(0, 0, STREAM_EVAL) and 4 < result.success.sum() < 16
    seeds = video.pick_seeds(result, 4)
    filming = video.make_video_env(cfg, 3)  # fewer worlds than episodes: two passes
    episodes, files, _ = video.film_evaluated(filming, policy, result, seeds, torch.device("cpu"),
                                              RenderConfig(width=32, height=24), tmp_path, False)  # fmt: skip
    filming.close()
    evaluated = {int(s): (bool(ok), int(t)) for s, ok, t in
                 zip(result.seeds, result.success, result.steps, strict=True)}
    assert [e.seed for e in episodes] == [int(s) for s in seeds] and len(files) == 4
    assert [(e.success, len(e.frames) - 1) for e in episodes] == [evaluated[int(s)] for s in seeds]
    assert {e.success for e in episodes} == {True, False}


def test_no_opengl_is_one_line_and_everything_else_runs(trained, tmp_path, monkeypatch):
    monkeypatch.setattr(render, "_chosen", None)
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.setattr(render, "probe", lambda backend, timeout=60.0: f"cannot open lib{backend}")
    ckpt = trained[0] / "plain" / "checkpoints" / "last.pt"
    out = run_main("evaluate", f"checkpoint={ckpt}", "n_seeds=10", "video=2", f"video_dir={tmp_path}")
    assert out.code == 2 and len(out.error_lines) == 1
    assert out.error_lines[0] == (
        "error: video=2 cannot be done: cannot render frames here (MUJOCO_GL=egl: cannot open libegl; "
        "MUJOCO_GL=osmesa: cannot open libosmesa); install headless OpenGL (Debian/Ubuntu: "
        "apt-get install -y libegl1 libgl1-mesa-dri libosmesa6)"
    )
    out = run_main("train", "env=reach", "iterations=1", "video_every=1", f"hydra.run.dir={tmp_path / 'run'}")
    assert out.code == 2 and "video_every=1 cannot be done: cannot render frames here" in out.error_lines[0]
    assert not (tmp_path / "run").exists()  # refused before any work
    out = run_main("evaluate", f"checkpoint={ckpt}", "n_seeds=10", f"output={tmp_path / 'e.json'}")
    assert out.code == 0 and "success" in out.stdout  # without video, nothing needs OpenGL


def test_a_platform_that_cannot_render_here_is_named():
    reason = render.probe("glfw", timeout=30) if not os.environ.get("DISPLAY") else "skipped"
    assert reason is not None  # no display: GLFW cannot open a window


def test_make_gifs_refuses_a_bad_size_or_run_in_one_line_before_any_work(tmp_path, monkeypatch, capsys):
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("make_gifs", root / "scripts" / "make_gifs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for argv, message in [([str(tmp_path), "--size", "64"], "argument --size: '64' is not WIDTHxHEIGHT in even "
                           "positive pixels"), ([str(tmp_path / "none")], "no checkpoint at "),
                          ([str(tmp_path), "--size", "2000x2000"], "larger than the scene's offscreen buffer, 640x480"),
                          ([str(tmp_path), "--seeds", "0"], "--seeds: '0' is not a whole number in [1, 10000]"),
                          ([str(tmp_path), "--seeds", "2000000"], "'2000000' is not a whole number in [1, 10000]"),
                          ([str(tmp_path), "--camera", "side"], "argument --camera: invalid choice: 'side'"),
                          ]:  # fmt: skip
        monkeypatch.setattr(sys, "argv", ["make_gifs.py", *argv, "--out", str(tmp_path / "gifs")])
        with pytest.raises(SystemExit) as exit_:
            module.main()
        lines = capsys.readouterr().err.strip().splitlines()
        assert exit_.value.code == 2 and message in lines[-1] and "Traceback" not in "\n".join(lines)
    assert not (tmp_path / "gifs").exists()


def test_make_gifs_names_every_gif_of_a_call_apart_and_judges_the_runs_outcome(trained, tmp_path, monkeypatch):
    import importlib.util

    from grpo_robot import checkpoint
    from grpo_robot.evaluation import EvalResult

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("make_gifs", root / "scripts" / "make_gifs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written: set[Path] = set()
    runs = [tmp_path / "a" / "checkpoints" / "best.pt", tmp_path / "b", tmp_path / "c", tmp_path / "c"]
    for run in runs:
        written.add(module._gif_name(tmp_path, "grpo_robot/Reach-v1", run, written))
    assert {p.name for p in written} == {"grpo_robot_Reach-v1.gif", "grpo_robot_Reach-v1_b.gif",
                                         "grpo_robot_Reach-v1_c.gif", "grpo_robot_Reach-v1_c-2.gif"}  # fmt: skip
    # env.outcome=final_step: the evaluation judges the last step (it looked for episodes that ended early)
    ckpt = checkpoint.load(trained[0] / "plain" / "checkpoints" / "last.pt")
    ckpt["config"]["env"]["outcome"] = "final_step"
    checkpoint.save_atomic(ckpt, tmp_path / "final" / "checkpoints" / "best.pt")
    calls = []

    def evaluate(env, policy, seeds, device, **kwargs):
        calls.append(kwargs)
        return EvalResult(seeds, np.zeros(len(seeds), bool), np.full(len(seeds), 50))

    monkeypatch.setattr(module, "evaluate", evaluate)
    monkeypatch.setattr(sys, "argv", ["make_gifs.py", str(tmp_path / "final"), "--seeds", "4",
                                      "--out", str(tmp_path / "gifs")])  # fmt: skip
    module.main()
    assert calls == [{"final_step_outcome": True}]


@pytest.mark.parametrize(
    "args, message",
    [
        (["video=5", "n_seeds=4"], "video=5 is invalid: must be at most n_seeds=4"),
        (["video=2", "render.width=101"], "render.width=101 is invalid: must be even"),
        (["video=2", "render.height=0"], "render.height=0 is invalid: must be >= 16"),
        (["video=2", "render.camera=side"], "render.camera='side' is invalid"),
        (["video=-1"], "video=-1 is invalid: must be >= 0"),
    ],
)
def test_bad_video_settings_are_one_line(trained, args, message):
    ckpt = trained[0] / "plain" / "checkpoints" / "last.pt"
    out = run_main("evaluate", f"checkpoint={ckpt}", *args)
    assert out.code == 2 and len(out.error_lines) == 1 and message in out.error_lines[0], out.stderr


def test_outputs_that_cannot_be_written_are_refused_first_and_films_never_mix(trained, tmp_path):
    import shutil

    afile = tmp_path / "afile"
    afile.write_text("x")
    ckpt = tmp_path / "run" / "checkpoints" / "last.pt"
    ckpt.parent.mkdir(parents=True)
    shutil.copy(trained[0] / "plain" / "checkpoints" / "last.pt", ckpt)
    cases = [([f"output={afile / 'x.json'}"], f"output='{afile / 'x.json'}' is invalid: {afile} is a file, not a "
              "folder"), (["video=1", f"video_dir={afile}"], f"video_dir='{afile}' is invalid: it is a file; give a "
              "folder")]  # fmt: skip
    for args, message in cases:
        out = run_main("evaluate", f"checkpoint={ckpt}", "n_seeds=4", *args)
        assert (out.code, out.error_lines) == (2, [f"error: {message}"]), out.stderr
        assert not out.stdout.strip()  # before the evaluation
    out = run_main("train", "env=reach", "video_every=1", "video_episodes=8", "eval_seeds=2",
                   f"hydra.run.dir={tmp_path / 'refused'}")  # fmt: skip
    assert out.error_lines == ["error: video_episodes=8 is invalid: must be at most eval_seeds=2 (the videos film "
                               "evaluated episodes)"]  # fmt: skip
    # two evaluations filmed into the default folder: the second gets its own, the first's films stay
    for _ in range(2):
        out = run_main("evaluate", f"checkpoint={ckpt}", "n_seeds=4", "video=1", "render.width=32",
                       "render.height=24")  # fmt: skip
        assert out.code == 0, out.stderr
    folders = sorted(p.name for p in ckpt.parent.iterdir() if p.is_dir())
    assert folders == ["last_videos", "last_videos-2"]
    assert [len(list((ckpt.parent / f).glob("*.mp4"))) for f in folders] == [1, 1]


def test_frames_larger_than_the_scene_buffer_are_refused(trained):
    ckpt = trained[0] / "plain" / "checkpoints" / "last.pt"
    out = run_main("evaluate", f"checkpoint={ckpt}", "n_seeds=10", "video=1", "render.width=800")
    assert out.code == 2 and "render.width=800 is invalid: must be at most 640 for the built-in tasks' scene" in (
        out.error_lines[0]
    )


def test_the_readme_and_ci_install_the_same_opengl_packages():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    line = f"apt-get install -y {render.GL_PACKAGES}"
    assert line in (root / "README.md").read_text()
    assert f'GL_PACKAGES="{render.GL_PACKAGES}"' in (root / ".ci" / "run").read_text()


@pytest.mark.parametrize("vector", ["sync", "async"])
def test_evaluate_films_a_gymnasium_env_through_its_own_render(tmp_path, vector):
    """The whole path for an env that is not built in: `GymGroupEnv` worlds made with
    render_mode="rgb_array" (async ones started by spawn), their frames, the MP4s."""
    run = tmp_path / "run"
    out = run_main("train", "env=gym", "env.id=grpo_robot/Reach-v1", "env.horizon=20", f"env.vector={vector}",
                   "algo.group_size=2", "algo.groups_per_iter=2", "algo.minibatches=1", "iterations=1", "eval_seeds=2",
                   "progress=false",
                   f"hydra.run.dir={run}")  # fmt: skip  (each async world is a process: as few as show the path)
    assert out.code == 0, out.stderr
    out = run_main("evaluate", f"checkpoint={run}", "n_seeds=2", "video=2", f"video_dir={tmp_path / 'v'}",
                   f"output={tmp_path / 'e.json'}")  # fmt: skip
    assert out.code == 0, out.stderr
    steps = {e["seed"]: e["steps"] for e in json.loads((tmp_path / "e.json").read_text())["episodes"]}
    mp4s = sorted((tmp_path / "v").glob("grpo_robot_Reach-v1_seed*.mp4"))
    assert len(mp4s) == 2
    for path in mp4s:
        seed = int(path.name.split("_seed")[1].split("_")[0])
        frames = np.stack(list(iio.imiter(path, plugin="FFMPEG")))
        assert frames.shape == (steps[seed] + 1, 240, 320, 3) and frames.std() > 10  # TaskEnv's own 320x240


def test_an_env_whose_render_gives_no_frame_or_stops_rendering_costs_no_training(tmp_path, caplog):
    """render() that stops working mid-run: the videos stop with a warning and the run trains to its
    end; `scripts/evaluate.py video=N` then fails in one line. render() that gives no frame: one
    line and exit code 2 before any training, and no run directory (a frame is rendered when the
    run begins)."""
    def cfg(**kwargs):
        env = EnvConfig(task=None, entry_point="toy_envs:Renders", horizon=10, kwargs=kwargs)
        return small_config(env=env, iterations=3, eval_every=1, eval_seeds=4, video_every=1, video_episodes=2,
                            algo=AlgoConfig(group_size=2, groups_per_iter=2, minibatches=1))  # fmt: skip

    trainer = Trainer(cfg(frames=12), tmp_path / "stops")  # the probe's frame, then the first film's 11
    with caplog.at_level("WARNING"):
        summary = trainer.run()
    trainer.close()
    assert summary["stopped"] == "iterations" and summary["iterations"] == 3, summary
    assert len(list((tmp_path / "stops" / "videos").glob("iter_*/*.mp4"))) >= 1  # filmed before it broke
    warned = [r.getMessage() for r in caplog.records if "no more videos" in r.getMessage()]
    assert len(warned) == 1 and "GL context lost" in warned[0], warned
    trainer = Trainer(replace(cfg(frames=3), video_every=0, iterations=1), tmp_path / "evaluated")
    trainer.run()
    trainer.close()
    out = run_main("evaluate", f"checkpoint={tmp_path / 'evaluated'}", "n_seeds=4", "video=2",
                   f"video_dir={tmp_path / 'v'}")  # fmt: skip
    assert out.code == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("error: videos: toy_envs:Renders") and \
        "GL context lost" in out.stderr  # fmt: skip
    out = run_main("train", "env=gym", "env.entry_point=toy_envs:Renders", "env.horizon=10", "+env.kwargs.frames=0",
                   "video_every=1", "video_episodes=2", f"hydra.run.dir={tmp_path / 'none'}")  # fmt: skip
    assert out.code == 2 and len(out.error_lines) == 1 and re.match(
        r"error: video: toy_envs:Renders: world 0 \(seed \d+\) could not render: render\(\) returned",
        out.error_lines[0]), out.stderr[-2000:]  # fmt: skip
    assert not (tmp_path / "none").exists()  # refused before any work: no run directory left


def test_films_of_an_env_that_ignores_its_seed_say_they_are_new_episodes(tmp_path):
    """Its evaluated seeds cannot be played again: `video_outcomes=failures` filmed successes. Its
    own render() decides the frame (render.* was ignored without a word), and small frames are
    enlarged before they are labelled (the captions were cut off)."""
    env = EnvConfig(task=None, entry_point="toy_envs:RendersGlobalRandom", horizon=10, group_start="clone")
    trainer = Trainer(small_config(env=env, iterations=1, eval_seeds=4,
                                   algo=AlgoConfig(group_size=2, groups_per_iter=2, minibatches=1)), tmp_path / "run")
    trainer.run()
    trainer.close()
    out = run_main("evaluate", f"checkpoint={tmp_path / 'run'}", "n_seeds=4", "video=1", f"video_dir={tmp_path / 'v'}")
    assert out.code == 0, out.stderr
    assert f"warning: videos: {video.NEW_EPISODES}" in out.stderr
    films = list((tmp_path / "v").glob("*.mp4"))
    assert len(films) == 1  # its 16x16 frames enlarged 20x, so that the labels fit
    assert np.stack(list(iio.imiter(films[0], plugin="FFMPEG"))).shape[1:] == (320, 320, 3)
    out = run_main("evaluate", f"checkpoint={tmp_path / 'run'}", "n_seeds=4", "video=1", "render.width=640")
    assert out.code == 2 and out.error_lines[-1] == (
        "error: render.width=640 is invalid: applies to the built-in tasks' scene; env.entry_point="
        "toy_envs:RendersGlobalRandom films what its own render() gives (its camera and size are its own "
        "arguments: video_kwargs.<name>=... in evaluate.py, env.kwargs.<name>=... in training)"
    ), out.stderr  # fmt: skip


def test_a_misspelled_mujoco_gl_is_one_line_before_mujoco_loads(monkeypatch):
    """`import mujoco` raised a RuntimeError with a traceback through grpo_robot's import."""
    from grpo_robot.machine import mujoco_gl_error

    for value in ("egl", "OSMesa", " glfw", "", "0", "disabled"):
        monkeypatch.setenv("MUJOCO_GL", value)
        assert mujoco_gl_error() is None, value
    monkeypatch.setenv("MUJOCO_GL", "eglx")
    assert mujoco_gl_error() == ("MUJOCO_GL='eglx' is invalid: must be one of egl, osmesa, glx, glfw (or unset: the "
                                 "first headless one that renders is chosen)")  # fmt: skip
    script = str(Path(__file__).parents[1] / "scripts" / "evaluate.py")
    done = subprocess.run([sys.executable, script, "checkpoint=x.pt"], env={**os.environ, "MUJOCO_GL": "eglx"},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert (done.returncode, done.stderr.strip()) == (2, f"error: {mujoco_gl_error()}")


def test_evaluate_refuses_to_film_an_env_that_cannot_render_before_it_evaluates(tmp_path):
    """The evaluation ran first (minutes on robosuite) and its JSON was written; only the filming then
    found that the env takes no render_mode."""
    from test_faults import GYM_TINY

    from grpo_robot.cli import compose_train_config

    Trainer(compose_train_config(*GYM_TINY, "env.entry_point=toy_envs:PointReach", "iterations=1"), tmp_path).run()
    out = run_main("evaluate", f"checkpoint={tmp_path}", "n_seeds=4", "video=1", f"output={tmp_path / 'e.json'}")
    assert out.code == 2 and out.error_lines == [
        "error: env.entry_point=toy_envs:PointReach cannot render frames: it takes no render_mode argument, and "
        "video needs render_mode='rgb_array'"
    ], out.stderr
    assert not (tmp_path / "e.json").exists()


@pytest.mark.parametrize("width, height", [(320, 240), (480, 480), (640, 480), (160, 120)])
def test_frame_labels_fit_the_frame_and_keep_the_seed(width, height):
    """At Gymnasium's 480x480 and with a long env name the seed and the step counter were drawn
    over each other; the file name kept a ':' from the entry point."""
    from PIL import Image, ImageDraw

    from grpo_robot.config import env_name, file_stem

    name = env_name(EnvConfig(task=None, entry_point="my_package.environments:MyVeryLongCellEnv"))
    steps = [f"step {t}/500" for t in range(501)]
    size, top, bottom = render.label_layout(f"{name}  seed 1500000000", steps, "failure: no success in 500 steps",
                                            width, height)  # fmt: skip
    measure = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    font = render._font(size)
    assert measure.textlength(f"{top}  {steps[-1]}", font=font) <= width - 8 and top.endswith("seed 1500000000")
    assert measure.textlength(bottom, font=font) <= width - 8 and bottom.startswith("failure")
    assert 8 <= size <= max(11, height // 16)
    assert file_stem(name) == "my_package.environments_MyVeryLongCellEnv"
    robosuite = EnvConfig(task=None, entry_point="grpo_robot.envs.robosuite_env:RobosuiteEnv",
                          kwargs={"env_name": "Stack"})  # fmt: skip
    assert env_name(robosuite) == "robosuite:Stack" and file_stem(env_name(robosuite)) == "robosuite_Stack"


@pytest.mark.parametrize("fps", [25.0, 125.0, 500.0])
def test_a_gif_of_a_fast_env_keeps_real_time_with_delays_browsers_honour(fps):
    """A 125 Hz env's GIF stored 0 cs per frame, which browsers play as 10 cs: 10x too slow."""
    from PIL import Image

    frames = np.zeros((251, 8, 8, 3), np.uint8)
    frames[:, 0, 0, 0] = np.arange(251) % 256  # every frame differs, so none is merged
    gif = Image.open(__import__("io").BytesIO(video.gif_bytes(frames, fps, hold_last_s=0.0)))
    delays = []
    for k in range(gif.n_frames):
        gif.seek(k)
        delays.append(gif.info["duration"])
    assert min(delays) >= 20 and abs(sum(delays) - 1000 * 250 / fps) <= 10 * len(delays), (fps, delays[:3])
    stride = video.gif_stride(fps)  # every stride-th frame before the last, then the last once
    assert gif.n_frames == len(range(0, 250, stride)) + 1, (fps, gif.n_frames)
    assert delays[-1] == delays[-2], (fps, delays[-3:])  # no hold asked for: the last frame lasts as long
    clip = video.Clip("t", frames, fps, [])
    small, small_fps = clip.small(max_frames=1000)
    assert small_fps <= video.GIF_MAX_FPS and abs(len(small) / small_fps - len(frames) / fps) < 3 / small_fps


def test_make_gifs_refuses_size_and_camera_for_an_env_that_films_with_its_own_render(tmp_path, monkeypatch, capsys):
    import importlib.util

    from test_faults import GYM_TINY

    from grpo_robot.cli import compose_train_config

    Trainer(compose_train_config(*GYM_TINY, "env.entry_point=toy_envs:PointReach", "iterations=1"), tmp_path).run()
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("make_gifs", root / "scripts" / "make_gifs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", ["make_gifs.py", str(tmp_path), "--size", "120x90", "--camera", "top",
                                      "--out", str(tmp_path / "gifs")])  # fmt: skip
    with pytest.raises(SystemExit) as exit_:
        module.main()
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and lines[-1].endswith(
        "--size and --camera apply to the built-in tasks; "
        f"{tmp_path / 'checkpoints' / 'best.pt'} is of toy_envs:PointReach, which films with its own render() "
        "(its camera and size are set through env.kwargs)"), lines  # fmt: skip
    assert not (tmp_path / "gifs").exists()


def test_a_gymnasium_envs_viewing_arguments_are_set_at_evaluation_and_never_part_of_its_identity(tmp_path):
    """evaluate.py could not choose a Gymnasium env's camera or frame size (it has no env key, and
    render.* applies to the built-in scene), and setting them in training made the clone's
    checkpoint refuse the run (`they differ in kwargs.render_camera`)."""
    from test_faults import GYM_TINY

    from grpo_robot.cli import compose_train_config
    from grpo_robot.environment import env_identity

    cfg = compose_train_config(*GYM_TINY, "env.entry_point=toy_envs:Renders", "iterations=1")
    Trainer(cfg, tmp_path / "run").run()
    out = run_main("evaluate", f"checkpoint={tmp_path / 'run'}", "n_seeds=2", "video=1", "video_kwargs.render_width=48",
                   f"video_dir={tmp_path / 'films'}")  # fmt: skip
    assert out.code == 0, out.stderr
    (film,) = (tmp_path / "films").glob("*.mp4")
    height, width = iio.imread(film, index=0).shape[:2]
    assert width == 3 * height  # the env's 16 x 48 frame (scaled up for its labels); 16 x 16 without the argument
    out = run_main("evaluate", f"checkpoint={tmp_path / 'run'}", "n_seeds=2", "video_kwargs.render_width=48")
    assert out.code == 2 and "video_kwargs={'render_width': 48} is invalid: applies to the videos" in out.stderr
    seen = EnvConfig(task=None, entry_point="x:Y", kwargs={"render_camera": "agentview", "camera_name": "top"})
    assert env_identity(seen) == env_identity(EnvConfig(task=None, entry_point="x:Y"))


def test_an_episodes_caption_clip_size_and_outcome_colour_follow_its_frames():
    """An episode's frames are its start and one per step (6 frames: 5 steps); a clip for a log
    file keeps at most `max_frames` (251 at 25 fps: every 6th, 42 frames); the bottom bar is green
    for a success and red for a failure."""
    from grpo_robot.render import GREEN, RED, label
    from grpo_robot.video import Clip, Episode

    frames = np.zeros((6, 48, 64, 3), np.uint8)
    assert Episode("Reach-v1", 3, frames, True, False, 50).caption() == "success at step 5"
    assert Episode("Reach-v1", 3, frames, False, True, 50).caption() == "failure: the world failed at step 5"
    assert Episode("Reach-v1", 3, frames, False, False, 50).caption() == "failure: no success in 5 steps"
    small, fps = Clip("t", np.zeros((251, 8, 8, 3), np.uint8), 25.0, []).small(max_frames=50)
    assert (len(small), fps) == (42, 25.0 / 6)
    for ok, colour in ((True, GREEN), (False, RED)):
        labelled = label(frames[:1], "top", None, "x", ok)
        assert tuple(labelled[0, -2, -2]) == colour  # the bar's far corner, clear of its text


FRAME_AGAINST_MUJOCO = """
import mujoco, numpy as np
from grpo_robot import render
render.gl_backend()
from grpo_robot.batched import BatchedEnv
env = BatchedEnv("PushCube", 1, nthread=1)
env.reset([3])
d = mujoco.MjData(env.model)
mujoco.mj_setState(env.model, d, env.state[0], mujoco.mjtState.mjSTATE_FULLPHYSICS)
d.mocap_pos[:] = env.mocap_pos[0].reshape(-1, 3)
mujoco.mj_forward(env.model, d)
theirs = mujoco.Renderer(env.model, 240, 320)
theirs.update_scene(d, camera="front")
reference = theirs.render().astype(int)
theirs.close()
ours = env.render(camera="front")[0].astype(int)
print(np.abs(ours - reference).mean(), np.abs(ours[::-1] - reference).mean())
"""


def test_a_frame_is_mujocos_own_picture_the_right_way_up():
    """The renderer reads OpenGL's rows bottom-up and turns them over: a frame of PushCube's front
    camera equals what mujoco.Renderer draws of the same state (in a process of its own: two
    OpenGL contexts in the test process is what the platform tests avoid), and its mirror image
    does not."""
    out = subprocess.run([sys.executable, "-c", FRAME_AGAINST_MUJOCO], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    same, flipped = map(float, out.stdout.split()[-2:])
    assert same < 1.0 and flipped > 10.0, (same, flipped)
