"""The robosuite adapter on real robosuite (Lift + Panda, small horizons): seeding, the success
signal, spaces, episode ends and bad input; then the `robosuite_lift` preset through the trainer.
Needs the robosuite extra."""

import mujoco
import numpy as np
import pytest

from grpo_robot.envs.robosuite_env import RobosuiteEnv

ENTRY_POINT = "grpo_robot.envs.robosuite_env:RobosuiteEnv"
HORIZON = 8
STATE = mujoco.mjtState.mjSTATE_INTEGRATION  # time, qpos, qvel, act, warmstart, controls, applied forces


def sim_state(env: RobosuiteEnv) -> np.ndarray:
    sim = env.robosuite_env.sim
    model, data = sim.model._model, sim.data._data
    state = np.empty(mujoco.mj_stateSize(model, STATE))
    mujoco.mj_getState(model, data, state, STATE)
    return state


def assert_same_obs(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def run_random_episode(env: RobosuiteEnv, seed: int, steps: int) -> None:
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(rng.uniform(-1, 1, env.action_space.shape))
        if terminated or truncated:
            break


@pytest.fixture(scope="module")
def lift():
    env = RobosuiteEnv("Lift", robots="Panda", horizon=HORIZON)
    yield env
    env.close()


@pytest.mark.parametrize("hard_reset", [False, True])
def test_equal_seeds_give_bit_identical_starts(hard_reset):
    a = RobosuiteEnv(horizon=HORIZON, hard_reset=hard_reset)
    b = RobosuiteEnv(horizon=HORIZON, hard_reset=hard_reset)
    first, info = a.reset(seed=7)
    first_state = sim_state(a)
    assert info == {"is_success": False}
    # b has run other episodes first, one cut short mid-way
    run_random_episode(b, seed=1, steps=HORIZON)
    run_random_episode(b, seed=2, steps=3)
    again, _ = b.reset(seed=7)
    assert_same_obs(first, again)
    np.testing.assert_array_equal(first_state, sim_state(b))
    # a itself, reused after some random steps
    run_random_episode(a, seed=3, steps=4)
    reused, _ = a.reset(seed=7)
    assert_same_obs(first, reused)
    np.testing.assert_array_equal(first_state, sim_state(a))
    # equal actions from equal starts stay identical
    actions = np.random.default_rng(0).uniform(-1, 1, (3, *a.action_space.shape))
    for action in actions:
        assert_same_obs(a.step(action)[0], b.step(action)[0])
    np.testing.assert_array_equal(sim_state(a), sim_state(b))
    a.close()
    b.close()


def test_different_seeds_give_different_cube_positions():
    env = RobosuiteEnv(horizon=HORIZON, obs_keys=["cube_pos", "robot0_eef_pos"])
    assert list(env.observation_space.spaces) == ["cube_pos", "robot0_eef_pos"]
    cubes = np.array([env.reset(seed=s)[0]["cube_pos"] for s in range(5)])
    assert len({tuple(c[:2]) for c in cubes}) == 5  # x, y all distinct
    assert np.abs(cubes[:, :2] - cubes[0, :2]).max() > 1e-3
    # unseeded resets continue the stream: they differ from each other too
    assert not np.array_equal(env.reset()[0]["cube_pos"], env.reset()[0]["cube_pos"])
    env.close()


def test_construction_seed_makes_unseeded_resets_reproducible():
    a, b = RobosuiteEnv(horizon=HORIZON, seed=11), RobosuiteEnv(horizon=HORIZON, seed=11)
    for _ in range(2):
        assert_same_obs(a.reset()[0], b.reset()[0])
    a.close()
    b.close()


def test_success_is_robosuites_check(lift):
    obs, info = lift.reset(seed=0)
    assert info["is_success"] is False
    _, reward, terminated, truncated, info = lift.step(np.zeros(7))
    assert (reward, info["is_success"], terminated, truncated) == (0.0, False, False, False)

    env = lift.robosuite_env
    rest = env.sim.data.get_joint_qpos(env.cube.joints[0]).copy()
    lift_cube_above_table(lift, 0.2)
    obs, reward, terminated, truncated, info = lift.step(np.zeros(7))
    assert env._check_success()
    assert (reward, info["is_success"]) == (1.0, True)
    assert not terminated and not truncated  # success does not end the episode
    assert obs["object-state"][2] > rest[2] + 0.1  # the observation sees the lifted cube


def test_spaces_match_robosuite(lift):
    obs_space, act_space = lift.observation_space, lift.action_space
    assert list(obs_space.spaces) == ["object-state", "robot0_proprio-state"]
    assert obs_space["object-state"].shape == (10,) and obs_space["robot0_proprio-state"].shape == (50,)
    obs, _ = lift.reset(seed=1)
    assert obs_space.contains(obs)
    assert all(v.dtype == np.float32 for v in obs.values())
    obs, *_ = lift.step(act_space.sample())
    assert obs_space.contains(obs)
    low, high = lift.robosuite_env.action_spec
    assert act_space.shape == (7,) and act_space.dtype == np.float32
    np.testing.assert_array_equal(act_space.low, low.astype(np.float32))
    np.testing.assert_array_equal(act_space.high, high.astype(np.float32))


def test_horizon_truncates_and_an_ended_episode_refuses_steps(lift):
    lift.reset(seed=2)
    for t in range(1, HORIZON + 1):
        _, _, terminated, truncated, _ = lift.step(np.zeros(7))
        assert not terminated and truncated == (t == HORIZON)
    with pytest.raises(RuntimeError, match="call reset"):
        lift.step(np.zeros(7))
    lift.reset(seed=2)
    with pytest.raises(ValueError, match="shape"):
        lift.step(np.zeros(3))


def test_controller_option_changes_the_action_space():
    env = RobosuiteEnv(controller="osc_position", horizon=HORIZON)
    assert env.action_space.shape == (4,)  # dx, dy, dz, gripper
    env.reset(seed=0)
    env.step(np.zeros(4))
    env.close()


def test_bad_names_are_one_line_value_errors():
    with pytest.raises(ValueError) as err:
        RobosuiteEnv("Lfit")
    message = str(err.value)
    assert "\n" not in message and "did you mean 'Lift'" in message
    assert all(name in message for name in ("Lift", "Stack", "Door", "NutAssembly", "PickPlace"))
    with pytest.raises(ValueError, match="unknown robosuite robot 'Pnada'"):
        RobosuiteEnv(robots="Pnada")
    with pytest.raises(ValueError, match="unknown robosuite controller"):
        RobosuiteEnv(controller="NO_SUCH_CONTROLLER")


def test_bad_obs_key_lists_the_available_ones():
    with pytest.raises(ValueError, match="cube_pos"):
        RobosuiteEnv(obs_keys=["cube_position"], horizon=HORIZON)


def lift_cube_above_table(env: RobosuiteEnv, height: float = 0.2) -> None:
    """Put the cube `height` m above where it rests (Lift needs its centre 4 cm over the table top)."""
    rs = env.robosuite_env
    joint = rs.cube.joints[0]
    qpos = rs.sim.data.get_joint_qpos(joint).copy()
    qpos[2] += height
    rs.sim.data.set_joint_qpos(joint, qpos)
    rs.sim.data.set_joint_qvel(joint, np.zeros(6))
    rs.sim.forward()


def test_lift_preset_groups_start_equal_and_read_success():
    from grpo_robot.cli import compose_train_config as preset
    from grpo_robot.environment import make_env
    from grpo_robot.seeding import group_seeds

    env = make_env(preset("env=robosuite_lift", "env.horizon=6").env, 4)
    assert (env.name, env.obs_dim, env.action_dim, env.horizon) == ("robosuite:Lift", 60, 7, 6)  # named by its task
    obs = env.reset(group_seeds([11, 12], 2))  # the first reset checks the seeding, and passes
    assert (obs[0] == obs[1]).all() and (obs[2] == obs[3]).all() and not (obs[0] == obs[2]).all()
    lift_cube_above_table(env.vec.envs[1].inner)
    _, reward, terminated, _, _ = env.step(np.zeros((4, 7)))
    assert reward.tolist() == [0.0, 1.0, 0.0, 0.0] and terminated.tolist() == [False, True, False, False]
    while not env.done.all():
        env.step(np.zeros((4, 7)))
    assert env.truncated.tolist() == [True, False, True, True] and (env.steps == [6, 1, 6, 6]).all()
    assert not env.failed.any()
    env.close()


def test_lift_preset_trains_and_checkpoints(tmp_path):
    from dataclasses import replace

    import torch

    from grpo_robot.cli import compose_train_config as preset
    from grpo_robot.trainer import Trainer

    cfg = preset("env=robosuite_lift", "env.horizon=10", "iterations=2", "eval_seeds=4", "progress=false")
    trainer = Trainer(replace(cfg, algo=replace(cfg.algo, group_size=2, groups_per_iter=2, minibatches=2)), tmp_path)
    summary = trainer.run()
    trainer.close()
    assert summary["iterations"] == 2 and summary["env_steps"] == 2 * 4 * 10  # nothing lifts by chance in 10 steps
    ckpt = torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["iteration"] == 2 and ckpt["policy"]["action_dim"] == 7
    assert ckpt["config"]["env"]["kwargs"] == {"env_name": "Lift", "robots": "Panda", "controller": None}


def test_a_copy_of_the_physics_alone_is_no_copy_of_a_robosuite_env(lift):
    """Why `group_start=clone` does not offer its `mujoco` method for robosuite (grpo_robot/env_state.py):
    the integration state copied into another env right after reset, both then given the same
    action, already observe apart at the first step (robosuite's controllers and observables keep
    state outside MjData). The adapter seeds its resets instead."""
    from grpo_robot import env_state

    assert env_state.applicable(lift) == ["deepcopy"]
    other = RobosuiteEnv("Lift", robots="Panda", horizon=HORIZON)
    try:
        lift.reset(seed=3)
        other.reset(seed=50)
        sim = other.robosuite_env.sim
        mujoco.mj_setState(sim.model._model, sim.data._data, sim_state(lift), STATE)
        mujoco.mj_forward(sim.model._model, sim.data._data)
        np.testing.assert_array_equal(sim_state(other), sim_state(lift))
        action = np.full(lift.action_space.shape, 0.5)
        a, b = lift.step(action)[0], other.step(action)[0]
        assert max(float(np.abs(a[k] - b[k]).max()) for k in a) > 1e-3
    finally:
        other.close()
