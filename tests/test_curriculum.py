"""The start curriculum (`algo.curriculum`): easier starts are the task's own with the goal moved
nearer, from the same seed; the hook raises the difficulty on the iterations that reach the
threshold; training draws the easier starts while evaluation keeps the task's own; a resumed run
goes on from the difficulty it had reached; settings it cannot apply to are refused before any work."""

import math
import re
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from test_train import resume_matches_straight_run, small_config

from grpo_robot.batched import BatchedEnv
from grpo_robot.checkpoint import CheckpointError
from grpo_robot.config import AlgoConfig, ConfigError, CurriculumConfig, EnvConfig, validate
from grpo_robot.envs import make_task
from grpo_robot.hooks import Hook, IterationRecord, StartCurriculum
from grpo_robot.trainer import Trainer

SEEDS = np.arange(64)


def planar(env, a, b):
    return env.task.planar_distance(env.sensordata, a, b)


def test_an_easier_start_is_the_same_start_with_the_goal_nearer():
    full, easy = BatchedEnv("PushCube", len(SEEDS), nthread=1), BatchedEnv("PushCube", len(SEEDS), nthread=1)
    easy.difficulty = 0.4
    full.reset(SEEDS)
    easy.reset(SEEDS)
    goal = full.task.obs_slices["goal_pos"]
    same = np.ones(full.obs_dim, bool)
    same[goal] = False
    same[full.task.obs_slices["goal_rel"]] = False
    assert np.array_equal(full.sensordata[:, same], easy.sensordata[:, same])  # hand, fingers, cube
    assert np.array_equal(full.state, easy.state)  # the goal is a mocap body, outside the physics state
    d_full, d_easy = planar(full, "goal_pos", "cube_pos"), planar(easy, "goal_pos", "cube_pos")
    assert d_full.min() >= 0.08 - 1e-9
    np.testing.assert_allclose(d_easy, np.maximum(0.05, 0.4 * d_full), rtol=1e-9)
    assert (d_easy < d_full).all() and np.isclose(d_easy, 0.05).sum() > 10  # both ends of the rule are hit
    # the goal moved along the line from the cube: the same direction, seen from the cube
    cube = full.sensordata[:, full.task.obs_slices["cube_pos"]][:, :2]
    u_full = (full.sensordata[:, goal][:, :2] - cube) / d_full[:, None]
    u_easy = (easy.sensordata[:, goal][:, :2] - cube) / d_easy[:, None]
    np.testing.assert_allclose(u_full, u_easy, atol=1e-9)


def test_difficulty_one_is_the_task_itself_and_other_values_are_refused():
    push, lift = make_task("PushCube"), make_task("LiftCube")
    for seed in range(20):
        assert all(np.array_equal(a, b) for a, b in zip(push.initial_condition(seed),
                                                        push.initial_condition(seed, 1.0), strict=True))  # fmt: skip
    for bad in (0.0, -0.5, 1.5, math.nan):
        with pytest.raises(ValueError, match=r"difficulty must be \(0, 1\], got"):
            push.initial_condition(0, bad)
    with pytest.raises(ValueError, match=r"difficulty must be 1 \(LiftCube has no easier starts\), got 0\.5"):
        lift.initial_condition(0, 0.5)


def test_nearer_leaves_the_goal_itself_at_difficulty_one_however_near_it_is():
    """At difficulty 1 the goal is the one drawn, bit for bit, even one nearer the cube than the
    floor a lower difficulty keeps; below 1 it moves along the line to the cube, not past the floor."""
    from grpo_robot.envs.task import nearer

    cube = np.array([0.013, -0.071])
    for goal in (np.array([0.1, 0.2]) / 3, cube + [0.01, -0.02]):  # 11 cm away, and 2.2 cm: inside 5 cm
        assert nearer(goal, cube, 1.0, 0.05) is goal
    goal = cube + [0.06, 0.08]  # 10 cm away
    np.testing.assert_allclose(nearer(goal, cube, 0.7, 0.05), cube + [0.042, 0.056], rtol=1e-12)
    np.testing.assert_allclose(nearer(goal, cube, 0.3, 0.05), cube + [0.03, 0.04], rtol=1e-12)


