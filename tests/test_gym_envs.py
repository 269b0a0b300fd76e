"""The Gymnasium backend on envs defined in tests/toy_envs.py: seeded groups, the success signal,
observation and action mapping, contained crashes, bad input, and training end to end."""

import json
import logging
from dataclasses import replace

import numpy as np
import pytest
import torch
from cli_harness import run_main
from test_env_faults import proc_stat
from test_train import ROOT, run_cli, small_config

from grpo_robot.config import ConfigError, DemoConfig, EnvConfig, env_config, to_train_config
from grpo_robot.environment import make_env
from grpo_robot.gym_vector import EnvFailure, GymGroupEnv, OutcomeEnv, make_inner, unit_actions
from grpo_robot.seeding import group_seeds
from grpo_robot.trainer import Trainer


def toy(cls: str = "PointReach", **kw) -> EnvConfig:
    return EnvConfig(task=None, entry_point=f"toy_envs:{cls}", horizon=kw.pop("horizon", 40), **kw)


def steer(obs: np.ndarray, gain: float = 5.0) -> np.ndarray:
    """A scripted controller for PointReach in the backend's [-1, 1] action units."""
    return np.clip(gain * (obs[:, 2:4] - obs[:, 0:2]), -1.0, 1.0)


@pytest.mark.parametrize("vector", ["sync", "async"])
def test_group_reset_gives_equal_starts_and_seeds_matter(vector):
    env = GymGroupEnv(toy(vector=vector), 6)
    try:
        obs = env.reset(group_seeds([3, 4, 5], 2)).reshape(3, 2, -1)
        assert (obs[:, 0] == obs[:, 1]).all()  # bit-identical within a group
        goals = obs[:, 0, 2:]
        assert len({tuple(g) for g in goals}) == 3  # different seeds, different goals
        again = env.reset(group_seeds([5, 3, 4], 2)).reshape(3, 2, -1)
        assert (again[1] == obs[0]).all() and (again[0] == obs[2]).all()  # a seed is its start, in any world
    finally:
        env.close()


def test_async_workers_start_from_the_fork_server_after_this_process_stepped_threaded_physics():
    """The async backend's workers are never forks of this process (whose threads they would not
    have): their parent is the fork server. Built after a threaded `BatchedEnv` was stepped and
    dropped into a reference cycle, as happens in any process that trained on a built-in task first,
    the pool answers and steps."""
    import gc
    import multiprocessing.forkserver
    import os

    from grpo_robot import BatchedEnv
    from grpo_robot.gym_vector import start_method

    physics = BatchedEnv("Reach", 4, nthread=2)
    physics.reset(np.arange(4))
    physics.step(np.zeros((4, physics.action_dim), np.float32))
    cycle = [physics]
    cycle.append(cycle)
    del physics, cycle
    gc.disable()  # the cycle is collected in the workers, if anywhere
    try:
        env = GymGroupEnv(toy(vector="async"), 4)
    finally:
        gc.enable()
    try:
        parents = {proc_stat(pid)[1] for pid in env.worker_pids()}
        assert start_method() == "forkserver"
        assert parents == {multiprocessing.forkserver._forkserver._forkserver_pid} != {os.getpid()}
        obs = env.reset(group_seeds([3, 4], 2))
        assert (obs[0] == obs[1]).all() and (obs[2] == obs[3]).all() and (obs[0] != obs[2]).any()
    finally:
        env.close()


def test_async_worlds_are_built_in_their_workers_and_once_here():
    # this process builds one env, the probe's, which Gymnasium then reads the spaces from and closes;
    # it used to build a second one for that (a robosuite Lift world: about 0.24 s, after the first)
    import toy_envs

    toy_envs.CountsBuilds.built.clear()
    env = GymGroupEnv(toy("CountsBuilds", vector="async"), 3)
    try:
        assert len(toy_envs.CountsBuilds.built) == 1 and toy_envs.CountsBuilds.built[0].closed
        assert len(set(env.worker_pids())) == 3
        obs = env.reset(np.array([1, 1, 2]))
        assert (obs[0] == obs[1]).all() and (obs[0] != obs[2]).any()
    finally:
        env.close()


