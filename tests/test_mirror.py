"""Mirror symmetry (`policy.mirror`): the built-in tasks are unchanged by the reflections x -> -x
and y -> -y of the world (exactly for the hand alone and for pushing across x; up to the one
finger the observation reads, and contacts, otherwise); a mirrored policy acts as its reflection
in every frame, in every policy family, through training, resume, evaluation and export; and it is
refused where no symmetry is declared, or against a checkpoint of the other kind."""

import re
import warnings
from dataclasses import replace

import mujoco
import numpy as np
import pytest
import torch
from test_train import resume_matches_straight_run, small_config

from grpo_robot.batched import BatchedEnv
from grpo_robot.checkpoint import CheckpointError, initial_policy_weights
from grpo_robot.config import (
    ConfigError,
    EnvConfig,
    PolicyConfig,
    TrainConfig,
    policy_kwargs,
    unused_settings,
    validate,
)
from grpo_robot.deploy import load_policy
from grpo_robot.envs import TASKS, make_task
from grpo_robot.envs.task import FULLPHYSICS
from grpo_robot.policies.base import Mirror, build_policy
from grpo_robot.trainer import Trainer

SEEDS = range(20)


def reflections(task, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(observation signs, action signs) of reflecting the world across `axis` (0: x, 1: y)."""
    spec = task.mirror_axes()[axis]
    obs, action = np.ones(task.obs_dim), np.ones(task.action_dim)
    obs[spec["obs"]], action[spec["action"]] = -1.0, -1.0
    return obs, action


def reflected_start(task, seed: int, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(physics state, mocap positions) of the start of `seed` reflected across `axis`: at a start
    everything is at rest and the cube unrotated, so the hand's and the cube's coordinates on that
    axis, the hand's position target (its actuator's activation) and the goal or pad change sign."""
    state, mocap, _ = task.initial_condition(seed)
    m = task.model
    d = mujoco.MjData(m)
    mujoco.mj_setState(m, d, state, FULLPHYSICS)
    d.qpos[task.qpos_adr("hand_" + "xy"[axis])] *= -1.0
    d.act[axis] *= -1.0
    if "cube" in [m.joint(i).name for i in range(m.njnt)]:
        d.qpos[task.qpos_adr("cube") + axis] *= -1.0
    mocap = mocap.reshape(-1, 3).copy()
    mocap[:, axis] *= -1.0
    out = np.empty(mujoco.mj_stateSize(m, FULLPHYSICS))
    mujoco.mj_getState(m, d, out, FULLPHYSICS)
    return out, mocap.ravel()


def mirrored_episode(task, seed: int, axis: int) -> tuple[float, bool, bool]:
    """One episode of the noisy scripted expert and, beside it, its reflection from the reflected
    start -> (the largest difference between the second world's observations and the first's
    reflected, over the episode; whether they agreed to 1e-3 for the first 5 control steps;
    whether both ended with the same outcome)."""
    obs_sign, action_sign = reflections(task, axis)
    env = BatchedEnv(task, 2, nthread=1)
    env.reset([seed, seed])
    env.state[1], env.mocap_pos[1] = reflected_start(task, seed, axis)
    obs = env.obs()
    rng = np.random.default_rng(seed)
    worst, early = 0.0, 0.0
    for t in range(task.horizon):
        action = np.clip(task.expert(obs[:1]) + 0.3 * rng.standard_normal((1, task.action_dim)), -1.0, 1.0)
        obs, _, _, _, info = env.step(np.concatenate([action, action * action_sign]))
        gap = float(np.abs(obs[1] - obs_sign * obs[0]).max())
        worst = max(worst, gap)
        early = max(early, gap) if t < 5 else early
        if env.done.any():
            break
    return worst, early < 1e-3, bool(info["is_success"][0] == info["is_success"][1])


@pytest.mark.parametrize("name", list(TASKS))
def test_each_task_is_its_own_mirror_image(name):
    task = make_task(name)
    for axis in (0, 1):
        episodes = [mirrored_episode(task, seed, axis) for seed in SEEDS]
        assert all(early for _, early, _ in episodes), (name, axis)
        agree = np.mean([same for _, _, same in episodes])
        assert agree >= 0.85, f"{name}, axis {axis}: the same outcome on {agree:.0%} of {len(SEEDS)} seeds"
        exact = sum(worst < 1e-9 for worst, _, _ in episodes)
        if axis == 0 and name == "Reach":  # the hand alone, reflected across x: exact
            assert exact == len(SEEDS)
        elif axis == 0 and name == "PushCube":  # exact but where a contact's rounding parts them (2 of 20)
            assert exact >= 15, exact
        else:  # the fingers swap (y) or hold the cube: apart by rounding, then by the contacts
            assert exact <= 10, (name, axis, exact)
    if name == "Reach":  # the one finger read: reflecting y swaps the fingers, which the hand's
        # acceleration sends apart by a fraction of a millimetre
        worst = max(mirrored_episode(task, seed, 1)[0] for seed in SEEDS)
        assert 1e-6 < worst < 2e-3


def test_every_task_declares_its_axes_from_its_sensors():
    push = make_task("PushCube")
    x, y = push.mirror_axes()
    slices = push.obs_slices
    assert x["key"] == [slices["goal_pos"].start, slices["cube_pos"].start] and x["action"] == [0]
    assert y["key"] == [slices["goal_pos"].start + 1, slices["cube_pos"].start + 1] and y["action"] == [1]
    vectors = [name for name in slices if slices[name].stop - slices[name].start == 3]
    assert x["obs"] == sorted(slices[name].start for name in vectors)
    assert slices["finger"].start not in x["obs"] + y["obs"]
    for name in TASKS:  # every built-in task declares them, every version alike
        assert len(make_task(name).mirror_axes()) == 2
    assert make_task("PushCube-v1").mirror_axes() == push.mirror_axes()


def start_observations(task_name: str, n: int = 256) -> torch.Tensor:
    """Observations of `n` starts a few random steps in, so velocities are not all zero."""
    env = BatchedEnv(task_name, n, nthread=1)
    env.reset(np.arange(n))
    rng = np.random.default_rng(0)
    for _ in range(3):
        obs, *_ = env.step(rng.uniform(-1.0, 1.0, (n, env.action_dim)))
    return torch.as_tensor(obs, dtype=torch.float32)


POLICIES = [
    ("gaussian", {}),
    ("gaussian", {"squash": True, "state_dependent_std": True}),
    ("tokenized", {"bins": 16}),
    ("tokenized", {"bins": 16, "head": "autoregressive"}),
    ("tokenized", {"bins": 16, "bin_logits": "gaussian", "decode": "mean"}),
    ("tokenized", {"bins": 15, "bin_logits": "ordinal", "decode": "median"}),
]


@pytest.mark.parametrize("kind,kwargs", POLICIES)
def test_a_mirrored_policy_acts_as_its_own_reflection(kind, kwargs):
    task = make_task("PushCube")
    obs = start_observations("PushCube")
    torch.manual_seed(0)
    policy = build_policy(kind, task.obs_dim, task.action_dim, hidden_sizes=[32, 32], mirror=task.mirror_axes(),
                          **kwargs)  # fmt: skip
    with torch.no_grad():  # away from the near-constant initial outputs, which any frame would reproduce
        for p in policy.parameters():
            p.add_(0.3 * torch.randn_like(p))
    policy.update_inputs(obs)
    generator = torch.Generator().manual_seed(1)
    raw, action, logp = policy.sample(obs, generator)
    again, _ = policy.log_probs(obs, raw)
    torch.testing.assert_close(again, logp, atol=1e-5, rtol=0)
    deterministic = policy.sample(obs, None, True)[1]
    for axis in (0, 1):
        obs_sign, action_sign = (torch.as_tensor(s, dtype=torch.float32) for s in reflections(task, axis))
        # the reflected world's deterministic action is the reflection of this one's
        torch.testing.assert_close(policy.sample(obs * obs_sign, None, True)[1], deterministic * action_sign,
                                   atol=1e-6, rtol=0)  # fmt: skip
        # and a reflected action is as likely there as the action here
        # (a Gaussian's raw draw reflects as it is, past the clip; a token's bin is read from its end)
        mirrored_raw = raw * action_sign if kind == "gaussian" else policy.raw_from_action(action * action_sign)
        torch.testing.assert_close(policy.log_probs(obs * obs_sign, mirrored_raw)[0], logp, atol=1e-5, rtol=0)
    # without the mirror, the same weights act otherwise in a reflected world
    plain = build_policy(kind, task.obs_dim, task.action_dim, hidden_sizes=[32, 32], **kwargs)
    plain.load_state_dict(policy.state_dict())
    obs_sign, action_sign = (torch.as_tensor(s, dtype=torch.float32) for s in reflections(task, 0))
    reflected = plain.sample(obs * obs_sign, None, True)[1]
    assert not torch.allclose(reflected, plain.sample(obs, None, True)[1] * action_sign)


def test_the_policy_sees_one_quadrant_and_normalizes_it():
    task = make_task("PushCube")
    obs = start_observations("PushCube")
    policy = build_policy("gaussian", task.obs_dim, task.action_dim, hidden_sizes=[16], mirror=task.mirror_axes())
    canonical, frame = policy.canonical(obs)
    assert frame.perm is None  # the built-in tasks' reflections swap no actions
    goal, cube = task.obs_slices["goal_pos"], task.obs_slices["cube_pos"]
    to_goal = canonical[:, goal][:, :2] - canonical[:, cube][:, :2]
    assert (to_goal >= 0).all()  # every push is towards +x and +y in the policy's frame
    world = obs[:, goal][:, :2] - obs[:, cube][:, :2]
    assert ((world < 0).float().mean(0) > 0.3).all()  # the starts push every way
    expected = torch.ones(len(obs), task.action_dim)
    expected[:, :2] = torch.where(world < 0, -1.0, 1.0)  # the hand's x and y velocities, reflected back
    torch.testing.assert_close(frame.sign, expected)
    policy.update_inputs(obs)
    mean = policy.obs_norm.mean.float()
    assert (mean[goal][:2] - mean[cube][:2] > 0.05).all()  # the canonical frame's statistics, not the world's


def test_an_entry_two_reflected_axes_negate_keeps_its_sign():
    """Axes may share entries (an angle both reflections negate, say): an entry is negated when an
    odd number of the axes it belongs to are reflected."""
    mirror = Mirror(3, 1, [{"key": [0], "obs": [0, 2], "action": [0]}, {"key": [1], "obs": [1, 2], "action": [0]}])
    obs_sign, action_sign = mirror.signs(torch.tensor([[-1.0, -2.0, 5.0], [-1.0, 2.0, 5.0], [1.0, 2.0, 5.0]]))
    assert obs_sign.tolist() == [[-1, -1, 1], [-1, 1, -1], [1, 1, 1]]  # both reflected; axis 0 alone; neither
    assert action_sign.tolist() == [[1], [-1], [1]]


@pytest.mark.parametrize("axes,message", [
    ([{"key": [0], "obs": [0, 9], "action": [0]}], r"axes\[0\].obs=\[0, 9\] is invalid: must lie in \[0, 9\)"),
    ([{"key": [0], "obs": [0], "action": [4]}], r"axes\[0\].action=\[4\] is invalid: must lie in \[0, 4\)"),
    ([{"key": [0, 1, 2], "obs": [0, 1, 2], "action": [0]}], r"axes\[0\].key=\[0, 1, 2\] is invalid: must name one "),
    ([], r"axes=\[\] is invalid: must be a non-empty list"),
    # a key the axis does not negate: reflecting never makes it positive, so no frame is picked
    ([{"key": [0], "obs": [1], "action": [0]}], r"axes\[0\].key=\[0\] is invalid: must be among its own obs entries"),
    # a key another axis negates: that axis's reflection would turn this one's frame over
    ([{"key": [0], "obs": [0], "action": [0]}, {"key": [1], "obs": [0, 1], "action": [1]}],
     r"axes\[0\].key=\[0\] is invalid: must be among axis 1's obs entries, only its own"),
    ([{"key": [0, 0], "obs": [0], "action": [0]}], r"axes\[0\].key=\[0, 0\] is invalid: must name distinct"),
    ([{"key": [0], "obs": [0], "action": []}], r"axes\[0\].action=\[\] is invalid: must name distinct entries, at"),
])  # fmt: skip
def test_axes_that_pick_no_frame_are_one_line_errors(axes, message):
    with pytest.raises(ValueError, match="^mirror " + message):
        Mirror(9, 4, axes)
    env = EnvConfig(task=None, entry_point="toy_envs:PointReach", horizon=40)
    cfg = small_config(env=env, policy=PolicyConfig(hidden_sizes=[8], mirror=True, mirror_axes=axes))
    if "must lie in" in message:  # the sizes are the env's: known when the policy is built
        validate(cfg)
    else:  # the rest before any work
        with pytest.raises(ConfigError, match="^policy.mirror_" + message):
            validate(cfg)


def test_mirror_is_refused_where_it_cannot_apply(tmp_path):
    cfg = small_config(policy=PolicyConfig(hidden_sizes=[64, 64], mirror=True))
    validate(cfg)
    gym = replace(cfg, env=EnvConfig(task=None, id="Pendulum-v1", horizon=20))
    with pytest.raises(ConfigError) as err:
        validate(gym)
    assert str(err.value) == ("policy.mirror=True is invalid: needs the env's mirror symmetries: env.id=Pendulum-v1 is "
                              "not a built-in task, so declare them in its env config, env.mirror_axes=[{key: [i, j], "
                              "obs: [...], action: [...]}, ...], or give them as policy.mirror_axes "
                              "(docs/custom_envs.md)")  # fmt: skip
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="needs a built-in env.task, which declares its mirror symmetries, or the "
                                         "env's own as env.mirror_axes or policy.mirror_axes"):  # fmt: skip
        policy_kwargs(cfg.policy, None)
    # a checkpoint of the other kind: its weights read the other frame
    plain = small_config(iterations=1)
    Trainer(plain, tmp_path / "plain").run()
    env = BatchedEnv("Reach", 1, nthread=1)
    with pytest.raises(CheckpointError, match=r"was trained with policy.mirror=false, but the config has "
                                              r"policy.mirror=true"):  # fmt: skip
        initial_policy_weights(str(tmp_path / "plain" / "checkpoints" / "last.pt"), cfg, env, torch.device("cpu"))


