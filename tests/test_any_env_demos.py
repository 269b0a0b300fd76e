"""Demonstrations and equal group starts for any Gymnasium env: clone-based group starts, expert
sources, the ecosystem's dataset formats, and the pipeline on an env the project does not ship."""

import json
import re
from dataclasses import replace
from pathlib import Path

import h5py
import numpy as np
import pytest

from grpo_robot import checkpoint
from grpo_robot.config import AlgoConfig, BCConfig, DemoConfig, EnvConfig, PolicyConfig, TrainConfig
from grpo_robot.datasets import load_demos
from grpo_robot.demos import DatasetError, DemoDataset, collect_expert_demos, replay
from grpo_robot.gym_vector import GymGroupEnv, unit_actions
from grpo_robot.trainer import Trainer

DATA = Path(__file__).parent / "data"
MINARI = DATA / "minari" / "grpo-robot" / "fetch-push-expert-v0"
ROBOMIMIC = DATA / "robomimic_lift_2demos.hdf5"
FETCH_PUSH = dict(id="FetchPush-v4", imports=["gymnasium_robotics"], obs_keys=["observation", "desired_goal"])


def toy(cls: str, **kw) -> EnvConfig:
    return EnvConfig(task=None, entry_point=f"toy_envs:{cls}", horizon=kw.pop("horizon", 40), **kw)


# -- equal group starts by copying ----------------------------------------------------------------
@pytest.mark.parametrize(
    "cls, vector, method",
    [
        ("GlobalRandomReach", "sync", "deepcopy"),
        ("StatefulRandomReach", "sync", "state"),
        ("MujocoRandomSlide", "sync", "mujoco"),
        ("MujocoRandomSlide", "async", "mujoco"),
        ("WaypointSlide", "sync", "mujoco"),  # task state in a list of tuples
        ("StatefulRandomReach", "async", "state"),
    ],
)
def test_clone_group_starts_give_bit_identical_members(cls, vector, method):
    env = GymGroupEnv(toy(cls, group_start="clone", vector=vector), 6)
    rng = np.random.default_rng(1)
    try:
        for _ in range(2):  # the first reset picks and checks the method; the second reuses it
            obs = env.reset([5, 5, 5, 9, 9, 9])
            assert env.copy_method == method
            trajectory = [obs]
            for _ in range(15):  # equal actions within a group: members stay bit-identical
                trajectory.append(env.step(np.repeat(rng.uniform(-1, 1, (2, 2)), 3, axis=0))[0])
            trajectory = np.stack(trajectory)
            for a, b in [(0, 1), (0, 2), (3, 4), (3, 5)]:
                np.testing.assert_array_equal(trajectory[:, a], trajectory[:, b])
            # the groups start apart: async workers, forked from one server, each seed numpy's global
            # generator afresh (they used to share the server's, and every group had one start)
            assert not np.array_equal(trajectory[0, 0], trajectory[0, 3])
        if cls.startswith("Mujoco"):  # a copy draws its next start from its own generator, not the leader's
            assert len(np.unique(env.reset([1, 2, 3, 4, 5, 6])[:, 4:], axis=0)) == 6
            np.testing.assert_array_equal(env.steps[[0, 3]].repeat(3), env.steps)  # and end together
    finally:
        env.close()