def test_actions_are_mapped_onto_the_box_and_success_ends_the_episode():
    env = GymGroupEnv(toy(), 4)
    obs = env.reset(np.array([10, 11, 12, 13]))
    inner = env.vec.envs[0].inner.unwrapped
    env.step(np.array([[1.0, -0.5]] * 4))
    np.testing.assert_allclose(inner.last_action, [2.0, -1.0])  # [-1, 1] -> [-2, 2]
    assert (env.steps == 1).all()
    env.reset(np.array([10, 11, 12, 13]))
    rewards = []
    obs = env.obs()
    steer_worlds = np.array([True, True, False, False])  # worlds 2, 3 stand still
    while not env.done.all():
        actions = np.where(steer_worlds[:, None], steer(obs), 0.0)
        obs, reward, terminated, truncated, info = env.step(actions)
        rewards.append(reward)
    goals = np.linalg.norm(obs[:, 2:], axis=1)
    assert (goals[2:] > 0.1).all()  # standing still at the origin cannot succeed on these seeds
    assert env.terminated.tolist() == [True, True, False, False]
    assert env.truncated.tolist() == [False, False, True, True]
    assert (env.steps[:2] < 40).all() and (env.steps[2:] == 40).all()  # success ends it, else the horizon
    assert np.sum(rewards, axis=0).tolist() == [1.0, 1.0, 0.0, 0.0]  # one reward, on the success step
    assert not env.failed.any()
    # a finished world is not called again: each world's wrapper was stepped once per step it ran
    calls = [0] * 4
    for i, world in enumerate(env.vec.envs):
        world.step = lambda action, i=i, step=world.step: (calls.__setitem__(i, calls[i] + 1), step(action))[1]
    env.reset(np.array([10, 11, 12, 13]))
    obs = env.obs()
    while not env.done.all():
        obs = env.step(np.where(steer_worlds[:, None], steer(obs), 0.0))[0]
    assert calls == env.steps.tolist() and calls[0] < 40


def test_actions_map_onto_a_box_with_an_unbounded_dimension():
    import gymnasium as gym

    from grpo_robot.gym_vector import OutcomeEnv

    class Open(gym.Env):
        observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
        action_space = gym.spaces.Box(np.array([-2.0, -np.inf, 0.0]), np.array([2.0, np.inf, 1.0]), dtype=np.float64)

    world = OutcomeEnv(toy(), 10, inner=Open())
    mapped = world.to_env_action(np.array([0.5, -3.0, 1.5]))
    assert mapped.tolist() == [1.0, -1.0, 1.0]  # scaled, passed through (after the clip to [-1, 1]), clipped
    assert world.to_env_action(np.array([-1.0, 0.25, 0.0])).tolist() == [-2.0, 0.25, 0.5]
    np.testing.assert_array_equal(world.from_env_action(np.array([-2.0, 0.25, 0.5])), [-1.0, 0.25, 0.0])


def test_final_step_outcome_judges_the_last_step():
    env = GymGroupEnv(toy(outcome="final_step", horizon=30), 2)
    obs = env.reset(np.array([10, 10]))
    while not env.done.all():
        obs, *_ = env.step(steer(obs) * np.array([[1.0], [0.0]]) if env.steps[0] < 20 else -np.ones((2, 2)))
    assert (env.steps == 30).all() and not env.terminated.any()  # no early end on success
    assert not env.success.any()  # world 0 reached the goal, then drove away from it


def test_success_fn_and_dict_observations():
    fn = GymGroupEnv(toy("NoSuccessKey", success_fn="toy_envs:goal_reached"), 2)
    obs = fn.reset(np.array([10, 10]))
    while not fn.done.all():
        obs, *_ = fn.step(steer(obs))
    assert fn.terminated.all()
    plain = GymGroupEnv(toy(), 1).reset(np.array([7]))
    picked = GymGroupEnv(toy("DictPointReach", obs_keys=["position", "goal"]), 1)
    assert picked.obs_dim == 4
    assert (picked.reset(np.array([7])) == plain).all()
    every = GymGroupEnv(toy("DictPointReach"), 1)  # default: every key, in the space's (sorted) order
    assert every.obs_dim == 5
    assert (every.reset(np.array([7]))[0, :4] == plain[0, [2, 3, 0, 1]]).all()  # goal, position, time


def test_env_that_ignores_its_seed_is_refused_unless_told():
    # checked when the env is built, before any work: equal seeds, then a second reset from the same seeds
    with pytest.raises(ValueError, match="ignores its reset seed: worlds 0 and 1 were both reset with seed 0"):
        GymGroupEnv(toy("GlobalRandomReach"), 4)
    with pytest.raises(ValueError, match="world 0 was reset twice with seed 0.*env.check_seeding=false"):
        GymGroupEnv(toy("GlobalRandomReach"), 1)
    noisy = GymGroupEnv(toy("GlobalRandomReach", check_seeding=False), 4)
    obs = noisy.reset(group_seeds([3, 4], 2))
    assert not (obs[0] == obs[1]).all()


