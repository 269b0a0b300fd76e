"""Replay of informative starts (`algo.start_replay`): which seeds the buffer keeps, what a draw
takes from it, that a replayed group starts where its seed started, and that a resumed run
replays what an uninterrupted one does."""

import math

import numpy as np
import pytest
import torch
from test_train import params, resumed_after_crash, small_config

from grpo_robot.batched import BatchedEnv
from grpo_robot.config import AlgoConfig, ConfigError, StartReplayConfig, validate
from grpo_robot.hooks import Hook
from grpo_robot.policies.gaussian import GaussianPolicy
from grpo_robot.rollout import GroupSampler
from grpo_robot.seeding import iteration_seeds
from grpo_robot.start_replay import StartReplay
from grpo_robot.trainer import Trainer


def test_the_buffer_keeps_mixed_starts_until_settled_or_replayed_enough():
    replay = StartReplay(fraction=0.5, max_replays=2)
    replay.record(np.array([10, 11, 12, 13]), np.array([0.0, 0.25, 1.0, 0.875], np.float32))
    assert list(replay.starts) == [11, 13]  # only mixed groups enter, in the order they came
    replay.record(np.array([13, 11]), np.array([0.5, 1.0], np.float32))
    assert replay.starts == {13: [0.5, 1]}  # 11 is solved now; 13 keeps its place, replayed once
    replay.record(np.array([13]), np.array([0.5], np.float32))
    assert replay.starts == {}  # a second replay reaches max_replays=2: out, however it went


def test_a_draw_takes_its_share_from_the_buffer_then_fresh_seeds():
    replay = StartReplay(fraction=0.25, max_replays=4)
    fresh = iteration_seeds(0, 5, 8)
    assert np.array_equal(replay.mix(fresh, 0, 5), fresh) and replay.replayed == 0  # empty buffer
    replay.record(np.arange(100, 103), np.full(3, 0.5, np.float32))
    mixed = replay.mix(fresh, 0, 5)
    assert replay.replayed == 2 == int(0.25 * 8)  # the share, when the buffer holds enough
    assert set(mixed[:2]) <= {100, 101, 102} and len(set(mixed[:2])) == 2
    assert np.array_equal(mixed[2:], fresh[:6])
    assert np.array_equal(replay.mix(fresh, 0, 5), mixed)  # a function of (run seed, iteration)
    picks = {tuple(replay.mix(fresh, 0, it)[:2]) for it in range(20)}
    assert len(picks) > 1  # and another iteration draws others
    replay.starts = {100: [0.5, 0]}
    assert replay.mix(fresh, 0, 5)[0] == 100 and replay.replayed == 1  # at most what it holds
    metrics = replay.metrics(8)
    assert metrics == {"charts/replayed_groups": 1 / 8, "charts/replay_starts": 1.0}


def test_the_state_round_trips_through_a_checkpoint_file(tmp_path):
    replay = StartReplay(fraction=0.5, max_replays=4)
    replay.record(np.array([7, 3, 9]), np.array([0.5, 0.125, 0.0], np.float32))
    replay.record(np.array([7]), np.array([0.25], np.float32))
    torch.save({"start_replay": replay.state_dict()}, tmp_path / "c.pt")
    again = StartReplay(fraction=0.5, max_replays=4)
    again.load_state_dict(torch.load(tmp_path / "c.pt", weights_only=True)["start_replay"])
    assert again.starts == replay.starts == {7: [0.25, 1], 3: [0.125, 0]}
    assert list(again.starts) == [7, 3]  # the order, which the draw depends on
    again.load_state_dict(None)  # a checkpoint written without replay
    assert again.starts == {}


def test_a_replayed_group_starts_where_its_seed_started():
    env = BatchedEnv("Reach", 8 * 16)
    policy = GaussianPolicy(env.obs_dim, env.action_dim, hidden_sizes=[32, 32])
    replay = StartReplay(fraction=0.5, max_replays=4)
    sampler = GroupSampler(env, 0, 16, 8, torch.device("cpu"), replay=replay)
    first, _ = sampler.sample(policy, 0)
    rates = first.success.view(16, 8).mean(1).numpy()
    groups = iteration_seeds(0, 0, 16)
    assert list(replay.starts) == [int(s) for s, r in zip(groups, rates, strict=True) if 0 < r < 1]
    held = {int(groups[k]): k for k in (1, 4, 9)}
    replay.starts = {seed: [0.5, 0] for seed in held}  # three of iteration 0's groups, whatever their outcome
    second, metrics = sampler.sample(policy, 1)
    assert metrics["charts/replayed_groups"] == 3 / 16
    starts = sampler.last_groups
    assert sorted(starts[:3].tolist()) == sorted(held)
    for k, seed in enumerate(starts[:3].tolist()):
        # every member of the replayed group starts from the observation that seed gave at iteration 0
        assert torch.equal(second.obs[0, k * 8 : (k + 1) * 8], first.obs[0, [held[seed] * 8] * 8])
    assert np.array_equal(starts[3:], iteration_seeds(0, 1, 16)[:13])


