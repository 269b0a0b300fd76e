"""PPO with a critic (algo=ppo) through the same trainer: it learns Reach from the binary outcome,
its value function fits, and the critic is checkpointed and restored exactly."""

from dataclasses import replace

import pytest
import torch
from test_train import small_config

from grpo_robot.cli import compose_train_config as preset
from grpo_robot.critic import Critic, shaping
from grpo_robot.trainer import Trainer


def ppo_config(**overrides):
    """conf/algo/ppo.yaml as the command line composes it, on a quarter of its rollouts and half its
    epochs, with half its minibatches (the update was most of the learning test's time: 21 -> 7 s)."""
    algo = preset("algo=ppo").algo
    return small_config(algo=replace(algo, groups_per_iter=128, lr=2e-3, epochs=5, minibatches=8), **overrides)


# training to a threshold (12 s on 2 cores): with -m slow; the update's math is pinned in the default
# run by tests/test_regression.py's "ppo" hash, the critic's checkpoint below
@pytest.mark.slow
def test_ppo_learns_reach_and_its_critic_fits(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    # 30 iterations: on Reach-v1 (10 ms physics) seeds 0 and 1 stand at 4% and 7% after 20, at 89%
    # and 39% after 30 (Reach-v0 took seed 0 to 60% in 20)
    cfg = ppo_config(iterations=30, eval_seeds=100, eval_at_start=True)
    assert (cfg.algo.advantage, cfg.algo.group_size, cfg.algo.aggregation) == ("gae", 1, "token-mean")
    trainer = Trainer(cfg, tmp_path)
    summary = trainer.run()
    before = summary["initial_policy"]["eval"]["success_rate"]
    assert trainer.last_eval.rate >= before + 0.15, f"{before:.2f} -> {trainer.last_eval.rate:.2f}"
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    explained = [s.value for s in events.Scalars("charts/explained_variance")]
    assert explained[0] < 0 and max(explained[-5:]) > 0.2  # the value function learned to predict outcomes
    assert len(events.Scalars("losses/value_loss")) == 30


def test_ppo_checkpoint_restores_the_critic(tmp_path):
    trainer = Trainer(ppo_config(iterations=2), tmp_path)
    trainer.run()
    ckpt = torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["critic"] is not None
    resumed = Trainer(ppo_config(iterations=3, resume=str(tmp_path / "checkpoints" / "last.pt")), tmp_path / "r")
    for key, value in trainer.critic.value.state_dict().items():
        assert torch.equal(resumed.critic.value.state_dict()[key], value), key
    grpo = Trainer(small_config(iterations=2), tmp_path / "g")
    assert grpo.critic is None


def test_group_size_one_only_for_ppo():
    from grpo_robot.config import ConfigError

    with pytest.raises(ConfigError, match="algo.group_size=1 is invalid: must be >= 2 .*a critic's advantage, gae"):
        Trainer(small_config(algo=replace(small_config().algo, group_size=1)), "/nonexistent")
    with pytest.raises(ConfigError, match="algo.dynamic_sampling.enabled=True is invalid"):
        cfg = ppo_config()
        sampling = replace(cfg.algo.dynamic_sampling, enabled=True)
        Trainer(replace(cfg, algo=replace(cfg.algo, dynamic_sampling=sampling)), "/nonexistent")


def test_task_potentials_rise_along_expert_demos(task_name):
    """The shaped reward's potential is higher where the expert ends (at success) than where it
    starts, and higher than where random actions leave the task."""
    import numpy as np

    from grpo_robot.batched import BatchedEnv
    from grpo_robot.demos import collect_demos
    from grpo_robot.envs import make_task

    task = make_task(task_name)
    data, _ = collect_demos(task, 8)
    starts = np.concatenate([[0], np.cumsum(data.lengths)[:-1]])
    ends = starts + data.lengths - 1
    phi = task.potential(data.obs)
    assert phi.shape == (len(data.obs),)
    assert (phi[ends] > phi[starts] + 0.03).all(), (phi[starts], phi[ends])
    assert phi[ends].min() > -0.1  # one step before success: the grip is a cube-width or two from the goal
    env = BatchedEnv(task, 8)
    obs = env.reset(data.seeds)
    rng = np.random.default_rng(0)
    while not env.done.all():
        obs, *_ = env.step(rng.uniform(-1, 1, (8, task.action_dim)))
    assert np.median(task.potential(obs)) < np.median(phi[ends]) - 0.03


def test_shaping_adds_the_potential_change_of_each_episode(tmp_path):
    """With gamma = 1 the shaping telescopes: each trajectory's shaped rewards sum to
    phi(last observation) - phi(first), and padding gets none."""
    import pytest

    cfg = ppo_config(env=replace(small_config().env, task="PushCube"))
    critic = replace(cfg.algo.critic, reward="shaped", gamma=1.0)
    cfg = replace(cfg, algo=replace(cfg.algo, critic=critic, groups_per_iter=16))
    trainer = Trainer(cfg, tmp_path)
    batch, _ = trainer.sampler.sample(trainer.policy, 0)
    task = trainer.critic.task
    shaped = shaping(task, batch, gamma=1.0)
    assert (shaped[~batch.mask] == 0).all()
    obs = batch.obs.cpu().numpy()
    last = batch.mask.sum(0).cpu().numpy() - 1
    cols = range(obs.shape[1])
    phi_first = task.potential(obs[0])
    phi_last = task.potential(obs[last, cols])
    assert shaped.sum(0).cpu().numpy() == pytest.approx(phi_last - phi_first, abs=1e-5)
    assert shaped.abs().sum() > 0
    # GAE sees the outcome plus shaping_coef x the shaping; the outcome-only run sees the outcome alone
    adv_shaped = trainer.critic.advantages(batch, trainer.policy)[0]
    outcome_cfg = replace(cfg.algo, critic=replace(critic, reward="outcome"))
    outcome_only = Critic(task.obs_dim, list(cfg.policy.hidden_sizes), cfg.policy.activation, outcome_cfg, task)
    outcome_only.value.load_state_dict(trainer.critic.value.state_dict())
    assert not torch.allclose(adv_shaped, outcome_only.advantages(batch, trainer.policy)[0])


def test_shaped_reward_is_refused_where_it_cannot_apply():
    import pytest

    from grpo_robot.config import ConfigError, EnvConfig

    def shaped(algo, reward="shaped"):
        return replace(algo, critic=replace(algo.critic, reward=reward))

    with pytest.raises(ConfigError, match="algo.critic.reward='shaped' is invalid: shaped needs a critic"):
        Trainer(small_config(algo=shaped(small_config().algo)), "/nonexistent")
    cfg = ppo_config(env=EnvConfig(task=None, id="grpo_robot/Reach-v1", horizon=50))
    with pytest.raises(ConfigError, match="algo.critic.reward='shaped' is invalid: shaped needs a built-in env.task"):
        Trainer(replace(cfg, algo=shaped(cfg.algo)), "/nonexistent")
    with pytest.raises(ConfigError, match="algo.critic.reward='dense' is invalid: must be one of outcome, shaped"):
        Trainer(replace(cfg, algo=shaped(cfg.algo, "dense")), "/nonexistent")


def _hand_batch():
    """Two trajectories by hand: 3 steps that succeed, and 1 step that fails (then padding). The
    potential is each observation's first entry: 1, 4, 2 along the first, 5 then padding (7, 9)."""
    from grpo_robot.rollout import Batch

    obs = torch.zeros(3, 2, 2)
    obs[:, 0, 0], obs[:, 1, 0] = torch.tensor([1.0, 4.0, 2.0]), torch.tensor([5.0, 7.0, 9.0])
    mask = torch.tensor([[True, True], [True, False], [True, False]])
    zeros = torch.zeros(3, 2, 2)
    return Batch(obs, zeros, zeros, mask, torch.tensor([1.0, 0.0]), torch.tensor([False, False]))


class _FirstEntry:
    obs_dim = 2

    @staticmethod
    def potential(obs):
        return obs[:, 0]


def test_shaping_discounts_the_next_potential_and_gives_padding_none():
    """gamma * phi(s_t+1) - phi(s_t) by hand, gamma 0.5: the other test runs gamma 1 on a batch
    without padding, where a dropped gamma or a mask shifted by a step change nothing."""
    shaped = shaping(_FirstEntry(), _hand_batch(), gamma=0.5)
    assert shaped.tolist() == [[0.5 * 4 - 1, 0.0], [0.5 * 2 - 4, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize("reward, returns", [
    ("outcome", [0.25, 0.0, 0.5, 1.0]),  # the outcome at the last step, discounted back: gamma^2, gamma, 1
    ("shaped", [10 * 1 + 0.5 * (10 * -3 + 0.5 * 1), 0.0, 10 * -3 + 0.5 * 1, 1.0]),  # plus 10 x the shaping
])  # fmt: skip
def test_the_critics_targets_put_the_outcome_on_the_last_step(reward, returns):
    """GAE with lambda 1 and a constant value (0.1) gives the Monte Carlo returns as targets, in
    `batch.packed()` order (time-major); the explained variance of a constant value is 0."""
    from grpo_robot.config import AlgoConfig, CriticConfig
    from grpo_robot.policies.gaussian import GaussianPolicy

    cfg = AlgoConfig(advantage="gae", group_size=1, critic=CriticConfig(gamma=0.5, gae_lambda=1.0, reward=reward))
    critic = Critic(2, [4], "tanh", cfg, _FirstEntry())
    with torch.no_grad():
        for param in critic.value.parameters():
            param.zero_()
        critic.value.net[-1].bias.fill_(0.1)
    adv, metrics = critic.advantages(_hand_batch(), GaussianPolicy(2, 2, hidden_sizes=[4]))
    assert critic.returns.tolist() == pytest.approx(returns)
    assert adv.tolist() == pytest.approx([r - 0.1 for r in returns])
    assert metrics["explained_variance"] == pytest.approx(0.0, abs=1e-6)