def test_registered_id_horizon_and_close_matches():
    import toy_envs  # noqa: F401  (registers toy/PointReach-v0)

    env = GymGroupEnv(EnvConfig(task=None, id="toy/PointReach-v0"), 2)
    assert env.horizon == 40  # from the registered TimeLimit
    env.reset(np.array([1, 2]))
    while not env.done.all():
        env.step(np.zeros((2, 2)))
    assert (env.steps == 40).all()
    short = GymGroupEnv(EnvConfig(task=None, id="toy/PointReach-v0", horizon=10), 1)
    short.reset(np.array([1]))
    while not short.done.all():
        short.step(np.zeros((1, 2)))
    assert short.steps[0] == 10
    message = r"env.id='toy/PointRech-v0' is not a registered .*close matches: toy/PointReach-v0"
    with pytest.raises(ValueError, match=message):
        GymGroupEnv(EnvConfig(task=None, id="toy/PointRech-v0"), 1)


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        (toy("NoSuccessKey"),
         r"env.success_key='is_success' is not in the info it returned, which has keys \['distance'\]"),
        (toy("ArraySuccess"),  # was blamed on env.success_fn=None
         r"^toy_envs:ArraySuccess: info\['is_success'\] \(env.success_key\) is not a single truth value: ValueError: "
         r"info\['is_success'\] holds 2 values, not one success flag"),
        (toy("DiscreteActions"),
         r"its action space Discrete\(4\) is not supported; grpo-robot needs continuous actions in a float "
         "gymnasium.spaces.Box"),
        (EnvConfig(task=None, entry_point="no_such_pkg.envs:Arm", horizon=5),
         r"env.entry_point='no_such_pkg.envs:Arm' could not be imported: ModuleNotFoundError: No module named "
         "'no_such_pkg'"),
        (toy("PointRach"), r"toy_envs has no attribute 'PointRach'; close matches: PointReach"),
        (toy("DictPointReach", obs_keys=["pos"]), r"env.obs_keys names 'pos', but .* observes goal, position, time"),
        (EnvConfig(task=None, entry_point="toy_envs:PointReach"), r"has no time limit .*set env.horizon"),
        (toy(imports=["no_such_pkg"]), r"env.import='no_such_pkg' failed: ModuleNotFoundError"),
        (toy(kwargs={"sped": 1}), r"^env.kwargs.sped is invalid: toy_envs:PointReach takes no argument 'sped'$"),
        (toy("LongerObservation"),  # was numpy's "Output array is the wrong shape"
         r"^toy_envs:LongerObservation: at reset, its observation has 5 values where its observation space "
         r"declares 4$"),
        (toy("RaisesInConstructor"),  # was a traceback
         r"^toy_envs:RaisesInConstructor could not be built: RuntimeError: cannot open the robot's serial port$"),
        (EnvConfig(task=None, id="grpo_robot/Reach-v1", horizon=5, kwargs={"a": 1}),
         r"^env.kwargs.a is invalid: grpo_robot/Reach-v1 takes no argument 'a'$"),  # was a TypeError traceback
    ],
)  # fmt: skip
def test_bad_envs_get_one_clear_line(cfg, message):
    with pytest.raises(ValueError, match=message) as info:
        make_env(cfg, 2)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("kwargs", ["env.kwargs={sped: 1}", "env.kwargs.sped=1", "+env.kwargs.sped=1"])
def test_constructor_arguments_reach_the_env_however_they_are_written(kwargs, tmp_path):
    """`env.kwargs={...}` (as docs/custom_envs.md writes it) and `env.kwargs.k=v` used to be refused by
    Hydra as new keys, in a line that blamed the default job's PushCube."""
    out = run_main("train", "env=gym", "env.entry_point=toy_envs:PointReach", "env.horizon=10", kwargs,
                   f"hydra.run.dir={tmp_path / 'run'}")  # fmt: skip
    assert out.code == 2 and out.error_lines == ["error: env.kwargs.sped is invalid: toy_envs:PointReach takes no "
                                                 "argument 'sped'"], out.stderr[-1000:]  # fmt: skip