def test_clone_members_diverge_by_their_own_actions_only():
    env = GymGroupEnv(toy("MujocoRandomSlide", group_start="clone"), 4)
    env.reset([1, 1, 1, 1])
    obs, *_ = env.step(np.array([[1.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [-1.0, 0.0]]))
    np.testing.assert_array_equal(obs[0], obs[1])
    assert obs[0, 2] > 0 > obs[2, 2]  # x velocity follows the action
    env.close()


def test_a_view_into_the_simulation_stays_a_view_in_a_copy():
    """An attribute that views MjData (the success check's `puck_xpos`) used to be replaced by a
    copy frozen at the start: every world read its success from where the puck started."""
    env = GymGroupEnv(toy("ViewSlide", group_start="clone", horizon=100), 4)
    seen = env.reset([7, 7, 7, 7])
    assert env.copy_method == "mujoco"
    while not env.done.all():  # a PD push toward the goal, the same in every member
        action = np.clip(8.0 * (seen[:, 4:6] - seen[:, 0:2]) - 1.0 * seen[:, 2:4], -1.0, 1.0)
        seen, *_ = env.step(action.astype(np.float32))
    assert env.success.all() and len(set(env.steps.tolist())) == 1 and env.steps[0] < 100, env.steps
    for w in env.vec.envs:  # still the live view
        inner = w.inner.unwrapped
        assert np.shares_memory(inner.puck_xpos, inner.data.xpos)
    env.close()


def test_a_reset_that_randomizes_the_model_is_copied_with_it_or_refused():
    """The `mujoco` copy carries the simulation state, not the model: a reset that changes the
    model (domain randomization) now fails the check (the members used to differ, unseen). An env
    whose own `set_state` carries the model passes it; one that nothing copies is refused."""
    with pytest.raises(ValueError, match=r"tried mujoco \(world 1's MjModel differs from world 0's in dof_damping: a "
                                         r"reset that changes the model is not carried by this copy\)") as refused:
        GymGroupEnv(toy("RandomDampingSlide", group_start="clone"), 4)
    assert "\n" not in str(refused.value)
    env = GymGroupEnv(toy("StatefulRandomDampingSlide", group_start="clone"), 4)
    env.reset([3, 3, 4, 4])
    assert env.copy_method == "state"
    damping = [float(w.inner.unwrapped.model.dof_damping[0]) for w in env.vec.envs]
    assert damping[0] == damping[1] != damping[2] == damping[3], damping
    for _ in range(20):
        obs, *_ = env.step(np.ones((4, 2), np.float32))
    np.testing.assert_array_equal(obs[0], obs[1])
    np.testing.assert_array_equal(obs[2], obs[3])
    env.close()


def test_a_set_state_that_restores_the_generator_in_place_leaves_the_copies_their_own():
    """A copy's own generators are kept aside with their state: a `set_state` that writes the
    leader's generator state into the member's generator object used to give every group, and
    every later reset, one start."""
    env = GymGroupEnv(toy("InPlaceRngReach", group_start="clone"), 6)
    obs = env.reset([1, 1, 1, 2, 2, 2])
    assert env.copy_method == "state"
    goals = obs[:, 2:4]
    np.testing.assert_array_equal(goals[0], goals[2])
    assert not np.array_equal(goals[0], goals[3])
    assert len(np.unique(env.reset([10, 11, 12, 13, 14, 15])[:, 2:4], axis=0)) == 6
    env.close()


def test_an_env_that_can_be_neither_seeded_nor_copied_is_refused():
    with pytest.raises(ValueError, match=r"env.group_start=clone") as seeded:
        GymGroupEnv(toy("UncopyableRandomReach"), 4).reset([3, 3, 4, 4])
    assert "ignores its reset seed" in str(seeded.value) and "\n" not in str(seeded.value)
    with pytest.raises(ValueError, match=r"cannot give a group equal starts .*deepcopy \(failed: TypeError: cannot "
                                         r"pickle.*add get_state\(\) and set_state\(state\)") as copied:
        GymGroupEnv(toy("UncopyableRandomReach", group_start="clone"), 4)  # at construction, before any work
    assert "\n" not in str(copied.value)
    cfg = TrainConfig(env=toy("UncopyableRandomReach", group_start="clone"), progress=False,
                      algo=AlgoConfig(group_size=2, groups_per_iter=2, minibatches=1))  # fmt: skip
    with pytest.raises(ValueError, match="cannot give a group equal starts"):
        Trainer(cfg, "/nonexistent")


def test_evaluating_an_env_that_ignores_its_seed_says_the_seeds_do_not_decide_the_episodes(tmp_path):
    """`evaluate.py` of such an env printed "test seeds" and a rate that changed from one run of it
    to the next (5.0%, then 4.0%) without a word; its JSON listed seeds that decided nothing."""
    from cli_harness import run_main

    cfg = TrainConfig(env=toy("GlobalRandomReach", group_start="clone"), progress=False, iterations=1, eval_seeds=4,
                      policy=PolicyConfig(hidden_sizes=[16]), algo=AlgoConfig(group_size=2, groups_per_iter=2,
                                                                              minibatches=1))  # fmt: skip
    Trainer(cfg, tmp_path).run()
    assert json.loads((tmp_path / "eval.json").read_text())["seeded"] is False
    out = run_main("evaluate", f"checkpoint={tmp_path}", "n_seeds=4")
    assert out.code == 0 and ("warning: env.group_start=clone: this env ignores its seed, so the test seeds do not "
                              "decide the episodes") in out.stderr, out.stderr  # fmt: skip
    record = json.loads((tmp_path / "checkpoints" / "last_eval_test_4_deterministic.json").read_text())
    assert record["seeded"] is False and record["seeds"] == "test"


def test_a_copy_that_breaks_on_its_next_reset_is_refused_when_the_env_is_built():
    with pytest.raises(ValueError, match=r"tried deepcopy \(world \d, a copy, failed its next reset: reset: "
                                         r"RuntimeError: the simulator was released\)"):  # fmt: skip
        GymGroupEnv(toy("SharedHandleReach", group_start="clone"), 4)


def test_fetch_push_members_are_copied_through_the_physics_state():
    env = GymGroupEnv(EnvConfig(task=None, **FETCH_PUSH, group_start="clone"), 4)
    obs = env.reset([0, 0, 1, 1])
    assert env.copy_method == "mujoco"  # Fetch pickles by re-construction: a deep copy would not do
    for _ in range(5):
        obs, *_ = env.step(np.repeat(np.array([[0.5, -0.3, 0.2, 1.0], [0.1, 0.4, -0.2, -1.0]]), 2, axis=0))
    np.testing.assert_array_equal(obs[0], obs[1])
    np.testing.assert_array_equal(obs[2], obs[3])
    env.close()


# -- demonstrations from an expert -----------------------------------------------------------------
def test_expert_actions_map_onto_the_unit_box_per_dimension():
    low, high = np.array([-2.0, 0.5, -np.inf, 3.0]), np.array([2.0, 1.5, np.inf, 3.0])  # the last one fixed
    actions = np.array([[1.0, 1.25, 7.0, 3.0], [-5.0, 0.5, -0.25, 3.0]])
    np.testing.assert_array_equal(unit_actions(actions, low, high),  # a fixed dimension was 0 / 0 = nan
                                  np.array([[0.5, 0.5, 1.0, 0.0], [-1.0, -1.0, -0.25, 0.0]], np.float32))


def test_expert_demos_keep_successes_map_actions_and_replay(tmp_path):
    cfg = toy("PointReach")
    data, stats = collect_expert_demos(cfg, "toy_envs:half_expert", 6, noise=0.0, seed=2)
    assert stats.kept == data.n_episodes == 6 and stats.attempted > 6  # failures were dropped
    assert 0.2 < stats.to_json()["expert_success_rate"] < 0.9
    goals = data.obs[np.cumsum(data.lengths) - data.lengths, 2:4]  # only goals the expert can reach:
    assert ((goals[:, 0] > 0) | (np.linalg.norm(goals, axis=1) < 0.1)).all()  # x > 0, or reached standing still
    assert np.abs(data.expert_actions).max() == 1.0  # the env's [-2, 2] mapped onto [-1, 1]
    assert data.env == {"entry_point": "toy_envs:PointReach", "kwargs": {}, "obs_keys": None, "obs_dim": 4,
                        "action_dim": 2}  # fmt: skip
    back = DemoDataset.load(data.save(tmp_path / "demos.npz"))
    np.testing.assert_array_equal(back.obs, data.obs)
    assert back.env == data.env and back.env_config["entry_point"] == "toy_envs:PointReach"
    assert back.spaces["action_high"] == [2.0, 2.0] and back.source == "expert toy_envs:half_expert"
    assert replay(back).all()  # the executed actions succeed again from the recorded seeds
    back.actions[:] = 0.0
    assert not replay(back)[back.lengths > 1].any()  # (a goal within reach of the start needs no action)
    env = GymGroupEnv(cfg, 2)
    back.check_compatible(cfg, env)
    back.spaces["action_high"] = [4.0, 2.0]  # recorded where the first dimension reached 4: its 1.0 meant 4, not 2
    with pytest.raises(DatasetError, match=r"recorded on action bounds low=\[-2, -2\] high=\[4, 2\], but "
                                           r"toy_envs:PointReach has low=\[-2, -2\] high=\[2, 2\]"):  # fmt: skip
        back.check_compatible(cfg, env)
    env.close()


def test_a_gymnasium_env_by_its_id_or_by_its_entry_point_is_the_same_env(tmp_path):
    """A dataset recorded on an env named by its registered id fits a config that names its entry
    point (and back), with the registration's kwargs as that env's defaults; another class, or
    another value of a registered kwarg, is still refused."""
    import gymnasium

    if "ToyPointReach-v0" not in gymnasium.registry:
        gymnasium.register("ToyPointReach-v0", entry_point="toy_envs:PointReach", kwargs={"tolerance": 0.2})
    by_id = EnvConfig(task=None, id="ToyPointReach-v0", horizon=40)
    data, _ = collect_expert_demos(by_id, "toy_envs:half_expert", 3, noise=0.0, seed=2)
    assert data.env["id"] == "ToyPointReach-v0" and data.env["entry_point"] == "toy_envs:PointReach"
    back = DemoDataset.load(data.save(tmp_path / "demos.npz"))
    same = toy("PointReach", kwargs={"tolerance": 0.2})
    env = GymGroupEnv(same, 1)
    back.check_compatible(same, env)
    by_entry, _ = collect_expert_demos(same, "toy_envs:half_expert", 3, noise=0.0, seed=2)
    id_env = GymGroupEnv(by_id, 1)
    by_entry.check_compatible(by_id, id_env)  # and back
    for other, key in ((toy("PointReach", kwargs={"tolerance": 0.1}), "kwargs.tolerance"),
                       (toy("GlobalRandomReach"), "entry_point")):  # fmt: skip
        with pytest.raises(ValueError, match=rf"is for ToyPointReach-v0 .* but the config has "
                                             rf"{other.entry_point} .*\(they differ in {key}[:)]"):  # fmt: skip
            back.check_compatible(other, env)
    with pytest.raises(ValueError, match=r"\(they differ in kwargs.tolerance: "):
        collect_expert_demos(toy("PointReach"), "toy_envs:half_expert", 3, seed=2)[0].check_compatible(by_id, id_env)
    defaults, _ = collect_expert_demos(toy("PointReach"), "toy_envs:half_expert", 3, noise=0.0, seed=2)
    defaults.check_compatible(toy("PointReach", kwargs={"tolerance": 0.1}), env)  # the default, written out
    with pytest.raises(ValueError, match=r"\(they differ in kwargs.tolerance: "):  # recorded with the default
        defaults.check_compatible(same, env)
    env.close()
    id_env.close()


def test_final_step_expert_demos_replay_as_training_judges_them():
    data, stats = collect_expert_demos(toy("PointReach", horizon=10, outcome="final_step"), "toy_envs:point_expert", 3)
    assert stats.kept == 3 and (data.lengths == 10).all() and data.env_config["outcome"] == "final_step"
    assert replay(data).all()  # was all False: replay read the any-step outcome, which final_step never sets


def test_expert_objects_with_get_action_are_reset_per_episode():
    import toy_envs

    data, stats = collect_expert_demos(toy("PointReach"), "toy_envs:GetActionExpert", 3, noise=0.1)
    assert stats.kept == 3 and stats.attempted == 3
    assert not np.array_equal(data.actions, data.expert_actions)  # noise on the executed actions only
    assert isinstance(toy_envs.GetActionExpert().get_action(np.zeros(4)), np.ndarray)


def test_a_seed_ignoring_env_records_no_seeds():
    data, _ = collect_expert_demos(toy("GlobalRandomReach", group_start="clone"), "toy_envs:point_expert", 2)
    np.testing.assert_array_equal(data.seeds, [-1, -1])
    with pytest.raises(ValueError, match="without a reset seed"):
        replay(data)


@pytest.mark.parametrize(
    "expert, message",
    [
        ("toy_envs:raising_expert", r"raised RuntimeError: lost track of the goal \(episode 0, seed 2000000000"),
        ("toy_envs:wrong_shape_expert", r"returned an action of 3 values; the env's action space has 2"),
        ("toy_envs:nan_expert", r"returned a non-finite action \[nan, 0.0\]"),
        ("toy_envs:idle_expert", r"succeeded in 0 of 3 episodes \(0.0%\) on toy_envs:PointReach"),
        ("toy_envs:no_such_expert", r"toy_envs has no attribute 'no_such_expert'"),
        ("toy_envs:SLIDER_XML", r"is a str: it must be a function"),
        ("toy_envs:ResetRaisingExpert", r"its reset\(\) raised KeyError: 'calibration'$"),  # was a traceback
    ],
)
def test_bad_experts_get_one_line(expert, message):
    with pytest.raises((ValueError, RuntimeError), match=message) as err:
        collect_expert_demos(toy("PointReach"), expert, 2, max_attempts=4)
    assert str(err.value).startswith(f"demos.expert={expert!r}") and "\n" not in str(err.value)


# -- the ecosystem's dataset formats -----------------------------------------------------------------
@pytest.fixture(scope="module")
def fetch_push():
    cfg = EnvConfig(task=None, **FETCH_PUSH)
    env = GymGroupEnv(cfg, 1)
    yield cfg, env
    env.close()


def test_a_minari_dataset_written_by_minari_loads_with_the_right_shapes(fetch_push, monkeypatch):
    cfg, env = fetch_push
    meta = json.loads((MINARI / "data" / "metadata.json").read_text())
    assert meta["minari_version"] == "0.5.4" and meta["data_format"] == "hdf5"  # written by Minari itself
    data = load_demos(MINARI, cfg, env)
    assert data.obs.shape == (500, 28) and data.actions.shape == (500, 4)  # 10 episodes x 50 steps
    np.testing.assert_array_equal(data.lengths, [50] * 10)
    np.testing.assert_array_equal(data.seeds, np.arange(10))
    with h5py.File(MINARI / "data" / "main_data.hdf5") as f:  # observation (25) then desired_goal (3), step 0..49
        np.testing.assert_allclose(data.obs[50:100, :25], f["episode_1/observations/observation"][:50], rtol=1e-6)
        np.testing.assert_allclose(data.obs[50:100, 25:], f["episode_1/observations/desired_goal"][:50], rtol=1e-6)
        np.testing.assert_allclose(data.actions[:50], f["episode_0/actions"][:], rtol=1e-6)  # bounds are [-1, 1]
    assert data.env["id"] == "FetchPush-v4" and data.source == "minari grpo-robot/fetch-push-expert-v0"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(DATA / "minari"))
    by_id = load_demos("minari:grpo-robot/fetch-push-expert-v0", cfg, env)
    np.testing.assert_array_equal(by_id.obs, data.obs)
    with pytest.raises(FileNotFoundError, match="no Minari dataset 'minari:grpo-robot/nothing-v0'"):
        load_demos("minari:grpo-robot/nothing-v0", cfg, env)


