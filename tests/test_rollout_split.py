"""The split rollout (`rollout.split`): policy and physics of different parts of the worlds
overlap, and the batch, the noise and the trained parameters are the same bit for bit as the
unsplit rollout's; torch's threads during sampling (`rollout.policy_threads`) change nothing
either. And the kinematic reset equals a full `mj_forward` reset."""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import mujoco
import numpy as np
import pytest
import torch
from test_train import params, small_config

from grpo_robot import BatchedEnv
from grpo_robot.config import PolicyConfig, RolloutConfig
from grpo_robot.config.validate import ConfigError, validate
from grpo_robot.envs import TASKS, make_task
from grpo_robot.envs.task import FULLPHYSICS
from grpo_robot.policies import build_policy
from grpo_robot.rollout import RowPadded, collect, exact_rows, exact_settings, split_bounds, torch_threads
from grpo_robot.seeding import (
    CorrelatedDraws,
    SharedDraws,
    WorldRows,
    exploration,
    group_seeds,
    iteration_generator,
    normal,
)
from grpo_robot.trainer import Trainer

FIELDS = ("obs", "raw", "logp", "mask", "success", "failed")


class NoisyExpert(torch.nn.Module):
    """A built-in task's scripted expert plus `scale` times the sampling stream's noise: a policy
    whose sampled episodes succeed or fail by their noise."""

    def __init__(self, task, scale: float) -> None:
        super().__init__()
        self.task, self.scale = task, scale

    def sample(self, obs, generator=None, deterministic=False):
        mean = torch.as_tensor(self.task.expert(obs.numpy().astype(np.float64)), dtype=torch.float32)
        raw = mean if deterministic else mean + self.scale * normal(generator, mean.shape)
        return raw, raw.clamp(-1.0, 1.0), raw[:, :1]


def test_shared_draws_give_each_part_its_rows_of_the_whole_draw_in_any_order():
    whole = iteration_generator(0, 3, "cpu")
    expected = [torch.randn((10, 4), generator=whole), torch.rand((10, 1), generator=whole)]
    draws = SharedDraws(iteration_generator(0, 3, "cpu"), 10)
    a, b = draws.rows(0, 6), draws.rows(6, 10)
    got_a0 = a.randn((6, 4))
    got_a1 = a.rand((6, 1))  # part a runs ahead of part b
    got_b0, got_b1 = b.randn((4, 4)), b.rand((4, 1))
    assert torch.equal(torch.cat([got_a0, got_b0]), expected[0])
    assert torch.equal(torch.cat([got_a1, got_b1]), expected[1])
    with pytest.raises(ValueError, match=r"draw 2 was randn\(3,\) for one part and rand\(3,\) for another"):
        a.randn((6, 3)), b.rand((4, 3))
    with pytest.raises(ValueError, match="not a slice"):
        draws.rows(4, 11)
    # nested in a Ray worker's rows: the worker's parts see the whole run's draw
    full = torch.randn((12, 2), generator=iteration_generator(1, 0, "cpu"))
    worker = SharedDraws(WorldRows(iteration_generator(1, 0, "cpu"), 4, 12, 12), 8)
    parts = [worker.rows(0, 3).randn((3, 2)), worker.rows(3, 8).randn((5, 2))]
    assert torch.equal(torch.cat(parts), full[4:])


def test_split_bounds_cover_the_worlds_in_order():
    assert split_bounds(10, 3) == [slice(0, 3), slice(3, 7), slice(7, 10)]
    assert split_bounds(2, 4) == [slice(0, 1), slice(1, 2)]  # never an empty part
    assert split_bounds(5, 1) == [slice(0, 5)]


