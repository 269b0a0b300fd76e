"""The physical-limit replay feeds the physics exactly what `BatchedEnv` applied."""

import numpy as np
import pytest

from grpo_robot.batched import BatchedEnv
from grpo_robot.bench.limit import LimitReplay, Recording, episode_plan, record_batched, run_batched


def test_every_control_step_replayed_alone_lands_on_the_batched_state():
    """From the state before a step, the replay of that one step (ctrl held for n_substeps, the
    world's mocap targets) gives the batched env's next state bit for bit."""
    env = BatchedEnv("PushCube", 3, nthread=1)
    replay = LimitReplay(BatchedEnv("PushCube", 3, nthread=1, horizon=1), 1)
    rng = np.random.default_rng(0)
    env.reset(np.array([5, 6, 7]))
    for _ in range(12):
        before = env.state.copy()
        actions = rng.uniform(-1.0, 1.0, (3, env.action_dim))
        env.step(actions)
        assert not env.done.any()  # every world was stepped
        replay.load(Recording(before, env.mocap_pos.copy(), actions[None]))
        np.testing.assert_array_equal(replay.final_states(), env.state)
    assert not np.array_equal(before, env.state)


def test_an_episode_is_laid_out_as_its_steps_replayed_one_by_one():
    env = BatchedEnv("Reach", 4, nthread=1)
    (rec,) = record_batched(env, episode_plan(3, 4, 1))
    full = LimitReplay(env, 1)
    full.load(rec)
    one = LimitReplay(BatchedEnv("Reach", 4, nthread=1, horizon=1), 1)
    nsub = env.task.n_substeps
    assert full.control.shape[1] == env.horizon * nsub
    for t in range(env.horizon):
        one.load(Recording(rec.state0, rec.mocap_pos, rec.actions[t : t + 1]))
        np.testing.assert_array_equal(full.control[:, t * nsub : (t + 1) * nsub], one.control)
    np.testing.assert_array_equal(full.state0, rec.state0)


def test_recording_mirrors_the_timed_loop():
    env = BatchedEnv("Reach", 8, nthread=1)
    plan = episode_plan(0, 8, 2)
    live, seconds = run_batched(env, plan)
    recordings = record_batched(env, plan)
    assert seconds > 0 and live == sum(r.live_steps for r in recordings)
    last = recordings[-1]
    assert last.live_steps == env.steps.sum() and last.failed == env.failed.sum() == 0
    np.testing.assert_array_equal(last.actions[env.steps.max() :], 0.0)  # after the last step
    assert (np.abs(last.actions[: env.steps.min()]) > 0).all()
    assert LimitReplay(env, 1).run(recordings) > 0


def test_episode_plan_draws_fresh_starts_each_episode():
    plan = episode_plan(seed=2, num_worlds=4, num_episodes=3)
    seeds = np.concatenate([ep.world_seeds for ep in plan])
    assert len(np.unique(seeds)) == 12 and seeds.dtype == np.int64
    assert seeds[0] == 2 * 1_000_003 and [ep.action_seed for ep in plan] == [15_838, 15_839, 15_840]
    again = episode_plan(seed=2, num_worlds=4, num_episodes=3)
    assert all(np.array_equal(a.world_seeds, b.world_seeds) for a, b in zip(plan, again, strict=True))


def test_a_recording_with_lengths_replays_each_world_for_its_own_episode():
    """Worlds that ended early are replayed for the steps they took, in one call per distinct
    length, not to the horizon with zero actions; a world of length 0 is not simulated."""
    env = BatchedEnv("Reach", 5, nthread=1)
    (rec,) = record_batched(env, episode_plan(1, 5, 1))
    full = LimitReplay(env, 1)
    full.load(rec)
    rec.lengths = np.array([3, 7, 3, 0, env.horizon])
    replay = LimitReplay(env, 1)
    replay.load(rec)
    nsub = env.task.n_substeps
    expected = [([0, 2], 3 * nsub), ([1], 7 * nsub), ([4], env.horizon * nsub)]
    assert [(j[0].tolist(), j[3]) for j in replay.jobs] == expected
    for worlds, state0, control, nstep in replay.jobs:
        np.testing.assert_array_equal(control, full.control[worlds, :nstep])
        np.testing.assert_array_equal(state0, rec.state0[worlds])
    final = replay.final_states()
    np.testing.assert_array_equal(final[3], rec.state0[3])  # length 0: never stepped
    np.testing.assert_array_equal(final[4], full.final_states()[4])  # the full horizon, as before
    assert not np.array_equal(final[0], rec.state0[0])
    # each world's clock advanced by exactly its own physics steps
    dt = env.model.opt.timestep
    np.testing.assert_allclose(final[:, 0] - rec.state0[:, 0], rec.lengths * nsub * dt, atol=1e-9)
    assert replay.run([rec]) > 0