def test_an_env_refused_once_built_leaves_no_run_directory(tmp_path, monkeypatch):
    """Some env checks need the env built, after the run directory is claimed: the directory this
    command made goes again; one the user named that existed stays, with what it held."""
    monkeypatch.chdir(tmp_path)
    no_limit = ("env=gym", "env.entry_point=toy_envs:PointReach")
    for where in ([f"hydra.run.dir={tmp_path / 'named'}"], []):  # named by the user; the default runs/train/<time>
        out = run_main("train", *no_limit, *where)
        assert out.code == 2 and out.error_lines[-1].endswith(
            "has no time limit (spec.max_episode_steps, or a TimeLimit wrapper); set env.horizon"), out.stderr[-1000:]
    assert not (tmp_path / "named").exists() and not (tmp_path / "runs").exists()  # nor the runs/train/ it made
    (tmp_path / "runs" / "train" / "earlier").mkdir(parents=True)
    out = run_main("train", *no_limit)
    assert out.code == 2 and [p.name for p in (tmp_path / "runs" / "train").iterdir()] == ["earlier"]
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("kept")
    out = run_main("train", *no_limit, f"hydra.run.dir={tmp_path / 'mine'}")
    assert out.code == 2 and (tmp_path / "mine" / "notes.txt").read_text() == "kept"


def test_env_config_keys_are_checked():
    assert env_config({"task": None, "id": "X-v0", "import": ["pkg"]}).imports == ["pkg"]
    with pytest.raises(ConfigError, match=r"env.sucess_key is not an env key \(did you mean env.success_key\?\)"):
        env_config({"task": None, "id": "X-v0", "sucess_key": "done"})
    with pytest.raises(ConfigError, match=r"env.task='Reach' and env.id='FetchReach-v4' are both set"):
        Trainer(small_config(env=EnvConfig(task="Reach", id="FetchReach-v4")), "/nonexistent")
    with pytest.raises(ConfigError, match=r"pretrain=True is invalid: on env.entry_point=toy_envs:PointReach needs "
                                          r"demonstrations: an expert \(demos.expert=module:attr\) or a dataset"):
        Trainer(small_config(env=toy(), pretrain=True), "/nonexistent")
    with pytest.raises(ConfigError, match="demos.expert='nope' is invalid: must be module:attr"):
        Trainer(small_config(env=toy(), pretrain=True, demos=DemoConfig(expert="nope")), "/nonexistent")
    with pytest.raises(ConfigError, match="env.group_start='copy' is invalid"):
        Trainer(small_config(env=toy(group_start="copy")), "/nonexistent")
    saved = to_train_config({"env": {"task": None, "id": "X-v0", "import": ["pkg"]}})
    assert saved.env.imports == ["pkg"]


def test_crashing_and_nan_worlds_are_contained(caplog):
    for cls, kw in (("PointReach", {"kwargs": {"crash_at": 3}}), ("NaNAfterFirstStep", {})):
        env = GymGroupEnv(toy(cls, **kw), 8)
        obs = env.reset(np.arange(8) + 100)
        goal = obs[:, 2:]
        with caplog.at_level(logging.WARNING, logger="grpo_robot.gym_vector"):
            while not env.done.all():
                obs, _, _, _, info = env.step(steer(obs))
        doomed = goal[:, 0] > 0 if cls == "PointReach" else goal[:, 1] > 0
        doomed &= env.steps >= (3 if cls == "PointReach" else 2)  # a world may succeed before its crash
        assert doomed.any() and (env.failed == doomed).all(), (env.failed, doomed)
        assert info["n_failed"] == doomed.sum()
        assert env.success[~doomed].all() and not env.success[doomed].any()
        assert np.isfinite(obs).all()  # a failed world keeps its last good observation
    assert "simulated crash" in caplog.text and "non-finite observation" in caplog.text


def test_env_horizon_wins_over_a_shorter_time_limit_of_the_entry_point():
    env = GymGroupEnv(toy("limited_point_reach", horizon=12), 2)  # the entry point's TimeLimit: 5 steps
    env.reset([1, 2])
    while not env.done.all():
        env.step(np.zeros((2, 2), np.float32))  # standing still: no success, the horizon ends it
    assert env.steps.tolist() == [12, 12] and not env.failed.any()  # cut at 5 before, as failures
    env.close()


def test_a_success_key_lost_after_the_probe_fails_its_worlds_in_one_line():
    """A world whose info loses the key fails (was a MissingSuccessKey traceback, nothing saved);
    here every world does, which the trainer ends as an EnvFailure, with its last iteration saved."""
    env = GymGroupEnv(toy("LateNoSuccessKey"), 4)  # the probe's first step has it
    env.reset(np.arange(4) + 100)
    for _ in range(2):
        env.step(np.zeros((4, 2), np.float32))
    with pytest.raises(EnvFailure, match=r"every one of the 4 worlds failed; first error: world 0 \(seed 100\) step 3: "
                                         r"env.success_key='is_success' is not in the info it returned"):  # fmt: skip
        env.step(np.zeros((4, 2), np.float32))
    env.close()


