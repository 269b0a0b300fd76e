"""`grpo_robot.load_policy`: a trained policy in the user's own loop, acting on the env's own
observations with the env's own actions, as training stepped it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_train import small_config

from grpo_robot import BatchedEnv, load_policy
from grpo_robot.config import AlgoConfig, EnvConfig, PolicyConfig
from grpo_robot.deploy import TrainedPolicy
from grpo_robot.gym_vector import GymGroupEnv
from grpo_robot.trainer import Trainer


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One short run on a Gymnasium env observed as a Dict (keys read in an order of the config's
    own, actions in [-2, 2]) and one on the built-in Reach."""
    root = tmp_path_factory.mktemp("deploy")
    algo = AlgoConfig(group_size=4, groups_per_iter=4, epochs=1, minibatches=1)
    dict_env = EnvConfig(task=None, entry_point="toy_envs:DictPointReach", horizon=15, obs_keys=["goal", "position"])
    for name, env in (("dict", dict_env), ("reach", EnvConfig(task="Reach", horizon=20))):
        Trainer(small_config(env=env, algo=algo, iterations=1), root / name).run()
    tokenized = PolicyConfig(type="tokenized", head="autoregressive", bins=32, hidden_sizes=[32, 32])
    Trainer(small_config(env=dict_env, algo=algo, policy=tokenized, iterations=1), root / "tokenized").run()
    return root


def test_a_policy_steps_its_gymnasium_env_as_training_stepped_it(runs):
    policy = load_policy(runs / "dict")
    cfg = policy.env_config
    env = policy.make_env()
    group = GymGroupEnv(cfg, 1)  # the trainer's own adapter, one world, driven by the policy's [-1, 1] actions
    try:
        for seed in (0, 1, 2):
            obs, _ = env.reset(seed=seed)
            flat = group.reset([seed])
            for _ in range(cfg.horizon):
                # the Dict's keys in the order training read them (goal, then position), not the env's
                read = np.concatenate([obs["goal"], obs["position"]]).astype(np.float32)
                np.testing.assert_array_equal(read, flat[0])
                action = policy(obs)
                with torch.no_grad():
                    unit = policy.policy.sample(torch.as_tensor(flat), None, True)[1].numpy()
                assert action.dtype == np.float32 and action.shape == (2,)
                np.testing.assert_allclose(action, 2.0 * unit[0], rtol=0, atol=1e-6)  # [-1, 1] onto [-2, 2]
                obs, _, _, _, _ = env.step(action)
                flat, *_ = group.step(unit)
        assert np.abs(action).max() > 0  # the policy acts; the env moved its point by what it was given
    finally:
        group.close()
        env.close()
    # a batch, as a vector env returns it: the rows' actions
    batch = {k: np.stack([obs[k], obs[k] * 0.5]) for k in obs}
    acts = policy.act(batch)
    assert acts.shape == (2, 2)
    np.testing.assert_allclose(acts[0], policy(obs), rtol=0, atol=1e-5)


def test_a_gymnasium_envs_episode_ends_at_the_runs_horizon_and_first_success(runs):
    # the toy env never ends an episode itself: training cut it at env.horizon (15) and at the first success
    policy = load_policy(runs / "dict")
    env = policy.make_env(tolerance=0.4)  # kwargs of the env's own: a wider goal, reached on some seeds
    lengths, successes = [], 0
    try:
        for seed in range(12):
            obs, _ = env.reset(seed=seed)
            steps, done = 0, False
            while not done:
                obs, _, terminated, truncated, info = env.step(policy(obs))
                steps, done = steps + 1, terminated or truncated
                assert steps <= 15
            assert terminated == info["is_success"] and truncated == (not info["is_success"] and steps == 15)
            lengths.append(steps)
            successes += info["is_success"]
    finally:
        env.close()
    assert max(lengths) == 15 and lengths.count(15) == 12 - successes
    assert 0 < successes < 12 and min(lengths) < 15