@pytest.mark.parametrize("split", ["rollout.split=1", "rollout.split=2"])
def test_the_profile_records_what_the_physics_received_from_the_batch(split):
    """`benchmark.py profile` takes each episode's actions from the batch after the rollout (no
    recording inside it): they equal, bit for bit, the actions each physics call was given, at
    each world's own control step, with each world's length."""
    from grpo_robot.bench.profile import profiled_trainer

    trainer = profiled_trainer([split, "algo.groups_per_iter=4", "algo.group_size=8", "algo.epochs=1",
                                "algo.train_horizon=30"])  # fmt: skip
    env = trainer.sampler.env
    inner = env.env
    # a split takes at most one part per physics thread, and an xdist worker has one core (all that
    # env.nthread may ask for there): the lanes get a thread each as on two cores
    inner.nthread = 2
    received = np.zeros((inner.horizon, inner.num_worlds, inner.action_dim))
    simulate = inner._timed_simulate

    def spy(idx, act, *args, **kwargs):
        received[inner.steps[idx], idx] = act
        return simulate(idx, act, *args, **kwargs)

    inner._timed_simulate = spy
    try:
        for _ in range(2):
            received[:] = 0.0
            trainer.train_iteration()
            rec = env.recordings[-1]
            assert rec.lengths is not None and (rec.lengths > 0).all()
            np.testing.assert_array_equal(rec.lengths, inner.steps)
            np.testing.assert_array_equal(rec.actions, received)
            assert (np.abs(received[: int(rec.lengths.min())]) > 0).all()
        assert len(env.recordings) == 2 and len(env.observations) >= int(rec.lengths.max())
        assert trainer.sampler._settings[0] == int(split[-1])  # the split this case is about
    finally:
        trainer.close()


def test_the_sample_benchmark_times_each_cold_call_right_after_one_physics_step(monkeypatch):
    """`benchmark.py sample`: one part's rows (`rollout.split`), both calls of the Gaussian, in
    the cold pass exactly one physics step of the whole batch before each timed call, and in the
    paused pass a sleep as long as the physics steps took on average, and no physics."""
    import time

    from grpo_robot.bench.profile import sample_costs

    steps, sleeps, physics = [], [], []
    step, sleep = BatchedEnv.step, time.sleep

    def counted(self, actions):
        start = time.perf_counter()
        out = step(self, actions)
        steps.append(len(actions))
        physics.append(time.perf_counter() - start)
        return out

    def slept(seconds):
        sleeps.append((len(steps), seconds))
        sleep(seconds)

    monkeypatch.setattr(BatchedEnv, "step", counted)
    monkeypatch.setattr(time, "sleep", slept)
    rows, clock, costs = sample_costs(["algo.groups_per_iter=3", "algo.group_size=4", "rollout.split=2"], calls=5)
    assert (rows, clock) == (6, "thread CPU time")
    assert set(costs) == {"sample", "distribution"}
    assert steps == [12] * 10  # 5 cold calls of each, every step on all 12 worlds
    # 5 paused calls of each, after that call's cold pass, each as long as the physics steps so far
    assert [n for n, _ in sleeps] == [5] * 5 + [10] * 5
    assert [s for _, s in sleeps] == pytest.approx([np.mean(physics[:5])] * 5 + [np.mean(physics)] * 5, rel=0.25)
    for warm, cold, paused in costs.values():
        assert 0 < warm < 1e3 and 0 < cold < 1e3 and 0 < paused < 1e3