def test_a_dataset_of_another_env_or_layout_is_refused_naming_both_sides():
    cfg = EnvConfig(task=None, **{**FETCH_PUSH, "id": "FetchPickAndPlace-v4"})
    env = GymGroupEnv(cfg, 1)
    with pytest.raises(ValueError) as err:
        load_demos(MINARI, cfg, env)
    assert str(err.value) == (
        f"demos.path={MINARI} is for FetchPush-v4 (kwargs=reward_type=sparse, obs_keys=[observation, desired_goal], "
        "obs_dim=28, action_dim=4), but the config has FetchPickAndPlace-v4 (obs_keys=[observation, desired_goal], "
        "obs_dim=28, action_dim=4) (they differ in id)"
    )
    env.close()
    point = GymGroupEnv(toy("DictPointReach", obs_keys=["position", "goal"]), 1)
    with pytest.raises(ValueError, match=r"the env observes 'position' .* which the dataset lacks; it has "
                                         r"achieved_goal, desired_goal, observation: choose the env's keys among "
                                         r"them \(env.obs_keys, or a robosuite env's own env.kwargs.obs_keys\)"):
        load_demos(MINARI, point.cfg, point)
    point.close()


def test_a_minari_dataset_recorded_on_other_action_bounds_is_refused(tmp_path, fetch_push):
    """Its actions are in the units of the bounds its metadata records; read in the env's bounds
    they were clipped into them, without a word."""
    import shutil

    cfg, env = fetch_push
    copy = tmp_path / "fetch-push-expert-v0"
    shutil.copytree(MINARI, copy)
    meta_file = copy / "data" / "metadata.json"
    meta = json.loads(meta_file.read_text())
    space = json.loads(meta["action_space"])
    assert load_demos(copy, cfg, env).spaces["action_low"] == space["low"] == [-1.0] * 4  # the env's own: read
    meta["action_space"] = json.dumps({**space, "low": [-2.0] * 4, "high": [2.0] * 4})
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(ValueError) as err:
        load_demos(copy, cfg, env)
    assert str(err.value) == (
        f"demos.path={copy} was recorded on action bounds low=[-2, -2, -2, -2] high=[2, 2, 2, 2], but FetchPush-v4 "
        "has low=[-1, -1, -1, -1] high=[1, 1, 1, 1]; record it again on this env, or give the env the bounds it had "
        "(env.kwargs)"
    )