def test_a_built_in_task_runs_at_the_version_and_horizon_it_trained_on(runs):
    policy = load_policy(runs / "reach" / "checkpoints" / "last.pt")
    env = policy.make_env()
    assert env.spec.id == "grpo_robot/Reach-v1" and env.unwrapped.horizon == 20
    assert env.spec.kwargs["terminate_on_success"] is True  # trained on the first success: its episodes end there
    batched = BatchedEnv("Reach-v1", 1, nthread=1, horizon=20)
    try:
        for seed in (5, 6):
            obs, _ = env.reset(seed=seed)
            flat = batched.reset([seed])
            done, steps = False, 0
            while not done:
                np.testing.assert_array_equal(obs, flat[0])
                with torch.no_grad():
                    unit = policy.policy.sample(torch.as_tensor(flat), None, True)[1].numpy()
                np.testing.assert_array_equal(policy(obs), unit[0])  # a built-in task acts in [-1, 1]
                obs, _, terminated, truncated, _ = env.step(policy(obs))
                flat, *_ = batched.step(unit)
                done, steps = terminated or truncated, steps + 1
            assert steps == int(batched.steps[0]) <= 20
    finally:
        batched.close()
        env.close()
    # a checkpoint of an earlier version builds that version
    ckpt = torch.load(runs / "reach" / "checkpoints" / "last.pt", weights_only=True)
    ckpt["config"]["env"]["task"] = "Reach-v0"
    ckpt["env_identity"]["version"] = 0
    old = TrainedPolicy(ckpt, runs / "old.pt").make_env()
    assert old.spec.id == "grpo_robot/Reach-v0"
    ckpt["config"]["env"]["outcome"] = "final_step"  # judged at its last step: it steps on past a success
    final = TrainedPolicy(ckpt, runs / "old.pt").make_env()
    assert final.spec.kwargs["terminate_on_success"] is False
    final.close()
    with pytest.raises(ValueError) as err:  # the current version's policy is refused on it
        policy.check_env(old)
    assert str(err.value) == f"{policy.path} was trained on Reach-v1; the env is Reach-v0"
    old.close()


def test_sampled_actions_repeat_with_their_seed(runs):
    obs = {"position": np.zeros(2), "goal": np.array([0.3, -0.2]), "time": np.zeros(1)}
    first = [load_policy(runs / "dict", deterministic=False, seed=s) for s in (1, 1, 2)]
    draws = [np.stack([p(obs) for _ in range(3)]) for p in first]
    np.testing.assert_array_equal(draws[0], draws[1])
    assert not np.array_equal(draws[0], draws[2])
    assert not np.array_equal(draws[0][0], draws[0][1])  # each call draws anew
    mean = load_policy(runs / "dict")(obs)
    assert np.abs(draws[0] - mean).max() > 1e-3