@pytest.mark.parametrize(
    "task, policy_type, kwargs, parallel_parts",
    [
        ("Reach", "gaussian", {"hidden_sizes": [32, 32], "init_std": 1.0}, False),
        ("Reach", "gaussian", {"hidden_sizes": [32, 32], "init_std": 1.0}, True),
        # the shared pool's part of this case is Reach's above: with -m slow only (the 10-minute budget)
        pytest.param("PushCube", "tokenized", {"hidden_sizes": [32], "bins": 16, "head": "autoregressive"}, False,
                     marks=pytest.mark.slow),
        ("PushCube", "tokenized", {"hidden_sizes": [32], "bins": 16, "head": "autoregressive"}, True),
    ],
    ids=["Reach-gaussian-shared-pool", "Reach-gaussian-parts-on-threads", "PushCube-tokenized-shared-pool",
         "PushCube-tokenized-parts-on-threads"],
)
def test_split_batches_equal_the_unsplit_batch_bit_for_bit(task, policy_type, kwargs, parallel_parts):
    env = BatchedEnv(task, 64, nthread=2, horizon=40)
    env.parallel_parts = parallel_parts
    torch.manual_seed(0)
    policy = build_policy(policy_type, env.obs_dim, env.action_dim, **kwargs)
    seeds = group_seeds(np.arange(16) * 7 + 1, 4)
    assert exact_settings(policy, 64, 4, 1, torch.device("cpu")) == (4, 1)  # parts of 16 rows agree here

    def run(split: int, threads: int | None = None, rho: float = 0.0):
        with torch_threads(threads):
            gen = exploration(iteration_generator(5, 2, "cpu"), rho)
            return collect(env, policy, seeds, torch.device("cpu"), gen, split=split)

    reference = run(1)
    for split, threads in ((2, None), (3, 1), (4, 1), (2, 2)):
        batch = run(split, threads)
        for name in FIELDS:
            assert torch.equal(getattr(batch, name), getattr(reference, name)), (split, threads, name)
    correlated = run(1, rho=0.9)  # time-correlated noise (algo.noise_correlation): split alike
    assert not torch.equal(correlated.raw, reference.raw)
    for name in FIELDS:
        assert torch.equal(getattr(run(3, 1, rho=0.9), name), getattr(correlated, name)), name
    deterministic = [collect(env, policy, seeds, torch.device("cpu"), None, True, split=s) for s in (1, 2)]
    for name in FIELDS:
        assert torch.equal(getattr(deterministic[0], name), getattr(deterministic[1], name))
    env.close()


@pytest.mark.parametrize("parallel_parts", [False, True], ids=["shared-pool", "parts-on-threads"])
def test_worlds_end_at_different_steps_in_the_split_rollout(parallel_parts):
    """The equality above covers parts that finish early: here some worlds succeed well before
    the horizon, in both parts, one part's last world ends before the other's (on threads of
    their own, that part is then sampled on), and the batch is still the unsplit one."""
    env = BatchedEnv("Reach", 16, nthread=2, horizon=60)
    env.parallel_parts = parallel_parts

    class NoisyExpert:  # Reach's scripted expert plus noise from the sampling stream
        def sample(self, obs, generator=None, deterministic=False):
            mean = torch.as_tensor(env.task.expert(obs.numpy().astype(np.float64)), dtype=torch.float32)
            raw = mean + 0.5 * normal(generator, mean.shape)
            return raw, raw.clamp(-1.0, 1.0), raw[:, :1]

    seeds = np.arange(16)
    batches = [collect(env, NoisyExpert(), seeds, torch.device("cpu"), iteration_generator(0, 0, "cpu"), split=s)
               for s in (1, 2)]  # fmt: skip
    lengths = batches[0].mask.sum(0)
    assert lengths.min() < 0.6 * lengths.max()  # worlds end far apart
    assert len(set(lengths[:8].tolist())) > 1 and len(set(lengths[8:].tolist())) > 1
    assert lengths[:8].max() != lengths[8:].max()  # one part is done steps before the other
    for name in FIELDS:
        assert torch.equal(getattr(batches[0], name), getattr(batches[1], name)), name
    env.close()


