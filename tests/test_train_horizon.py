"""`algo.train_horizon`: training rollouts stop after that many control steps, a world still
running then has not succeeded, and evaluation still runs the env's own horizon."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from test_rollout_split import FIELDS
from test_train import small_config

from grpo_robot import BatchedEnv
from grpo_robot.config import AlgoConfig, EnvConfig
from grpo_robot.config.validate import ConfigError, validate
from grpo_robot.hooks import Hook
from grpo_robot.rollout import collect
from grpo_robot.seeding import iteration_generator, normal
from grpo_robot.trainer import Trainer


class NoisyExpert:
    """Reach's scripted expert plus noise from the sampling stream: worlds end at many steps."""

    def __init__(self, env: BatchedEnv) -> None:
        self.env = env

    def sample(self, obs, generator=None, deterministic=False):
        mean = torch.as_tensor(self.env.task.expert(obs.numpy().astype(np.float64)), dtype=torch.float32)
        raw = mean + 0.6 * normal(generator, mean.shape)
        return raw, raw.clamp(-1.0, 1.0), raw[:, :1]


@pytest.mark.parametrize("split", [1, 2])
def test_a_cut_rollout_is_the_full_rollouts_first_steps_and_counts_later_successes_as_failures(split):
    env = BatchedEnv("Reach", 32, nthread=2, horizon=60)
    policy, seeds = NoisyExpert(env), np.arange(32)

    def run(max_steps):
        return collect(env, policy, seeds, torch.device("cpu"), iteration_generator(0, 0, "cpu"), split=split,
                       max_steps=max_steps)  # fmt: skip

    full = run(None)
    lengths = full.mask.sum(0)
    cut = int(lengths[full.success.bool()].float().median())  # half of the successes come later
    short = run(cut)
    assert short.obs.shape[0] == cut < full.obs.shape[0]
    for name in ("obs", "raw", "logp", "mask"):  # the same steps, bit for bit, up to the cut
        assert torch.equal(getattr(short, name), getattr(full, name)[:cut]), name
    expected = full.success.bool() & (lengths <= cut)
    assert torch.equal(short.success.bool(), expected)
    assert 0 < expected.sum() < full.success.sum()  # some successes kept, some lost to the cut
    assert short.valid_steps == int(torch.minimum(lengths, torch.tensor(cut)).sum())
    assert torch.equal(run(60).success, full.success)  # a cut at the env's horizon changes nothing
    env.close()


def test_split_and_unsplit_cut_rollouts_agree_bit_for_bit():
    env = BatchedEnv("Reach", 16, nthread=2, horizon=60)
    batches = [collect(env, NoisyExpert(env), np.arange(16), torch.device("cpu"), iteration_generator(1, 0, "cpu"),
                       split=s, max_steps=17) for s in (1, 2)]  # fmt: skip
    for name in FIELDS:
        assert torch.equal(getattr(batches[0], name), getattr(batches[1], name)), name
    env.close()


def test_training_rollouts_stop_at_the_train_horizon_and_evaluation_runs_the_envs(tmp_path):
    cfg = small_config(iterations=2, algo=replace(small_config().algo, train_horizon=12))
    trainer = Trainer(cfg, tmp_path)
    assert trainer.env.horizon == trainer.eval_env.horizon == 50  # Reach's own: the envs are the task's
    steps = []
    trainer.hooks.append(type("Steps", (Hook,), {"after_iteration": lambda self, t, r: steps.append(r.env_steps)})())
    summary = trainer.run()
    worlds = cfg.algo.group_size * cfg.algo.groups_per_iter
    assert summary["env_steps"] <= 2 * worlds * 12  # no training world ran past 12 control steps
    assert steps[0] > worlds * 6  # ... and they did run up to it (a random policy rarely succeeds)
    result = trainer.evaluate()
    assert result.steps.max() > 12  # evaluation episodes run to Reach's 50 steps
    trainer.close()


@pytest.mark.parametrize("value, message", [
    (0, r"algo.train_horizon=0 is invalid: must be >= 1"),
    (51, r"algo.train_horizon=51 is invalid: must be <= the env's horizon \(50\)"),
])  # fmt: skip
def test_a_train_horizon_beyond_the_envs_is_refused_in_one_line(value, message):
    cfg = small_config(algo=AlgoConfig(train_horizon=value))
    with pytest.raises(ConfigError, match=message):
        validate(cfg)
    validate(small_config(algo=AlgoConfig(train_horizon=50)))
    validate(small_config(env=EnvConfig(task="Reach", horizon=80), algo=AlgoConfig(train_horizon=80)))


def test_a_gymnasium_envs_horizon_bounds_the_train_horizon_once_the_env_is_built(tmp_path):
    """A registered env's time limit is known only when it is built: the trainer refuses then,
    in one line, before any rollout."""
    env = EnvConfig(task=None, id="toy/PointReach-v0", imports=["toy_envs"])  # max_episode_steps=40
    cfg = small_config(env=env, algo=AlgoConfig(group_size=2, groups_per_iter=2, minibatches=1, train_horizon=41))
    validate(cfg)  # the horizon is not known from the config
    with pytest.raises(ConfigError, match=r"algo.train_horizon=41 is invalid: must be <= the env's horizon \(40\)"):
        Trainer(cfg, tmp_path)
    validate(replace(cfg, env=replace(env, horizon=30), algo=replace(cfg.algo, train_horizon=30)))
    with pytest.raises(ConfigError, match=r"must be <= the env's horizon \(30\)"):
        validate(replace(cfg, env=replace(env, horizon=30)))