def test_what_does_not_fit_is_one_line(runs):
    import gymnasium
    from toy_envs import PointReach

    policy = load_policy(runs / "dict")
    where = str(runs / "dict" / "checkpoints" / "last.pt")
    cases = [
        (lambda: policy({"position": np.zeros(2), "time": np.zeros(1)}), f"{where}: its observation has no key 'goal'"),
        (lambda: policy(np.zeros(4)),
         f"{where}: its observation is a ndarray, where a Dict with keys ['goal', 'position']"),
        (lambda: policy({"position": np.zeros(3), "goal": np.zeros(2)}),
         f"{where}: its observation has 5 values where last.pt's policy takes 4"),
        (lambda: load_policy(runs / "dict", env=PointReach()),
         f"{where} was trained on the Dict keys ['goal', 'position']"),
        (lambda: load_policy(runs / "reach", decode="median"), "decode='median' is for a tokenized policy"),
        (lambda: load_policy(runs / "nothing"), "no checkpoint at"),
        (lambda: policy({"position": np.array([np.nan, 0.0]), "goal": np.zeros(2)}),
         f"{where}: its observation holds a non-finite value (nan at flat index 2)"),
        (lambda: load_policy(runs / "dict", decode="bogus"), "decode='bogus' is invalid: must be None or one of"),
        (lambda: load_policy(runs / "dict", decode="mean", deterministic=False), "decode='mean' chooses the"),
        (lambda: load_policy(runs / "dict", device="tpu"), "device='tpu' is invalid"),
    ]
    for call, start in cases:
        with pytest.raises((ValueError, FileNotFoundError)) as err:
            call()
        assert str(err.value).startswith(start) and "\n" not in str(err.value), str(err.value)

    class OtherBounds(gymnasium.Wrapper):
        def __init__(self, env):
            super().__init__(env)
            self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)

    from toy_envs import DictPointReach

    with pytest.raises(ValueError) as err:
        load_policy(runs / "dict", env=OtherBounds(DictPointReach()))
    assert str(err.value) == (f"{where} was trained on action bounds low=[-2, -2] high=[2, 2]; the env's are "
                              "low=[-1, -1] high=[1, 1]")  # fmt: skip

    class MoreActions(gymnasium.Wrapper):  # observes as trained, acts with one value more
        def __init__(self, env):
            super().__init__(env)
            self.action_space = gymnasium.spaces.Box(-2.0, 2.0, (3,), np.float32)

    with pytest.raises(ValueError) as err:
        load_policy(runs / "dict", env=MoreActions(DictPointReach()))
    assert str(err.value) == (f"{where} takes 4 observation values and gives 2 actions; the env observes 4 and "
                              "acts with 3")  # fmt: skip
    # one world's spaces of a vector env; a batch to act() as it returns it
    vec = gymnasium.vector.SyncVectorEnv([DictPointReach, DictPointReach, DictPointReach])
    batched = load_policy(runs / "dict" / "checkpoints", env=vec)  # the run's checkpoints folder: its last.pt
    obs, _ = vec.reset(seed=3)
    acts = batched.act(obs)
    assert acts.shape == (3, 2) and vec.action_space.contains(acts)
    vec.close()
    for bad, start in ((np.zeros(4), "act() takes a batch [N, ...] of observations, got an array of shape (4,)"),
                       ({"goal": np.zeros(2), "position": np.zeros(2)}, "act() takes a batch, a Dict of [N, ...]"),
                       ({"goal": np.zeros((2, 2)), "position": np.zeros((3, 2))}, "act() was given a Dict whose")):
        with pytest.raises(ValueError) as err:
            batched.act(bad)
        assert str(err.value).startswith(f"{where}: {start}")
    # your own instance with the same spaces is taken, and its action dtype kept
    mine = load_policy(runs / "dict", env=DictPointReach())
    obs, _ = DictPointReach().reset(seed=0)
    np.testing.assert_array_equal(mine(obs), policy(obs))


def test_a_policy_without_recorded_bounds_takes_them_from_the_env(runs):
    ckpt = torch.load(runs / "dict" / "checkpoints" / "last.pt", weights_only=True)
    del ckpt["env_identity"]["action_low"], ckpt["env_identity"]["action_high"]
    old = TrainedPolicy(ckpt, runs / "old.pt")
    obs = {"position": np.zeros(2), "goal": np.array([0.3, -0.2]), "time": np.zeros(1)}
    with pytest.raises(ValueError, match="records no action bounds"):
        old(obs)
    from toy_envs import DictPointReach

    old.check_env(DictPointReach())
    np.testing.assert_array_equal(old(obs), load_policy(runs / "dict")(obs))