def test_correlated_draws_keep_each_draw_standard_and_correlate_consecutive_ones():
    """`algo.noise_correlation`: every draw is still N(0, 1) (uniform draws uniform), consecutive
    draws of a world correlate by rho, and rho = 0 leaves the stream as it is."""
    steps, worlds, rho = 200, 2000, 0.9
    draws = CorrelatedDraws(iteration_generator(0, 0, "cpu"), rho)
    z = torch.stack([draws.randn((worlds, 2)) for _ in range(steps)])  # [T, W, 2]
    assert abs(z.mean().item()) < 0.02 and abs(z[-1].std().item() - 1) < 0.03 and abs(z[0].std().item() - 1) < 0.03
    lag1 = (z[1:] * z[:-1]).mean().item()
    assert abs(lag1 - rho) < 0.01, lag1
    assert abs((z[5:] * z[:-5]).mean().item() - rho**5) < 0.01  # AR(1): rho^k at lag k
    u = torch.stack([draws.rand((worlds, 1), dtype=torch.float64) for _ in range(steps)])
    assert u.min() >= 0 and u.max() < 1
    counts = torch.histc(u.float(), bins=10, min=0, max=1) / u.numel()
    assert (counts - 0.1).abs().max() < 0.005, counts
    assert torch.corrcoef(torch.stack([u[1:].flatten(), u[:-1].flatten()]))[0, 1] > 0.85
    gen = iteration_generator(0, 0, "cpu")
    assert exploration(gen, 0.0) is gen
    with pytest.raises(ValueError, match=r"rho must be in \[0, 1\), got 1.0"):
        CorrelatedDraws(gen, 1.0)


def test_the_rollouts_noise_is_correlated_in_time_for_every_world():
    """Through `collect`, split in two: the raw actions of a zero-mean unit-noise policy keep
    rho from one control step to the next within each world."""
    env = BatchedEnv("Reach", 64, nthread=2, horizon=50)

    class Noise:  # actions = the noise itself
        def sample(self, obs, generator=None, deterministic=False):
            raw = normal(generator, (len(obs), env.action_dim))
            return raw, 0.01 * raw.clamp(-1.0, 1.0), raw[:, :1]

    noise = exploration(iteration_generator(0, 0, "cpu"), 0.8)
    batch = collect(env, Noise(), np.arange(64), torch.device("cpu"), noise, split=2)
    assert batch.mask.all()  # no world ended early: every row is a step
    raw = batch.raw  # [T, worlds, action_dim]
    lag1 = torch.corrcoef(torch.stack([raw[1:].flatten(), raw[:-1].flatten()]))[0, 1].item()
    assert abs(lag1 - 0.8) < 0.03 and abs(raw.std().item() - 1) < 0.05, (lag1, raw.std())
    env.close()


def test_a_split_that_would_change_the_numbers_is_dropped():
    """Matrix products can round a row differently with the number of rows: on the Intel Xeon of
    these measurements, for a 1024-wide MLP, 256 rows give other bits than the same rows among
    512 (on an AMD EPYC they do not). The sampler then runs unsplit. A policy whose output depends
    on its row count checks the rule on any CPU."""
    from grpo_robot.policies.gaussian import GaussianPolicy

    class RowCountDependent(GaussianPolicy):
        def sample(self, obs, generator=None, deterministic=False):
            raw, action, logp = super().sample(obs, generator, deterministic)
            return raw + 1e-6 * obs.shape[0], action, logp

    torch.manual_seed(0)
    assert exact_settings(RowCountDependent(30, 4, hidden_sizes=[32]), 512, 2, None, torch.device("cpu"))[0] == 1
    probe = torch.randn((512, 30), generator=torch.Generator().manual_seed(0))
    for width in (1024, 2048):
        wide = build_policy("gaussian", 30, 4, hidden_sizes=[width, width])
        with torch.no_grad():
            whole, half = wide.sample(probe, None, True)[0], wide.sample(probe[:256], None, True)[0]
        if not torch.equal(whole[:256], half):  # this CPU's BLAS rounds by row count here
            assert exact_settings(wide, 512, 2, None, torch.device("cpu"))[0] == 1
    narrow = build_policy("gaussian", 30, 4, hidden_sizes=[128, 128])
    assert exact_settings(narrow, 512, 2, 1, torch.device("cpu")) == (2, 1)
    assert exact_settings(narrow, 512, 1, None, torch.device("cpu")) == (1, None)