def test_training_on_a_gymnasium_env_learns_and_checkpoints(tmp_path):
    cfg = small_config(env=toy(), iterations=12, eval_seeds=100, eval_at_start=True,
                       algo=replace(small_config().algo, group_size=8, groups_per_iter=16, lr=1e-3))  # fmt: skip
    trainer = Trainer(cfg, tmp_path)
    assert trainer.eval_env is trainer.env  # evaluated in chunks on the training worlds
    summary = trainer.run()
    after = trainer.last_eval
    trainer.close()
    before = summary["initial_policy"]["eval"]  # eval_at_start: the random policy on the same seeds
    assert summary["initial_policy"]["source"] == "random initial weights (seed 0)"
    assert before["n"] == len(after.success) == 100
    assert after.rate >= before["success_rate"] + 0.3, f"{before['success_rate']:.2f} -> {after.rate:.2f}"
    ckpt = torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["iteration"] == 12 and ckpt["config"]["env"]["entry_point"] == "toy_envs:PointReach"
    resumed = Trainer(replace(cfg, iterations=13, resume=str(tmp_path / "checkpoints" / "last.pt")), tmp_path / "r")
    assert resumed.iteration == 12


def test_cli_trains_and_evaluates_a_registered_gym_env(tmp_path, monkeypatch):
    """Training in its own process finds toy_envs.py in its working directory; evaluation and a bad
    env id run the same entry points in this process."""
    run_dir = tmp_path / "run"
    args = ["env=gym", "env.id=toy/PointReach-v0", "env.import=[toy_envs]", "algo.group_size=4",
            "algo.groups_per_iter=4", "iterations=2", "eval_seeds=20", "progress=false",
            f"hydra.run.dir={run_dir}"]  # fmt: skip
    result = run_cli("train.py", *args, cwd=ROOT / "tests")  # toy_envs.py is found in the working dir
    assert result.returncode == 0, result.stderr
    assert (run_dir / "checkpoints" / "last.pt").is_file()
    assert "import:\n  - toy_envs" in (run_dir / "resolved_config.yaml").read_text()
    monkeypatch.chdir(ROOT / "tests")
    result = run_main("evaluate", f"checkpoint={run_dir}", "n_seeds=24")
    assert result.code == 0, result.stderr
    record = json.loads(next(run_dir.glob("checkpoints/*_eval_test_24_deterministic.json")).read_text())
    assert not (ROOT / "tests" / "evaluate.log").exists()  # the evaluation writes only its JSON
    assert record["task"] == "toy/PointReach-v0" and record["n"] == 24  # 24 seeds on 16 worlds: two chunks
    bad = run_main("train", "env=gym", "env.id=toy/PointReach-v9", "env.import=[toy_envs]",
                   f"hydra.run.dir={run_dir.parent / 'bad'}")  # fmt: skip
    assert bad.code == 2 and len(bad.error_lines) == 1, bad.stderr
    assert bad.error_lines[0].startswith("error: env.id='toy/PointReach-v9' is not a registered")
    assert "close matches: toy/PointReach-v0" in bad.error_lines[0]


