"""PPO with a critic (algo=ppo) through the same trainer: it learns Reach from the binary outcome,
its value function fits, and the critic is checkpointed and restored exactly."""

from dataclasses import replace

import torch
from test_train import small_config

from grpo_robot.cli import compose_train_config as preset
from grpo_robot.trainer import Trainer


def ppo_config(**overrides):
    algo = preset("algo=ppo").algo  # conf/algo/ppo.yaml as the command line composes it
    return small_config(algo=replace(algo, groups_per_iter=128, lr=1e-3), **overrides)


def test_ppo_learns_reach_and_its_critic_fits(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = ppo_config(iterations=20, eval_seeds=100, eval_at_start=True)
    assert (cfg.algo.advantage, cfg.algo.group_size, cfg.algo.aggregation) == ("gae", 1, "token-mean")
    trainer = Trainer(cfg, tmp_path)
    summary = trainer.run()
    before = summary["initial_policy"]["eval"]["success_rate"]
    assert trainer.last_eval.rate >= before + 0.15, f"{before:.2f} -> {trainer.last_eval.rate:.2f}"
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    explained = [s.value for s in events.Scalars("charts/explained_variance")]
    assert explained[0] < 0 and max(explained[-5:]) > 0.2  # the value function learned to predict outcomes
    assert len(events.Scalars("losses/value_loss")) == 20


def test_ppo_checkpoint_restores_the_critic(tmp_path):
    trainer = Trainer(ppo_config(iterations=2), tmp_path)
    trainer.run()
    ckpt = torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["critic"] is not None
    resumed = Trainer(ppo_config(iterations=3, resume=str(tmp_path / "checkpoints" / "last.pt")), tmp_path / "r")
    for key, value in trainer.critic.state_dict().items():
        assert torch.equal(resumed.critic.state_dict()[key], value), key
    grpo = Trainer(small_config(iterations=2), tmp_path / "g")
    assert grpo.critic is None


def test_group_size_one_only_for_ppo():
    import pytest

    from grpo_robot.config import ConfigError

    with pytest.raises(ConfigError, match="algo.group_size=1 is invalid: must be >= 2 .*only advantage=gae takes 1"):
        Trainer(small_config(algo=replace(small_config().algo, group_size=1)), "/nonexistent")
    with pytest.raises(ConfigError, match="algo.dynamic_sampling=True is invalid"):
        cfg = ppo_config()
        Trainer(replace(cfg, algo=replace(cfg.algo, dynamic_sampling=True)), "/nonexistent")