def test_a_few_rows_padded_as_exact_rows_says_give_the_whole_batchs_rows():
    """A rollout worker's slice of a few rows (1-10 of a 64-wide MLP's, on the CPUs measured here)
    takes other BLAS kernels than the whole batch; padded to the rows `exact_rows` picks, a
    slice's sampled calls give the whole batch's rows bit for bit, noise included. A policy
    whose output depends on its row count needs the whole batch's rows on any CPU."""
    from grpo_robot.policies.gaussian import GaussianPolicy

    class RowCountDependent(GaussianPolicy):
        def sample(self, obs, generator=None, deterministic=False):
            raw, action, logp = super().sample(obs, generator, deterministic)
            return raw + 1e-6 * obs.shape[0], action, logp

    torch.manual_seed(0)
    total = 16
    probe = torch.randn((total, 13), generator=torch.Generator().manual_seed(1))
    policies = [build_policy("gaussian", 13, 3, hidden_sizes=[64, 64]), RowCountDependent(13, 3, hidden_sizes=[64]),
                build_policy("tokenized", 13, 3, hidden_sizes=[64, 64], bins=16)]
    for policy in policies:
        whole = policy.sample(probe, iteration_generator(0, 1, "cpu"))
        for a, b in ((0, 1), (2, 4), (4, 8), (13, 16), (0, 16)):
            rows = exact_rows(policy, total, a, b, 1)
            sampler = policy if rows is None else RowPadded(policy, rows)
            with torch_threads(1):
                part = sampler.sample(probe[a:b], WorldRows(iteration_generator(0, 1, "cpu"), a, b, total))
            assert all(torch.equal(x[a:b], y) for x, y in zip(whole, part, strict=True)), (policy.type, a, b, rows)
            if (a, b) == (0, 16):
                assert rows is None
            elif isinstance(policy, RowCountDependent):
                assert rows == total


def test_a_split_is_kept_only_where_every_layer_agrees():
    """A tokenized policy's sampled outputs of one row agreed with the whole batch's for the probe
    where its logits did not (this Xeon): the split into single rows was kept, and could sample
    another bin on other observations. Every layer's output is compared now."""
    for seed in range(6):
        torch.manual_seed(seed)
        policy = build_policy("tokenized", 13, 3, hidden_sizes=[64, 64], bins=16)
        for n in (2, 3, 4, 8):
            if exact_settings(policy, n, n, None, torch.device("cpu"))[0] == 1:
                continue
            for k in range(4):  # a kept split: the logits of each one-row part are the whole batch's
                probe = torch.randn((n, 13), generator=torch.Generator().manual_seed(100 + k))
                with torch.no_grad():
                    whole = policy.logits(probe)
                    assert all(torch.equal(policy.logits(probe[i : i + 1]), whole[i : i + 1]) for i in range(n))


def test_training_with_any_split_and_thread_setting_gives_the_same_parameters(tmp_path):
    results = []
    for split, threads, parallel, turns in ((1, None, False, True), (2, 1, False, True), (3, 2, False, True),
                                            (2, 1, True, True), (2, 1, True, False)):  # fmt: skip
        rollout = RolloutConfig(split=split, policy_threads=threads, parallel_parts=parallel, take_turns=turns)
        cfg = small_config(rollout=rollout, policy=PolicyConfig(hidden_sizes=[32, 32], init_std=1.0))
        # 3 physics threads, so that every split runs as asked on any number of cores (a split takes at most one
        # part per thread, and an xdist worker has one core, the most env.nthread may ask for there)
        env = BatchedEnv("Reach", cfg.algo.groups_per_iter * cfg.algo.group_size, nthread=3)
        trainer = Trainer(cfg, tmp_path / f"run{len(results)}", env=env)
        trainer.run()
        assert trainer.sampler._settings[0] == split  # the split this case is about
        results.append(params(trainer))
        trainer.close()
    for other in results[1:]:
        assert all(torch.equal(results[0][k], other[k]) for k in results[0])
    assert torch.get_num_threads() >= 1


def test_torch_threads_are_restored_after_the_rollout_and_after_an_error():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError, match="boom"), torch_threads(1):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before