def test_a_minari_dataset_fits_its_envs_entry_point_and_is_refused_when_recorded_through_wrappers(tmp_path,
                                                                                                    fetch_push):
    """Its `env_spec` records the class it made (`entry_point`): a config naming that class is the
    same env, even where the dataset's id is not registered here (it was refused: "differ in id").
    A dataset recorded through an observation wrapper (`additional_wrappers`) was cloned as if it
    were the bare env's: 46% became 8% with NormalizeObservation, without a word."""
    import shutil

    copy = tmp_path / "fetch-push-expert-v0"
    shutil.copytree(MINARI, copy)
    meta_file = copy / "data" / "metadata.json"
    meta = json.loads(meta_file.read_text())
    spec = json.loads(meta["env_spec"])
    meta["env_spec"] = json.dumps({**spec, "id": "MyFetchPush-v0"})  # registered by the user's module, not here
    meta_file.write_text(json.dumps(meta))
    cfg = EnvConfig(task=None, entry_point=spec["entry_point"], obs_keys=FETCH_PUSH["obs_keys"], horizon=50)
    _, env = fetch_push
    data = load_demos(copy, cfg, env)
    assert data.n_episodes == 10 and data.env["entry_point"] == spec["entry_point"]
    wrapper = {"name": "NormalizeObservation", "entry_point": "gymnasium.wrappers:NormalizeObservation", "kwargs": {}}
    meta["env_spec"] = json.dumps({**spec, "additional_wrappers": [wrapper]})
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match=r"metadata.json: recorded through the wrappers NormalizeObservation "
                                           r"\(env_spec.additional_wrappers\), which change"):  # fmt: skip
        load_demos(copy, cfg, env)


LIFT_KEYS = ["object-state", "robot0_eef_pos", "robot0_eef_quat", "robot0_gripper_qpos"]  # the fixture's


def lift_stand_in(name: str = "Lift") -> object:
    """What loading a dataset reads of robosuite Lift's env (sizes, keys, bounds), without building it."""
    return type("Env", (), {"obs_dim": 19, "action_dim": 7, "obs_keys": LIFT_KEYS, "action_low": -np.ones(7),
                            "action_high": np.ones(7), "name": name})()  # fmt: skip


def test_a_robomimic_layout_file_loads_for_robosuite_lift():
    keys = LIFT_KEYS
    kwargs = {"env_name": "Lift", "robots": "Panda", "controller": None, "obs_keys": keys}
    cfg = EnvConfig(task=None, entry_point="grpo_robot.envs.robosuite_env:RobosuiteEnv", kwargs=kwargs, horizon=50)
    env = GymGroupEnv(cfg, 1)
    data = load_demos(ROBOMIMIC, cfg, env)
    with h5py.File(ROBOMIMIC) as f:
        lengths = [f[f"data/demo_{i}/actions"].shape[0] for i in range(2)]
        object_obs = f["data/demo_1/obs/object"][:]
    assert data.obs.shape == (sum(lengths), 10 + 3 + 4 + 2) and data.actions.shape == (sum(lengths), 7)
    np.testing.assert_array_equal(data.lengths, lengths)
    np.testing.assert_allclose(data.obs[lengths[0]:, :10], object_obs, rtol=1e-6)  # robomimic's "object" key
    assert data.env["kwargs"] == {"env_name": "Lift", "robots": "Panda", "control_freq": 20}
    env.close()
    other = replace(cfg, kwargs={**kwargs, "env_name": "Stack"})
    with pytest.raises(ValueError, match=r"for .*env_name=Lift.* the config has .*env_name=Stack.*in kwargs.env_name"):
        load_demos(ROBOMIMIC, other, lift_stand_in("Stack"))


def test_a_robomimic_file_recorded_at_another_control_rate_is_refused(tmp_path):
    """A robomimic file records the control rate of its demos (`env_kwargs.control_freq`); one recorded
    at 10 Hz loaded for an env at robosuite's 20 Hz, where its actions replay as other motions."""
    import shutil

    keys, env = LIFT_KEYS, lift_stand_in()
    copy = tmp_path / "lift_10hz.hdf5"
    shutil.copy(ROBOMIMIC, copy)
    with h5py.File(copy, "r+") as f:
        args = json.loads(f["data"].attrs["env_args"])
        args["env_kwargs"]["control_freq"] = 10
        f["data"].attrs["env_args"] = json.dumps(args)
    kwargs = {"env_name": "Lift", "robots": "Panda", "obs_keys": keys}
    cfg = EnvConfig(task=None, entry_point="grpo_robot.envs.robosuite_env:RobosuiteEnv", kwargs=kwargs, horizon=50)
    with pytest.raises(ValueError, match=r"control_freq=10.* the config has .*\(they differ in kwargs.control_freq: "
                                         r"10 against the config's 20\)$"):  # fmt: skip
        load_demos(copy, cfg, env)  # the config leaves it to the adapter's default, 20
    at_10hz = load_demos(copy, replace(cfg, kwargs={**kwargs, "control_freq": 10}), env)
    assert at_10hz.env["kwargs"]["control_freq"] == 10 and at_10hz.actions.shape[1] == 7
    assert load_demos(ROBOMIMIC, cfg, env).env["kwargs"]["control_freq"] == 20  # the fixture's rate, the default