def test_with_dynamic_sampling_the_replayed_share_counts_every_round():
    env = BatchedEnv("Reach", 8 * 4)
    policy = GaussianPolicy(env.obs_dim, env.action_dim, hidden_sizes=[32, 32])
    replay = StartReplay(fraction=0.5, max_replays=100)
    # a group is kept only if it is mixed: from a random policy on Reach nearly none is, so every round is drawn
    sampler = GroupSampler(env, 0, 4, 8, torch.device("cpu"), keep_range=(0.0, 1.0), max_rounds=3, replay=replay)
    shares = []
    real_mix = replay.mix

    def mix(*args, **kwargs):  # the first round replays 2 of its 4 groups (the share), the later ones none
        replay.starts = {10**6 + k: [0.5, 0] for k in range(5)} if not shares else {}
        seeds = real_mix(*args, **kwargs)
        shares.append(replay.replayed)
        return seeds

    replay.mix = mix
    _, metrics = sampler.sample(policy, 0)
    rounds = metrics["groups_drawn"] // 4
    assert rounds == len(shares) == 3 and shares == [2, 0, 0], (metrics, shares)
    assert metrics["charts/replayed_groups"] == 2 / 12  # it read 0: the last round's share alone


def test_a_resumed_run_replays_what_an_uninterrupted_one_does(tmp_path):
    algo = AlgoConfig(group_size=8, groups_per_iter=16, epochs=2, minibatches=2,
                      start_replay=StartReplayConfig(fraction=0.5))  # fmt: skip
    cfg = small_config(iterations=4, algo=algo, checkpoint_every=1)
    straight = Trainer(cfg, tmp_path / "straight")
    seen = []

    class Watch(Hook):
        def after_iteration(self, trainer, record):
            seen.append((record.scalars["charts/replayed_groups"], len(trainer.sampler.replay.starts)))

    straight.hooks.append(Watch())
    straight.run()
    # the buffer fills and is drawn from; iteration 3, the first after the interruption below, draws
    # from what iteration 2 left in it
    assert seen[0][0] == 0 and seen[1][1] > 0 and seen[2][0] > 0, seen
    resumed = resumed_after_crash(cfg, tmp_path, 2)
    assert resumed.sampler.replay.starts  # the buffer came back with the checkpoint
    resumed.run()
    assert resumed.env_steps == straight.env_steps
    assert resumed.sampler.replay.starts == straight.sampler.replay.starts
    a, b = params(straight), params(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("key, value", [("fraction", 1.5), ("fraction", -0.1), ("fraction", math.nan),
                                        ("max_replays", 0), ("max_replays", 10**6)])  # fmt: skip
def test_a_bad_setting_is_refused_before_any_work(key, value):
    bad = StartReplayConfig(**{key: value})
    with pytest.raises(ConfigError, match=rf"algo\.start_replay\.{key}="):
        validate(small_config(algo=AlgoConfig(group_size=8, groups_per_iter=16, start_replay=bad)))


def test_the_share_is_not_cut_by_float_rounding():
    """0.29 x 100 is 28.999... in floating point: 28 groups were replayed, not the 29 asked for."""
    replay = StartReplay(fraction=0.29, max_replays=4)
    replay.starts = {10**6 + k: [0.5, 0] for k in range(40)}
    replay.mix(np.arange(100), 0, 0)
    assert replay.replayed == 29


def test_dynamic_sampling_keeps_the_open_ranges_groups_up_to_the_groups_asked_for():
    """keep_range (0, 1): a group all failed or all succeeded is dropped, and the second round fills
    the batch only up to its 4 groups."""
    env = BatchedEnv("Reach", 8 * 4)
    policy = GaussianPolicy(env.obs_dim, env.action_dim, hidden_sizes=[32, 32])
    sampler = GroupSampler(env, 0, 4, 8, torch.device("cpu"), keep_range=(0.0, 1.0), max_rounds=2)
    draw, wins = sampler.draw, [[0, 4, 8, 2], [4, 4, 4, 4]]  # successes of 8, per group, in each round

    def drawn(policy, it, round_=0):
        batch = draw(policy, it, round_)
        batch.success = torch.tensor([float(k < w) for w in wins[round_] for k in range(8)])
        return batch

    sampler.draw = drawn
    batch, metrics = sampler.sample(policy, 0)
    assert batch.success.view(-1, 8).mean(1).tolist() == [0.5, 0.25, 0.5, 0.5]
    assert metrics["groups_kept"] == 4 and metrics["groups_drawn"] == 8
    env.close()