def test_step_async_needs_a_reset_and_checks_its_actions():
    env = BatchedEnv("Reach", 4, nthread=1)
    with pytest.raises(RuntimeError, match="reset"):
        env.step_async(np.zeros((2, env.action_dim)), slice(0, 2))
    env.reset(np.arange(4))
    with pytest.raises(ValueError, match=r"actions must have shape \(2, 4\)"):
        env.step_async(np.zeros((4, env.action_dim)), slice(2, 4))
    env.step_async(np.zeros((2, env.action_dim)), slice(2, 4)).result()
    assert env.steps.tolist() == [0, 0, 1, 1]
    env.close()


@pytest.mark.parametrize("key, value, allowed", [("split", 0, r"\[1, 64\]"), ("policy_threads", 0, "null")])
def test_bad_rollout_values_are_one_line(key, value, allowed):
    cfg = replace(small_config(), rollout=RolloutConfig(**{key: value}))
    with pytest.raises(ConfigError, match=f"rollout.{key}={value}.*{allowed}") as err:
        validate(cfg)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("task_name", sorted(TASKS))
def test_kinematic_reset_equals_a_full_forward_bit_for_bit(task_name):
    """The reset computes the start's sensor readings with kinematics and velocities only; a full
    `mj_forward` on the same data gives the same state and readings, bit for bit."""
    task = make_task(task_name)
    assert task._kinematic_reset
    m, d = task.model, task._data
    for seed in [*range(300), 2**40 + 3, 999_999_999]:
        state, mocap, obs = task.initial_condition(seed)
        mujoco.mj_forward(m, d)
        full = np.empty(task.nstate)
        mujoco.mj_getState(m, d, full, FULLPHYSICS)
        assert np.array_equal(state, full) and np.array_equal(obs, d.sensordata), seed
        assert np.array_equal(mocap, d.mocap_pos.ravel()), seed


def test_importing_grpo_robot_sets_a_short_openmp_spin_that_the_user_can_override():
    """`import grpo_robot` (before torch) makes torch's OpenMP threads spin briefly, then sleep: the
    update's back-to-back ops keep their threads, the physics keeps its cores. A value the user
    set wins. Needs a fresh interpreter: the setting is read when OpenMP loads."""
    import os
    import subprocess
    import sys

    probe = (
        "import grpo_robot, os; e = os.environ; print(e['GOMP_SPINCOUNT'], e['KMP_BLOCKTIME'], 'OMP_WAIT_POLICY' in e)"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "KMP_BLOCKTIME", "OMP_WAIT_POLICY")}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["100000", "1", "False"]  # spin about 1 ms; never sleep at once (passive)
    env["GOMP_SPINCOUNT"] = "0"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "1", "False"]