def test_a_robomimic_file_recorded_under_another_arm_controller_is_refused(tmp_path):
    """robomimic records the controller its demos acted through (`env_kwargs.controller_configs`,
    robosuite 1.4's arm-part config or 1.5's composite one): OSC_POSE deltas, 7 numbers a step, are
    other motions under absolute OSC_POSE targets or a joint controller of the same size, and the
    action size alone let them through."""
    import shutil

    keys, env = LIFT_KEYS, lift_stand_in()
    cfg = EnvConfig(task=None, entry_point="grpo_robot.envs.robosuite_env:RobosuiteEnv", horizon=50,
                    kwargs={"env_name": "Lift", "robots": "Panda", "controller": None, "obs_keys": keys})

    def recorded(name: str, controller: dict) -> Path:
        copy = tmp_path / f"{name}.hdf5"
        shutil.copy(ROBOMIMIC, copy)
        with h5py.File(copy, "r+") as f:
            args = json.loads(f["data"].attrs["env_args"])
            args["env_kwargs"]["controller_configs"] = controller
            f["data"].attrs["env_args"] = json.dumps(args)
        return copy

    osc = {"type": "OSC_POSE", "input_max": 1, "input_min": -1, "kp": 150, "control_delta": True}  # robosuite 1.4
    assert load_demos(recorded("osc_delta", osc), cfg, env).actions.shape[1] == 7  # the Panda's default
    composite = {"type": "BASIC", "body_parts": {"arms": {"right": {"type": "OSC_POSE", "input_type": "delta"}}}}
    assert load_demos(recorded("osc_delta_15", composite), cfg, env).actions.shape[1] == 7  # robosuite 1.5
    absolute = recorded("osc_absolute", {**osc, "control_delta": False})
    with pytest.raises(DatasetError) as err:
        load_demos(absolute, cfg, env)
    assert str(err.value) == (
        f"demos.path={absolute}: its demos were recorded with right arm OSC_POSE (absolute actions), and the env runs "
        "right arm OSC_POSE (delta actions), from the robot's default controller: their actions would replay as "
        "other motions; give the env the dataset's controller (env.kwargs.controller=<name or .json>, or "
        "env.kwargs.controller_configs)")  # fmt: skip
    joints = recorded("joints", {"type": "BASIC", "body_parts": {"arms": {"right": {"type": "JOINT_POSITION"}}}})
    with pytest.raises(DatasetError, match=re.escape("recorded with right arm JOINT_POSITION (delta actions), and the "
                                                     "env runs right arm OSC_POSE (delta actions), from the robot's")):
        load_demos(joints, cfg, env)
    from grpo_robot.envs.robosuite_env import arm_controllers

    two = {"robots": ["Panda", "Panda"], "controller_configs": {**osc, "control_delta": False}}  # one config for both
    assert arm_controllers(two) == [{"right": "OSC_POSE (absolute actions)"}] * 2
    assert arm_controllers({"robots": "NoSuchRobot"}) is None  # nothing known to compare: not refused for it
    under_joints = replace(cfg, kwargs={**cfg.kwargs, "controller": "joint_position"})
    with pytest.raises(DatasetError, match=re.escape("the env runs right arm JOINT_POSITION (delta actions), from "
                                                     "kwargs.controller='joint_position':")):  # fmt: skip
        load_demos(recorded("osc_delta", osc), under_joints, env)


def test_a_robomimic_filter_key_picks_the_demos_its_mask_lists(tmp_path, caplog):
    """robomimic's `mask/<filter key>` lists (train, valid, 20_percent, ...) were ignored without a
    word: every demo was cloned."""
    import logging

    cfg = toy("PointReach", horizon=30)
    env = GymGroupEnv(cfg, 1)
    path = tmp_path / "masked.hdf5"
    with h5py.File(path, "w") as f:
        for i, n in enumerate((5, 6, 7)):
            f.create_dataset(f"data/demo_{i}/obs/state", data=np.full((n, 4), float(i)))
            f.create_dataset(f"data/demo_{i}/actions", data=np.zeros((n, 2)))
        f.create_dataset("mask/train", data=np.array([b"demo_0", b"demo_2"]))
        f.create_dataset("mask/valid", data=np.array([b"demo_1"]))
    try:
        assert load_demos(path, cfg, env, filter_key="train").lengths.tolist() == [5, 7]
        assert load_demos(path, cfg, env, filter_key="valid").lengths.tolist() == [6]
        with caplog.at_level(logging.WARNING, logger="grpo_robot.datasets"):
            assert load_demos(path, cfg, env).lengths.tolist() == [5, 6, 7]
        assert "every demo is cloned; its filter keys (mask/: train, valid) are not used (demos.filter_key=<key> " \
            "picks one)" in caplog.text  # fmt: skip
        with pytest.raises(DatasetError, match=r"has no filter key 'test' \(its mask/ holds train, valid\)$"):
            load_demos(path, cfg, env, filter_key="test")
        with pytest.raises(DatasetError, match=r"^dataset=.*main_data.hdf5: filter_key=train is for a robomimic "
                                               r"file's masks, and this is not one$"):  # fmt: skip
            load_demos(MINARI, cfg, env, key="dataset", filter_key="train")
    finally:
        env.close()


def test_a_minari_datasets_failed_episodes_are_named_where_it_records_success(tmp_path, fetch_push, caplog):
    """A dataset of random and expert episodes was cloned whole without a word (0% after cloning);
    where its episodes record the env's success flag (`infos/is_success`), the ones that never
    succeed are counted and named."""
    import shutil

    cfg, env = fetch_push
    copy = tmp_path / "fetch-push-expert-v0"
    shutil.copytree(MINARI, copy)
    with h5py.File(copy / "data" / "main_data.hdf5", "a") as f:
        for i in range(10):
            steps = f[f"episode_{i}/actions"].shape[0]
            f.create_dataset(f"episode_{i}/infos/is_success", data=np.arange(steps + 1) >= (steps if i >= 2 else 10**6))
    with caplog.at_level("WARNING"):
        data = load_demos(copy, cfg, env)
    assert data.n_episodes == 10
    warned = [r.getMessage() for r in caplog.records if "never succeed" in r.getMessage()]
    assert len(warned) == 1 and "2 of 10 episodes never succeed" in warned[0] and \
        warned[0].endswith(": episode_0, episode_1"), warned  # fmt: skip
    caplog.clear()
    with caplog.at_level("WARNING"):
        load_demos(MINARI, cfg, env)  # no success recorded: nothing to say
    assert not [r for r in caplog.records if "never succeed" in r.getMessage()]