def test_the_module_example_runs(runs, monkeypatch):
    import grpo_robot.deploy as deploy

    lines = deploy.__doc__.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("    "))
    end = next(i for i in range(start, len(lines)) if lines[i] and not lines[i].startswith("    "))
    code = "\n".join(line[4:] for line in lines[start:end])
    assert "load_policy(" in code and "env.step(policy(obs))" in code
    monkeypatch.chdir(runs)
    code = code.replace('"runs/train/<date>_<time>"', repr(str(runs / "reach")))
    scope: dict = {}
    exec(compile(code, "deploy example", "exec"), scope)  # noqa: S102 - the docstring's own example
    assert isinstance(scope["policy"], TrainedPolicy) and (scope["terminated"] or scope["truncated"])


def test_an_exported_policy_gives_the_actions_without_this_package(runs, tmp_path):
    import json
    import subprocess
    import sys

    # a Gaussian policy acting in [-2, 2] on a Dict's keys, and the autoregressive tokenized head's
    # decoding loop with its median decode
    cases = {"dict": load_policy(runs / "dict"), "tokenized": load_policy(runs / "tokenized", decode="median")}
    obs = np.random.default_rng(0).standard_normal((7, 4)).astype(np.float32)
    np.save(tmp_path / "obs.npy", obs)
    for name, policy in cases.items():
        assert policy.export(tmp_path / f"{name}.pt2") == tmp_path / f"{name}.pt2"
    # a process that never imports grpo_robot: torch alone loads and runs them
    child = ("import json, sys, numpy as np, torch\n"
             "metas = {}\n"
             "for name in sys.argv[1:]:\n"
             "    files = {'meta.json': ''}\n"
             "    m = torch.export.load(name + '.pt2', extra_files=files).module()\n"
             "    with torch.no_grad():\n"
             "        np.save(name + '_actions.npy', m(torch.as_tensor(np.load('obs.npy'))).numpy())\n"
             "    metas[name] = json.loads(files['meta.json'])\n"
             "assert 'grpo_robot' not in sys.modules\n"
             "print(json.dumps(metas))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", child, *cases], capture_output=True, text=True, check=True,
                         cwd=tmp_path)  # fmt: skip
    metas = json.loads(out.stdout)
    for name, policy in cases.items():
        actions = np.load(tmp_path / f"{name}_actions.npy")
        np.testing.assert_array_equal(actions, policy.act({"goal": obs[:, :2], "position": obs[:, 2:]}))  # to the bit
        with torch.no_grad():
            unit = policy.policy.sample(torch.as_tensor(obs), None, True)[1].numpy()
        np.testing.assert_allclose(actions, 2.0 * unit, rtol=0, atol=1e-6)  # the env's [-2, 2]
        meta = metas[name]
        assert meta["obs_keys"] == ["goal", "position"] and meta["action_low"] == [-2.0, -2.0]
        assert meta["decode"] == ("median" if name == "tokenized" else None)
    with pytest.raises(ValueError, match="export writes the deterministic action"):
        load_policy(runs / "dict", deterministic=False).export(tmp_path / "x.pt2")
    # a non-finite observation gives NaN actions, never a plausible command (the tokenized median's
    # was the end bin); the finite rows beside it are unchanged
    bad = torch.as_tensor(obs).clone()
    bad[1, 0], bad[3, 2] = float("nan"), float("inf")
    finite = [0, 2, 4, 5, 6]
    for name in cases:
        with torch.no_grad():
            acts = torch.export.load(tmp_path / f"{name}.pt2").module()(bad).numpy()
        assert np.isnan(acts[[1, 3]]).all()
        np.testing.assert_array_equal(acts[finite], np.load(tmp_path / f"{name}_actions.npy")[finite])


def test_an_env_without_its_success_key_is_refused_not_read_as_no_success():
    from toy_envs import NoSuccessKey

    from grpo_robot.deploy import EndsAtSuccess

    env = EndsAtSuccess(NoSuccessKey(), EnvConfig(task=None, entry_point="toy_envs:NoSuccessKey", horizon=5))
    env.reset(seed=0)
    with pytest.raises(ValueError) as err:
        env.step(np.zeros(2, np.float32))
    assert str(err.value).startswith("env.success_key='is_success' is not in the info it returned, which has keys")