def test_parts_step_on_physics_of_their_own_from_threads_at_once_and_land_where_step_does():
    """`BatchedEnv.use_parts`: each part its own rollout pool of nthread // parts threads (at
    least 1); `step_part` from threads of their own, at once, gives the states `step` gives; the
    same layout again keeps what it built, another rebuilds it."""
    env = BatchedEnv("PushCube", 12, nthread=2)
    halves = split_bounds(12, 2)
    env.use_parts(halves)
    lanes = [env._lanes[(p.start, p.stop)] for p in halves]
    assert lanes[0] is not lanes[1] and [lane.nthread for lane in lanes] == [1, 1]
    env.use_parts(halves)
    assert [env._lanes[(p.start, p.stop)] for p in halves] == lanes  # kept, not rebuilt
    quarters = split_bounds(12, 4)
    env.use_parts(quarters)
    assert sorted(env._lanes) == [(0, 3), (3, 6), (6, 9), (9, 12)]
    assert all(lane.nthread == 1 for lane in env._lanes.values())
    wide = BatchedEnv("PushCube", 12, nthread=4)
    wide.use_parts(halves)
    assert [wide._lanes[(p.start, p.stop)].nthread for p in halves] == [2, 2]
    wide.close()

    reference = BatchedEnv("PushCube", 12, nthread=2)
    seeds = np.arange(12) // 3
    env.use_parts(halves)  # another layout in between: new pools
    assert not set(lanes) & {env._lanes[(p.start, p.stop)] for p in halves}
    lanes = [env._lanes[(p.start, p.stop)] for p in halves]
    env.reset(seeds), reference.reset(seeds)
    rng = np.random.default_rng(0)
    with ThreadPoolExecutor(2) as threads:
        for _ in range(5):
            actions = rng.uniform(-1, 1, (12, env.action_dim))
            list(threads.map(lambda p, a=actions: env.step_part(a[p], p), halves))  # both parts at once
            reference.step(actions)
            np.testing.assert_array_equal(env.state, reference.state)
            np.testing.assert_array_equal(env.sensordata, reference.sensordata)
    assert env.steps.tolist() == [5] * 12
    assert env._main_seconds == 0 and all(lane.seconds > 0 for lane in lanes)
    assert env.physics_seconds == pytest.approx(sum(lane.seconds for lane in lanes) / 2)

    # once the other part has ended, the last one steps on the env's pool of all the threads
    whole_pool_calls = []

    class CountingPool:
        def rollout(self, *args, **kwargs):
            whole_pool_calls.append(len(args[2]))
            return pool.rollout(*args, **kwargs)

    pool, env._pool = env._pool, CountingPool()
    actions = rng.uniform(-1, 1, (6, env.action_dim))
    env.step_part(actions, halves[1])
    assert whole_pool_calls == []  # both parts running: its own physics
    reference.use_parts(halves)
    for _ in range(2):
        reference.step_part(actions, halves[1])
    env.end_part(halves[0])
    env.step_part(actions, halves[1])
    assert whole_pool_calls == [6]
    np.testing.assert_array_equal(env.state, reference.state)
    env.use_parts(halves)  # the next episode: both running again
    env.step_part(actions, halves[1])
    assert whole_pool_calls == [6]
    env._pool = pool

    # `turn`: held by the caller, released for the physics call alone, held again after it (an error too)
    turn, seen = threading.Lock(), []
    lane = env._lanes[(6, 12)]
    real = lane.pool

    class WatchingPool:
        def rollout(self, *args, **kwargs):
            seen.append(turn.locked())
            if len(seen) == 2:
                raise RuntimeError("physics failed")
            return real.rollout(*args, **kwargs)

    lane.pool = WatchingPool()
    with turn:
        env.step_part(actions, halves[1], turn)
        assert seen == [False] and turn.locked()
        with pytest.raises(RuntimeError, match="physics failed"):
            env.step_part(actions, halves[1], turn)
        assert turn.locked()

    # the part's physics seconds are the physics call's alone, not the wait for `turn` after it
    taken, hold = threading.Event(), 0.3

    def other_part():
        with turn:
            taken.set()
            time.sleep(hold)

    class OvertakenPool:
        def rollout(self, *args, **kwargs):
            threading.Thread(target=other_part).start()
            taken.wait()  # the other part holds the turn while this physics call runs
            return real.rollout(*args, **kwargs)

    lane.pool = OvertakenPool()
    before, start = lane.seconds, time.perf_counter()
    with turn:
        env.step_part(actions, halves[1], turn)
    assert time.perf_counter() - start >= hold  # the call waited for its turn back
    assert 0 < lane.seconds - before < hold / 3
    lane.pool = real
    with pytest.raises(ValueError, match=r"step_part needs one of the parts given to use_parts .*slice\(0, 4, None\)"):
        env.step_part(np.zeros((4, env.action_dim)), slice(0, 4))
    env.close(), reference.close()
    assert env._lanes == {}