def test_a_robomimic_layout_file_of_one_observation_key_loads_for_a_box_env(tmp_path):
    """`data/demo_i/obs/state` for an env that observes a Box was refused ("the dataset's
    observations are a Dict (state), but the env observes a Box"); its one key is the Box. Two
    keys stay refused: their order in the Box would be a guess."""
    cfg = toy("PointReach", horizon=30)
    env = GymGroupEnv(cfg, 1)
    path = tmp_path / "box.hdf5"
    rng = np.random.default_rng(0)
    states = [rng.normal(size=(n, 4)) for n in (5, 7)]
    with h5py.File(path, "w") as f:
        for i, state in enumerate(states):
            f.create_dataset(f"data/demo_{i}/obs/state", data=state)
            f.create_dataset(f"data/demo_{i}/actions", data=np.full((len(state), 2), 1.0))
    data = load_demos(path, cfg, env)
    np.testing.assert_allclose(data.obs, np.concatenate(states), rtol=1e-6)
    np.testing.assert_allclose(data.actions, 0.5)  # 1.0 in the env's [-2, 2]: 0.5 in the unit box
    with h5py.File(path, "a") as f:
        f.create_dataset("data/demo_0/obs/other", data=states[0])
    with pytest.raises(DatasetError, match=r"observations are a Dict \(other, state\), but the env observes a Box"):
        load_demos(path, cfg, env)
    env.close()


def test_a_robomimic_file_with_an_empty_demo_or_actions_past_the_bounds_loads_and_says_so(tmp_path, caplog):
    """One empty `data/demo_i` refused the whole file; an action past the env's bounds was clipped
    without a word (an .npz label past [-1, 1] is refused: its format is the unit box)."""
    import logging

    cfg = toy("PointReach", horizon=30)
    env = GymGroupEnv(cfg, 1)
    path = tmp_path / "gaps.hdf5"
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        for i, n in enumerate((5, 0, 7)):
            actions = np.full((n, 2), 1.0)
            if i == 2:
                actions[3, 1] = 3.0  # past [-2, 2]
            f.create_dataset(f"data/demo_{i}/obs/state", data=rng.normal(size=(n, 4)))
            f.create_dataset(f"data/demo_{i}/actions", data=actions)
    with caplog.at_level(logging.WARNING, logger="grpo_robot.datasets"):
        data = load_demos(path, cfg, env)
    env.close()
    assert data.lengths.tolist() == [5, 7] and data.actions[5 + 3, 1] == 1.0 and data.actions.max() == 1.0
    assert f"{path}: 1 of its 3 demos hold no steps and are left out (demo_1)" in caplog.text
    assert (f"{path}: 1 of its 24 action values lie outside toy_envs:PointReach's bounds (low=[-2, -2] high=[2, 2]) "
            "and are clipped to them; the first is 3 (episode 1, step 3, dimension 1)") in caplog.text  # fmt: skip


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", r"not a readable"),
        (b"\x89HDF\r\n\x1a\nthis is not the rest of an HDF5 file", r"not a readable HDF5 demo dataset"),
        (b"PK\x03\x04 truncated zip", r"not a readable demo dataset \(\.npz\)"),
    ],
)
def test_corrupt_dataset_files_get_one_line(tmp_path, fetch_push, content, message):
    cfg, env = fetch_push
    suffix = ".npz" if content.startswith(b"PK") else ".hdf5"
    path = tmp_path / f"bad{suffix}"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message) as err:
        load_demos(path, cfg, env)
    assert "\n" not in str(err.value)


def test_truncated_minari_file_is_refused(tmp_path, fetch_push):
    cfg, env = fetch_push
    data = (MINARI / "data" / "main_data.hdf5").read_bytes()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "main_data.hdf5").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="not a readable HDF5 demo dataset"):
        load_demos(tmp_path, cfg, env)


# -- the pipeline on a user's env whose reset ignores the seed ---------------------------------------------
def seed_ignoring_pipeline(iterations: int) -> TrainConfig:
    """docs/custom_envs.md's recipe in one run, on a user's env whose reset ignores the seed (its
    goal comes from numpy's global generator): clone-based groups, an expert, 3 demos, cloning, GRPO."""
    return TrainConfig(
        env=toy("GlobalRandomReach", group_start="clone", kwargs={"tolerance": 0.05}),
        policy=PolicyConfig(hidden_sizes=[64, 64], init_std=0.3),
        algo=AlgoConfig(group_size=8, groups_per_iter=16, epochs=4, minibatches=4, lr=1e-3),
        pretrain=True,
        demos=DemoConfig(expert="toy_envs:point_expert", episodes=3, noise=0.3),
        bc=BCConfig(max_steps=300, val_fraction=0.0),
        iterations=iterations,
        eval_every=iterations,
        eval_seeds=200,
        progress=False,
    )


def test_expert_clone_grpo_pipeline_on_a_seed_ignoring_env(tmp_path):
    """The one-run pipeline's stages on such an env. GRPO's gain from this clone is the slow test
    below; the docs' three commands (`test_custom_envs_demonstrations_section_runs_as_written`)
    check such a gain in the default run."""
    np.random.seed(0)  # noqa: NPY002 (the env's only randomness, seeded here so that the test repeats)
    trainer = Trainer(seed_ignoring_pipeline(2), tmp_path)
    summary = trainer.run()
    trainer.close()
    assert trainer.env.copy_method == "deepcopy"
    assert DemoDataset.load(tmp_path / "demos.npz").n_episodes == 3
    assert summary["iterations"] == 2 and summary["initial_policy"]["eval"]["n"] == 200
    assert summary["initial_policy"]["eval"]["success_rate"] >= 0.5  # the clone of 3 demos: 74% measured


@pytest.mark.slow
def test_grpo_improves_the_clone_on_a_seed_ignoring_env(tmp_path):
    np.random.seed(0)  # noqa: NPY002
    trainer = Trainer(seed_ignoring_pipeline(20), tmp_path)
    summary = trainer.run()
    trainer.close()
    clone = summary["initial_policy"]["eval"]["success_rate"]
    final = summary["eval"]["success_rate"]
    # measured: 74% -> 95.5%. The outcome depends on every draw from numpy's generator (the 3 demos
    # above all): a change in how many draws come before the demos moves it, as it would for a user.
    assert final >= clone + 0.15 and final >= 0.85, (clone, final)