def test_custom_envs_doc_example_runs_as_written(tmp_path, monkeypatch):
    """docs/custom_envs.md: its module, saved as my_envs.py, imported and checked here; then its
    command, run from the module's directory, trains to the result the page states."""
    import re

    doc = (ROOT / "docs" / "custom_envs.md").read_text()
    code = re.search(r"```python\n(.*?)```", doc, re.S).group(1)
    command = re.search(r"```bash\n(python scripts/train.py env=gym env.entry_point=my_envs:BallReach .*?)\n```", doc)
    (tmp_path / "my_envs.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    import my_envs

    cfg = EnvConfig(task=None, entry_point="my_envs:BallReach", horizon=50)
    env = GymGroupEnv(cfg, 4)
    obs = env.reset(group_seeds([0, 1], 2))
    assert (obs[0] == obs[1]).all() and not (obs[0] == obs[2]).all()
    ball = env.vec.envs[2].inner  # put world 2's ball on its goal: that step succeeds
    assert isinstance(ball, my_envs.BallReach)
    ball.data.qpos[:] = ball.goal
    env.step(np.zeros((4, 2)))
    assert env.success.tolist() == [False, False, True, False] and env.terminated[2]

    args = command.group(1).split()[2:]  # after "python scripts/train.py"; the same entry point, in this process
    monkeypatch.chdir(tmp_path)
    run = run_main("train", *args, f"hydra.run.dir={tmp_path}/run")
    assert run.code == 0, run.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["iterations"] == 15 and summary["eval"]["n"] == 200
    assert summary["eval"]["success_rate"] >= 0.95, summary["eval"]  # the page states 100%


def test_a_list_success_flag_half_bounded_actions_and_an_entry_points_own_time_limit():
    """A one-element list `[False]` read as a success (bool of a non-empty list); a half-bounded action
    dimension got values outside the Box (the [-1, 1] value unchanged, below a low bound of 0); an
    entry point's own TimeLimit was "no time limit"."""
    env = GymGroupEnv(toy("ListSuccess", horizon=5), 2)
    env.reset(np.arange(2))
    env.step(np.zeros((2, 2)))
    assert not env.success.any()  # the point starts away from its goal
    env.close()
    env = GymGroupEnv(toy("HalfBounded", horizon=5), 2)
    env.reset(np.arange(2))
    env.step(np.array([[-1.0, -1.0], [1.0, 1.0]]))
    assert not env.failed.any()
    env.close()
    world = OutcomeEnv(toy("HalfBounded"), 5, make_inner(toy("HalfBounded")))
    mapped = [world.to_env_action(np.array(a)).tolist() for a in ([-1, -1], [1, 1], [0, 0.5])]
    assert mapped == [[0, -1], [2, 1], [1, 0.5]]
    assert np.array_equal(unit_actions(np.array([[0.0, -1.0], [2.0, 1.0]]), np.array([0.0, -np.inf]),
                                       np.array([np.inf, 1.0])), [[-1, -1], [1, 1]])  # fmt: skip
    env = GymGroupEnv(EnvConfig(task=None, entry_point="toy_envs:wrapped_point"), 2)
    assert env.horizon == 7
    env.close()


def test_a_checkpoint_trained_on_all_dict_keys_is_refused_for_another_key_order(tmp_path):
    """Its config says obs_keys=null (all keys, in the space's order); the same keys in another order
    have the same size, and init_from took them: the policy read each value as another's. The
    checkpoint now records the keys it observed."""
    cfg = small_config(env=toy("DictPointReach", horizon=10), iterations=1, eval_seeds=4)
    trainer = Trainer(cfg, tmp_path / "run")
    trainer.run()
    trainer.close()
    last = tmp_path / "run" / "checkpoints" / "last.pt"
    Trainer(replace(cfg, init_from=str(last)), tmp_path / "same").close()  # the same keys, named or not
    Trainer(replace(cfg, env=toy("DictPointReach", horizon=10, obs_keys=["goal", "position", "time"]),
                    init_from=str(last)), tmp_path / "named").close()  # fmt: skip
    other = replace(cfg, env=toy("DictPointReach", horizon=10, obs_keys=["time", "position", "goal"]),
                    init_from=str(last))  # fmt: skip
    with pytest.raises(ValueError, match=r"obs_keys=\[goal, position, time\].*obs_keys=\[time, position, goal\]"):
        Trainer(other, tmp_path / "other")


def test_evaluate_and_resume_refuse_an_env_whose_observation_keys_changed_since(tmp_path, monkeypatch):
    """The config is the checkpoint's own, obs_keys=null (all keys): an env whose Dict observation
    renamed a key since scored the checkpoint on permuted inputs (81.5% became 1.5%, exit 0), and a
    resumed run trained on them; an added key was a traceback. Both now compare the keys observed."""
    import toy_envs

    cfg = small_config(env=toy("RenamingDictReach", horizon=10), iterations=1, eval_seeds=4)
    trainer = Trainer(cfg, tmp_path / "run")
    trainer.run()
    trainer.close()
    out = run_main("evaluate", f"checkpoint={tmp_path / 'run'}", "n_seeds=4")
    assert out.code == 0, out.stderr
    for renamed, key in (({"goal": "target"}, "obs_keys"), ({"time": "a_time"}, "obs_keys")):
        monkeypatch.setattr(toy_envs, "RENAMED_KEYS", renamed)
        out = run_main("evaluate", f"checkpoint={tmp_path / 'run'}", "n_seeds=4")
        assert out.code == 2 and len(out.error_lines) == 1 and out.error_lines[-1].endswith(
            f"(they differ in {key})"), out.stderr  # fmt: skip
        assert "obs_keys=[goal, position, time]" in out.error_lines[-1]
        with pytest.raises(ValueError, match=rf"^resume=.* is for .*obs_keys=\[goal, position, time\].*\(they differ "
                                             rf"in {key}\)$"):  # fmt: skip
            Trainer(replace(cfg, resume=str(tmp_path / "run"), iterations=2), tmp_path / "run")


def test_env_nthread_on_a_gymnasium_env_is_one_line_that_says_what_it_is_for(tmp_path):
    """It said "env.nthread is not a key of env (did you mean env.nthread?)" and listed a built-in
    task's keys; with + it was accepted and ignored."""
    gym = ("env=gym", "env.entry_point=toy_envs:PointReach", "env.horizon=10", f"hydra.run.dir={tmp_path / 'r'}")
    out = run_main("train", *gym, "env.nthread=1")
    assert out.code == 2 and out.error_lines[-1].endswith(
        "(only built-in tasks use it; a Gymnasium env steps its own worlds)"), out.stderr[-500:]
    assert "did you mean" not in out.error_lines[-1] and "keys: task, id, entry_point" in out.error_lines[-1]
    out = run_main("train", *gym, "+env.nthread=1")
    assert out.code == 2 and "env.nthread=1 is invalid: is for built-in tasks" in out.error_lines[-1], out.stderr
    assert not (tmp_path / "r").exists()


def test_a_reset_that_keeps_state_from_the_episode_before_is_refused_or_named(caplog):
    """Equal seeds gave equal starts at build (two resets back to back), so an env whose reset
    leaves the arm where the last episode left it passed, and its groups started apart without a
    word. The build's check now steps the worlds apart between its resets; a leak that shows only
    later is named in a warning at the reset where it shows (once)."""
    with pytest.raises(ValueError, match=r"^toy_envs:LeakyReset ignores its reset seed: world \d was reset twice with "
                                         r"seed \d, a few steps apart, but started from different observations "
                                         r"\(obs\[[01]\]: "):  # fmt: skip
        GymGroupEnv(toy("LeakyReset"), 4)
    env = GymGroupEnv(toy("LeakyReset", kwargs={"from_reset": 6}), 4)  # past the build's resets
    try:
        with caplog.at_level(logging.WARNING, logger="grpo_robot.gym_vector"):
            for _ in range(4):
                env.reset([1, 1, 2, 2])
                for _ in range(3):  # each world its own way
                    env.step(np.array([[1.0, 0.5], [-1.0, 0.2], [0.3, -1.0], [-0.4, 1.0]]))
        warned = [r.getMessage() for r in caplog.records if "ignores its reset seed" in r.getMessage()]
        assert len(warned) == 1 and "were both reset with seed 1" in warned[0] and warned[0].endswith(
            "this run's groups are not equal starts from here on"), warned  # fmt: skip
    finally:
        env.close()


def test_a_dict_entry_is_named_in_the_seeding_message_and_an_image_entry_is_warned_of(caplog):
    with caplog.at_level(logging.WARNING, logger="grpo_robot.gym_vector"):
        with pytest.raises(ValueError, match=r"started from different observations \(obs\['state'\]\[[23]\]: "):
            GymGroupEnv(toy("DictGoalUnseeded"), 4)  # 'cam' comes first: flat index 194 or 195 named as this
    assert ("toy_envs:DictGoalUnseeded: observation['cam'] is a uint8 Box of shape (8, 8, 3), which the policy's MLP "
            "takes flattened into 192 raw inputs (no image encoder); leave it out with env.obs_keys=[state]"
            ) in caplog.text  # fmt: skip


def test_a_string_success_flag_is_refused_and_a_reused_observation_array_is_kept_as_it_was():
    """bool("False") is True: every episode ended at step 1 as a success (100% evaluated). And a
    world that failed kept the env's own array, which the env went on filling (with NaN)."""
    with pytest.raises(ValueError, match=r"^toy_envs:StringSuccess: info\['is_success'\] \(env.success_key\) is not "
                                         r"a single truth value: .*is the string 'False', not a success flag \(a "
                                         r"bool or a number\)$"):  # fmt: skip
        GymGroupEnv(toy("StringSuccess"), 2)  # the probe's step, before any work
    seeds = [s for s in range(40) if (np.random.default_rng(s).uniform(-0.5, 0.5, 2)[0] > 0)][:2] + \
        [s for s in range(40) if (np.random.default_rng(s).uniform(-0.5, 0.5, 2)[0] <= 0)][:2]  # fmt: skip
    env = GymGroupEnv(toy("ReusedBuffer", check_seeding=False), 4)
    try:
        env.reset(seeds)
        for _ in range(6):
            obs, *_ = env.step(np.zeros((4, 2)))
        assert env.failed.tolist() == [True, True, False, False] and np.isfinite(obs).all(), (env.failed, obs)
    finally:
        env.close()


def test_evaluate_and_resume_refuse_an_env_whose_action_bounds_changed_since(tmp_path):
    """The checkpoint kept no action bounds: a policy trained on [-2, 2] was evaluated on [-5, 5]
    (its actions 2.5 times as large) without a word; a dataset was refused for the same change."""
    import toy_envs

    run = tmp_path / "run"
    out = run_main("train", "env=gym", "env.entry_point=toy_envs:Bounded", "env.horizon=10", "iterations=1",
                   "eval_seeds=4", "algo.group_size=2", "algo.groups_per_iter=2", "algo.minibatches=1",
                   "policy.hidden_sizes=[16]", "progress=false", f"hydra.run.dir={run}")  # fmt: skip
    assert out.code == 0, out.stderr
    toy_envs.Bounded.HIGH = 5.0  # the env's code changed since
    try:
        for command, args in (("evaluate", [f"checkpoint={run}", "n_seeds=4"]),
                              ("train", [f"resume={run}", "iterations=2"])):
            out = run_main(command, *args)
            assert out.code == 2 and out.error_lines[0].endswith(
                "was trained on action bounds low=[-2, -2] high=[2, 2], but toy_envs:Bounded has low=[-5, -5] "
                "high=[5, 5]; give the env the bounds it had (env.kwargs)"), (command, out.error_lines)  # fmt: skip
    finally:
        toy_envs.Bounded.HIGH = 2.0
    assert run_main("evaluate", f"checkpoint={run}", "n_seeds=4").code == 0


def test_a_gymnasium_run_resumes_with_another_vector_backend_or_step_timeout(tmp_path):
    """`resume=<run> env.vector=async` (which the hang message recommends) was refused: the
    command line composed over the default env preset, which has no `vector` key."""
    from grpo_robot import checkpoint

    run = tmp_path / "run"
    tiny = ["env=gym", "env.entry_point=toy_envs:PointReach", "env.horizon=10", "eval_seeds=4", "algo.group_size=2",
            "algo.groups_per_iter=2", "algo.minibatches=1", "policy.hidden_sizes=[16]", "progress=false"]  # fmt: skip
    assert run_main("train", *tiny, "iterations=1", f"hydra.run.dir={run}").code == 0
    out = run_main("train", f"resume={run}", "iterations=2", "env.vector=async", "env.step_timeout_s=60")
    assert out.code == 0, out.stderr
    env = checkpoint.load(run, purpose="resume")["config"]["env"]
    assert (env["vector"], env["step_timeout_s"], env["entry_point"]) == ("async", 60.0, "toy_envs:PointReach")
    out = run_main("train", f"resume={run}", "iterations=3", "env.horizon=20")  # what is trained: refused
    assert out.code == 2 and "env.horizon" in out.error_lines[0], out.error_lines


def test_a_success_fn_that_returns_no_flag_is_refused_and_a_later_odd_terminated_fails_its_world_only():
    """A success_fn returning any object (here the info dict) counted every episode a success; a
    `terminated` that became an array took the whole run down (outside the env's error handling)."""
    with pytest.raises(ValueError, match=r"env.success_fn's value is a dict, not a success flag \(a bool or a number"):
        GymGroupEnv(toy(success_fn="toy_envs:success_as_info"), 2)
    env = GymGroupEnv(toy("ArrayTerminatedLater", kwargs={"at": 3}), 2)
    try:
        env.reset([1, 1])
        for _ in range(2):
            env.step(np.zeros((2, 2)))
        assert not env.failed.any()
        with pytest.raises(EnvFailure, match=r"every one of the 2 worlds failed.*terminated holds 2 values, not one"):
            env.step(np.zeros((2, 2)))  # the worlds fail as in any other error of the env's step
    finally:
        env.close()


def test_a_world_whose_env_raised_is_not_a_success():
    """With the final step's outcome and a wide tolerance every world would succeed; the worlds
    whose env raised are failures, in `success` and in the step's `is_success`."""
    env = GymGroupEnv(toy(outcome="final_step", horizon=5, kwargs={"tolerance": 10.0, "crash_at": 3}), 8)
    try:
        env.reset(list(range(8)))
        for _ in range(5):
            if env.done.all():
                break
            info = env.step(np.zeros((8, 2)))[4]
        assert 0 < env.failed.sum() < 8
        assert not env.success[env.failed].any() and env.success[~env.failed].all()
        assert not info["is_success"][env.failed].any()
    finally:
        env.close()