def test_parts_on_threads_of_their_own_stop_at_the_training_horizon_and_pass_on_errors():
    """`rollout.parallel_parts`: the training horizon cuts every part at the same step, as
    `collect` does; a part whose policy raises stops the rollout with that error, once the
    other part's thread has finished with the env."""
    env = BatchedEnv("Reach", 16, nthread=2, horizon=30)
    torch.manual_seed(0)
    policy = build_policy("gaussian", env.obs_dim, env.action_dim, hidden_sizes=[32, 32], init_std=1.0)
    seeds = group_seeds(np.arange(4), 4)

    def run(split: int, parallel: bool, net=policy):
        env.parallel_parts = parallel
        return collect(env, net, seeds, torch.device("cpu"), iteration_generator(1, 0, "cpu"), split=split,
                       max_steps=10)  # fmt: skip

    reference = run(1, False)
    own = run(2, True)
    assert len(env._lanes) == 2 and own.mask.shape == (10, 16) and env.steps.tolist() == [10] * 16
    for name in FIELDS:
        assert torch.equal(getattr(own, name), getattr(reference, name)), name

    class FailsOnSecondPart:
        def sample(self, obs, generator=None, deterministic=False):
            if generator.start == 8 and generator.count == 3:
                raise RuntimeError("policy failed on worlds 8:16")
            return policy.sample(obs, generator, deterministic)

    with pytest.raises(RuntimeError, match="policy failed on worlds 8:16"):
        run(2, True, FailsOnSecondPart())
    assert env.steps[:8].tolist() == [10] * 8 and env.steps[8:].tolist() == [3] * 8
    assert not [t for t in threading.enumerate() if t.name.startswith("rollout-part")]
    env.close()


def test_an_abandoned_rollout_stops_its_parts_at_their_next_step():
    """A signal in the main thread while the parts run on threads of their own (a Ctrl-C abandoning
    the iteration): the error comes out of `collect` once every part's thread has ended, and the
    parts stopped at their next step instead of running their episodes out."""

    class Abandoned(BaseException):
        pass

    def abandon(signum, frame):
        raise Abandoned

    env = BatchedEnv("PushCube", 64, nthread=2)
    env.parallel_parts = True
    torch.manual_seed(0)
    policy = build_policy("gaussian", env.obs_dim, env.action_dim, hidden_sizes=[32, 32], init_std=1.0)
    step_part, calls = env.step_part, []

    def signalling_step_part(*args, **kwargs):  # the signal comes once the parts are stepping, however slow
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGALRM)
        return step_part(*args, **kwargs)

    env.step_part = signalling_step_part
    previous = signal.signal(signal.SIGALRM, abandon)
    try:
        with pytest.raises(Abandoned):
            collect(env, policy, group_seeds(np.arange(8), 8), torch.device("cpu"), iteration_generator(0, 0, "cpu"),
                    split=2)  # fmt: skip
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert not [t for t in threading.enumerate() if t.name.startswith("rollout-part")]
    assert 0 < env.steps.max() < env.horizon  # stopped well before the episode's end
    env.close()


def test_a_rollout_in_turn_abandoned_by_an_exception_waits_for_the_physics_under_way():
    """Parts in turn: part 0's physics step runs on the env's thread while this thread samples part 1.
    A policy that raises there left part 0's step running after the exception (into the env's reset,
    an evaluation or close); the exception now leaves once it has ended."""
    from grpo_robot.rollout import _parts_in_turn

    physics = ThreadPoolExecutor(1)
    steps_done = []

    class Env:  # the duck type _parts_in_turn drives
        done = np.zeros(4, dtype=bool)
        sensordata = np.zeros((4, 3))

        def step_async(self, actions, part):
            return physics.submit(lambda: (time.sleep(0.3), steps_done.append(part)))

    class Policy:
        def sample(self, obs, rows, deterministic):
            if rows == "raise":
                raise RuntimeError("the policy failed")
            return obs, obs, obs[:, 0]

    with pytest.raises(RuntimeError, match="the policy failed"):
        _parts_in_turn(Env(), Policy(), [slice(0, 2), slice(2, 4)], ["ok", "raise"], torch.device("cpu"), False, 10)
    assert steps_done == [slice(0, 2)]  # ended before the exception left
    physics.shutdown()