def record(success: float, iteration: int = 1) -> IterationRecord:
    return IterationRecord(iteration, 0, {"charts/train_success": success})


def test_the_difficulty_rises_by_a_step_on_each_iteration_at_the_threshold_and_stops_at_one():
    hook = StartCurriculum(start=0.8, step=0.07, threshold=0.4)
    trainer = SimpleNamespace(env=SimpleNamespace(difficulty=1.0), sampler=SimpleNamespace(difficulty=1.0))
    hook.on_start(trainer)
    assert trainer.sampler.difficulty == 0.8  # the sampler resets its draws at it
    logged, env = [], []
    for success in (0.1, 0.39, 0.4, 0.9, 0.2, 0.5, 0.6, 1.0):
        rec = record(success)
        hook.after_iteration(trainer, rec)
        logged.append(rec.scalars["charts/difficulty"])
        env.append(trainer.sampler.difficulty)
    assert logged == pytest.approx([0.8, 0.8, 0.8, 0.87, 0.94, 0.94, 1.0, 1.0])  # what each iteration ran at
    assert env == pytest.approx([0.8, 0.8, 0.87, 0.94, 0.94, 1.0, 1.0, 1.0])
    assert env[-1] == 1.0  # exactly the task's own starts, not 1 - 1e-16
    assert hook.state_dict() == {"difficulty": 1.0}
    with pytest.raises(ConfigError, match=r"algo\.curriculum\.start=0\.8 is invalid: the training env \(.*\) has no "
                                          r"easier starts"):  # fmt: skip
        StartCurriculum(0.8, 0.1, 0.5).on_start(SimpleNamespace(env=object()))


def curriculum_config(**overrides):
    algo = AlgoConfig(group_size=8, groups_per_iter=16, epochs=2, minibatches=2,
                      curriculum=CurriculumConfig(start=0.3, step=0.1, threshold=0.5))  # fmt: skip
    return small_config(env=EnvConfig(task="PushCube"), algo=algo, **overrides)


def test_training_draws_the_easier_starts_and_evaluation_the_task_own(tmp_path):
    trainer = Trainer(curriculum_config(iterations=2), tmp_path)
    seen = []

    class Watch(Hook):
        def after_iteration(self, trainer, record):
            seen.append((record.scalars["charts/difficulty"], trainer.env.difficulty))

    trainer.hooks.append(Watch())
    trainer.run()
    assert seen == [(0.3, 0.3), (0.3, 0.3)]  # no iteration reached 50%
    assert trainer.eval_env.difficulty == 1.0
    trainer.evaluate()
    assert planar(trainer.eval_env, "goal_pos", "cube_pos").max() > 0.1  # evaluation starts stay far
    trainer.env.reset(np.arange(128))  # and the training worlds draw near goals
    assert planar(trainer.env, "goal_pos", "cube_pos").max() <= max(0.05, 0.3 * 0.3 * math.sqrt(2)) + 1e-9


def test_a_resumed_run_goes_on_from_the_difficulty_it_had_reached(tmp_path):
    cfg = curriculum_config(iterations=3, checkpoint_every=1)
    resume_matches_straight_run(cfg, tmp_path, 1)
    # the checkpoint carries the hook's state, and a resumed run starts from it
    path = tmp_path / "first" / "checkpoints" / "last.pt"
    ckpt = torch.load(path, weights_only=False)
    assert ckpt["hooks"] == {"StartCurriculum": {"difficulty": 0.3}}
    ckpt["hooks"]["StartCurriculum"]["difficulty"] = 0.75
    torch.save(ckpt, path)
    again = Trainer(replace(cfg, resume=str(tmp_path / "first")), tmp_path / "third")
    next(h for h in again.hooks if isinstance(h, StartCurriculum)).on_start(again)
    assert again.sampler.difficulty == 0.75
    again.close()
    ckpt["hooks"]["StartCurriculum"] = {"level": 0.75}  # a state of another layout: one line naming the file
    torch.save(ckpt, path)
    with pytest.raises(CheckpointError, match=rf"^{re.escape(str(path))}: its state of the StartCurriculum hook "
                                              r"cannot be restored: KeyError: 'difficulty'$"):
        Trainer(replace(cfg, resume=str(tmp_path / "first")), tmp_path / "fourth")


