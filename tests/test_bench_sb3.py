"""The SB3 reference's evaluation is grpo-robot's own; the module imports without SB3."""

import sys

import numpy as np
import torch

from grpo_robot.batched import BatchedEnv
from grpo_robot.bench import sb3
from grpo_robot.bench.experts import expert_row, run_expert
from grpo_robot.policies.base import ObsNormalizer
from grpo_robot.seeding import eval_seeds


class ExpertModel:
    """SB3's `predict` interface around a task's scripted expert; records what it was shown."""

    def __init__(self, task):
        self.task, self.seen = task, []

    def predict(self, obs, deterministic=False):
        assert deterministic and obs.dtype == np.float32
        self.seen.append(obs)
        return self.task.expert(obs).astype(np.float32), None


def test_evaluate_sb3_scores_a_model_like_the_expert_run():
    seeds = eval_seeds(6)
    env = BatchedEnv("Reach", 6, nthread=1)
    run_expert(env, seeds)
    expected = (env.terminated & ~env.failed, env.steps.copy())
    model = ExpertModel(env.task)
    result = sb3.evaluate_sb3(model, env, seeds)
    np.testing.assert_array_equal(result.seeds, seeds)
    np.testing.assert_array_equal(result.success, expected[0])
    np.testing.assert_array_equal(result.steps, expected[1])
    assert result.rate == 1.0 and len(model.seen) == expected[1].max()


def test_frozen_normalizer_is_the_clones_own():
    norm = ObsNormalizer(3)
    norm.update(torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, -1.0]]))
    obs = np.array([[2.0, 5.0, 1.0]], dtype=np.float32)
    out = sb3.frozen_normalizer(norm)(obs)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, norm(torch.as_tensor(obs)).numpy())
    assert out[0, 0] == 0.0 and out[0, 1] == 10.0  # centred; clipped (zero variance)
    assert norm.count == 2  # not updated by normalizing


def test_module_loads_without_stable_baselines3():
    assert "stable_baselines3" not in sys.modules


def test_expert_row():
    assert expert_row("Reach", 4).startswith("| Reach | 4 | 100.0% | 0 | ")


def test_her_table_reports_time_to_target_and_a_median_only_when_every_seed_got_there():
    from grpo_robot.bench.her import table

    def row(method, seed, target, success):
        return {"method": method, "seed": seed, "target": target, "env_steps": 30_000, "seconds": 200.0,
                "final_success": success}  # fmt: skip

    rows = [row("A", 0, {"env_steps": 9_000, "train_seconds": 40.0}, 0.96),
            row("A", 1, {"env_steps": 12_000, "train_seconds": 60.0}, 0.97),
            row("B", 0, {"env_steps": 5_000, "train_seconds": 90.0}, 0.95),
            row("B", 1, None, 0.80)]  # fmt: skip
    text = table(rows, 0.95)
    assert "| A | 0 | 9,000 | 40 s | 96% | 30,000 | 200 s |" in text
    assert "| B | 1 | not reached | - | 80% | 30,000 | 200 s |" in text
    assert "A: target reached on 2 of 2 seeds, median 50 s" in text
    assert text.endswith("B: target reached on 1 of 2 seeds")  # no median of the seeds that got there