def compose(config_name: str, *overrides: str):
    """The config `scripts/<config_name>.py <overrides>` runs with, composed in this process."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from grpo_robot.cli import CONF_DIR
    from grpo_robot.config import register_configs

    register_configs()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return hydra_compose(config_name, overrides=list(overrides))


def test_collect_and_pretrain_scripts_take_any_env(tmp_path, capsys, monkeypatch):
    from grpo_robot import cli

    monkeypatch.chdir(tmp_path)
    demos = tmp_path / "fetch.npz"
    cli._collect_demos(compose("collect_demos", "env=fetch_push", "demos.expert=grpo_robot.experts.fetch:push",
                               "demos.episodes=3", f"output={demos}"))  # fmt: skip
    assert "FetchPush-v4: kept 3 of 3 expert episodes" in capsys.readouterr().out
    record = json.loads(demos.with_suffix(".json").read_text())
    assert record["env"]["id"] == "FetchPush-v4" and record["env"]["obs_dim"] == 28
    bc = tmp_path / "bc.pt"
    cli._pretrain_bc(compose("pretrain_bc", f"dataset={demos}", "bc.max_steps=100", "eval_seeds=10", f"output={bc}"))
    assert "FetchPush-v4, deterministic, on 10 held-out seeds: success" in capsys.readouterr().out
    cfg = compose("config", "env=fetch_pick_and_place", f"init_from={bc}", "policy.hidden_sizes=[256,256]",
                  "algo.groups_per_iter=2", "algo.group_size=2", "algo.minibatches=1")
    with pytest.raises(ValueError) as err:
        Trainer(cli.to_train_config(cfg), tmp_path / "run")
    assert str(err.value).startswith(f"init_from={bc} is for FetchPush-v4") and "(they differ in id)" in str(err.value)
    for config, overrides, message in [
        ("collect_demos", ["env=fetch_push", "demos.episodes=3"], "set demos.expert=module:attr"),
        ("pretrain_bc", [f"dataset={MINARI}"], "say which env it is for"),
        ("collect_demos", ["env=push_cube", "demos.expert=toy_envs:point_expert"], "is for Gymnasium envs"),
    ]:
        with pytest.raises(SystemExit) as code:
            getattr(cli, f"_{config}")(compose(config, *overrides))
        assert code.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "demos").exists() and not (tmp_path / "run").exists()  # nothing written on a refusal


def test_a_failing_evaluation_keeps_the_clone_and_is_one_line(tmp_path):
    """`pretrain_bc.py`: an env whose every world fails on the evaluation seeds lost the trained
    clone with a traceback; now the clone is saved first. `evaluate.py` on it: one line, exit 1."""
    from cli_harness import run_main

    env = ["env=gym", "env.entry_point=toy_envs:EvalSeedsNaN", "env.horizon=30"]
    demos, bc = tmp_path / "d.npz", tmp_path / "bc.pt"
    out = run_main("collect_demos", *env, "demos.expert=toy_envs:point_expert", "demos.episodes=3", f"output={demos}")
    assert out.code == 0, out.stderr
    out = run_main("pretrain_bc", f"dataset={demos}", "bc.max_steps=20", "eval_seeds=4", f"output={bc}")
    assert out.code == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("error: the held-out evaluation failed: ") and \
        out.stderr.strip().endswith(f"the clone is saved without one: {bc}")  # fmt: skip
    assert checkpoint.load(bc, purpose="evaluate")["eval"] is None
    out = run_main("evaluate", f"checkpoint={bc}", "n_seeds=4")
    assert out.code == 1 and "Traceback" not in out.stderr, out.stderr
    assert "every one of the 4 worlds failed" in out.stderr.strip().splitlines()[-1], out.stderr


def test_custom_envs_demonstrations_section_runs_as_written(tmp_path, monkeypatch, capsys):
    """docs/custom_envs.md, "From demonstrations": its module saved as my_cell.py, its three
    commands composed exactly as written and run in this process, from the module's directory."""
    import re
    import shlex

    from grpo_robot import cli

    doc = (Path(__file__).parents[1] / "docs" / "custom_envs.md").read_text()
    section = doc[doc.index("## From demonstrations") :]
    (tmp_path / "my_cell.py").write_text(re.search(r"```python\n(.*?)```", section, re.S).group(1))
    commands = re.search(r"```bash\n(.*?)```", section, re.S).group(1).strip().splitlines()
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import my_cell

    first = my_cell.Cell()
    assert not np.array_equal(first.reset(seed=1)[0], my_cell.Cell().reset(seed=1)[0])  # it ignores the seed
    np.random.seed(0)  # noqa: NPY002 (the cell's only randomness, seeded here so that the test repeats)
    scripts = [shlex.split(c)[1].removeprefix("scripts/").removesuffix(".py") for c in commands]
    assert scripts == ["collect_demos", "pretrain_bc", "train"]
    collect, pretrain, train = (shlex.split(c)[2:] for c in commands)
    cli._collect_demos(compose("collect_demos", *collect))
    cli._pretrain_bc(compose("pretrain_bc", *pretrain))
    out = capsys.readouterr().out
    assert "my_cell:Cell: kept 3 of 3 expert episodes" in out and "checkpoint: cell_bc_gaussian.pt" in out
    trainer = Trainer(cli.to_train_config(compose("config", *train)), tmp_path / "run")
    summary = trainer.run()
    trainer.close()
    assert trainer.env.copy_method == "mujoco"
    clone, final = summary["initial_policy"]["eval"]["success_rate"], summary["eval"]["success_rate"]
    assert final >= 0.9 and final >= clone + 0.1, (clone, final)


def test_pretrain_on_a_gymnasium_env_with_a_tokenized_policy(tmp_path):
    from grpo_robot import checkpoint

    cfg = TrainConfig(
        env=toy("PointReach"),
        policy=PolicyConfig(type="tokenized", hidden_sizes=[64, 64], bins=21),
        algo=AlgoConfig(group_size=4, groups_per_iter=4, epochs=1, minibatches=1),
        pretrain=True,
        demos=DemoConfig(expert="toy_envs:GetActionExpert", episodes=6),
        bc=BCConfig(max_steps=400),
        iterations=1,
        eval_seeds=50,
        progress=False,
    )
    summary = Trainer(cfg, tmp_path).run()
    bc = checkpoint.load(tmp_path / "bc.pt")
    assert bc["kind"] == "bc" and bc["policy"]["type"] == "tokenized" and bc["config"]["env"]["entry_point"]
    assert summary["initial_policy"]["eval"]["success_rate"] >= 0.5  # the clone of an expert that always succeeds


def test_expert_demos_on_an_env_that_ignores_its_seed_are_refused_unless_cloned():
    """The recorded seeds would not replay their starts (they were recorded, and `replay` failed later)."""
    with pytest.raises(ValueError, match=r"^toy_envs:GlobalRandomReach ignores its reset seed: reset twice with seed "
                                         r"2000000000, it started from different observations .*env.group_start=clone"):
        collect_expert_demos(toy("GlobalRandomReach"), "toy_envs:point_expert", 2)
    data, _ = collect_expert_demos(toy("GlobalRandomReach", group_start="clone"), "toy_envs:point_expert", 2)
    np.testing.assert_array_equal(data.seeds, [-1, -1])