def test_sb3_is_given_no_mirrored_clone(tmp_path):
    from grpo_robot.bench.sb3 import load_clone

    Trainer(small_config(policy=PolicyConfig(hidden_sizes=[16], mirror=True), iterations=1), tmp_path).run()
    with pytest.raises(SystemExit, match=r"acts in a mirror frame \(policy.mirror=true\), which SB3's actor has no "
                                         r"place for: clone with policy.mirror=false"):  # fmt: skip
        load_clone(tmp_path / "checkpoints" / "last.pt")


def test_a_mirrored_run_trains_resumes_evaluates_and_exports(tmp_path):
    cfg = small_config(policy=PolicyConfig(hidden_sizes=[64, 64], mirror=True), iterations=3, checkpoint_every=1)
    trainer = resume_matches_straight_run(cfg, tmp_path, 1)
    axes = make_task("Reach").mirror_axes()
    ckpt = torch.load(tmp_path / "straight" / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["policy"]["kwargs"]["mirror"] == axes
    loaded = load_policy(tmp_path / "straight")
    obs = start_observations("Reach", 64)
    with torch.no_grad():
        expected = trainer.policy.sample(obs, None, True)[1].numpy()
    np.testing.assert_array_equal(loaded.act(obs.numpy()), expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # after act(), too: the policy's cached statistics once made export warn
        written = loaded.export(tmp_path / "policy.pt2")
    program = torch.export.load(written).module()
    np.testing.assert_allclose(program(obs).numpy(), expected, atol=1e-6)
    obs_sign, action_sign = reflections(make_task("Reach"), 1)
    np.testing.assert_allclose(loaded.act(obs.numpy() * obs_sign), expected * action_sign, atol=1e-6)


def test_success_by_direction_reads_where_a_policy_fails(tmp_path, capsys):
    import importlib.util
    import json
    from pathlib import Path

    script = Path(__file__).parents[1] / "scripts" / "success_by_direction.py"
    spec = importlib.util.spec_from_file_location("success_by_direction", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    seeds = list(range(400))
    angles = module.directions("PushCube-v3", seeds)
    # a policy that succeeds exactly when the cube must travel towards +y
    episodes = [{"seed": s, "success": bool(a > 0)} for s, a in zip(seeds, angles, strict=True)]
    path = tmp_path / "eval.json"
    path.write_text(json.dumps({"task": "PushCube-v3", "episodes": episodes}))
    module.main([str(path)])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{path}: PushCube-v3, 400 episodes, success {np.mean(angles > 0):.1%}"
    rows = [line.split(" | ") for line in out[3:]]
    assert len(rows) == 8 and sum(int(r[1]) for r in rows) == 400
    assert [r[2].rstrip(" |") for r in rows] == ["0.0%"] * 4 + ["100.0%"] * 4
    with pytest.raises(SystemExit, match="has no cube to move towards a target"):
        path.write_text(json.dumps({"task": "Reach", "episodes": episodes}))
        module.main([str(path)])


# PointReach (tests/toy_envs.py): obs = (position, goal), action = velocity; symmetric about both axes
POINT_AXES = [{"key": [2, 0], "obs": [0, 2], "action": [0]}, {"key": [3, 1], "obs": [1, 3], "action": [1]}]


def point_reach_config(env_axes=None, **policy) -> TrainConfig:
    env = EnvConfig(task=None, entry_point="toy_envs:PointReach", horizon=40, mirror_axes=env_axes)
    return small_config(env=env, policy=PolicyConfig(hidden_sizes=[32, 32], **policy), iterations=1)


@pytest.mark.parametrize("declared", ["policy", "env"])
def test_a_gymnasium_env_takes_its_axes_from_the_config(tmp_path, declared):
    """From `policy.mirror_axes`, or from `env.mirror_axes`, declared once with the env (its
    conf/env/<yours>.yaml), so that `policy.mirror=true` is all a run needs, as on a built-in task."""

    def config(axes):
        return point_reach_config(mirror=True, **{"mirror_axes" if declared == "policy" else "env_axes": axes})

    cfg = config(POINT_AXES)
    validate(cfg)
    assert unused_settings(cfg) == []
    trainer = Trainer(cfg, tmp_path)
    trainer.run()
    assert trainer.policy.init_kwargs()["mirror"] == POINT_AXES
    obs = torch.rand(64, 4) - 0.5
    with torch.no_grad():
        action = trainer.policy.sample(obs, None, True)[1]
        reflected = trainer.policy.sample(obs * torch.tensor([-1.0, 1.0, -1.0, 1.0]), None, True)[1]
    torch.testing.assert_close(reflected, action * torch.tensor([-1.0, 1.0]), atol=1e-6, rtol=0)
    # an entry past the env's sizes is found when the policy is built, before training
    far = config([{"key": [4], "obs": [0, 4], "action": [0]}])
    with pytest.raises(ValueError, match=r"mirror axes\[0\].key=\[4\] is invalid: must lie in \[0, 4\) for this env"):
        Trainer(far, tmp_path / "far")


def test_policy_mirror_axes_replace_the_env_configs_own_and_the_declaration_alone_does_nothing():
    cfg = point_reach_config(POINT_AXES, mirror=True)
    x_only = POINT_AXES[:1]
    replaced = replace(cfg, policy=replace(cfg.policy, mirror_axes=x_only))
    assert policy_kwargs(replaced.policy, replaced.env)["mirror"] == x_only
    assert unused_settings(replaced) == ["policy.mirror_axes replaces the env's own env.mirror_axes for this run"]
    off = replace(cfg, policy=replace(cfg.policy, mirror=False))
    validate(off)
    assert "mirror" not in policy_kwargs(off.policy, off.env) and unused_settings(off) == []


def test_a_run_from_before_env_mirror_axes_resumes_with_its_preset_that_now_declares_them():
    """A resumed run is compared on the mirror axes its policy takes, not on where they are
    declared: a Fetch preset now declares the env's axes (env.mirror_axes), and a run saved
    before, plain or mirrored by policy.mirror_axes, resumed with that preset on the command line
    was refused for env.mirror_axes differing from None. Other axes are still refused."""
    from grpo_robot.config import config_dict
    from grpo_robot.resume import check_same_run

    for mirror in (False, True):
        old = config_dict(point_reach_config(mirror=mirror, mirror_axes=POINT_AXES if mirror else None))
        del old["env"]["mirror_axes"]  # a config saved before the key
        check_same_run(old, point_reach_config(POINT_AXES, mirror=mirror), "resume=old")
    old = config_dict(point_reach_config(mirror=True, mirror_axes=POINT_AXES))
    with pytest.raises(ValueError) as err:
        check_same_run(old, point_reach_config(POINT_AXES[:1], mirror=True), "resume=old")
    assert str(err.value).startswith(f"resume=old: policy.mirror_axes={POINT_AXES[:1]!r} differs from the run's "
                                     f"policy.mirror_axes={POINT_AXES!r}; a resumed run keeps"), str(err.value)


def test_the_env_configs_axes_are_refused_for_another_observation_layout():
    """`env.mirror_obs_keys` names the `env.obs_keys` that `env.mirror_axes` count their entries
    in: with other obs_keys (reordered, or null: every key), the entries would name other
    quantities and the policy would mirror the wrong ones, so the env's axes are refused; a
    run's own `policy.mirror_axes` are taken for the layout they are given with."""
    keys = ["observation", "desired_goal"]
    env = EnvConfig(task=None, entry_point="toy_envs:PointReach", horizon=40, mirror_axes=POINT_AXES,
                    mirror_obs_keys=keys, obs_keys=keys)  # fmt: skip
    mirrored = PolicyConfig(hidden_sizes=[8], mirror=True)
    validate(small_config(env=env, policy=mirrored))
    for other in (keys[::-1], None):
        moved = replace(env, obs_keys=other)
        with pytest.raises(ConfigError) as err:
            validate(small_config(env=moved, policy=mirrored))
        assert str(err.value) == (f"env.obs_keys={other!r} is invalid: moves the observation entries that "
                                  f"env.mirror_axes count in (they are for env.obs_keys={keys}): give "
                                  "policy.mirror_axes for this layout, or keep env.obs_keys")  # fmt: skip
        validate(small_config(env=moved, policy=replace(mirrored, mirror_axes=POINT_AXES[:1])))
        validate(small_config(env=moved, policy=replace(mirrored, mirror=False)))


@pytest.mark.parametrize("env,message", [
    ({"mirror_axes": []}, "env.mirror_axes=[] is invalid: must be a non-empty list"),
    ({"mirror_axes": [{"key": [0, 1, 2], "obs": [0], "action": [0]}]},
     "env.mirror_axes[0].key=[0, 1, 2] is invalid: must name one or two observation entries"),
    ({"task": "Reach", "entry_point": None, "mirror_axes": POINT_AXES},
     "env.mirror_axes=[{'key': [2, 0], 'obs': [0, 2], 'action': [0]}, {'key': [3, 1], 'obs': [1, 3], 'action': [1]}] "
     "is invalid: is for an env that is not a built-in task; env.task=Reach declares its own (Task.mirror_axes)"),
])  # fmt: skip
def test_bad_env_mirror_axes_are_refused_by_every_command_even_without_the_mirror(env, message):
    """`validate_env` checks them: training, demos and cloning alike, whether or not this run mirrors."""
    from grpo_robot.config.validate import validate_env

    cfg = EnvConfig(**{"task": None, "entry_point": "toy_envs:PointReach", "horizon": 40, **env})
    with pytest.raises(ConfigError) as err:
        validate_env(cfg)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.parametrize("policy,message", [
    ({"mirror": True}, "policy.mirror=True is invalid: needs the env's mirror symmetries: env.entry_point="
                       "toy_envs:PointReach is not a built-in task, so declare them in its env config"),
    ({"mirror": True, "mirror_axes": []}, "policy.mirror_axes=[] is invalid: must be a non-empty list"),
    ({"mirror": True, "mirror_axes": [{"key": [0], "obs": [0]}]}, "policy.mirror_axes[0]={'key': [0], 'obs': [0]} is "
                                                                  "invalid: must be a non-empty list"),
    ({"mirror": True, "mirror_axes": [{"key": [0], "obs": [-1], "action": [0]}]},
     "policy.mirror_axes[0].obs=[-1] is invalid: must be a non-empty list"),
    ({"mirror": True, "mirror_axes": [{"key": [0, 1, 2], "obs": [0], "action": [0]}]},
     "policy.mirror_axes[0].key=[0, 1, 2] is invalid: must name one or two observation entries"),
])  # fmt: skip
def test_bad_mirror_axes_are_refused_before_any_work(policy, message):
    with pytest.raises(ConfigError) as err:
        validate(point_reach_config(**policy))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_built_in_task_keeps_its_own_axes():
    cfg = small_config(policy=PolicyConfig(hidden_sizes=[64, 64], mirror=True, mirror_axes=POINT_AXES))
    with pytest.raises(ConfigError, match=r"policy.mirror_axes=.* is invalid: is for an env that is not a built-in "
                                          r"task; env.task=Reach declares its own"):  # fmt: skip
        validate(cfg)


# -- reflections that swap entries and mirror about planes off the origin (ThrusterReach) --------------


def thruster_reflect(obs: np.ndarray, action: np.ndarray | None, axis: int):
    """ThrusterReach's observation (and action, in the policy's [-1, 1] units) reflected about x = 0.5
    (axis 0) or y = 0.5 (axis 1), written out by hand from the env's definition."""
    obs = np.array(obs, dtype=np.float64)
    action = None if action is None else np.array(action, dtype=np.float64)
    if axis == 0:
        obs[..., [0, 2]] = 1.0 - obs[..., [0, 2]]
        obs[..., [4, 5]] = obs[..., [5, 4]]
        if action is not None:
            action[..., [0, 1]] = action[..., [1, 0]]
    else:
        obs[..., [1, 3]] = 1.0 - obs[..., [1, 3]]
        if action is not None:
            action[..., 2] = -action[..., 2]
    return obs, action


def test_thruster_reach_is_its_own_mirror_image():
    """The axes describe the env: from a start and from its reflection, with reflected actions, the
    two worlds stay each other's reflection, step by step (to rounding)."""
    from toy_envs import ThrusterReach

    from grpo_robot.gym_vector import unit_actions

    rng = np.random.default_rng(0)
    for axis in (0, 1):
        a, b = ThrusterReach(), ThrusterReach()
        obs_a, _ = a.reset(seed=3)
        b.reset(seed=3)
        b.pos, b.goal = thruster_reflect(obs_a, None, axis)[0][:4].reshape(2, 2)
        low, high = a.action_space.low.astype(np.float64), a.action_space.high.astype(np.float64)

        def to_env(u, low=low, high=high):  # the wrapper's map from [-1, 1]
            return low + (u + 1.0) / 2.0 * (high - low)

        for _ in range(30):
            unit = rng.uniform(-1.0, 1.0, size=3)
            obs_a, *_ = a.step(to_env(unit))
            obs_b, *_ = b.step(to_env(thruster_reflect(obs_a, unit, axis)[1]))
            np.testing.assert_allclose(obs_b, thruster_reflect(obs_a, None, axis)[0], atol=1e-12)
        np.testing.assert_allclose(unit_actions(to_env(unit)[None], low, high)[0], unit, atol=1e-12)


@pytest.mark.parametrize("kind,kwargs", [("gaussian", {}), ("gaussian", {"state_dependent_std": True}),
                                         ("tokenized", {"bins": 33}),
                                         ("tokenized", {"bins": 33, "bin_logits": "gaussian",
                                                        "learn_temperature": True})])  # fmt: skip
def test_a_policy_with_swaps_and_centers_acts_as_its_own_reflection(kind, kwargs):
    """Under axes that swap entries and reflect about x = 0.5: the action at a reflected observation
    is the reflected action, and an action and its image have the same log-probs, in all four
    frames, with weights that are not symmetric by chance."""
    from toy_envs import THRUSTER_AXES

    torch.manual_seed(0)
    policy = build_policy(kind, 6, 3, hidden_sizes=[32, 32], mirror=THRUSTER_AXES, **kwargs)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.3 * torch.randn_like(p))  # every weight, so that no dimension's head is zero
        pos_goal = torch.rand(256, 4, dtype=torch.float64)
        obs = torch.cat([pos_goal, pos_goal[:, :1], 1.0 - pos_goal[:, :1]], 1).float()
        raw, action, _ = policy.sample(obs, torch.Generator().manual_seed(1))
        logp, entropy = policy.log_probs(obs, raw)
        deterministic = policy.sample(obs, None, True)[1]
        # the update's shortcut for a zero-advantage step's entropy: what log_probs gives, or none
        free = policy.state_free_entropy(len(obs))
        assert free is None or torch.equal(free, entropy)
        assert deterministic[:, 0].std() > 0.01 and (deterministic[:, 0] - deterministic[:, 1]).abs().mean() > 0.01
        for axis in (0, 1):
            image_obs, image_action = (torch.as_tensor(x, dtype=torch.float32)
                                       for x in thruster_reflect(obs.numpy(), action.numpy(), axis))  # fmt: skip
            expected = torch.as_tensor(thruster_reflect(obs.numpy(), deterministic.numpy(), axis)[1],
                                       dtype=torch.float32)  # fmt: skip
            torch.testing.assert_close(policy.sample(image_obs, None, True)[1], expected, atol=2e-5, rtol=0)
            image_raw = raw[:, [1, 0, 2]] if axis == 0 else raw * torch.tensor([1.0, 1.0, -1.0])
            if kind == "tokenized":
                image_raw = policy.raw_from_action(image_action)
            image_logp, image_entropy = policy.log_probs(image_obs, image_raw)
            order = [1, 0, 2] if axis == 0 else [0, 1, 2]  # per-token values follow their dimension
            torch.testing.assert_close(image_logp, logp[:, order], atol=2e-5, rtol=0)
            torch.testing.assert_close(image_entropy, entropy[:, order], atol=2e-5, rtol=0)


def test_axes_with_swaps_and_centers_train_resume_load_and_export_from_the_config(tmp_path):
    from toy_envs import THRUSTER_AXES

    env = EnvConfig(task=None, entry_point="toy_envs:ThrusterReach", horizon=40)
    cfg = small_config(env=env, policy=PolicyConfig(hidden_sizes=[32, 32], mirror=True, mirror_axes=THRUSTER_AXES),
                       iterations=2, checkpoint_every=1)  # fmt: skip
    validate(cfg)
    resume_matches_straight_run(cfg, tmp_path, 1)
    ckpt = torch.load(tmp_path / "straight" / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["policy"]["kwargs"]["mirror"] == THRUSTER_AXES
    loaded = load_policy(tmp_path / "straight")
    rng = np.random.default_rng(0)
    pos_goal = rng.uniform(0.1, 0.9, size=(64, 4))
    obs = np.concatenate([pos_goal, pos_goal[:, :1], 1.0 - pos_goal[:, :1]], 1).astype(np.float32)
    action = loaded.act(obs)  # in the env's units: thrusters in [0, 1], the y velocity in [-1, 1]
    assert ((action[:, :2] >= 0) & (action[:, :2] <= 1)).all() and np.abs(action[:, 0] - action[:, 1]).mean() > 1e-3
    for axis in (0, 1):
        image = thruster_reflect(obs, None, axis)[0].astype(np.float32)
        expected = action[:, [1, 0, 2]] if axis == 0 else action * np.array([1.0, 1.0, -1.0], np.float32)
        np.testing.assert_allclose(loaded.act(image), expected, atol=1e-5)
    program = torch.export.load(loaded.export(tmp_path / "policy.pt2")).module()
    np.testing.assert_array_equal(program(torch.as_tensor(obs)).numpy(), action)  # the env's Box too


def test_the_general_frame_equals_the_sign_flips_where_the_axes_only_negate():
    """The built-in tasks' axes only negate entries and take the two-matmul path; the general one
    (each reflected axis's signed permutation and offset in turn) gives the same, bit for bit."""
    task = make_task("PushCube")
    obs = start_observations("PushCube")
    mirror = Mirror(task.obs_dim, task.action_dim, task.mirror_axes())
    assert mirror.plain
    fast, fast_frame = mirror.frame(obs)
    mirror.plain = False
    general, general_frame = mirror.frame(obs)
    assert torch.equal(fast, general) and torch.equal(fast_frame.sign, general_frame.sign)
    assert general_frame.perm is None
    # an axis given with zero centers and no swaps is a plain one; a center may be numpy's float
    assert Mirror(4, 2, [dict(POINT_AXES[0], center=[0.0, 0.0], swap=[]), POINT_AXES[1]]).plain
    assert not Mirror(4, 2, [dict(POINT_AXES[0], center=[np.float64(0.5), 0.5]), POINT_AXES[1]]).plain


def test_a_frame_composes_the_reflected_axes():
    """Two axes that both move actions: axis 0 swaps actions 0 and 1, axis 1 negates both; the
    world's action for a row with both reflected is the canonical one swapped and negated, and the
    observation reflects about each axis's center."""
    axes = [{"key": [0], "obs": [0], "center": [1.0], "action": [], "swap_action": [[0, 1]]},
            {"key": [1], "obs": [1, 2], "action": [0, 1], "swap": [[2, 3]]}]  # fmt: skip
    with pytest.raises(ValueError, match=r"axes\[1\].swap=\[\[2, 3\]\] is invalid: must pair entries that are both "
                                         r"negated or neither, so that reflecting twice is the identity \(entries 2, "
                                         r"3\)"):  # fmt: skip
        Mirror(4, 2, axes)
    axes[1]["obs"] = [1, 2, 3]
    mirror = Mirror(4, 2, axes)
    obs = torch.tensor([[0.5, -1.0, 3.0, 4.0], [2.0, -1.0, 3.0, 4.0], [0.5, 1.0, 3.0, 4.0], [2.0, 1.0, 3.0, 4.0]])
    canonical, frame = mirror.frame(obs)
    assert canonical.tolist() == [[1.5, 1.0, -4.0, -3.0], [2.0, 1.0, -4.0, -3.0], [1.5, 1.0, 3.0, 4.0],
                                  [2.0, 1.0, 3.0, 4.0]]  # fmt: skip
    action = torch.tensor([[10.0, 20.0]]).expand(4, 2)
    assert frame.to_world(action).tolist() == [[-20.0, -10.0], [-10.0, -20.0], [20.0, 10.0], [10.0, 20.0]]
    assert frame.order(action).tolist() == [[20.0, 10.0], [10.0, 20.0], [20.0, 10.0], [10.0, 20.0]]


@pytest.mark.parametrize("axes,message", [
    ([{"key": [0], "obs": [0], "action": [0], "swap": [[1]]}], r"\[0\].swap=\[\[1\]\] is invalid: must be a non-empty"),
    ([{"key": [0], "obs": [0], "action": [0], "swap": [[1, 1]]}], r"\[0\].swap=\[\[1, 1\]\] is invalid: must name "
                                                                  r"distinct entries"),
    ([{"key": [0], "obs": [0], "action": [0], "swap": [[1, 2], [2, 3]]}], r"\[0\].swap=\[\[1, 2\], \[2, 3\]\] is "
                                                                          r"invalid: must name distinct entries"),
    ([{"key": [0], "obs": [0], "action": [0], "swap": [[1, 9]]}], r"\[0\].swap=\[\[1, 9\]\] is invalid: must lie in "
                                                                  r"\[0, 9\)"),
    ([{"key": [0], "obs": [0], "action": [], "swap_action": [[0, 4]]}], r"\[0\].swap_action=\[\[0, 4\]\] is invalid: "
                                                                        r"must lie in \[0, 4\)"),
    ([{"key": [0], "obs": [0, 1], "action": [0], "swap": [[1, 2]]}], r"\[0\].swap=\[\[1, 2\]\] is invalid: must pair "
                                                                     r"entries that are both negated or neither"),
    ([{"key": [0], "obs": [0], "action": [0, 1], "swap_action": [[1, 2]]}],
     r"\[0\].swap_action=\[\[1, 2\]\] is invalid: must pair entries that are both"),
    ([{"key": [0], "obs": [0, 1, 2], "center": [0.5, 0.1, 0.2], "action": [0], "swap": [[1, 2]]}],
     r"\[0\].swap=\[\[1, 2\]\] is invalid: must pair entries with the same center"),
    ([{"key": [0], "obs": [0, 1], "center": [0.5], "action": [0]}], r"\[0\].center=\[0.5\] is invalid: must be a list "
                                                                    r"of 2 finite numbers, one per obs entry"),
    ([{"key": [0], "obs": [0], "center": [float("nan")], "action": [0]}], r"\[0\].center=\[nan\] is invalid"),
    ([{"key": [0], "obs": [0], "center": [True], "action": [0]}], r"\[0\].center=\[True\] is invalid"),
    ([{"key": [0], "obs": [0], "action": [0], "mirror": [1]}], r"\[0\]=\{.*\} is invalid: must be a non-empty list"),
    ([{"key": [0], "obs": [], "action": [0]}], r"\[0\].obs=\[\] is invalid: must name distinct entries, at least one "
                                               r"where it swaps none"),
    # a key the reflection moves elsewhere: it is not negated, so no frame is picked
    ([{"key": [1], "obs": [0], "action": [0], "swap": [[1, 2]]}], r"\[0\].key=\[1\] is invalid: must read negated "
                                                                  r"under its own reflection"),
    ([{"key": [1, 2], "obs": [0, 1], "action": [0]}], r"\[0\].key=\[1, 2\] is invalid: must be among its own obs "
                                                      r"entries \(entry 2\)"),
    ([{"key": [0], "obs": [0], "action": [0]}, {"key": [1], "obs": [1], "action": [1], "swap": [[0, 2]]}],
     r"\[0\].key=\[0\] is invalid: must not be among axis 1's swapped entries \(entry 0\)"),
    # axis 1 swaps entries 2 and 3, of which axis 0 negates one: in one order 2 is negated, in the other 3
    ([{"key": [0], "obs": [0, 2], "action": [0]}, {"key": [1], "obs": [1], "action": [1], "swap": [[2, 3]]}],
     r"\[1\]=\{.*\} is invalid: must commute with axis 0 \(reflect across both in either order, the same obs\)"),
    ([{"key": [0], "obs": [0], "action": [0]}, {"key": [1], "obs": [1], "action": [], "swap_action": [[0, 1]]}],
     r"\[1\]=\{.*\} is invalid: must commute with axis 0 \(reflect across both in either order, the same action\)"),
])  # fmt: skip
def test_swaps_and_centers_that_are_no_reflection_are_one_line_errors(axes, message):
    with pytest.raises(ValueError, match=r"^mirror axes" + message):
        Mirror(9, 4, axes)
    env = EnvConfig(task=None, entry_point="toy_envs:ThrusterReach", horizon=40)
    cfg = small_config(env=env, policy=PolicyConfig(hidden_sizes=[8], mirror=True, mirror_axes=axes))
    if "must lie in" in message:  # the sizes are the env's: known when the policy is built
        validate(cfg)
    else:
        with pytest.raises(ConfigError) as err:
            validate(cfg)
        assert re.match("^policy.mirror_axes" + message, str(err.value)) and "\n" not in str(err.value)


def test_the_autoregressive_head_is_refused_axes_that_swap_actions():
    from toy_envs import THRUSTER_AXES

    env = EnvConfig(task=None, entry_point="toy_envs:ThrusterReach", horizon=40)
    policy = PolicyConfig(type="tokenized", head="autoregressive", hidden_sizes=[8], mirror=True,
                          mirror_axes=THRUSTER_AXES)  # fmt: skip
    with pytest.raises(ConfigError) as err:
        validate(small_config(env=env, policy=policy))
    assert str(err.value) == ("policy.head='autoregressive' is invalid: must be factorized where the mirror axes "
                              "swap actions (swap_action): the autoregressive head decodes the dimensions in a fixed "
                              "order")
    with pytest.raises(ValueError, match="need head=factorized: the autoregressive head decodes"):
        build_policy("tokenized", 6, 3, head="autoregressive", hidden_sizes=[8], mirror=THRUSTER_AXES)
    # without swapped actions it takes them (an observation's swap and centers are the trunk's alone)
    axes = [THRUSTER_AXES[1], {"key": [2, 0], "obs": [0, 2], "swap": [[4, 5]], "center": [0.5, 0.5], "action": [0]}]
    assert build_policy("tokenized", 6, 3, head="autoregressive", hidden_sizes=[8], mirror=axes).mirror.plain is False