def test_under_dynamic_sampling_the_curriculum_and_the_evaluation_gate_read_the_success_of_every_group():
    # kept groups are the mixed ones: their success (here 0.5) is no measure of the policy, which
    # succeeded in 10% of all the groups drawn; both read charts/train_success before
    from grpo_robot.bench.tune import own_starts_success
    from grpo_robot.hooks import Evaluation

    scalars = {"charts/train_success": 0.5, "charts/drawn_success": 0.1}
    trainer = SimpleNamespace(sampler=SimpleNamespace(difficulty=0.3), evaluate=None)
    curriculum = StartCurriculum(0.3, 0.1, threshold=0.4)
    curriculum.after_iteration(trainer, IterationRecord(1, 100, dict(scalars)))
    assert curriculum.difficulty == 0.3
    curriculum.after_iteration(trainer, IterationRecord(2, 200, {**scalars, "charts/drawn_success": 0.45}))
    assert curriculum.difficulty == pytest.approx(0.4) and trainer.sampler.difficulty == curriculum.difficulty
    record = IterationRecord(5, 500, dict(scalars))
    Evaluation(5, None, False, min_train_success=0.3).after_iteration(trainer, record)  # gated: evaluate not called
    assert record.evaluation is None
    assert own_starts_success(scalars) == 0.1


FIELD = r"algo\.curriculum\."


@pytest.mark.parametrize("overrides, message", [
    ({"env": EnvConfig(task="Reach")}, r"start=0\.3 is invalid: needs a built-in task with easier starts "
                                       r"\(PushCube\); env\.task=Reach has none: set it to null"),
    ({"env": EnvConfig(task=None, id="CartPole-v1")}, r"start=0\.3 is invalid: .*env\.id=CartPole-v1 has none"),
    ({"curriculum": CurriculumConfig(start=1.0)}, r"start=1\.0 is invalid: must be in \(0, 1\)"),
    ({"curriculum": CurriculumConfig(start=0.0)}, r"start=0\.0 is invalid: must be in \(0, 1\)"),
    ({"curriculum": CurriculumConfig(start=math.nan)}, r"start=nan is invalid"),
    ({"curriculum": CurriculumConfig(start=0.3, step=0.0)}, r"step=0\.0 is invalid: must be in \(0, 1\]"),
    ({"curriculum": CurriculumConfig(start=0.3, threshold=1.5)}, r"threshold=1\.5 is invalid: must be in \(0, 1\]"),
])  # fmt: skip
def test_a_setting_it_cannot_apply_is_refused_before_any_work(overrides, message):
    curriculum = overrides.pop("curriculum", CurriculumConfig(start=0.3))
    cfg = small_config(**{"env": EnvConfig(task="PushCube"), **overrides},
                       algo=AlgoConfig(curriculum=curriculum))  # fmt: skip
    with pytest.raises(ConfigError, match=FIELD + message):
        validate(cfg)


def test_the_default_job_turns_it_on_for_pushcube_and_off_for_an_env_swapped_in():
    from grpo_robot.cli import compose_train_config

    default = compose_train_config()
    assert default.algo.curriculum == CurriculumConfig(start=0.35, step=0.05, threshold=0.4)
    assert default.target_success == 0.9 and default.time_limit_min == 9
    for env in ("reach", "lift_cube", "place_cube", "fetch_reach"):
        cfg = compose_train_config(f"env={env}")
        assert cfg.algo.curriculum.start is None and cfg.target_success is None  # as before the curriculum
        assert cfg.time_limit_min is None  # the job's 9 minutes are PushCube's (a Fetch run stopped at them)
        validate(cfg)
    cfg = compose_train_config("env=reach", "algo.curriculum.start=0.5")  # asked for by name: refused
    with pytest.raises(ConfigError, match=FIELD + r"start=0\.5 is invalid: needs a built-in task with easier"):
        validate(cfg)