def test_each_training_seed_draws_its_own_demos_and_clone_unless_they_are_pinned(tmp_path):
    """`seed=0` and `seed=1` with `pretrain=true` collected the same demos and cloned the same
    policy (demos.seed and bc.seed were 0 whatever the run's seed; only the *_bc presets tied
    them to it): a seed sweep trained one clone N times. Null, now the default, is the run's seed."""
    def pipeline(seed: int, **pinned) -> tuple[np.ndarray, dict, dict]:
        cfg = TrainConfig(env=toy("PointReach", horizon=30), policy=PolicyConfig(hidden_sizes=[32, 32]),
                          algo=AlgoConfig(group_size=2, groups_per_iter=2, epochs=1, minibatches=1), pretrain=True,
                          demos=DemoConfig(expert="toy_envs:point_expert", episodes=3, noise=0.2,
                                           seed=pinned.get("demos")),
                          bc=BCConfig(max_steps=20, seed=pinned.get("bc")), iterations=1, eval_seeds=4, seed=seed,
                          progress=False)  # fmt: skip
        run = tmp_path / f"{seed}-{sorted(pinned.items())}"
        Trainer(cfg, run).run()
        clone = checkpoint.load(run / "bc.pt")
        return DemoDataset.load(run / "demos.npz").seeds, clone["policy"]["state_dict"], clone["config"]

    seeds0, weights0, config0 = pipeline(0)
    seeds1, weights1, config1 = pipeline(1)
    assert not np.array_equal(seeds0, seeds1)  # other demo episodes
    assert any(not np.array_equal(weights0[k], weights1[k]) for k in weights0)  # another clone
    assert config1["demos"]["seed"] is None and config1["bc"]["seed"] is None  # as configured: the run's seed
    pinned = [pipeline(s, demos=0, bc=0) for s in (0, 1)]
    assert np.array_equal(pinned[0][0], seeds0) and np.array_equal(pinned[1][0], seeds0)
    assert all(np.array_equal(pinned[1][1][k], weights0[k]) for k in weights0)  # seed 0's clone, pinned


def test_pretrain_bc_keeps_its_dataset_and_its_kwargs_and_evaluates_on_a_few_worlds(tmp_path):
    """`pretrain_bc.py output=<the dataset>` replaced the demos with the clone; `+env.kwargs.k=v`
    replaced the kwargs the dataset records (then refused it as another env); the evaluation built
    one env per seed (200 by default, 200 processes with env.vector=async) with no way to bound it;
    collect_demos.py's `task=` and `nthread=` did nothing for a Gymnasium env without a word."""
    import toy_envs
    from cli_harness import run_main

    demos = tmp_path / "d.npz"
    out = run_main("collect_demos", "env=gym", "env.entry_point=toy_envs:CountedReach", "env.horizon=30",
                   "+env.kwargs.tolerance=0.08", "demos.expert=toy_envs:point_expert", "demos.episodes=3",
                   "task=LiftCube", "nthread=1", f"output={demos}")  # fmt: skip
    assert out.code == 0, out.stderr
    warned = [line for line in (out.stdout + out.stderr).splitlines() if "does nothing here" in line]
    assert len(warned) == 2 and "nthread=1 does nothing here" in warned[0] and "task=LiftCube" in warned[1], warned
    before = demos.read_bytes()
    out = run_main("pretrain_bc", f"dataset={demos}", f"output={demos}")
    assert out.code == 2 and out.error_lines == [f"error: output={str(demos)!r} is invalid: must not be the dataset "
                                                 "itself: the clone would replace it"], out.stderr  # fmt: skip
    assert demos.read_bytes() == before
    toy_envs.CountedReach.built = 0
    out = run_main("pretrain_bc", f"dataset={demos}", "+env.kwargs.sleep_s=0", "bc.max_steps=10", "eval_seeds=40",
                   f"output={tmp_path / 'bc.pt'}")  # fmt: skip
    assert out.code == 0, out.stderr
    assert "on 40 held-out seeds" in out.stdout and toy_envs.CountedReach.built == 1 + 16, toy_envs.CountedReach.built
    kwargs = checkpoint.load(tmp_path / "bc.pt")["config"]["env"]["kwargs"]
    assert kwargs == {"tolerance": 0.08, "sleep_s": 0}, kwargs  # the dataset's, and the one added
    toy_envs.CountedReach.built = 0
    out = run_main("evaluate", f"checkpoint={tmp_path / 'bc.pt'}", "n_seeds=12", "worlds=4")
    assert out.code == 0 and toy_envs.CountedReach.built == 4, (out.stderr, toy_envs.CountedReach.built)


@pytest.mark.parametrize("delay", [0.0, 0.5])
def test_a_signal_during_pretrain_bcs_evaluation_keeps_the_clone_and_is_one_line(tmp_path, delay):
    """Ctrl-C while the clone was evaluated: a traceback, and the trained clone was never written.
    At once after the clone is written (its eval env is being built) or half a second later (into
    the evaluation): the same one line and the same saved clone."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from cli_harness import run_main

    demos, bc = tmp_path / "d.npz", tmp_path / "bc.pt"
    out = run_main("collect_demos", "env=gym", "env.entry_point=toy_envs:CountedReach", "env.horizon=30",
                   "+env.kwargs.sleep_s=0.01", "demos.expert=toy_envs:point_expert", "demos.episodes=3",
                   f"output={demos}")  # fmt: skip
    assert out.code == 0, out.stderr
    script = Path(__file__).parents[1] / "scripts" / "pretrain_bc.py"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    args = [sys.executable, str(script), f"dataset={demos}", "bc.max_steps=10", "eval_seeds=200", f"output={bc}"]
    proc = subprocess.Popen(args, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not bc.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(delay)  # 0.5 s: into the evaluation (200 seeds on 16 worlds at 10 ms a step: about 20 s)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, stderr[-2000:])
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr and lines[-1] == ("error: stopped by SIGINT during the held-out evaluation; the "
                                                       f"clone is saved without one: {bc}"), stderr[-2000:]  # fmt: skip
    clone = checkpoint.load(bc, purpose="evaluate")
    assert clone["kind"] == "bc" and clone["eval"] is None


def test_robomimic_demos_load_in_the_order_of_their_numbers(tmp_path):
    """demo_10 sorts between demo_1 and demo_2 by name; episodes keep their numbers' order."""
    cfg = toy("PointReach", horizon=30)
    path = tmp_path / "demos.hdf5"
    with h5py.File(path, "w") as f:
        for i in range(12):
            f.create_dataset(f"data/demo_{i}/obs/state", data=np.full((i + 1, 4), float(i)))
            f.create_dataset(f"data/demo_{i}/actions", data=np.zeros((i + 1, 2)))
    env = GymGroupEnv(cfg, 1)
    try:
        data = load_demos(path, cfg, env)
    finally:
        env.close()
    assert data.lengths.tolist() == list(range(1, 13))
    assert data.obs[data.episode_index() == 10, 0].tolist() == [10.0] * 11