def test_a_sampled_evaluations_episode_is_its_seeds_whatever_the_other_seeds_and_worlds():
    """Each seed's noise is its own stream (`SeedStreams`): an episode is the same in an evaluation
    of 24 seeds on 24 worlds, on 7 (chunks, a padded last one), or among 12 of them in reverse on 4.
    A chunk's draws came from one generator, so an episode depended on `n_seeds` and the worlds."""
    from grpo_robot.evaluation import evaluate
    from grpo_robot.seeding import eval_seeds

    def outcomes(worlds, seeds, noise_seed=123):
        env = BatchedEnv("Reach", worlds, nthread=1, horizon=40)
        result = evaluate(env, NoisyExpert(env.task, 1.5), seeds, torch.device("cpu"), False, noise_seed)
        env.close()
        assert result.noise_seed == noise_seed  # what a film of its episodes plays them with
        return {int(s): (bool(ok), int(t)) for s, ok, t in zip(result.seeds, result.success, result.steps, strict=True)}

    seeds = eval_seeds(24)
    whole = outcomes(24, seeds)
    assert 4 <= sum(ok for ok, _ in whole.values()) <= 20 and len({t for _, t in whole.values()}) > 3
    assert outcomes(7, seeds) == whole
    part = outcomes(4, seeds[5:17][::-1])
    assert part == {s: whole[s] for s in part} and len(part) == 12
    assert outcomes(24, seeds, noise_seed=124) != whole  # the noise seed matters


def test_a_split_rollout_takes_no_more_cores_than_its_physics_threads():
    """A split rollout keeps two threads busy (a part's policy beside another part's physics). With
    `env.nthread=1`, which is also what a Ray worker of one CPU builds, the default split of 2 ran
    two lanes of one physics thread each: two cores for a worker that reserved one. It now runs
    unsplit there, and the batch is the same."""
    from grpo_robot.config import EnvConfig, env_config_dict
    from grpo_robot.ray_rollout import RolloutWorker
    from grpo_robot.rollout import GroupSampler, usable_split

    torch.manual_seed(0)
    policy = build_policy("gaussian", 13, 4, hidden_sizes=[32])
    batches = []
    for nthread, expected in [(1, 1), (2, 2)]:
        env = BatchedEnv("Reach", 16, nthread=nthread, horizon=20)
        env.parallel_parts = True  # as the trainer sets it (rollout.parallel_parts)
        assert usable_split(env, 2) == expected and usable_split(env, 4) == nthread
        sampler = GroupSampler(env, 0, 4, 4, torch.device("cpu"), split=2)
        batches.append(sampler.draw(policy, 0))
        assert sampler._settings[0] == expected and len(env._lanes) == (0 if expected == 1 else 2)
        env.close()
    for field in FIELDS:
        assert torch.equal(getattr(batches[0], field), getattr(batches[1], field)), field
    assert usable_split(object(), 2) == 1  # an env with no split rollout (a Gymnasium one)
    spec = {"type": "gaussian", "obs_dim": 13, "action_dim": 4, "kwargs": policy.init_kwargs(), "modules": []}
    worker = RolloutWorker(env_config_dict(EnvConfig(task="Reach", horizon=20)), 8, spec, 1, False, [], split=2)
    worker.collect(policy.state_dict(), 0, 0, 0, np.repeat(np.arange(2), 4), 0, 8)
    assert worker.exact_split == 1 and not worker.env._lanes
    worker.close()


class _EndsAfterOneStep:
    """Two worlds that end after one control step, neither terminated (the horizon ends them): the
    success predicate holds at world 0's last step, not at world 1's."""

    num_worlds = 2

    def reset(self, seeds):
        self.done, self.success = np.zeros(2, bool), np.zeros(2, bool)
        self.terminated, self.failed = np.zeros(2, bool), np.zeros(2, bool)
        return np.zeros((2, 3), np.float32)

    def step(self, actions):
        self.done[:] = True
        self.success[:] = [True, False]
        return (np.zeros((2, 3), np.float32),)


def test_the_outcome_is_success_at_the_last_step_or_a_terminating_success():
    policy = build_policy("gaussian", 3, 2, hidden_sizes=[8])
    seeds, cpu = np.array([0, 0]), torch.device("cpu")
    final = collect(_EndsAfterOneStep(), policy, seeds, cpu, torch.Generator().manual_seed(0), final_step_outcome=True)
    assert final.success.tolist() == [1.0, 0.0]
    any_step = collect(_EndsAfterOneStep(), policy, seeds, cpu, torch.Generator().manual_seed(0))
    assert any_step.success.tolist() == [0.0, 0.0]  # no world terminated on a success
